//! Events the lane dispatcher accepts and the outcomes it replies with.

use super::errors::LaneDispatchError;
use voxlane_runtime::{DiagnosticsSnapshot, LaneError, PoolError};

/// Build the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Configure {
    /// The whole compute budget, caller included.
    pub threads: usize,
    /// Pin lanes to cores.
    pub pin: bool,
}

/// Run `job(i)` for every `i < tasks`.
#[derive(Clone, Copy)]
pub struct Dispatch<'a> {
    /// Number of task indices.
    pub tasks: usize,
    /// Lanes this dispatch may use (0 = the whole pool).
    pub lanes: usize,
    /// The work; must be safe to call concurrently for distinct indices.
    pub job: &'a (dyn Fn(usize) + Sync),
}

impl std::fmt::Debug for Dispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatch")
            .field("tasks", &self.tasks)
            .field("lanes", &self.lanes)
            .finish_non_exhaustive()
    }
}

/// Everything the machine reacts to. `pool_*` and `lanes_*` are outcome
/// events the machine's own actions raise; callers send the others.
#[derive(Debug)]
pub enum Event<'a> {
    /// Build the pool.
    Configure(Configure),
    /// Run a batch of tasks.
    Dispatch(Dispatch<'a>),
    /// Outcome: the pool started.
    PoolDone,
    /// Outcome: the pool could not start.
    PoolError(PoolError),
    /// Outcome: every task of the running dispatch finished.
    LanesDone,
    /// Outcome: a task panicked.
    LanesError(LaneError),
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
    /// Stop the workers.
    Shutdown,
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Configure(_) => "configure",
            Self::Dispatch(_) => "dispatch",
            Self::PoolDone => "pool_done",
            Self::PoolError(_) => "pool_error",
            Self::LanesDone => "lanes_done",
            Self::LanesError(_) => "lanes_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
            Self::Shutdown => "shutdown",
        }
    }
}

/// Which route a dispatch took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// No tasks: nothing ran.
    Empty,
    /// On the calling thread only.
    Serial,
    /// Forked across lanes.
    Parallel,
}

/// What the machine replies to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `configure_done`: the pool runs with this many threads.
    ConfigureDone {
        /// Threads in the pool, caller included.
        threads: usize,
        /// Whether lanes were pinned.
        pinned: bool,
    },
    /// `dispatch_done`: every task ran.
    DispatchDone {
        /// Tasks run.
        tasks: usize,
        /// The route taken.
        route: Route,
    },
    /// `diagnostics`: the counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `shutdown_done`: workers joined.
    ShutdownDone,
    /// `*_error`: the request was rejected or failed.
    Error(LaneDispatchError),
}

/// Per-dispatch scratch handed to statig as external context: the reply slot
/// and the outcome event an action raised, which the wrapper feeds back.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply to the caller, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
    /// Tasks and route of the dispatch in flight.
    pub in_flight: Option<(usize, Route)>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowUp {
    /// See [`Event::PoolDone`].
    PoolDone,
    /// See [`Event::PoolError`].
    PoolError(PoolError),
    /// See [`Event::LanesDone`].
    LanesDone,
    /// See [`Event::LanesError`].
    LanesError(LaneError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::PoolDone => Event::PoolDone,
            Self::PoolError(e) => Event::PoolError(e),
            Self::LanesDone => Event::LanesDone,
            Self::LanesError(e) => Event::LanesError(e),
        }
    }
}
