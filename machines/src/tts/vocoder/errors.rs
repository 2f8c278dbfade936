//! Typed rejections of `kokoro_vocoder`.

use voxlane_actors::tts::kokoro::graph::KokoroError;

/// Why the vocoder stage (`kokoro_vocoder`, the network's back half) refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum KokoroVocoderError {
    /// `asr` is empty or not whole frames of `channels` values.
    #[error("asr has {values} values: not a whole, non-zero number of {channels}-channel frames")]
    AsrShape {
        /// Values given.
        values: usize,
        /// Channels per frame.
        channels: usize,
    },
    /// F0 or N does not have two values per `asr` frame.
    #[error("{curve} has {got} values; {want} (2 per asr frame) are needed")]
    CurveLength {
        /// `f0` or `n`.
        curve: &'static str,
        /// Values given.
        got: usize,
        /// Values needed.
        want: usize,
    },
    /// The decoder style is not `want` finite values.
    #[error("decoder style has {got} values (or a non-finite one); the decoder takes {want} finite values")]
    Style {
        /// Values given.
        got: usize,
        /// Values the decoder takes.
        want: usize,
    },
    /// A `next_window` whose F0 or style does not fit the streamed chunk.
    #[error("next_window has {f0} F0 values and {style} style values; the streamed chunk needs {want_f0} and {want_style} finite ones")]
    WindowMismatch {
        /// F0 values given.
        f0: usize,
        /// Style values given.
        style: usize,
        /// F0 values the chunk has.
        want_f0: usize,
        /// Style values the decoder takes.
        want_style: usize,
    },
    /// Loading or running the network failed (foreign or truncated model file, bad node, kernel, lane).
    #[error(transparent)]
    Model(#[from] KokoroError),
    /// `run` before `load`.
    #[error("the Kokoro back stage is not loaded")]
    NotLoaded,
    /// A second `load`.
    #[error("the Kokoro back stage is already loaded")]
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

impl KokoroVocoderError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::AsrShape { .. } => "asr_shape",
            Self::CurveLength { .. } => "curve_length",
            Self::Style { .. } => "style_length",
            Self::WindowMismatch { .. } => "window_mismatch",
            Self::Model(_) => "model_failed",
            Self::NotLoaded => "not_loaded",
            Self::AlreadyLoaded => "already_loaded",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
