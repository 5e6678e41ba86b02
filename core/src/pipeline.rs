//! The pipeline seam: the `tracing` events that follow a key through the machinery (the
//! reflector, the fifo, the store, the handlers, the queue, the workers, the client's requests),
//! which `ferrokube::view` draws live. The schema (stages, ops, states, fields) is written down
//! there; here is only what every emitter must agree on: the target and the level.

/// The `tracing` target of every pipeline event.
pub const TARGET: &str = "ferrokube_pipeline";

/// `tracing::trace!` with the pipeline's [`TARGET`](crate::pipeline::TARGET): the one way a crate of
/// ferrokube emits a pipeline event. Nothing is formatted unless a subscriber asks for that target.
///
/// ```
/// use ferrokube_core::pipeline_event;
/// pipeline_event!(stage = "store", op = "applied", instance = "pods", key = %"ns/web", state = "stored");
/// ```
#[macro_export]
macro_rules! pipeline_event {
    ($($field:tt)*) => {
        $crate::__private::tracing::trace!(target: $crate::pipeline::TARGET, $($field)*)
    };
}

/// True when a subscriber records pipeline events (the `tracing` callsite of [`TARGET`] at
/// TRACE is enabled): guards work done only for them, such as building a key to print.
///
/// ```
/// if ferrokube_core::pipeline_enabled!() {
///     // format what only the events need
/// }
/// ```
#[macro_export]
macro_rules! pipeline_enabled {
    () => {
        $crate::__private::tracing::enabled!(
            target: $crate::pipeline::TARGET,
            $crate::__private::tracing::Level::TRACE
        )
    };
}
