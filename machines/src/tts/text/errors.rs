//! Typed rejections of `kokoro_text`.

use voxlane_actors::tts::frontend::FrontendError;

/// Why the text stage (`kokoro_text`) refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum KokoroTextError {
    /// The text is empty or has nothing to say.
    #[error("the text is empty: nothing to speak")]
    EmptyText,
    /// The text exceeds what one request may carry.
    #[error("the text has {chars} characters; one request takes at most {max}")]
    TextTooLong {
        /// Characters in the text.
        chars: usize,
        /// The cap.
        max: usize,
    },
    /// The frontend failed: espeak-ng missing or failing, no phonemes, bad vocab file.
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    /// `tokenize` before `load`.
    #[error("the text frontend is not loaded")]
    NotLoaded,
    /// A second `load`.
    #[error("the text frontend is already loaded")]
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

impl KokoroTextError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::EmptyText => "empty_text",
            Self::TextTooLong { .. } => "text_too_long",
            Self::Frontend(e) => match e {
                FrontendError::EmptyText => "empty_text",
                FrontendError::EspeakMissing { .. } => "espeak_missing",
                FrontendError::EspeakFailed { .. } => "espeak_failed",
                FrontendError::NoPhonemes { .. } => "no_phonemes",
                FrontendError::VocabIo { .. } => "vocab_io",
                FrontendError::VocabFormat { .. } => "vocab_format",
            },
            Self::NotLoaded => "not_loaded",
            Self::AlreadyLoaded => "already_loaded",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
