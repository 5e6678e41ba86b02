//! The informer (`ferrokube::informer`) against the embedded API server, fed through the client.
//! (`pipeline_seam.rs` is a binary of its own: it installs a process-wide `tracing` subscriber.)

mod embedded;
