//! Fuzz target `field_selector`: see `ferrokube::fuzzing::field_selector` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::field_selector(data));
