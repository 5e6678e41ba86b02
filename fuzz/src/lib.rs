//! # ferrokube-fuzzing
//!
//! Fuzz harnesses: every parser of ferrokube that reads bytes from outside the process, driven by
//! arbitrary input, with one property above all: **bad input gives a typed error, never a panic or
//! a hang.**
//!
//! ## Why a crate of its own
//!
//! A controller reads a kubeconfig a person wrote, watch and list bodies from the network, label
//! selectors from flags, and (in its tests) sends anything to the embedded API server. Each of
//! those parsers has a harness here. The harnesses live in this workspace member (`publish =
//! false`), not in `ferrokube` itself, so they cost the library nothing (not even a `cfg`), and
//! they can use only what a user of ferrokube can use: its public API. A harness that needs
//! something private shows that a user could not do what it does either.
//!
//! ## How data flows
//!
//! Each harness is a plain `fn(&[u8])`. It turns the bytes into the input of one parser (text, a
//! chunked body, HTTP requests), runs the parser, and checks what comes back:
//!
//! ```text
//!   bytes ──▶ harness ──▶ parser (ferrokube's public API) ──▶ Ok(value)  ──▶ properties checked
//!                                                        └──▶ Err(typed) ──▶ the right type/code
//!                                                        └──▶ panic, hang ──▶ a finding
//! ```
//!
//! A harness returns when the parser either succeeded (and the value satisfies the target's
//! properties) or failed with its typed error (`ConfigError`, `Error::Decode`, a 400 `Status`,
//! ...). It panics when the parser panicked, hung, or broke a property; that panic is what a fuzzer
//! reports, with the input that caused it.
//!
//! Two drivers share the harnesses:
//!
//! ```text
//!   cargo test (CI)                               scripts/fuzz.sh (longer runs)
//!   tests/fuzz/: proptest, fixed seed and         cargo fuzz (libFuzzer, coverage-guided) on
//!   case count, + every file of fuzz/seeds/       fuzz/fuzz_targets/, stable toolchain,
//!   replayed, + the named regressions             --sanitizer none; proptest with more cases
//!                                                 if cargo-fuzz is missing
//!          │                                                │
//!          └─────▶ ferrokube_fuzzing::<target>(bytes) ◀─────┘
//! ```
//!
//! | target | reads | the property beyond "no panic" |
//! |---|---|---|
//! | [`kubeconfig`](fn@kubeconfig) | a kubeconfig | every context gives a `Config` and a `Client`, or a `ConfigError` |
//! | [`watch_stream`](fn@watch_stream) | a watch body | its lines whatever the chunking; each an event or `Error::Decode` |
//! | [`list_body`](fn@list_body) | a list body | chunking changes nothing; agrees with serde_json where it reads a list |
//! | [`gzip_body`](fn@gzip_body) | a gzip-compressed list or watch body (`Content-Encoding: gzip`, one member or many) | chunking changes nothing; agrees with flate2's reader where it inflates; errors are typed |
//! | [`label_selector`](fn@label_selector) | a `labelSelector` | what parses prints as text that parses to the same |
//! | [`field_selector`](fn@field_selector) | a `fieldSelector` | a parsed selection matches any object; errors are 400s |
//! | [`server_requests`](fn@server_requests) | HTTP requests | answered in time; errors are `Status` objects, 4xx |
//! | [`protobuf_body`](fn@protobuf_body) | a protobuf request body | decodes to an object with apiVersion and kind, or a `DecodeError` |
//! | [`cel_rules`](fn@cel_rules) | a CRD validation rule and an object | the rule is accepted or refused, the object admitted or refused, every answer in time, no 5xx, messages bounded |
//! | [`protobuf_response`](fn@protobuf_response) | a protobuf object, list or watch body (the client's decoders) | dropping managedFields changes nothing else; chunking changes nothing; errors are typed |
//! | [`protobuf_encode`](fn@protobuf_encode) | an object (decoded from protobuf, or any JSON) for core's encoder and the server's protobuf answers | a decoded object encodes and decodes back to itself; any JSON encodes or is refused with a typed error, and a second round changes nothing |
//!
//! Chunked targets take their chunking from the input: the first two bytes choose two chunk sizes
//! that alternate over the rest ([`split_control`]), so the fuzzer explores chunk boundaries too.
//!
//! ## Running
//!
//! Short (what CI runs: deterministic, about a minute for all targets in a debug build on two
//! cores, most of it the server target):
//!
//! ```text
//! cargo test -p ferrokube-fuzzing                             # all targets, regressions, corpus
//! cargo test -p ferrokube-fuzzing short_run::fuzz_list_body   # one target
//! ```
//!
//! The short run's seed and case counts are fixed (tests/fuzz/short_run.rs); the environment
//! changes them: `FERROKUBE_FUZZ_CASES=N` (cases per target), `FERROKUBE_FUZZ_SEED=S` (printed
//! with any failure, so a failure reproduces).
//!
//! Long: `scripts/fuzz.sh [SECONDS] [TARGET...]` runs the cargo-fuzz targets of `fuzz/`
//! (coverage-guided; a separate cargo workspace whose targets call these harnesses), and
//! `scripts/fuzz.sh --proptest CASES [TARGET...]` runs the short run's tests with more cases and a
//! new seed. `scripts/fuzz.sh --merge-seeds` adds what cargo-fuzz found that reaches new code to
//! `fuzz/seeds/`, which the short run replays.
//!
//! ## When a fuzzer finds something
//!
//! Fix the parser (or the harness, if the finding is about the harness), then add the input as a
//! named test in `tests/fuzz/regressions.rs`: it failed before the fix and passes since.

pub mod cel;
pub mod client_protobuf;
pub mod gzip;
pub mod kubeconfig;
pub mod list;
pub mod protobuf;
pub mod protobuf_encode;
pub mod selectors;
pub mod server;
pub mod watch;

// The targets at the crate's root: `ferrokube_fuzzing::<target>` is what fuzz/fuzz_targets/ and
// the tests call.
pub use cel::cel_rules;
pub use client_protobuf::protobuf_response;
pub use gzip::gzip_body;
pub use kubeconfig::kubeconfig;
pub use list::list_body;
pub use protobuf::protobuf_body;
pub use protobuf_encode::protobuf_encode;
pub use selectors::{field_selector, label_selector};
pub use server::server_requests;
pub use watch::watch_stream;

thread_local! {
    /// One current-thread runtime per thread, for the targets that drive the embedded server: the
    /// fuzzer calls a harness many times on one thread, and `cargo test` runs tests on several.
    static RUNTIME: std::cell::RefCell<Option<tokio::runtime::Runtime>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `work` on this thread's runtime (made on first use); panics if none can be made.
pub(crate) fn on_thread_runtime<T>(work: impl FnOnce(&tokio::runtime::Runtime) -> T) -> T {
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        let runtime = match slot.as_ref() {
            Some(runtime) => runtime,
            None => match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => slot.insert(runtime),
                Err(error) => panic!("fuzz harness: no tokio runtime: {error}"),
            },
        };
        work(runtime)
    })
}

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
