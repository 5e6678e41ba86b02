//! Leader election (`ferrokube::leader`) and the manager (`ferrokube::manager`) against the
//! embedded API server. (`manager_abuse.rs` is a binary of its own: it lowers the process's
//! descriptor limit.)

mod election;
mod manager;
