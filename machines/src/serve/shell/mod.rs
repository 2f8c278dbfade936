//! The server shell every route family plugs into: the listener, a limit on
//! concurrent streams, `/health`, `/metrics` (Prometheus text), JSON errors
//! for unknown paths, and a graceful shutdown on SIGINT/SIGTERM that stops
//! accepting, tells streams to finish and waits for them. Routes (the duplex
//! websocket, later the OpenAI speech routes) are plain axum routers built
//! against a [`ShellState`].

pub mod errors;
pub mod limits;
pub mod metrics;
pub mod shutdown;

pub use errors::{ApiError, ServeError};
pub use limits::{Busy, StreamLimit, StreamPermit};
pub use metrics::{Counter, Gauge, Histogram, LabelledCounter, Metrics};
pub use shutdown::{shutdown_signal, Shutdown};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Where to listen and how much to take at once.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// The address to bind (port 0 picks a free one).
    pub addr: SocketAddr,
    /// Streams (conversations, syntheses) served at once; more get a busy error.
    pub max_streams: usize,
    /// How long a shutdown waits for streams in flight before it drops them.
    pub shutdown_grace: Duration,
    /// The largest HTTP request body accepted.
    pub max_body_bytes: usize,
}

impl ShellConfig {
    /// One stream at a time on `addr`, 10 s of grace, 1 MiB bodies.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            max_streams: 1,
            shutdown_grace: Duration::from_secs(10),
            max_body_bytes: 1 << 20,
        }
    }
}

/// What routes share with the shell: metrics, the stream limit, shutdown.
#[derive(Debug, Clone)]
pub struct ShellState {
    /// The Prometheus counters `/metrics` renders.
    pub metrics: Arc<Metrics>,
    /// The limit on concurrent streams, and the count shutdown waits on.
    pub streams: StreamLimit,
    /// Turns true when the server starts shutting down.
    pub shutdown: Shutdown,
}

/// Kernel send buffer of every connection (accepted sockets inherit the
/// listener's): fixed, not autotuned up to `tcp_wmem`'s maximum (4 MB, ~90 s
/// of 24 kHz PCM), so audio a client does not read waits in the bounded
/// synthesis queue instead of the kernel.
const SEND_BUFFER: u32 = 256 * 1024;

/// A listening socket on `addr` with [`SEND_BUFFER`].
fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.set_send_buffer_size(SEND_BUFFER)?;
    sock.bind(addr)?;
    sock.listen(1024)
}

/// A bound listener, ready to serve routes.
#[derive(Debug)]
pub struct Shell {
    listener: tokio::net::TcpListener,
    config: ShellConfig,
    state: ShellState,
    trigger: tokio::sync::watch::Sender<bool>,
}

impl Shell {
    /// Binds `config.addr` (inside a tokio runtime).
    pub async fn bind(config: ShellConfig) -> Result<Self, ServeError> {
        if config.max_streams == 0 {
            return Err(ServeError::Config("max_streams must be at least 1".into()));
        }
        let listener = listen(config.addr).map_err(|source| ServeError::Bind {
            addr: config.addr,
            source,
        })?;
        let metrics = Arc::new(Metrics::new());
        let streams = StreamLimit::new(config.max_streams, &metrics);
        let (trigger, shutdown) = Shutdown::channel();
        Ok(Self {
            listener,
            config,
            state: ShellState {
                metrics,
                streams,
                shutdown,
            },
            trigger,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(ServeError::Io)
    }

    /// What route builders need from the shell.
    pub fn state(&self) -> &ShellState {
        &self.state
    }

    /// Serves `routes` with the shell's own until `signal` resolves, then
    /// stops accepting, tells streams to finish and waits for them (up to
    /// the configured grace).
    pub async fn serve(
        self,
        routes: Router,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let Self {
            listener,
            config,
            state,
            trigger,
        } = self;
        let app = routes
            .merge(shell_routes(&state))
            .fallback(|| async {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
            })
            .layer(DefaultBodyLimit::max(config.max_body_bytes));
        let stop = async move {
            signal.await;
            // Streams see this and wind down; the listener stops accepting.
            let _ = trigger.send(true);
        };
        axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
            .map_err(ServeError::Io)?;
        // Upgraded websockets outlive their HTTP connection: wait for them here.
        if !state.streams.wait_idle(config.shutdown_grace).await {
            tracing::warn!(
                in_flight = state.streams.in_flight(),
                "shutdown grace elapsed with streams in flight"
            );
        }
        Ok(())
    }
}

/// `/health` and `/metrics`.
fn shell_routes(state: &ShellState) -> Router {
    let metrics = state.metrics.clone();
    let streams = state.streams.clone();
    Router::new()
        .route(
            "/health",
            get(move || {
                let body = serde_json::json!({
                    "status": "ok",
                    "streams_in_flight": streams.in_flight(),
                    "max_streams": streams.capacity(),
                });
                async move { axum::Json(body) }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let text = metrics.render();
                async move {
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
                }
            }),
        )
}
