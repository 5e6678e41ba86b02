//! The client (`ferrokube::client`, `config`, `api`, `watch`) as one test binary: its HTTP
//! behaviour against a scripted server, connection lifetimes, credentials kept out of `Debug`, and
//! network faults that give no signal (a proxy that freezes connections), on the embedded server.

mod connections;
mod credentials_debug;
mod http;
mod network_faults;
mod server_client;
mod write_gate;
