//! Native Kokoro-82M inference reproducing the int8 ONNX export's arithmetic
//! (`kokoro-v1.0.int8.onnx`; the graph is mapped in `GRAPH.md`).
//!
//! [`graph`] resolves nodes into typed weight bundles and [`quant`] runs them
//! exactly as onnxruntime does; the front half is [`albert`] (PL-BERT →
//! `d_en`), [`prosody`] (durations, F0, N) and [`text_encoder`] (`asr`),
//! put together by [`front`]; the back half is [`decoder`] and [`generator`]
//! (with [`blocks`], [`adain_rows`], [`lane_qconv`], [`ort_sin`],
//! [`pointwise`], [`source`], [`stft`]), put together by [`back`].

pub mod adain_rows;
pub mod albert;
pub mod back;
pub mod bind_cache;
pub mod blocks;
pub mod decoder;
pub mod fold;
pub mod front;
pub mod generator;
pub mod graph;
pub mod lane_qconv;
pub mod ort_sin;
pub mod pipeline;
pub mod pointwise;
pub mod prosody;
pub mod qgemm;
pub mod quant;
pub mod source;
pub mod stft;
pub mod text_encoder;
pub mod window;
