//! The shell's errors: serving failures, and the JSON error body of a 4xx.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (in use, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// A configuration the shell cannot run with.
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// The listener failed while serving.
    #[error("server I/O: {0}")]
    Io(std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// An HTTP error answered as `{"error": {"message", "type", "param", "code"}}`
/// (OpenAI's shape, so the speech routes can share it).
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable machine-readable code (`bad_query`, `busy`, ...).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// The request field at fault (OpenAI's `param`), if one is.
    pub param: Option<&'static str>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            param: None,
        }
    }

    /// The same error, naming the request field at fault.
    pub fn with_param(mut self, param: Option<&'static str>) -> Self {
        self.param = param;
        self
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let kind = if self.status.is_client_error() {
            "invalid_request_error"
        } else {
            "server_error"
        };
        serde_json::json!({
            "error": { "message": self.message, "type": kind, "param": self.param, "code": self.code }
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
