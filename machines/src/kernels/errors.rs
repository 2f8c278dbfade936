//! Typed rejections of the kernel machines.

use voxlane_actors::kernels::KernelError;

/// Why a kernel machine refused or failed a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelMachineError {
    /// Configuration or weights are invalid.
    #[error("invalid kernel parameters: {0}")]
    Params(String),
    /// The bind limits are invalid.
    #[error("invalid bind limits: {0}")]
    Limits(String),
    /// A request's shape does not fit the kernel or its bound limits.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The request asks for more lanes than were bound.
    #[error("execute asked for {requested} lanes but the kernel was bound for {bound}")]
    LanesExceedBudget {
        /// Lanes in the request's share.
        requested: usize,
        /// Lanes bound.
        bound: usize,
    },
    /// The kernel failed while computing.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// Event kind.
        event: &'static str,
        /// Current state.
        state: &'static str,
    },
}

impl KernelMachineError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Params(_) => "invalid_params",
            Self::Limits(_) => "invalid_limits",
            Self::Shape(_) => "shape_mismatch",
            Self::LanesExceedBudget { .. } => "lanes_exceed_budget",
            Self::Kernel(_) => "kernel_failed",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
