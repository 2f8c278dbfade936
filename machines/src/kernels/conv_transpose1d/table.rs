//! `conv_transpose1d`'s transitions: one prepare route per algorithm the
//! kernel runs plus the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::kernel_transitions![
    ("guard_streaming_causal", "effect_build_streaming"),
    ("guard_polyphase", "effect_pack_polyphase"),
    ("guard_gemm_col2im", "effect_pack_col2im"),
    ("guard_depthwise_scatter", "effect_pack_scatter"),
    ("guard_polyphase_bf16", "effect_pack_polyphase_bf16"),
];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "conv_transpose1d",
    "transposed 1-D convolution, batch or causal streaming, identical for every lane budget",
    TRANSITIONS,
);
