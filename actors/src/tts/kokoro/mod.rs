//! Native Kokoro-82M inference reproducing the int8 ONNX export's arithmetic
//! (`kokoro-v1.0.int8.onnx`; the graph is mapped in `GRAPH.md`).
//!
//! [`graph`] resolves nodes into typed weight bundles, [`quant`] runs them
//! exactly as onnxruntime does.

pub mod albert;
pub mod back;
pub mod blocks;
pub mod decoder;
pub mod front;
pub mod generator;
pub mod graph;
pub mod prosody;
pub mod quant;
pub mod source;
pub mod stft;
pub mod text_encoder;
