//! `voxlane serve --duplex`: Kyutai's full-duplex websocket protocol at
//! `/api/chat`, as PersonaPlex's `server.py` serves it. The query string
//! carries the prompts and sampling ([`query`]); each connection gets a
//! conversation thread ([`worker`]) driven through the [`engine`] seam, and
//! the socket pump ([`pump`]) moves Ogg/Opus pages and text both ways
//! ([`protocol`] frames each message).

pub mod converse_engine;
pub mod engine;
pub mod errors;
pub mod protocol;
pub mod pump;
pub mod query;
pub mod worker;

pub use converse_engine::ConverseEngine;
pub use engine::{ConverseRequest, DuplexEngine, DuplexFrame, DuplexSession, EngineError};
pub use errors::DuplexError;
pub use query::{parse_query, QueryError};

use crate::serve::shell::{ApiError, Counter, ShellState};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::path::PathBuf;
use std::sync::Arc;
use worker::WorkerMetrics;

/// The largest websocket message accepted from a client.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// How the duplex route is set up.
#[derive(Debug, Clone, Default)]
pub struct DuplexOptions {
    /// Where `voice_prompt` names are looked up (`--voices-dir`).
    pub voices_dir: Option<PathBuf>,
}

/// What every connection of the route shares.
pub struct DuplexState {
    engine: Arc<dyn DuplexEngine>,
    options: DuplexOptions,
    shell: ShellState,
    refused: Counter,
    worker_metrics: WorkerMetrics,
}

/// The `/api/chat` route over `engine`, its counters registered in the shell's metrics.
pub fn routes(engine: Arc<dyn DuplexEngine>, options: DuplexOptions, shell: &ShellState) -> Router {
    let m = &shell.metrics;
    let state = Arc::new(DuplexState {
        engine,
        options,
        shell: shell.clone(),
        refused: m.counter(
            "voxlane_duplex_refused_total",
            "Conversations refused (bad query, busy).",
        ),
        worker_metrics: WorkerMetrics {
            frames_in: m.counter("voxlane_duplex_frames_in_total", "Input frames stepped."),
            frames_out: m.counter("voxlane_duplex_frames_out_total", "Answer frames sent."),
            text_pieces: m.counter("voxlane_duplex_text_pieces_total", "Text pieces sent."),
        },
    });
    Router::new()
        .route("/api/chat", get(chat))
        .with_state(state)
}

/// Upgrades to the websocket (a plain HTTP request gets a JSON 4xx instead).
async fn chat(
    State(state): State<Arc<DuplexState>>,
    RawQuery(query): RawQuery,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let request = parse_query(query.as_deref(), state.options.voices_dir.as_deref())
        .map_err(DuplexError::from);
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            return match request {
                Err(e) => ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e.to_string())
                    .into_response(),
                Ok(_) => ApiError::new(
                    rejection.status(),
                    "websocket_required",
                    rejection.body_text(),
                )
                .into_response(),
            }
        }
    };
    upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| pump::run(socket, request, state))
}
