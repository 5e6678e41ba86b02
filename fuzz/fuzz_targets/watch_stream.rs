//! Fuzz target `watch_stream`: see `ferrokube::fuzzing::watch_stream` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::watch_stream(data));
