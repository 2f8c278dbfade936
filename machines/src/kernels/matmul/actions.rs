//! Effects of `kernel_matmul`: one packing action per weight format, the
//! workspace sizing and the run.

use super::events::{IntQuants, MatmulLimits, MatmulParams, MatmulRequest, MatmulWeights};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::matmul::{
    matmul_ws, IntWeights, MatmulWorkspace, WeightFormat, Weights,
};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The prepared kernel: packed weights and bias, owned.
#[derive(Debug, Clone)]
pub struct PackedMatmul {
    weights: Weights,
    bias: Option<Vec<f32>>,
}

impl PackedMatmul {
    /// Output features N.
    pub fn n(&self) -> usize {
        self.weights.n()
    }

    /// Input features K.
    pub fn k(&self) -> usize {
        self.weights.k()
    }

    /// The packed storage format.
    pub fn format(&self) -> WeightFormat {
        self.weights.format()
    }

    /// Bytes of packed weight data.
    pub fn bytes(&self) -> usize {
        self.weights.bytes()
    }
}

fn packed(
    p: &MatmulParams,
    w: Result<Weights, KernelError>,
) -> Result<PackedMatmul, KernelMachineError> {
    let weights = w.map_err(|e| KernelMachineError::Params(e.to_string()))?;
    Ok(PackedMatmul {
        weights,
        bias: p.bias.clone(),
    })
}

fn wrong_format(action: &str) -> KernelMachineError {
    KernelMachineError::Params(format!("{action} called for another weight format"))
}

/// Take the f32 weights (already in the kernel's layout).
pub fn effect_pack_f32(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::F32(w) => packed(p, Weights::f32(w.clone(), p.n, p.k)),
        _ => Err(wrong_format("effect_pack_f32")),
    }
}

/// Store the f16 weights as raw halves (decoded per tile at run time).
pub fn effect_pack_f16(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::F16(w) => packed(p, Weights::f16(w, p.n, p.k)),
        _ => Err(wrong_format("effect_pack_f16")),
    }
}

/// Store the bf16 weights as raw halves (decoded per tile at run time).
pub fn effect_pack_bf16(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Bf16(w) => packed(p, Weights::bf16(w, p.n, p.k)),
        _ => Err(wrong_format("effect_pack_bf16")),
    }
}

/// Split GGML q8_0 blocks into f32 scales and i8 quants.
pub fn effect_pack_q8_0(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Q8_0(bytes) => packed(p, Weights::q8_0_from_ggml(bytes, p.n, p.k)),
        _ => Err(wrong_format("effect_pack_q8_0")),
    }
}

/// Interleave GGML q8_0 blocks across 16 output rows for the integer block sums.
pub fn effect_pack_q8_0_act16(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Q8_0Act16(bytes) => {
            packed(p, Weights::q8_0_act16_from_ggml(bytes, p.n, p.k))
        }
        _ => Err(wrong_format("effect_pack_q8_0_act16")),
    }
}

/// Repack GGML q4_0 blocks per 16 output rows for the integer block sums.
pub fn effect_pack_q4_0_act16(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Q4_0Act16(bytes) => {
            packed(p, Weights::q4_0_act16_from_ggml(bytes, p.n, p.k))
        }
        _ => Err(wrong_format("effect_pack_q4_0_act16")),
    }
}

/// Split GGML q4_0 blocks into f32 scales and nibble bytes.
pub fn effect_pack_q4_0(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Q4_0(bytes) => packed(p, Weights::q4_0_from_ggml(bytes, p.n, p.k)),
        _ => Err(wrong_format("effect_pack_q4_0")),
    }
}

/// Pad and shift the integer weights, precompute row sums, expand scales and zero points.
pub fn effect_pack_int8(p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
    match &p.weights {
        MatmulWeights::Int8 {
            quants,
            scales,
            zero_points,
        } => {
            let w = match quants {
                IntQuants::I8(q) => IntWeights::I8(q),
                IntQuants::U8(q) => IntWeights::U8(q),
            };
            packed(p, Weights::int8(w, p.n, p.k, scales, zero_points))
        }
        _ => Err(wrong_format("effect_pack_int8")),
    }
}

/// Reserve scratch for `max_m` activation rows, so `execute` allocates nothing.
pub fn effect_size_workspace(k: &PackedMatmul, l: &MatmulLimits) -> MatmulWorkspace {
    MatmulWorkspace::new(l.max_m, k.k())
}

/// Compute `C = A·Wᵀ (+ bias)` on `lanes`.
pub fn effect_matmul(
    k: &PackedMatmul,
    ws: &mut MatmulWorkspace,
    r: &MatmulRequest<'_>,
    c: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    matmul_ws(r.a, r.m, k.k(), &k.weights, k.bias.as_deref(), c, ws, lanes)
}
