//! Every panic or hang the fuzzers found, as a named test with the input that found it. Each test
//! runs the harness of its target on that input: it failed before the fix and passes since.
