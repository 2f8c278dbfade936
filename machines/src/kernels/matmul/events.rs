//! Payloads of `kernel_matmul`'s events.

use voxlane_actors::kernels::matmul::{bf16, f16};

/// Integer weight data `W[N,K]`, row-major, owned.
#[derive(Debug, Clone, PartialEq)]
pub enum IntQuants {
    /// Signed 8-bit weights (zero points in -128..=127).
    I8(Vec<i8>),
    /// Unsigned 8-bit weights (zero points in 0..=255).
    U8(Vec<u8>),
}

impl IntQuants {
    /// Number of weights.
    pub fn len(&self) -> usize {
        match self {
            Self::I8(v) => v.len(),
            Self::U8(v) => v.len(),
        }
    }

    /// Whether there are no weights.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The unpacked weights `W[N,K]` in one of the supported formats.
#[derive(Debug, Clone, PartialEq)]
pub enum MatmulWeights {
    /// Row-major f32, `n * k` values.
    F32(Vec<f32>),
    /// Row-major IEEE binary16, `n * k` values.
    F16(Vec<f16>),
    /// Row-major bfloat16, `n * k` values.
    Bf16(Vec<bf16>),
    /// GGML q8_0 bytes: `n * k / 32` blocks of 34 bytes (f16 scale, 32 × i8).
    Q8_0(Vec<u8>),
    /// GGML q4_0 bytes: `n * k / 32` blocks of 18 bytes (f16 scale, 16 bytes of nibbles).
    Q4_0(Vec<u8>),
    /// GGML q8_0 bytes run against activations rounded per block to i16
    /// (integer block sums: AVX512-VNNI / AVX2, the same bits everywhere).
    Q8_0Act16(Vec<u8>),
    /// GGML q4_0 bytes run against activations rounded per block to i16
    /// (integer block sums, −8 folded in: the same bits everywhere).
    Q4_0Act16(Vec<u8>),
    /// Integer weights with per-tensor (length 1) or per-channel (length `n`)
    /// scales and zero points (onnxruntime dynamic quantization).
    Int8 {
        /// The quantized weights.
        quants: IntQuants,
        /// Dequantization scales, 1 or `n` values.
        scales: Vec<f32>,
        /// Zero points, 1 or `n` values, in the range of the quant type.
        zero_points: Vec<i32>,
    },
}

/// `prepare`: the weight matrix in its stored format and an optional bias.
#[derive(Debug, Clone, PartialEq)]
pub struct MatmulParams {
    /// Output features N (rows of W).
    pub n: usize,
    /// Input features K (columns of W).
    pub k: usize,
    /// The weights.
    pub weights: MatmulWeights,
    /// Optional bias, `n` values.
    pub bias: Option<Vec<f32>>,
}

/// `bind`: the largest request the workspace must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatmulLimits {
    /// Most activation rows M of one request.
    pub max_m: usize,
}

/// `execute`: the activations `A[M,K]` (the output `C[M,N]` travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct MatmulRequest<'a> {
    /// Row-major activations, `m * k` values.
    pub a: &'a [f32],
    /// Activation rows M.
    pub m: usize,
}
