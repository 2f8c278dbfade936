//! Typed failures of a conversation: setup, persona prompt, frames.

use crate::speech::mimi_init::MimiInitError;
use crate::speech::mimi_session::MimiSessionError;
use crate::speech::moshi_executor::MoshiExecutorError;
use crate::speech::wavefront::WavefrontError;
use std::path::PathBuf;
use voxlane_actors::speech::voice::prompt::VoicePromptError;

/// Why a conversation could not be set up or went wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConverseError {
    /// Mimi's setup failed (config, weights, a session).
    #[error(transparent)]
    Mimi(#[from] MimiInitError),
    /// A Mimi session failed during the prompt.
    #[error("Mimi session: {0}")]
    Session(#[from] MimiSessionError),
    /// The LM refused or failed.
    #[error(transparent)]
    Lm(#[from] MoshiExecutorError),
    /// The wavefront refused or failed a frame.
    #[error(transparent)]
    Wavefront(#[from] WavefrontError),
    /// The LM's config could not be read.
    #[error("LM config {path}: {detail}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The SentencePiece model could not be read.
    #[error("tokenizer {path}: {detail}")]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The voice prompt is missing, damaged or does not fit the model.
    #[error(transparent)]
    VoicePrompt(#[from] VoicePromptError),
    /// A voice or text prompt given to a model that is not PersonaPlex.
    #[error(
        "{0} needs a PersonaPlex model (its depformer predicts both speakers); this LM is Moshi"
    )]
    NotPersona(&'static str),
    /// A text prompt with nothing to say.
    #[error("the text prompt is empty")]
    EmptyTextPrompt,
    /// Mimi and the LM do not fit together, or a stage replied out of turn.
    #[error("{0}")]
    Mismatch(String),
}
