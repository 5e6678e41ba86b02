//! This crate's side of the pipeline seam (the client's requests, the controller layer's enqueues
//! and reconciles): one macro, so that every event has the same target and level as the
//! workqueue's and the informer's. The schema and its reader are in [`crate::view`].

/// `tracing::trace!` with the pipeline's target.
macro_rules! pipeline_event {
    ($($field:tt)*) => {
        ::tracing::trace!(target: "ferrokube_pipeline", $($field)*)
    };
}
