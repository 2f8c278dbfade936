//! `lstm`'s transitions: one prepare route per direction count and weight
//! layout plus the shared kernel edges.

use crate::core::{MachineSpec, Transition};
use crate::kernels::table::kernel_spec;

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::kernel_transitions![
    ("guard_unidirectional", "effect_pack_unidirectional"),
    ("guard_bidirectional", "effect_pack_bidirectional"),
    ("guard_onnx_layout", "effect_reorder_onnx_gates"),
];

/// The machine's spec.
pub const SPEC: MachineSpec = kernel_spec(
    "lstm",
    "LSTM layer (PyTorch or ONNX weights, uni- or bidirectional), identical for every lane budget",
    TRANSITIONS,
);
