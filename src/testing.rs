//! Testing a controller on the embedded API server: a client straight from a running server.
//!
//! The embedded server (`ferrokube::apiserver`, feature `apiserver`) stands on the object model
//! alone and knows nothing of the client; the client knows nothing of the server. This module is
//! the one place that sees both, which is why it lives in the front crate.
//!
//! ```no_run
//! use ferrokube::apiserver::ApiServer;
//! use ferrokube::testing::ServerClient;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = ApiServer::new().start().await?;
//! let client = server.client()?;         // no client-side rate limit
//! let limited = ferrokube::Client::new(server.config()?.with_qps(5.0, 10))?; // as in production
//! # Ok(()) }
//! ```
//!
//! A client made this way talks to the server as any client would (over HTTP, or HTTPS with the
//! server's CA when it was started with `tls(true)`, with its token if it has one), through the
//! kubeconfig the server writes for itself. Unlike [`Config::infer`](crate::Config::infer), it
//! has **no client-side rate limit**: client-go's default of 5 requests per second is there to
//! spare a shared production API server, and it would make a test of a controller that creates a
//! hundred objects take twenty seconds instead of a fraction of one. Ask for one with
//! [`Config::with_qps`](crate::Config::with_qps) when a test is about the limit.

use crate::apiserver::RunningServer;
use crate::config::{ConfigError, Kubeconfig};
use crate::{Client, Config, Error};

/// A client (or its config) for a running embedded server. See the [module docs](self).
pub trait ServerClient {
    /// The config of the server's own kubeconfig (context `ferrokube`, namespace `default`),
    /// with no client-side rate limit.
    fn config(&self) -> Result<Config, ConfigError>;

    /// A client of [`config`](Self::config).
    fn client(&self) -> Result<Client, Error> {
        Client::new(self.config()?)
    }
}

impl ServerClient for RunningServer {
    fn config(&self) -> Result<Config, ConfigError> {
        let kubeconfig =
            Kubeconfig::parse(&self.kubeconfig()).map_err(|source| ConfigError::Yaml {
                path: "<the embedded server's kubeconfig>".into(),
                source,
            })?;
        let mut config = Config::from_kubeconfig(&kubeconfig, None)?;
        config.qps = None;
        Ok(config)
    }
}
