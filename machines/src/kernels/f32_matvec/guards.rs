//! Pure predicates of `kernel_f32_matvec`.

use super::actions::PackedMatvec;
use super::events::{MatvecParams, MatvecRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::f32_matvec::CHUNK_ROWS;

/// Why `p` cannot be prepared, if it cannot.
pub fn params_problem(p: &MatvecParams) -> Option<String> {
    if p.n == 0 || p.k == 0 {
        return Some(format!("n and k must be positive (n={}, k={})", p.n, p.k));
    }
    if p.weights.len() != p.n * p.k {
        return Some(format!(
            "weights hold {} values, n*k = {}",
            p.weights.len(),
            p.n * p.k
        ));
    }
    match &p.bias {
        Some(b) if b.len() != p.n => Some(format!("bias holds {} values, n = {}", b.len(), p.n)),
        _ => None,
    }
}

/// The weights and bias match `n × k`.
pub fn guard_weights_valid(p: &MatvecParams) -> bool {
    params_problem(p).is_none()
}

/// `x` has `k` values and `y` has `n`.
pub fn check_request(
    k: &PackedMatvec,
    r: &MatvecRequest<'_>,
    y: &[f32],
) -> Result<(), KernelMachineError> {
    if r.x.len() != k.k {
        return Err(KernelMachineError::Shape(format!(
            "x has {} values, k = {}",
            r.x.len(),
            k.k
        )));
    }
    if y.len() != k.n {
        return Err(KernelMachineError::Shape(format!(
            "y has {} values, n = {}",
            y.len(),
            k.n
        )));
    }
    Ok(())
}

/// More than one fixed row chunk: forking can help.
pub fn worth_splitting(k: &PackedMatvec) -> bool {
    k.n > CHUNK_ROWS
}
