//! Typed rejections of `logits_sampler`.

use voxlane_actors::speech::sampler::SamplerError;

/// Why the sampler refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplerMachineError {
    /// Invalid sampling parameters or logits.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// A vocabulary of 0 tokens.
    #[error("a sampler needs a vocabulary of at least one token")]
    EmptyVocab,
    /// `sample` before `configure`.
    #[error("the sampler is not configured")]
    NotConfigured,
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

impl SamplerMachineError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Sampler(e) => e.reason(),
            Self::EmptyVocab => "empty_vocab",
            Self::NotConfigured => "not_configured",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
