//! Expected: exactly two groups of modules importing each other, {http::handlers, http::verbs} and
//! {client, config}; `parent` and `parent::child`, and the test module, are no circle.

pub mod client;
pub mod config;
pub mod http;
pub mod parent;

pub use client::Client;
pub use config::Config;
