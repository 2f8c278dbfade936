//! `lstm`: one LSTM layer (PyTorch semantics: gates i, f, g, o;
//! `bias_ih + bias_hh`; batch 1, input `[T, I]` time-major, output
//! `[T, directions · H]`) over `voxlane_actors::kernels::lstm`, as a kernel
//! machine (see [`crate::kernels`] for the shared lifecycle).
//!
//! Prepare routes: `effect_pack_unidirectional` and
//! `effect_pack_bidirectional` for PyTorch-layout weights, and
//! `effect_reorder_onnx_gates` for ONNX-layout weights (`W`, `R`, `B` with
//! gate order i, o, f, c, as Kokoro's ONNX export stores them), reordered
//! once into the PyTorch layout the kernel runs. Each execute starts from a
//! zero state.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use actions::PackedLstm;
pub use events::{LstmDirection, LstmLayout, LstmLimits, LstmParams, LstmRequest, OnnxLstm};
pub use machine::{LstmContract, LstmKernel};
pub use table::SPEC;
