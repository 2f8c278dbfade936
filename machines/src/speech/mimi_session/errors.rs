//! Typed rejections of the Mimi session machines.

/// Why a Mimi session machine refused or failed a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MimiSessionError {
    /// `open_session` carried no session (already taken, or never bound).
    #[error("open_session carries no session (bind one with mimi_init's bind_session)")]
    NoSession,
    /// `open_session` while a session is open.
    #[error("a session is already open; close it first")]
    AlreadyOpen,
    /// PCM that is not whole 1920-sample frames, or more frames than bound.
    #[error("push_pcm of {got} samples: needs 1 to {max_frames} frames of {frame_size} samples")]
    WrongFrameSize {
        /// Samples pushed.
        got: usize,
        /// Samples per frame.
        frame_size: usize,
        /// Frames the session was bound for.
        max_frames: usize,
    },
    /// Codes that are not whole frames of K codes, or more frames than bound.
    #[error("push_codes of {got} codes: needs 1 to {max_frames} frames of {codebooks} codes")]
    WrongCodeCount {
        /// Codes pushed.
        got: usize,
        /// Codebooks per frame (K).
        codebooks: usize,
        /// Frames the session was bound for.
        max_frames: usize,
    },
    /// A code at or above the codebook size.
    #[error("code {code} (codebook {codebook}, frame {frame}) is outside 0..{codebook_size}")]
    CodeOutOfRange {
        /// The code.
        code: u32,
        /// Its codebook.
        codebook: usize,
        /// Its frame within the push.
        frame: usize,
        /// Entries per codebook.
        codebook_size: usize,
    },
    /// The output buffer in the sink is missing or of the wrong length.
    #[error("output buffer holds {got} values, the push needs {expected}")]
    OutputSize {
        /// Values the buffer holds (0 when missing).
        got: usize,
        /// Values the push writes.
        expected: usize,
    },
    /// The session was closed: every request is rejected.
    #[error("the session is closed")]
    Closed,
    /// The codec failed while stepping (a bug if the guards passed).
    #[error("mimi step failed: {0}")]
    Step(String),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// Event kind.
        event: &'static str,
        /// Current state.
        state: &'static str,
    },
}

impl MimiSessionError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoSession => "no_session",
            Self::AlreadyOpen => "already_open",
            Self::WrongFrameSize { .. } => "wrong_frame_size",
            Self::WrongCodeCount { .. } => "wrong_code_count",
            Self::CodeOutOfRange { .. } => "code_out_of_range",
            Self::OutputSize { .. } => "output_size",
            Self::Closed => "closed",
            Self::Step(_) => "step_failed",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
