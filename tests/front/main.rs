//! The front crate's own tests (`cargo test -p ferrokube`): what only it has, as a user's crate sees
//! it. Each layer's behaviour is tested beside its crate (`<crate>/tests/`, crate map in README.md);
//! here are the guide's chapters whose code block is a test ([`explore_readme`], the explorer;
//! [`readme_testing`], testing a controller) and the one module the front crate adds to its layers,
//! `ferrokube::testing` ([`server_client`]).

mod explore_generated;
mod explore_readme;
mod readme_testing;
mod server_client;
