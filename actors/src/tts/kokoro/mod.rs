//! Native Kokoro-82M inference reproducing the int8 ONNX export's arithmetic
//! (`kokoro-v1.0.int8.onnx`; the graph is mapped in `GRAPH.md`).
//!
//! [`graph`] resolves nodes into typed weight bundles and [`quant`] runs them
//! exactly as onnxruntime does; the front half is [`albert`] (PL-BERT →
//! `d_en`), [`prosody`] (durations, F0, N) and [`text_encoder`] (`asr`),
//! put together by [`front`].

pub mod albert;
pub mod front;
pub mod graph;
pub mod prosody;
pub mod quant;
pub mod text_encoder;
