//! Fuzz target `label_selector`: see `ferrokube_fuzzing::label_selector` (crate ferrokube-fuzzing,
//! in fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::label_selector(data));
