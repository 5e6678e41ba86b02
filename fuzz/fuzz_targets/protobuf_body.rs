//! Fuzz target `protobuf_body`: see `ferrokube::fuzzing::protobuf_body` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::protobuf_body(data));
