//! `kernel_matmul`'s transitions: one prepare route per weight format plus
//! the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::kernel_transitions![
    ("guard_weights_f32", "effect_pack_f32"),
    ("guard_weights_f16", "effect_pack_f16"),
    ("guard_weights_bf16", "effect_pack_bf16"),
    ("guard_weights_q8_0", "effect_pack_q8_0"),
    ("guard_weights_int8", "effect_pack_int8"),
    ("guard_weights_q4_0", "effect_pack_q4_0"),
    ("guard_weights_q8_0_act16", "effect_pack_q8_0_act16"),
    ("guard_weights_q4_0_act16", "effect_pack_q4_0_act16"),
];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "kernel_matmul",
    "C = A·Wᵀ (+bias) over f32, f16, bf16, q8_0 or q4_0 (f32 or i16 activations) or int8 weights, identical for every lane budget",
    TRANSITIONS,
);
