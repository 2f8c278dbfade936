//! `conv1d`'s transitions: one prepare route per algorithm the kernel runs
//! plus the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::kernel_transitions![
    ("guard_streaming_causal", "effect_build_streaming"),
    ("guard_depthwise", "effect_pack_depthwise"),
    ("guard_dense_direct", "effect_pack_direct"),
    ("guard_dense_phases", "effect_pack_phases"),
    ("guard_dense_gemm", "effect_pack_gemm"),
    ("guard_dense_bf16", "effect_pack_bf16"),
];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "conv1d",
    "1-D convolution, batch or causal streaming, identical for every lane budget",
    TRANSITIONS,
);
