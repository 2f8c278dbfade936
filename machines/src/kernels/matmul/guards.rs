//! Pure predicates of `kernel_matmul`: one guard per weight format (the
//! prepare routes), the request shape check and the lane-split test.

use super::actions::PackedMatmul;
use super::events::{IntQuants, MatmulLimits, MatmulParams, MatmulRequest, MatmulWeights};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::matmul::{CHUNK_N, Q4_0_BLOCK_BYTES, Q8_0_BLOCK, Q8_0_BLOCK_BYTES};

/// Prepare route indices, in table order.
pub mod route {
    /// f32 weights.
    pub const F32: usize = 0;
    /// f16 weights.
    pub const F16: usize = 1;
    /// bf16 weights.
    pub const BF16: usize = 2;
    /// GGML q8_0 weights.
    pub const Q8_0: usize = 3;
    /// int8/uint8 weights with scales and zero points.
    pub const INT8: usize = 4;
    /// GGML q4_0 weights.
    pub const Q4_0: usize = 5;
    /// GGML q8_0 weights against i16 block-quantized activations.
    pub const Q8_0_ACT16: usize = 6;
    /// GGML q4_0 weights against i16 block-quantized activations.
    pub const Q4_0_ACT16: usize = 7;
}

/// The prepare route of a weight format (ignoring whether it is consistent).
pub fn format_route(w: &MatmulWeights) -> usize {
    match w {
        MatmulWeights::F32(_) => route::F32,
        MatmulWeights::F16(_) => route::F16,
        MatmulWeights::Bf16(_) => route::BF16,
        MatmulWeights::Q8_0(_) => route::Q8_0,
        MatmulWeights::Q4_0(_) => route::Q4_0,
        MatmulWeights::Q8_0Act16(_) => route::Q8_0_ACT16,
        MatmulWeights::Q4_0Act16(_) => route::Q4_0_ACT16,
        MatmulWeights::Int8 { .. } => route::INT8,
    }
}

fn len_problem(what: &str, got: usize, want: usize) -> Option<String> {
    (got != want).then(|| format!("{what} hold {got} values, expected {want}"))
}

fn per_channel_problem(what: &str, got: usize, n: usize) -> Option<String> {
    (got != 1 && got != n).then(|| format!("{what} hold {got} values, expected 1 or n = {n}"))
}

fn int8_problem(
    quants: &IntQuants,
    scales: &[f32],
    zero_points: &[i32],
    n: usize,
    nk: usize,
) -> Option<String> {
    let range = match quants {
        IntQuants::I8(_) => -128..=127,
        IntQuants::U8(_) => 0..=255,
    };
    len_problem("int8 weights", quants.len(), nk)
        .or_else(|| per_channel_problem("int8 scales", scales.len(), n))
        .or_else(|| per_channel_problem("int8 zero points", zero_points.len(), n))
        .or_else(|| {
            zero_points
                .iter()
                .find(|z| !range.contains(*z))
                .map(|z| format!("int8 zero point {z} is outside {range:?}"))
        })
}

fn weights_problem(p: &MatmulParams, nk: usize) -> Option<String> {
    match &p.weights {
        MatmulWeights::F32(w) => len_problem("f32 weights", w.len(), nk),
        MatmulWeights::F16(w) => len_problem("f16 weights", w.len(), nk),
        MatmulWeights::Bf16(w) => len_problem("bf16 weights", w.len(), nk),
        MatmulWeights::Q8_0(bytes)
        | MatmulWeights::Q4_0(bytes)
        | MatmulWeights::Q8_0Act16(bytes)
        | MatmulWeights::Q4_0Act16(bytes)
            if !p.k.is_multiple_of(Q8_0_BLOCK) =>
        {
            Some(format!(
                "block formats need k divisible by {Q8_0_BLOCK} (k = {}, {} bytes)",
                p.k,
                bytes.len()
            ))
        }
        MatmulWeights::Q8_0(bytes) | MatmulWeights::Q8_0Act16(bytes) => len_problem(
            "q8_0 bytes",
            bytes.len(),
            nk / Q8_0_BLOCK * Q8_0_BLOCK_BYTES,
        ),
        MatmulWeights::Q4_0(bytes) | MatmulWeights::Q4_0Act16(bytes) => len_problem(
            "q4_0 bytes",
            bytes.len(),
            nk / Q8_0_BLOCK * Q4_0_BLOCK_BYTES,
        ),
        MatmulWeights::Int8 {
            quants,
            scales,
            zero_points,
        } => int8_problem(quants, scales, zero_points, p.n, nk),
    }
}

/// Why `p` cannot be prepared, if it cannot.
pub fn params_problem(p: &MatmulParams) -> Option<String> {
    if p.n == 0 || p.k == 0 {
        return Some(format!("n and k must be positive (n={}, k={})", p.n, p.k));
    }
    let Some(nk) = p.n.checked_mul(p.k) else {
        return Some(format!("n*k overflows (n={}, k={})", p.n, p.k));
    };
    weights_problem(p, nk).or_else(|| match &p.bias {
        Some(b) => len_problem("bias", b.len(), p.n),
        None => None,
    })
}

fn consistent_as(p: &MatmulParams, r: usize) -> bool {
    format_route(&p.weights) == r && params_problem(p).is_none()
}

/// Consistent f32 weights.
pub fn guard_weights_f32(p: &MatmulParams) -> bool {
    consistent_as(p, route::F32)
}

/// Consistent f16 weights.
pub fn guard_weights_f16(p: &MatmulParams) -> bool {
    consistent_as(p, route::F16)
}

/// Consistent bf16 weights.
pub fn guard_weights_bf16(p: &MatmulParams) -> bool {
    consistent_as(p, route::BF16)
}

/// Consistent q8_0 weights (k a multiple of 32, whole blocks).
pub fn guard_weights_q8_0(p: &MatmulParams) -> bool {
    consistent_as(p, route::Q8_0)
}

/// Consistent q4_0 weights (k a multiple of 32, whole blocks).
pub fn guard_weights_q4_0(p: &MatmulParams) -> bool {
    consistent_as(p, route::Q4_0)
}

/// Consistent q8_0 weights for the i16-activation route (k a multiple of 32, whole blocks).
pub fn guard_weights_q8_0_act16(p: &MatmulParams) -> bool {
    consistent_as(p, route::Q8_0_ACT16)
}

/// Consistent q4_0 weights for the i16-activation route (k a multiple of 32, whole blocks).
pub fn guard_weights_q4_0_act16(p: &MatmulParams) -> bool {
    consistent_as(p, route::Q4_0_ACT16)
}

/// Consistent int8/uint8 weights (scales and zero points per tensor or per channel).
pub fn guard_weights_int8(p: &MatmulParams) -> bool {
    consistent_as(p, route::INT8)
}

/// The prepare route `p` takes, in table order, or `None` if no guard holds.
pub fn prepare_route(p: &MatmulParams) -> Option<usize> {
    let guards: [fn(&MatmulParams) -> bool; 8] = [
        guard_weights_f32,
        guard_weights_f16,
        guard_weights_bf16,
        guard_weights_q8_0,
        guard_weights_int8,
        guard_weights_q4_0,
        guard_weights_q8_0_act16,
        guard_weights_q4_0_act16,
    ];
    guards.iter().position(|g| g(p))
}

/// A workspace must serve at least one activation row.
pub fn check_limits(l: &MatmulLimits) -> Result<(), KernelMachineError> {
    if l.max_m == 0 {
        return Err(KernelMachineError::Limits(
            "max_m must be at least 1".into(),
        ));
    }
    Ok(())
}

/// `1 ≤ m ≤ max_m`, `a` has `m*k` values and `c` has `m*n`.
pub fn check_request(
    k: &PackedMatmul,
    l: &MatmulLimits,
    r: &MatmulRequest<'_>,
    c: &[f32],
) -> Result<(), KernelMachineError> {
    let shape = |s: String| Err(KernelMachineError::Shape(s));
    if r.m == 0 || r.m > l.max_m {
        return shape(format!("m = {} is outside 1..={}", r.m, l.max_m));
    }
    let (mk, mn) = (r.m.checked_mul(k.k()), r.m.checked_mul(k.n()));
    if mk != Some(r.a.len()) {
        return shape(format!(
            "a has {} values, m*k = {}*{}",
            r.a.len(),
            r.m,
            k.k()
        ));
    }
    if mn != Some(c.len()) {
        return shape(format!("c has {} values, m*n = {}*{}", c.len(), r.m, k.n()));
    }
    Ok(())
}

/// More than one fixed column chunk: forking can help.
pub fn worth_splitting(k: &PackedMatmul) -> bool {
    k.n() > CHUNK_N
}
