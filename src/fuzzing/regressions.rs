//! Every panic or hang the fuzzers found, as a named test with the input that found it. Each test
//! runs the harness of its target on that input: it failed before the fix and passes since.

/// Found by reading the watch path while writing the server harness, confirmed by it: the
/// embedded server added `timeoutSeconds` to the clock, so a value near 2^64 panicked in the watch's
/// stream task (`overflow when adding duration to instant`). The client got a 200 and a body that
/// ended at once. Fixed: a timeout the clock cannot represent is no timeout.
#[test]
fn server_watch_with_a_timeout_past_the_clock() {
    super::server_requests(
        b"GET /api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=18446744073709551615",
    );
    super::server_requests(
        b"GET /api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=9223372036854775807",
    );
}
