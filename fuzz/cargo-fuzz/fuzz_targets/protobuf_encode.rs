//! Fuzz target `protobuf_encode`: see `ferrokube_fuzzing::protobuf_encode` (crate
//! ferrokube-fuzzing, in fuzz/) for what it reads and the properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube_fuzzing::protobuf_encode(data));
