//! `conv1d`: 1-D convolution (batch 1, channel-major `[C, T]` f32) over
//! `voxlane_actors::kernels::conv1d`, as a kernel machine (see
//! [`crate::kernels`] for the shared lifecycle).
//!
//! Each algorithm the data-plane kernel really picks is its own prepare
//! route, so the choice shows in the reply and in the diagram:
//! `effect_build_streaming` (Mimi's causal `StreamingConv1d`, history carried
//! between executes), `effect_pack_depthwise` (`C_in/groups == 1`),
//! `effect_pack_direct` (dense, stride 1), `effect_pack_phases` (dense,
//! stride > 1 rewritten as a stride-1 conv over the input phases) and
//! `effect_pack_gemm` (the GEMM cross-check route, on request).
//!
//! `bind` sizes the workspace for the largest input, so `execute` allocates
//! nothing. On the streaming route the workspace holds the stream (its
//! history and its own copy of the packed weights): binding again starts a
//! new stream.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use actions::{Conv1dScratch, PackedConv1d};
pub use events::{CausalHistory, Conv1dKernelParams, Conv1dLimits, Conv1dRequest};
pub use machine::{Conv1dContract, Conv1dKernel};
pub use table::SPEC;
