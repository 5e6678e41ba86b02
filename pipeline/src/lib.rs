//! # ferrokube-pipeline
//!
//! The pipeline seam: the `tracing` events that follow a key through the machinery (the reflector,
//! the fifo, the store, the handlers, the queue, the workers, the client's requests), which
//! `ferrokube::view` draws live. Every crate of ferrokube that does such work emits through the
//! macros here, so that all of them agree on the target and the level; the schema (stages, ops,
//! states, fields) is written down in the view.
//!
//! ```text
//!   workqueue ─┐
//!   informer  ─┤ pipeline_event!(stage = .., op = .., key = .., state = ..)
//!   client    ─┼──▶ tracing, target "ferrokube_pipeline", TRACE ──▶ the view's layer (if any)
//!   runtime   ─┘
//! ```
//!
//! It is a crate of its own, below every other, because the workqueue (generic keys, no object
//! model) emits these events too and should not need the object model (`ferrokube-core`, which
//! re-exports this crate's macros) to do so. Nothing is formatted unless a subscriber asks for the
//! target.

/// The `tracing` target of every pipeline event.
pub const TARGET: &str = "ferrokube_pipeline";

/// `tracing::trace!` with the pipeline's [`TARGET`]: the one way a crate of ferrokube emits a
/// pipeline event. Nothing is formatted unless a subscriber asks for that target.
///
/// ```
/// use ferrokube_pipeline::pipeline_event;
/// pipeline_event!(stage = "store", op = "applied", instance = "pods", key = %"ns/web", state = "stored");
/// ```
#[macro_export]
macro_rules! pipeline_event {
    ($($field:tt)*) => {
        $crate::__private::tracing::trace!(target: $crate::TARGET, $($field)*)
    };
}

/// True when a subscriber records pipeline events (the `tracing` callsite of [`TARGET`] at TRACE
/// is enabled): guards work done only for them, such as building a key to print.
///
/// ```
/// if ferrokube_pipeline::pipeline_enabled!() {
///     // format what only the events need
/// }
/// ```
#[macro_export]
macro_rules! pipeline_enabled {
    () => {
        $crate::__private::tracing::enabled!(
            target: $crate::TARGET,
            $crate::__private::tracing::Level::TRACE
        )
    };
}

/// What the macros expand to needs; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use tracing;
}
