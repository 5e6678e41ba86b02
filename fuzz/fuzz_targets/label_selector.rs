//! Fuzz target `label_selector`: see `ferrokube::fuzzing::label_selector` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::label_selector(data));
