//! Events, replies and the per-dispatch sink of the kernel machines.

use super::contract::KernelContract;
use super::errors::KernelMachineError;
use voxlane_runtime::{DiagnosticsSnapshot, SubPool};

/// Size the workspace for the largest request and fix the lane budget.
#[derive(Debug, Clone, Copy)]
pub struct Bind<L> {
    /// The largest request to serve.
    pub limits: L,
    /// The most lanes any execute may use.
    pub lanes: usize,
}

/// Run the kernel on one request.
pub struct Execute<'a, K: KernelContract> {
    /// Inputs.
    pub request: K::Request<'a>,
    /// The lane share to compute on.
    pub lanes: SubPool<'a>,
}

/// Everything a kernel machine reacts to.
pub enum KernelEvent<'a, K: KernelContract> {
    /// Validate and pack configuration and weights.
    Prepare(&'a K::Params),
    /// Size workspaces and fix the lane budget.
    Bind(Bind<K::Limits>),
    /// Compute one request.
    Execute(Execute<'a, K>),
    /// Outcome: the request computed.
    ExecuteDone,
    /// Outcome: computing failed.
    ExecuteError(KernelMachineError),
    /// Outcome: packing or binding failed after its guard passed.
    SetupError(KernelMachineError),
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
    /// Leave `errored` and start over.
    Reset,
}

impl<K: KernelContract> KernelEvent<'_, K> {
    /// The event kind, as named in the transition tables.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Prepare(_) => "prepare",
            Self::Bind(_) => "bind",
            Self::Execute(_) => "execute",
            Self::ExecuteDone => "execute_done",
            Self::ExecuteError(_) => "execute_error",
            Self::SetupError(_) => "setup_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
            Self::Reset => "reset",
        }
    }
}

/// The event kinds, in table order.
pub const EVENT_KINDS: &[&str] = &[
    "prepare",
    "bind",
    "execute",
    "execute_done",
    "execute_error",
    "setup_error",
    "capture_diagnostics",
    "reset",
];

/// Which lane route an execute took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneRoute {
    /// On the calling thread.
    Serial,
    /// Forked across the request's lane share.
    Lanes,
}

/// The reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelReply {
    /// `prepare_done`: weights packed along this route.
    PrepareDone {
        /// The prepare action that ran.
        route: &'static str,
    },
    /// `bind_done`: workspace sized.
    BindDone,
    /// `execute_done`: outputs written.
    ExecuteDone {
        /// The lane route taken.
        route: LaneRoute,
    },
    /// `reset_done`.
    ResetDone,
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: rejected or failed.
    Error(KernelMachineError),
}

/// Per-dispatch scratch passed to statig as external context.
pub struct KernelSink<'a, K: KernelContract> {
    /// Where `execute` writes.
    pub output: Option<K::Output<'a>>,
    /// The reply, once known.
    pub reply: Option<KernelReply>,
    /// An outcome event an action raised, dispatched next.
    pub follow_up: Option<FollowUp>,
    /// The lane route of the execute in flight.
    pub route: Option<LaneRoute>,
}

impl<'a, K: KernelContract> KernelSink<'a, K> {
    /// A sink carrying `output` (or none, for events that write nothing).
    pub fn new(output: Option<K::Output<'a>>) -> Self {
        Self {
            output,
            reply: None,
            follow_up: None,
            route: None,
        }
    }
}

/// Outcome events an action can raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowUp {
    /// See [`KernelEvent::ExecuteDone`].
    ExecuteDone,
    /// See [`KernelEvent::ExecuteError`].
    ExecuteError(KernelMachineError),
    /// See [`KernelEvent::SetupError`].
    SetupError(KernelMachineError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event<'a, K: KernelContract>(self) -> KernelEvent<'a, K> {
        match self {
            Self::ExecuteDone => KernelEvent::ExecuteDone,
            Self::ExecuteError(e) => KernelEvent::ExecuteError(e),
            Self::SetupError(e) => KernelEvent::SetupError(e),
        }
    }
}
