//! Typed rejections of `speech_wavefront`.

use crate::speech::mimi_session::MimiSessionError;
use crate::speech::moshi_executor::MoshiExecutorError;

/// Why the wavefront refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum WavefrontError {
    /// The Mimi encoder stage failed.
    #[error("Mimi encode stage: {0}")]
    Encode(MimiSessionError),
    /// The LM stage failed.
    #[error("LM stage: {0}")]
    Lm(MoshiExecutorError),
    /// The Mimi decoder stage failed.
    #[error("Mimi decode stage: {0}")]
    Decode(MimiSessionError),
    /// A stage replied something other than its outcome.
    #[error("{stage} stage replied {reply}")]
    StageReply {
        /// `encode`, `lm` or `decode`.
        stage: &'static str,
        /// What it replied.
        reply: String,
    },
    /// The stages do not fit together (codebooks, frame size, an unopened session).
    #[error("stages do not fit: {0}")]
    Stages(String),
    /// An input frame of the wrong length or with a non-finite sample.
    #[error("an input frame of {got} samples (expected {want}, all finite)")]
    FrameSize {
        /// Samples given.
        got: usize,
        /// Samples per frame.
        want: usize,
    },
    /// An output frame does not answer the input frame two ticks back.
    #[error("output frame answers input {got}, the pipeline expected {want}")]
    Attribution {
        /// Sequence number it carries.
        got: u64,
        /// Sequence number expected.
        want: u64,
    },
    /// The lane pool failed a stage job.
    #[error("lane pool: {0}")]
    Lanes(String),
    /// A request that needs bound stages.
    #[error("the wavefront has no stages: bind first")]
    NotBound,
    /// `push_frame` after `flush`.
    #[error("the conversation was flushed: reset to start another")]
    Complete,
    /// An outcome event arrived without its payload.
    #[error("outcome event `{0}` carries no payload")]
    MissingPayload(&'static str),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// The event kind.
        event: &'static str,
        /// The state it arrived in.
        state: &'static str,
    },
}

impl WavefrontError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Encode(_) => "encode_stage",
            Self::Lm(_) => "lm_stage",
            Self::Decode(_) => "decode_stage",
            Self::StageReply { .. } => "stage_reply",
            Self::Stages(_) => "stages",
            Self::FrameSize { .. } => "frame_size",
            Self::Attribution { .. } => "attribution",
            Self::Lanes(_) => "lanes",
            Self::NotBound => "not_bound",
            Self::Complete => "complete",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
