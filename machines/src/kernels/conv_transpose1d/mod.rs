//! `conv_transpose1d`: transposed 1-D convolution (batch 1, `[C, T]` f32,
//! PyTorch semantics) over `voxlane_actors::kernels::conv_transpose1d`, as a
//! kernel machine (see [`crate::kernels`] for the shared lifecycle).
//!
//! Each algorithm the data-plane kernel really picks is its own prepare
//! route: `effect_build_streaming` (Mimi's causal
//! `StreamingConvTranspose1d`, the overlap carried between executes),
//! `effect_pack_polyphase` (`dilation == 1`: every output phase as one
//! stride-1 direct conv, the default), `effect_pack_col2im` (GEMM + overlap
//! add, for dilated convs or on request) and `effect_pack_scatter` (the same
//! fallback with one input channel per group: a direct scatter loop).
//!
//! `bind` sizes the workspace for the largest input, so `execute` allocates
//! nothing. On the streaming route the workspace holds the stream (its
//! carried overlap and its own copy of the packed weights): binding again
//! starts a new stream.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use actions::{ConvTranspose1dScratch, PackedConvTranspose1d};
pub use events::{ConvTranspose1dKernelParams, ConvTranspose1dLimits, ConvTranspose1dRequest};
pub use machine::{ConvTranspose1dContract, ConvTranspose1dKernel};
pub use table::SPEC;
