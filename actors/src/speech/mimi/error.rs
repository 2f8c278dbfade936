//! Errors of the Mimi codec: configuration, weights, inputs and kernels.

use crate::kernels::KernelError;
use voxlane_runtime::weights::WeightError;

/// Why a Mimi model could not be built or run; each variant names the culprit.
#[derive(Debug, thiserror::Error)]
pub enum MimiError {
    /// The configuration JSON is not JSON.
    #[error("mimi config: invalid JSON: {0}")]
    Json(String),
    /// A configuration field has the wrong type or an unsupported value.
    #[error("mimi config: field `{field}`: {detail}")]
    Config {
        /// Dotted field path, e.g. `seanet.ratios`.
        field: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Tensors the configuration needs are absent from the weights.
    #[error("mimi weights: {} missing tensor(s): {}", .0.len(), .0.join(", "))]
    MissingTensors(Vec<String>),
    /// Tensors the configuration does not know are present (wrong model or config).
    #[error("mimi weights: {} unexpected tensor(s): {}", .0.len(), .0.join(", "))]
    UnexpectedTensors(Vec<String>),
    /// A tensor has the wrong shape for the configuration.
    #[error("mimi weights: tensor `{tensor}`: expected shape {expected:?}, found {found:?}")]
    Shape {
        /// Tensor name.
        tensor: String,
        /// Shape the configuration implies.
        expected: Vec<usize>,
        /// Shape in the file.
        found: Vec<usize>,
    },
    /// A tensor is not a float tensor (f32/f16/bf16).
    #[error("mimi weights: tensor `{tensor}` has dtype {dtype}, expected f32, f16 or bf16")]
    Dtype {
        /// Tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },
    /// The weight file itself could not be read.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A caller-supplied input (audio, codes, step size) is invalid.
    #[error("mimi input: {0}")]
    Input(String),
    /// A kernel rejected its operands (a bug if the input checks passed).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

impl From<crate::speech::config_json::FieldError> for MimiError {
    fn from(e: crate::speech::config_json::FieldError) -> Self {
        MimiError::Config {
            field: e.field,
            detail: e.detail,
        }
    }
}

impl From<voxlane_runtime::LaneError> for MimiError {
    fn from(e: voxlane_runtime::LaneError) -> Self {
        MimiError::Kernel(KernelError::Lane(e))
    }
}
