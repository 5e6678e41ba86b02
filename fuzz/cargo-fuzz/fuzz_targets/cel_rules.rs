//! Fuzz target `cel_rules`: see `ferrokube_fuzzing::cel_rules` (crate ferrokube-fuzzing, in
//! fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::cel_rules(data));
