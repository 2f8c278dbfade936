//! `kernel_attention`'s transitions: one prepare route per RoPE convention
//! plus the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::kernel_transitions![
    ("guard_rope_interleaved", "effect_plan_rope_interleaved"),
    ("guard_rope_halves", "effect_plan_rope_halves"),
    ("guard_no_rope", "effect_plan_no_rope"),
];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "kernel_attention",
    "streaming causal multi-head attention with RoPE over a windowed KV cache built at bind",
    TRANSITIONS,
);
