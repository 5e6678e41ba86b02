//! The fuzz harnesses' drivers in `cargo test`: the short proptest run of each target and the
//! replay of the committed corpus ([`short_run`]), and every finding so far as a named test
//! ([`regressions`]). One test binary, so the workspace's test run links the harnesses (and the
//! embedded server they drive) once.
//!
//! A harness that panics fails its test: proptest shrinks the input and the panic message names
//! the target, the seed and the case count (see the crate docs for running one target longer).

mod regressions;
mod short_run;
