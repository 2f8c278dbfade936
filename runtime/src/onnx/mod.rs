//! ONNX models: a memory-mapped reader for graphs and their weights.
//!
//! A hand-written protobuf decoder ([`wire`]) walks `ModelProto → GraphProto
//! → NodeProto / TensorProto` (`parse`); initializer payloads stored as
//! `raw_data` stay borrowed from the map, so opening the 92 MB int8 or 310 MB
//! fp32 Kokoro export costs a scan, not a copy. Truncated, foreign and
//! corrupt files are typed errors naming what is wrong ([`OnnxError`]).

pub mod dtype;
pub mod error;
pub mod file;
pub mod model;
mod parse;
pub mod tensor;
pub mod voxlane;
pub mod wire;

pub use dtype::DataType;
pub use error::OnnxError;
pub use file::OnnxModel;
pub use model::{
    AttrValue, Attribute, Dim, Graph, ModelInfo, Node, OpsetId, TensorInfo, ValueInfo,
};
pub use tensor::Tensor;
pub use voxlane::{convert, Converted};

#[cfg(test)]
mod tests;
