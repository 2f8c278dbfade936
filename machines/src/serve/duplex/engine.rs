//! The seam between the websocket route and a conversation engine: the
//! route parses the query into a [`ConverseRequest`], opens a
//! [`DuplexSession`] on a worker thread (the prompt phase), then steps it
//! one input frame at a time. The engine (PersonaPlex LM + Mimi) implements
//! these traits; the route never touches a model.

use crate::serve::debug::LiveMachines;
use std::path::PathBuf;

/// Prompts and sampling of one conversation, from the query string; `None`
/// leaves the engine's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConverseRequest {
    /// The system text prompt as the client typed it (the engine adds any
    /// tags its model expects, e.g. PersonaPlex's `<system>`).
    pub text_prompt: Option<String>,
    /// The voice prompt file (`.wav`, `.pt`, ...), resolved inside `--voices-dir`.
    pub voice_prompt: Option<PathBuf>,
    /// The sampling seed (`-1` or absent: the engine's own).
    pub seed: Option<u64>,
    /// Text token temperature (0 is greedy).
    pub text_temperature: Option<f32>,
    /// Text token top-k.
    pub text_topk: Option<usize>,
    /// Audio token temperature (0 is greedy).
    pub audio_temperature: Option<f32>,
    /// Audio token top-k.
    pub audio_topk: Option<usize>,
    /// PersonaPlex's padding multiplier on the text PAD logit.
    pub pad_mult: Option<f32>,
    /// Repetition penalty (1 is none).
    pub repetition_penalty: Option<f32>,
    /// Text tokens the repetition penalty looks back over.
    pub repetition_penalty_context: Option<usize>,
}

/// One frame of the agent's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct DuplexFrame {
    /// The agent's audio for this frame, [`DuplexEngine::frame_size`] samples.
    pub pcm: Vec<f32>,
    /// The text piece sampled with it, if any (SentencePiece's `▁` already a space).
    pub text: Option<String>,
}

/// Why an engine refused or failed a conversation.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Prompts or sampling values the engine cannot use (sent to the client).
    #[error("bad request: {0}")]
    Request(String),
    /// The model failed while running.
    #[error("engine failure: {0}")]
    Failed(String),
    /// The engine could not be loaded or is not built.
    #[error("engine unavailable: {0}")]
    Unavailable(String),
}

/// A loaded conversation model; shared by the route, used by one session at
/// a time; its machines shown by `/debug`.
pub trait DuplexEngine: LiveMachines + Send + Sync + 'static {
    /// Runs the prompt phase (blocking: called on a worker thread) and returns the session.
    fn open(&self, req: &ConverseRequest) -> Result<Box<dyn DuplexSession>, EngineError>;
    /// The audio rate in and out (Mimi: 24 000 Hz).
    fn sample_rate(&self) -> u32;
    /// Samples per frame in and out (Mimi: 1920, 80 ms).
    fn frame_size(&self) -> usize;
}

/// One conversation in progress; dropping it frees the model for the next.
pub trait DuplexSession: Send {
    /// One input frame in ([`DuplexEngine::frame_size`] samples); the agent's
    /// frame when one is ready (`None` while the model's delays fill).
    fn step(&mut self, pcm: &[f32]) -> Result<Option<DuplexFrame>, EngineError>;
}
