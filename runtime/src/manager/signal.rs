//! The signals that ask a controller process to stop: SIGTERM (what the kubelet sends when it
//! deletes a pod, and what `kill` sends) and SIGINT (Ctrl-C).
//!
//! # Listening starts at the call, not at the first poll
//!
//! Once tokio has installed its handler for a signal (the first listener anywhere in the process
//! does), the signal no longer ends the process by default: it goes to the listeners that exist
//! when it arrives, and is lost if there are none. A program that prints "ready" and only then
//! starts to listen can therefore miss a SIGTERM sent right after the line, and keep running.
//! [`shutdown_signal`] creates its listeners when it is called (inside a runtime), so a signal that
//! arrives between the call and the first `.await` still ends the wait.

use std::future::Future;

/// Resolves on the first SIGTERM or SIGINT (on other platforms: Ctrl-C) received after this call.
///
/// Call it before announcing that the program is ready to be stopped, and keep the future (e.g.
/// pinned, and awaited through `&mut` in several `select!`s) rather than calling it again: each
/// call listens from its own start. Called inside a tokio runtime, the listeners exist from the
/// call on; outside one, from the first poll. If a handler cannot be installed, that is logged
/// and the other signal still works; if neither can, this never resolves.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        // A listener now if there is a runtime to register it with; `None` means "at first poll".
        let listen_now = |kind: SignalKind| -> Option<std::io::Result<Signal>> {
            tokio::runtime::Handle::try_current()
                .ok()
                .map(|_| signal(kind))
        };
        let terminate = listen_now(SignalKind::terminate());
        let interrupt = listen_now(SignalKind::interrupt());
        async move {
            let wait = |early: Option<std::io::Result<Signal>>,
                        kind: SignalKind,
                        name: &'static str| async move {
                match early.unwrap_or_else(|| signal(kind)) {
                    Ok(mut stream) => {
                        stream.recv().await;
                    }
                    Err(error) => {
                        tracing::warn!(%error, signal = name, "cannot listen for the signal");
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                // Either ends the wait; the order only picks which one the log names.
                biased;
                () = wait(terminate, SignalKind::terminate(), "SIGTERM") => {
                    tracing::info!("SIGTERM received")
                }
                () = wait(interrupt, SignalKind::interrupt(), "SIGINT") => {
                    tracing::info!("SIGINT received")
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if let Err(error) = tokio::signal::ctrl_c().await {
                tracing::warn!(%error, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    /// A SIGTERM sent after the call and before the first poll still ends the wait. (Another
    /// listener exists all along, as in a program that listened earlier: without it the signal
    /// would end the test process.)
    #[tokio::test]
    async fn a_signal_between_the_call_and_the_first_poll_is_not_lost() {
        use tokio::signal::unix::{SignalKind, signal};
        let _earlier = signal(SignalKind::terminate()).expect("a listener");
        let stop = super::shutdown_signal();
        let raised = std::process::Command::new("kill")
            .args(["-s", "TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(raised.success());
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("the SIGTERM sent before the first poll ends the wait");
    }
}
