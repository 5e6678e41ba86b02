//! Fuzz target `server_requests`: see `ferrokube::fuzzing::server_requests` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::server_requests(data));
