//! Typed rejections of the lane dispatcher.

use voxlane_runtime::{LaneError, PoolError};

/// Why the lane dispatcher refused or failed a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneDispatchError {
    /// `configure` asked for zero threads.
    #[error("thread budget must be at least 1 (got 0)")]
    ZeroThreads,
    /// `configure` asked for more threads than voxlane allows.
    #[error("thread budget {requested} exceeds the maximum {max}")]
    BudgetTooLarge {
        /// Threads asked for.
        requested: usize,
        /// The cap.
        max: usize,
    },
    /// A dispatch asked for more lanes than the pool owns.
    #[error("dispatch asked for {requested} lanes but the pool has {available}")]
    LanesExceedBudget {
        /// Lanes asked for.
        requested: usize,
        /// Lanes the pool owns.
        available: usize,
    },
    /// The pool has not been configured yet.
    #[error("lane pool is not configured")]
    NotConfigured,
    /// `configure` was sent twice.
    #[error("lane pool is already configured")]
    AlreadyConfigured,
    /// The pool was shut down.
    #[error("lane pool is shut down")]
    ShutDown,
    /// The OS refused to start the pool's workers.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A task panicked inside a lane; the pool is still usable.
    #[error(transparent)]
    Lane(#[from] LaneError),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// The event kind.
        event: &'static str,
        /// The state it arrived in.
        state: &'static str,
    },
}

impl LaneDispatchError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::ZeroThreads => "zero_threads",
            Self::BudgetTooLarge { .. } => "budget_too_large",
            Self::LanesExceedBudget { .. } => "lanes_exceed_budget",
            Self::NotConfigured => "not_configured",
            Self::AlreadyConfigured => "already_configured",
            Self::ShutDown => "shut_down",
            Self::Pool(_) => "pool_spawn_failed",
            Self::Lane(_) => "lane_panicked",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
