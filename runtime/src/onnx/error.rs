//! Why an ONNX file could not be read; each variant names the file and what is wrong.

use std::path::PathBuf;

/// An ONNX reading error.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be opened or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file ends before its own fields do: a truncated download or copy.
    #[error("{path}: truncated ONNX file: {detail}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Which field was cut off.
        detail: String,
    },
    /// Not an ONNX model at all.
    #[error("{path}: not an ONNX model: {detail}")]
    NotOnnx {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        detail: String,
    },
    /// An ONNX model whose contents are inconsistent (corrupt, not cut short).
    #[error("{path}: malformed ONNX model: {detail}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where (message path) and what.
        detail: String,
    },
    /// A required initializer is absent.
    #[error("initializer `{0}` is missing")]
    MissingTensor(String),
    /// A tensor cannot be read the way it was asked for.
    #[error("tensor `{tensor}`: {detail}")]
    Unsupported {
        /// Tensor name.
        tensor: String,
        /// What is not supported.
        detail: String,
    },
}
