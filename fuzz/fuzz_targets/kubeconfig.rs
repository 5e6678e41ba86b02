//! Fuzz target `kubeconfig`: see `ferrokube::fuzzing::kubeconfig` (src/fuzzing/) for what it reads and the
//! properties it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ferrokube::fuzzing::kubeconfig(data));
