//! Events `speech_wavefront` accepts, its replies and its sink.

use super::errors::WavefrontError;
use super::stages::Stages;
use crate::core::Slot;
use voxlane_runtime::DiagnosticsSnapshot;

/// Everything the machine reacts to (outcomes are raised by its own actions).
#[derive(Debug)]
pub enum Event<'a> {
    /// Take the three child machines (sessions open, the LM bound).
    Bind(Slot<Box<Stages>>),
    /// One input frame of the user's PCM.
    PushFrame(&'a [f32]),
    /// No more input: run the ticks that bring the frames in flight out.
    Flush,
    /// Outcome: every stage of the tick finished.
    TickDone,
    /// Outcome: a stage failed.
    TickError(Slot<WavefrontError>),
    /// Back to `fill`: frames in flight dropped, every stage's stream restarted.
    Reset,
    /// Hand the child machines back (`unbound`).
    Release,
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
}

impl std::fmt::Debug for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stages")
            .field("lm", &self.lm.state())
            .field("threads", &voxlane_runtime::Fork::threads(&*self.pool))
            .finish()
    }
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Bind(_) => "bind",
            Self::PushFrame(_) => "push_frame",
            Self::Flush => "flush",
            Self::TickDone => "tick_done",
            Self::TickError(_) => "tick_error",
            Self::Reset => "reset",
            Self::Release => "release",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }
}

/// One output frame, lent from the machine's buffers.
#[derive(Debug, Clone, Copy)]
pub struct OutFrame<'a> {
    /// The input frame (0-based, in push order) this frame answers.
    pub seq: u64,
    /// The agent's PCM (one frame).
    pub pcm: &'a [f32],
    /// The LM's tokens: the text token, then its audio tokens.
    pub tokens: &'a [u32],
}

/// What the machine replies.
#[derive(Debug)]
pub enum Reply {
    /// `bind` done.
    Bound {
        /// Samples per input frame.
        frame_size: usize,
    },
    /// A tick ran; no frame came out of it (the pipeline is filling).
    Filling,
    /// A tick ran and a frame came out (read it from the handle).
    Frame,
    /// Nothing is in flight any more.
    Complete,
    /// `reset` done.
    Ok,
    /// `release`: the child machines.
    Released(Option<Box<Stages>>),
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// The request was rejected or failed.
    Error(WavefrontError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
}

/// Outcome events an action can raise.
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::TickDone`].
    TickDone,
    /// See [`Event::TickError`].
    TickError(WavefrontError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::TickDone => Event::TickDone,
            Self::TickError(e) => Event::TickError(Slot::new(e)),
        }
    }
}
