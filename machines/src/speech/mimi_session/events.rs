//! Events, replies and the per-dispatch sink of the Mimi session machines.

use super::contract::SessionContract;
use super::errors::MimiSessionError;
use std::cell::RefCell;
use voxlane_runtime::{DiagnosticsSnapshot, SubPool};

/// One step of the stream: the input and the lane share to run on.
pub struct Push<'a, S: SessionContract> {
    /// PCM (encode) or codes (decode).
    pub input: S::Input<'a>,
    /// The lane share to compute on.
    pub lanes: SubPool<'a>,
}

/// Everything a session machine reacts to. `DONE` / `ERROR` are outcome
/// events the machine's own step action raises; callers send the others.
pub enum SessionEvent<'a, S: SessionContract> {
    /// Take the session out of the slot and start streaming.
    OpenSession(RefCell<Option<S::Session>>),
    /// One step: `push_pcm` (encode) or `push_codes` (decode).
    Push(Push<'a, S>),
    /// Outcome: the step wrote its output (`encode_done` / `decode_done`).
    Done(usize),
    /// Outcome: the step failed (`encode_error` / `decode_error`).
    Error(MimiSessionError),
    /// Back to the start of the stream.
    Reset,
    /// Drop the session; every later request is rejected.
    Close,
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
}

impl<S: SessionContract> SessionEvent<'_, S> {
    /// The event kind, as named in the transition tables.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OpenSession(_) => "open_session",
            Self::Push(_) => S::PUSH,
            Self::Done(_) => S::DONE,
            Self::Error(_) => S::ERROR,
            Self::Reset => "reset",
            Self::Close => "close",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }

    /// An `open_session` event carrying `session`.
    pub fn open(session: S::Session) -> Self {
        Self::OpenSession(RefCell::new(Some(session)))
    }
}

/// The event kinds of a side, in table order.
pub const fn event_kinds(
    push: &'static str,
    done: &'static str,
    error: &'static str,
) -> [&'static str; 7] {
    [
        "open_session",
        push,
        done,
        error,
        "reset",
        "close",
        "capture_diagnostics",
    ]
}

/// The reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionReply {
    /// `open_session` done: the session streams.
    Opened {
        /// The most frames one push may carry.
        max_frames: usize,
        /// Bytes of streaming state the session holds.
        bytes: usize,
    },
    /// `encode_done` / `decode_done`: the output holds this many frames.
    Done {
        /// Code frames the push covered.
        frames: usize,
    },
    /// `reset` done: the next push starts a new stream.
    ResetDone,
    /// `close` done: the session is dropped.
    CloseDone,
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: rejected or failed.
    Error(MimiSessionError),
}

/// Per-dispatch scratch passed to statig as external context: where a push
/// writes, the reply, and the outcome event an action raised.
pub struct SessionSink<'a, S: SessionContract> {
    /// Where a push writes.
    pub output: Option<S::Output<'a>>,
    /// The reply, once known.
    pub reply: Option<SessionReply>,
    /// An outcome event an action raised, dispatched next.
    pub follow_up: Option<FollowUp>,
}

impl<'a, S: SessionContract> SessionSink<'a, S> {
    /// A sink carrying `output` (or none, for events that write nothing).
    pub fn new(output: Option<S::Output<'a>>) -> Self {
        Self {
            output,
            reply: None,
            follow_up: None,
        }
    }
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowUp {
    /// See [`SessionEvent::Done`].
    Done(usize),
    /// See [`SessionEvent::Error`].
    Error(MimiSessionError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event<'a, S: SessionContract>(self) -> SessionEvent<'a, S> {
        match self {
            Self::Done(frames) => SessionEvent::Done(frames),
            Self::Error(e) => SessionEvent::Error(e),
        }
    }
}
