//! `kernel_matmul`: `C[M,N] = A[M,K]·W[N,K]ᵀ (+ bias)` over the weight formats
//! of `voxlane_actors::kernels::matmul` (f32, f16, bf16, GGML q8_0,
//! onnxruntime int8/uint8), as a kernel machine (see [`crate::kernels`] for
//! the shared lifecycle). Each weight format is its own prepare route, so the
//! format a model loaded shows in the reply and in the diagram.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use actions::PackedMatmul;
pub use events::{IntQuants, MatmulLimits, MatmulParams, MatmulRequest, MatmulWeights};
pub use machine::{Matmul, MatmulKernel};
pub use table::SPEC;
