//! `/debug`: the server's live machines. `GET /debug/machines` answers each
//! live machine's current state and counters (events handled, rejections by
//! reason, time in each state) with its mermaid diagram; `GET /debug` is a
//! page drawing those diagrams with the current state highlighted, mermaid
//! served from the binary (no CDN). Reading the machines blocks (a model
//! thread may hold them for one frame), so it runs off the async executor.

use crate::core::mermaid::render_mermaid;
use crate::core::registry::FAMILIES;
use crate::serve::shell::ApiError;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use voxlane_runtime::DiagnosticsSnapshot;

/// How long `/debug/machines` waits for a model thread to let go of its machines.
const WAIT: Duration = Duration::from_millis(1500);

/// The page (static: it fetches `/debug/machines` itself).
const PAGE: &str = include_str!("page.html");

/// mermaid 11.17.2 (MIT, `assets/mermaid-LICENSE`), minified and gzipped.
const MERMAID_JS_GZ: &[u8] = include_bytes!("assets/mermaid-11.17.2.min.js.gz");

/// Something holding live machines (a loaded model), asked on a blocking thread.
pub trait LiveMachines: Send + Sync + 'static {
    /// Each live machine's counters, or `None` when they stay busy past `wait`
    /// (a prompt phase holds them for seconds).
    fn machines(&self, wait: Duration) -> Option<Vec<DiagnosticsSnapshot>> {
        let _ = wait;
        Some(Vec::new())
    }
}

/// `/debug`, `/debug/machines` and the page's script over `sources`.
pub fn routes(sources: Vec<Arc<dyn LiveMachines>>) -> Router {
    let sources = Arc::new(sources);
    Router::new()
        .route("/debug/machines", get(move || machines(sources.clone())))
        .route("/debug", get(|| async { Html(PAGE) }))
        .route("/debug/mermaid.min.js", get(mermaid_js))
}

async fn machines(sources: Arc<Vec<Arc<dyn LiveMachines>>>) -> Response {
    let read = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        for s in sources.iter() {
            all.extend(s.machines(WAIT)?);
        }
        Some(all)
    })
    .await;
    match read {
        Ok(Some(snaps)) => {
            let list: Vec<Value> = snaps.iter().map(machine_json).collect();
            axum::Json(json!({ "machines": list })).into_response()
        }
        Ok(None) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "machines_busy",
            "the machines are busy (a prompt phase); try again shortly",
        )
        .into_response(),
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "debug_failed",
            format!("reading the machines failed: {e}"),
        )
        .into_response(),
    }
}

/// One machine as JSON: its counters, family and diagram.
pub fn machine_json(d: &DiagnosticsSnapshot) -> Value {
    let counts = |list: &[(&'static str, u64)]| -> Map<String, Value> {
        list.iter()
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect()
    };
    let time: Map<String, Value> = d
        .time_in_state
        .iter()
        .map(|(k, t)| (k.to_string(), json!(t.as_secs_f64() * 1e3)))
        .collect();
    let found = FAMILIES.iter().find_map(|f| {
        f.specs
            .iter()
            .find(|s| s.name == d.machine)
            .map(|s| (f.name, render_mermaid(s)))
    });
    json!({
        "machine": d.machine,
        "family": found.as_ref().map(|(f, _)| *f),
        "state": d.state,
        "events_total": d.events_total(),
        "events": counts(&d.events),
        "rejections": counts(&d.rejections),
        "time_in_state_ms": time,
        "diagram": found.map(|(_, m)| m),
    })
}

async fn mermaid_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CONTENT_ENCODING, "gzip"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        MERMAID_JS_GZ,
    )
        .into_response()
}
