//! The pipeline seam, from the crate `ferrokube-pipeline` (below this one, so that the workqueue,
//! which has no object model, uses the same macros): the `tracing` target every pipeline event has.
//! The macros themselves, [`pipeline_event!`](crate::pipeline_event) and
//! [`pipeline_enabled!`](crate::pipeline_enabled), are re-exported at this crate's root.

pub use ferrokube_pipeline::TARGET;
