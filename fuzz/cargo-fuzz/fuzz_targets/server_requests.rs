//! Fuzz target `server_requests`: see `ferrokube_fuzzing::server_requests` (crate
//! ferrokube-fuzzing, in fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::server_requests(data));
