//! Fuzz harnesses: every parser that reads bytes from outside the process, driven by arbitrary
//! input, with the property that bad input gives a typed error and never a panic or a hang.
//!
//! Compiled only for tests and for fuzz builds (`cfg(fuzzing)`, which `cargo fuzz` sets), so it
//! costs users nothing. Two drivers share these harnesses:
//!
//! ```text
//!   cargo test (CI)                            scripts/fuzz.sh (longer runs)
//!   proptest, fixed seed and case count        cargo fuzz (libFuzzer, coverage-guided),
//!   + every file of fuzz/corpus and            stable toolchain, --sanitizer none;
//!     fuzz/regressions replayed                proptest with more cases if cargo-fuzz is missing
//!          │                                          │
//!          └──────────────▶ fuzzing::<target>(bytes) ◀┘
//! ```
//!
//! | target | reads | the property beyond "no panic" |
//! |---|---|---|
//! | [`kubeconfig`] | a kubeconfig | every context gives a `Config` and a `Client`, or a `ConfigError` |
//! | [`watch_stream`] | a watch body | its lines whatever the chunking; each an event or `Error::Decode` |
//! | [`list_body`] | a list body | chunking changes nothing; agrees with serde_json where it reads a list |
//! | [`label_selector`] | a `labelSelector` | what parses prints as text that parses to the same |
//! | [`field_selector`] | a `fieldSelector` | a parsed selection matches any object; errors are 400s |
//! | [`server_requests`] | HTTP requests | answered in time; errors are `Status` objects, 4xx |
//! | [`protobuf_body`] | a protobuf request body | decodes to an object with apiVersion and kind, or a `DecodeError` |
//!
//! Chunked targets take their chunking from the input: the first two bytes choose two chunk sizes
//! that alternate over the rest ([`split_control`]), so the fuzzer explores chunk boundaries too.
//! Every panic or hang found becomes a named test in `regressions.rs` with its input.

mod kubeconfig;
mod list;
mod protobuf;
mod selectors;
mod server;
mod watch;

#[cfg(test)]
mod regressions;
#[cfg(test)]
mod tests;

pub use kubeconfig::kubeconfig;
pub use list::list_body;
pub use protobuf::protobuf_body;
pub use selectors::{field_selector, label_selector};
pub use server::{Request, parse_requests, render_requests, server_requests};
pub use watch::watch_stream;

/// The chunk sizes a chunked target uses, from the input's first two bytes, and the rest of the
/// input (the body). Sizes alternate: `1 + first % 64` (byte-level boundaries) and
/// `1 + second * 16` (up to 4 KiB, whole lines and items).
pub fn split_control(data: &[u8]) -> ([usize; 2], &[u8]) {
    match data {
        [first, second, body @ ..] => (
            [1 + usize::from(*first) % 64, 1 + usize::from(*second) * 16],
            body,
        ),
        _ => ([usize::MAX, usize::MAX], &[]),
    }
}

/// `body` cut into chunks of the alternating `sizes`.
pub fn chunks(body: &[u8], sizes: [usize; 2]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut turn = 0;
    while !rest.is_empty() {
        let size = sizes[turn % 2].clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(size);
        out.push(chunk);
        rest = tail;
        turn += 1;
    }
    out
}
