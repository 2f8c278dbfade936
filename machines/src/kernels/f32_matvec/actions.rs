//! Effects of `kernel_f32_matvec`.

use super::events::{MatvecParams, MatvecRequest};
use voxlane_actors::kernels::{f32_matvec, KernelError};
use voxlane_runtime::SubPool;

/// The prepared kernel: row-major weights and bias, owned.
#[derive(Debug, Clone)]
pub struct PackedMatvec {
    /// Output rows.
    pub n: usize,
    /// Input length.
    pub k: usize,
    weights: Vec<f32>,
    bias: Option<Vec<f32>>,
}

/// Take ownership of the f32 weights (they are already in the kernel's layout).
pub fn effect_pack_f32(p: &MatvecParams) -> PackedMatvec {
    PackedMatvec {
        n: p.n,
        k: p.k,
        weights: p.weights.clone(),
        bias: p.bias.clone(),
    }
}

/// Compute `y = W·x (+ bias)` on `lanes`.
pub fn effect_matvec(
    k: &PackedMatvec,
    r: &MatvecRequest<'_>,
    y: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    f32_matvec::matvec(r.x, &k.weights, k.n, k.bias.as_deref(), y, lanes)
}
