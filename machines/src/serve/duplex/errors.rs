//! Why a duplex conversation was refused or ended early; each is sent to the
//! client as a kind-5 message before the close.

use super::engine::EngineError;
use super::query::QueryError;
use crate::serve::codec::CodecError;
use crate::serve::shell::Busy;

/// A refused or failed conversation.
#[derive(Debug, thiserror::Error)]
pub enum DuplexError {
    /// A malformed or out-of-range query value, or an unknown voice.
    #[error("bad query: {0}")]
    Query(#[from] QueryError),
    /// Every conversation slot is taken.
    #[error(transparent)]
    Busy(#[from] Busy),
    /// The engine refused the prompts or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The client's audio is not a valid Ogg/Opus stream (or encoding failed).
    #[error("audio stream: {0}")]
    Codec(#[from] CodecError),
    /// The conversation thread could not start.
    #[error("cannot start the conversation thread: {0}")]
    Thread(std::io::Error),
}

impl DuplexError {
    /// A stable code for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Query(_) => "bad_query",
            Self::Busy(_) => "busy",
            Self::Engine(EngineError::Request(_)) => "bad_request",
            Self::Engine(_) => "engine",
            Self::Codec(_) => "codec",
            Self::Thread(_) => "thread",
        }
    }
}
