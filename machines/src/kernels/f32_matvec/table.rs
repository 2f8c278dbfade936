//! `kernel_f32_matvec`'s transitions: one prepare route plus the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] =
    crate::kernel_transitions![("guard_weights_valid", "effect_pack_f32")];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "kernel_f32_matvec",
    "f32 matrix-vector product in an exact, thread-independent accumulation order",
    TRANSITIONS,
);
