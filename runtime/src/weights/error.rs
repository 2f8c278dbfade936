//! Errors reading or writing weight files.

use std::path::PathBuf;

/// Why a weight file could not be used; each names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// The file could not be opened or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Shorter than its own header says: truncated download or copy.
    #[error("{path}: truncated: {detail}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// What was cut off.
        detail: String,
    },
    /// Not a safetensors file at all.
    #[error("{path}: not a safetensors file: {detail}")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        detail: String,
    },
    /// A dtype voxlane does not read.
    #[error("tensor `{tensor}` has unsupported dtype {dtype}")]
    UnsupportedDtype {
        /// Tensor name.
        tensor: String,
        /// The dtype found.
        dtype: String,
    },
    /// A required tensor is absent.
    #[error("tensor `{0}` is missing")]
    Missing(String),
    /// A tensor's shape or dtype is not what the model needs.
    #[error("tensor `{tensor}`: expected {expected}, found {found}")]
    Mismatch {
        /// Tensor name.
        tensor: String,
        /// What was expected.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// A byte range that cannot be read in place as the element type asked
    /// for: outside the map, not aligned for it, or not whole elements.
    #[error("{what}: cannot map in place: {detail}")]
    Misaligned {
        /// The tensor or element type.
        what: String,
        /// What does not fit.
        detail: String,
    },
    /// A voxlane file whose header fails its own checks (hash, offsets):
    /// damaged after it was written.
    #[error("{path}: corrupt: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// A voxlane file written in a layout version this build does not read.
    #[error("{path}: version {found}, this build reads version {supported}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
}
