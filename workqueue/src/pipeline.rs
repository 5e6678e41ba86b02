//! The queue's side of the pipeline seam: what its events say. They go through
//! `ferrokube_pipeline::pipeline_event!`, the macro every layer uses, so that every event has the
//! same target and level. The schema (stages, ops, states, fields) is written down in
//! `ferrokube::view`.
//!
//! | op | state after it |
//! |---|---|
//! | `add` | `queued` (`deduplicated` when it already was) or `processing_dirty` (added while a worker holds it) |
//! | delay `add_after` / `due` | `delayed` (`delay_ms`) / `gone` (it was added: an `add` follows) |
//! | `get` | `processing` |
//! | `done` | `gone`, or `queued` when it was dirty |
//! | limiter `failure` / `forget` | `failing` (`failures`, `backoff_ms`) / `gone` |
