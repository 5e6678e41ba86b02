//! Fuzz target `watch_stream`: see `ferrokube_fuzzing::watch_stream` (crate ferrokube-fuzzing, in
//! fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::watch_stream(data));
