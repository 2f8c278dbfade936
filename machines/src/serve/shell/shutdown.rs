//! Shutdown: the OS signals that start it, and the flag streams watch so they
//! finish what is in flight instead of being cut.

use tokio::sync::watch;

/// Turns true once the server starts shutting down.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// A trigger and the flag it sets.
    pub fn channel() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Self(rx))
    }

    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when shutdown starts (or the shell is gone).
    pub async fn triggered(&mut self) {
        let _ = self.0.wait_for(|&stop| stop).await;
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT: shutting down"),
        _ = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}
