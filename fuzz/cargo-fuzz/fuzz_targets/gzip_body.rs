//! Fuzz target `gzip_body`: see `ferrokube_fuzzing::gzip_body` (crate ferrokube-fuzzing, in
//! fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::gzip_body(data));
