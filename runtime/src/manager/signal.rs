//! The signals that ask a controller process to stop: SIGTERM (what the kubelet sends when it
//! deletes a pod, and what `kill` sends) and SIGINT (Ctrl-C).

/// Resolves on the first SIGTERM or SIGINT (on other platforms: Ctrl-C). If a handler cannot be
/// installed, that is logged and the other signal still works; if neither can, this never
/// resolves.
///
/// It listens from its first poll. Once any listener has installed tokio's handler, a signal that
/// arrives while nothing listens is lost rather than ending the process: poll the future (e.g. in
/// a `select!`) before telling anyone the program is ready to be stopped, and keep that one
/// future (pinned, awaited through `&mut`) rather than calling this again later.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = async {
            match signal(SignalKind::terminate()) {
                Ok(mut stream) => {
                    stream.recv().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        let interrupt = async {
            if let Err(error) = tokio::signal::ctrl_c().await {
                tracing::warn!(%error, "cannot listen for SIGINT");
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            // Either ends the wait; the order only picks which one the log names.
            biased;
            () = terminate => tracing::info!("SIGTERM received"),
            () = interrupt => tracing::info!("SIGINT received"),
        }
    }
    #[cfg(not(unix))]
    {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}
