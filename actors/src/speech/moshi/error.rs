//! Errors of the Moshi LM: configuration, weights, inputs, sampling, kernels.

use crate::kernels::KernelError;
use crate::speech::config_json::FieldError;
use crate::speech::sampler::SamplerError;
use std::path::PathBuf;
use voxlane_runtime::weights::WeightError;

/// Why a Moshi model could not be built or stepped; each variant names the culprit.
#[derive(Debug, thiserror::Error)]
pub enum MoshiError {
    /// The configuration JSON is not JSON.
    #[error("moshi config: invalid JSON: {0}")]
    Json(String),
    /// A file could not be read.
    #[error("{}: {detail}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        detail: String,
    },
    /// A configuration field has the wrong type or an unsupported value.
    #[error("moshi config: field `{field}`: {detail}")]
    Config {
        /// Dotted field path, e.g. `lm_config.dep_q`.
        field: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Tensors the configuration needs are absent from the weights.
    #[error("moshi weights: {} missing tensor(s): {}", .0.len(), .0.join(", "))]
    MissingTensors(Vec<String>),
    /// Tensors the configuration does not know are present (wrong model or config).
    #[error("moshi weights: {} unexpected tensor(s): {}", .0.len(), .0.join(", "))]
    UnexpectedTensors(Vec<String>),
    /// A tensor has the wrong shape for the configuration.
    #[error("moshi weights: tensor `{tensor}`: expected shape {expected:?}, found {found:?}")]
    Shape {
        /// Tensor name.
        tensor: String,
        /// Shape the configuration implies.
        expected: Vec<usize>,
        /// Shape in the file.
        found: Vec<usize>,
    },
    /// A tensor is not a float tensor (f32/f16/bf16).
    #[error("moshi weights: tensor `{tensor}` has dtype {dtype}, expected f32, f16 or bf16")]
    Dtype {
        /// Tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },
    /// The weight file itself could not be read.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The converted-weights cache could not be written or does not fit the model.
    #[error("moshi weights cache: {0}")]
    Cache(String),
    /// A caller-supplied input (codes, token, step size) is invalid.
    #[error("moshi input: {0}")]
    Input(String),
    /// The sampler rejected its parameters or logits.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// A kernel rejected its operands (a bug if the input checks passed).
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

impl From<FieldError> for MoshiError {
    fn from(e: FieldError) -> Self {
        MoshiError::Config {
            field: e.field,
            detail: e.detail,
        }
    }
}

impl From<voxlane_runtime::LaneError> for MoshiError {
    fn from(e: voxlane_runtime::LaneError) -> Self {
        MoshiError::Kernel(KernelError::Lane(e))
    }
}
