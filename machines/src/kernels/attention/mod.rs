//! `kernel_attention`: streaming causal multi-head attention with RoPE over
//! the windowed KV cache of `voxlane_actors::kernels::attention`, as a kernel
//! machine (see [`crate::kernels`] for the shared lifecycle).
//!
//! * `prepare` validates an [`AttentionConfig`] and takes one route per RoPE
//!   convention (interleaved pairs as in Kyutai's moshi/mimi, "rotate half"
//!   as in HF Llama, or none), so a mixed-up convention shows in the reply.
//! * `bind` builds the [`KvCache`](voxlane_actors::kernels::attention::KvCache)
//!   for the largest step it must serve: the cache is the machine's
//!   workspace (persistent stream state), never part of an event.
//! * Each `execute` appends `t` positions and attends them causally.
//! * A new stream on the same layer: `bind` again (a fresh cache at position
//!   0, configuration kept); `reset` drops the configuration too.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use actions::AttentionPlan;
pub use events::{AttentionLimits, AttentionRequest};
pub use machine::{Attention, AttentionKernel};
pub use table::SPEC;
pub use voxlane_actors::kernels::attention::{AttentionConfig, Rope, RopeLayout};
