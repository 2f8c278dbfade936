//! Typed rejections of `kokoro_tts`; the stages' errors pass through.

use crate::tts::acoustic::KokoroAcousticError;
use crate::tts::text::KokoroTextError;
use crate::tts::vocoder::KokoroVocoderError;
use voxlane_actors::tts::frontend::FrontendError;
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_actors::tts::voices::VoiceError;
use voxlane_runtime::PoolError;

/// Why the utterance machine refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    /// The text is empty or has nothing to say.
    #[error("the text is empty: nothing to speak")]
    EmptyText,
    /// Speed outside 0.5..=2.0.
    #[error("speed {0} is outside 0.5..=2.0")]
    Speed(f32),
    /// An unknown voice, a bad blend spec, or an unreadable voices file.
    #[error(transparent)]
    Voice(#[from] VoiceError),
    /// The text frontend failed (espeak-ng missing, no phonemes, bad vocab file).
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    /// The model file is foreign or truncated, or the network failed.
    #[error(transparent)]
    Model(#[from] KokoroError),
    /// The lane pool could not start.
    #[error("thread budget: {0}")]
    Threads(#[from] PoolError),
    /// The text stage refused the text (too long, ...).
    #[error("text frontend: {0}")]
    Text(KokoroTextError),
    /// The front stage refused the chunk.
    #[error("Kokoro front: {0}")]
    Front(KokoroAcousticError),
    /// The back stage refused the chunk.
    #[error("Kokoro back: {0}")]
    Back(KokoroVocoderError),
    /// A stage machine replied with something other than its outcome.
    #[error("the {stage} stage replied {reply}")]
    StageReply {
        /// The stage.
        stage: &'static str,
        /// Its reply.
        reply: String,
    },
    /// A request before `load`.
    #[error("Kokoro is not loaded")]
    NotLoaded,
    /// A second `load`.
    #[error("Kokoro is already loaded")]
    AlreadyLoaded,
    /// `synthesize` while an utterance is in flight.
    #[error("an utterance is in flight: read its chunks or cancel it first")]
    Busy,
    /// `next_chunk` or `cancel` with no utterance in flight.
    #[error("no utterance is in flight")]
    NotSynthesizing,
    /// An outcome event arrived without the payload its action puts in it.
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

impl TtsError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::EmptyText => "empty_text",
            Self::Speed(_) => "speed_out_of_range",
            Self::Voice(VoiceError::UnknownVoice { .. }) => "unknown_voice",
            Self::Voice(VoiceError::BadSpec { .. }) => "bad_voice_spec",
            Self::Voice(_) => "voice_pack",
            Self::Frontend(_) => "frontend_failed",
            Self::Model(_) => "model_failed",
            Self::Threads(_) => "threads",
            Self::Text(e) => e.reason(),
            Self::Front(e) => e.reason(),
            Self::Back(e) => e.reason(),
            Self::StageReply { .. } => "stage_reply",
            Self::NotLoaded => "not_loaded",
            Self::AlreadyLoaded => "already_loaded",
            Self::Busy => "busy",
            Self::NotSynthesizing => "not_synthesizing",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}

impl From<KokoroTextError> for TtsError {
    fn from(e: KokoroTextError) -> Self {
        match e {
            KokoroTextError::EmptyText => Self::EmptyText,
            KokoroTextError::Frontend(f) => Self::Frontend(f),
            other => Self::Text(other),
        }
    }
}

impl From<KokoroAcousticError> for TtsError {
    fn from(e: KokoroAcousticError) -> Self {
        match e {
            KokoroAcousticError::Model(k) => Self::Model(k),
            KokoroAcousticError::Speed(s) => Self::Speed(s),
            other => Self::Front(other),
        }
    }
}

impl From<KokoroVocoderError> for TtsError {
    fn from(e: KokoroVocoderError) -> Self {
        match e {
            KokoroVocoderError::Model(k) => Self::Model(k),
            other => Self::Back(other),
        }
    }
}
