//! Fuzz target `field_selector`: see `ferrokube_fuzzing::field_selector` (crate ferrokube-fuzzing,
//! in fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::field_selector(data));
