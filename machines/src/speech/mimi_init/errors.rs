//! Typed rejections of `mimi_init`.

use crate::speech::mimi_session::Side;
use voxlane_actors::speech::mimi::MimiError;

/// Why `mimi_init` refused or failed a request; each variant names the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MimiInitError {
    /// The configuration is invalid (a field, or unreadable JSON).
    #[error("mimi config: {0}")]
    Config(String),
    /// Tensors the configuration needs are absent.
    #[error("mimi weights: {} missing tensor(s): {}", .0.len(), .0.join(", "))]
    MissingTensors(Vec<String>),
    /// Tensors the configuration does not know are present.
    #[error("mimi weights: {} unexpected tensor(s): {}", .0.len(), .0.join(", "))]
    UnexpectedTensors(Vec<String>),
    /// A tensor has the wrong shape (or value count) for the configuration.
    #[error("mimi weights: tensor `{tensor}`: expected shape {expected:?}, found {found:?}")]
    TensorShape {
        /// Tensor name.
        tensor: String,
        /// Shape the configuration implies.
        expected: Vec<usize>,
        /// Shape found.
        found: Vec<usize>,
    },
    /// A tensor is not f32, f16 or bf16.
    #[error("mimi weights: tensor `{tensor}` has dtype {dtype}, expected f32, f16 or bf16")]
    TensorDtype {
        /// Tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },
    /// The weight file could not be opened or parsed.
    #[error("mimi weights: {0}")]
    WeightFile(String),
    /// The in-memory weights were already taken by an earlier `initialize`.
    #[error("mimi weights: the in-memory weights were already used")]
    WeightsTaken,
    /// Binding the model failed after the checks passed.
    #[error("mimi bind: {0}")]
    Bind(String),
    /// `initialize` while a model is bound.
    #[error("a Mimi model is already initialized; reset first")]
    AlreadyInitialized,
    /// `bind_session` with `max_frames` 0.
    #[error("bind_session: max_frames must be at least 1")]
    ZeroFrames,
    /// The session's workspace does not fit the capacity given.
    #[error("bind_session: a {side} session of {max_frames} frame(s) needs {needed} bytes, capacity is {capacity}", side = .side.name())]
    CapacityTooSmall {
        /// The session side.
        side: Side,
        /// Frames per step asked for.
        max_frames: usize,
        /// Bytes the workspace rule asks for (`usize::MAX` on overflow).
        needed: usize,
        /// Bytes allowed.
        capacity: usize,
    },
    /// Allocating the session failed.
    #[error("bind_session: {0}")]
    Session(String),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// Event kind.
        event: &'static str,
        /// Current state.
        state: &'static str,
    },
}

impl MimiInitError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Config(_) => "invalid_config",
            Self::MissingTensors(_) => "missing_tensors",
            Self::UnexpectedTensors(_) => "unexpected_tensors",
            Self::TensorShape { .. } => "tensor_shape",
            Self::TensorDtype { .. } => "tensor_dtype",
            Self::WeightFile(_) => "weight_file",
            Self::WeightsTaken => "weights_taken",
            Self::Bind(_) => "bind_failed",
            Self::AlreadyInitialized => "already_initialized",
            Self::ZeroFrames => "zero_frames",
            Self::CapacityTooSmall { .. } => "capacity_too_small",
            Self::Session(_) => "session_failed",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }

    /// The typed error for a codec failure while loading or binding.
    pub fn from_mimi(e: MimiError) -> Self {
        match e {
            MimiError::Json(m) => Self::Config(m),
            e @ MimiError::Config { .. } => Self::Config(e.to_string()),
            MimiError::MissingTensors(v) => Self::MissingTensors(v),
            MimiError::UnexpectedTensors(v) => Self::UnexpectedTensors(v),
            MimiError::Shape {
                tensor,
                expected,
                found,
            } => Self::TensorShape {
                tensor,
                expected,
                found,
            },
            MimiError::Dtype { tensor, dtype } => Self::TensorDtype { tensor, dtype },
            MimiError::Weights(w) => Self::WeightFile(w.to_string()),
            other => Self::Bind(other.to_string()),
        }
    }
}
