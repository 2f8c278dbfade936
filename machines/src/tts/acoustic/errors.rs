//! Typed rejections of `kokoro_acoustic`.

use voxlane_actors::tts::kokoro::graph::KokoroError;

/// Why the acoustic stage (`kokoro_acoustic`, the network's front half) refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum KokoroAcousticError {
    /// Zero tokens, or more than the model's position table holds.
    #[error("{got} tokens: a chunk takes 1..={max}, the two pads included")]
    TokenCount {
        /// Tokens given.
        got: usize,
        /// The model's limit.
        max: usize,
    },
    /// The style row is not `want` finite values.
    #[error("style has {got} values (or a non-finite one); the model takes {want} finite values")]
    Style {
        /// Values given.
        got: usize,
        /// Values the model takes.
        want: usize,
    },
    /// Speed outside 0.5..=2.0.
    #[error("speed {0} is outside 0.5..=2.0")]
    Speed(f32),
    /// A token id the vocab does not have.
    #[error("token id {id} at position {at} is outside the vocab 0..{vocab}")]
    TokenId {
        /// The id.
        id: i64,
        /// Its position.
        at: usize,
        /// The vocab size.
        vocab: usize,
    },
    /// Reference durations whose count is not the token count.
    #[error("{got} durations for {tokens} tokens")]
    DurationsLength {
        /// Durations given.
        got: usize,
        /// Tokens given.
        tokens: usize,
    },
    /// Loading or running the network failed (foreign or truncated model file, bad node, kernel, lane).
    #[error(transparent)]
    Model(#[from] KokoroError),
    /// `run` before `load`.
    #[error("the Kokoro front stage is not loaded")]
    NotLoaded,
    /// A second `load`.
    #[error("the Kokoro front stage is already loaded")]
    AlreadyLoaded,
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

impl KokoroAcousticError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TokenCount { .. } => "token_count",
            Self::Style { .. } => "style_length",
            Self::Speed(_) => "speed_out_of_range",
            Self::TokenId { .. } => "token_out_of_vocab",
            Self::DurationsLength { .. } => "durations_length",
            Self::Model(_) => "model_failed",
            Self::NotLoaded => "not_loaded",
            Self::AlreadyLoaded => "already_loaded",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
