//! The manager (`ferrokube_runtime::manager`) against the embedded API server: its controllers
//! under one leader election, its endpoints, its shutdown. Every manager test is in this folder:
//! [`leader`] here, and `abuse.rs`, the endpoint under thousands of idle connections, as a binary
//! of its own (`manager_abuse`, declared in Cargo.toml: it lowers the process's descriptor limit,
//! which would starve the tests beside it).

mod leader;
