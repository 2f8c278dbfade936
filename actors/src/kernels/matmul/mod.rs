//! `C[M,N] = A[M,K] · W[N,K]ᵀ (+ bias)`: f32 activations against weights
//! prepared (converted, packed) once at bind time in one of several formats.
//!
//! * [`Weights`] holds one prepared weight: f32, f16, bf16, GGML `q8_0` or
//!   `q4_0` (f32 activations, or activations rounded per block to i16 for
//!   integer block sums), or onnxruntime-style int8/uint8 with
//!   per-output-channel scale and zero point.
//! * [`matmul`] / [`matmul_with`] run it; M = 1 takes the matvec path, small M
//!   runs the matvec rows once per activation row, larger M takes a tiled GEMM.
//! * Lanes split N into fixed chunks ([`CHUNK_N`]), never into per-thread
//!   shares, and each output is produced by one lane in a fixed order: results
//!   are bit-identical for every thread budget.
//! * Every SIMD route is selectable through a [`SimdLevel`] (capped at what
//!   the CPU supports), so tests compare each route with the scalar one.
//! * Prepared buffers are owned or ranges of a memory map ([`Buf`]): a model
//!   packed once is stored with [`write_weights`] and mapped back in place by
//!   [`read_weights`] (`store.rs`), the same bits without converting again.
//!
//! Bench shapes (the xtask bench calls these directly): prepare once with
//! e.g. [`Weights::bf16`], [`Weights::q8_0_act16_from_ggml`] or
//! [`Weights::q4_0_act16_from_ggml`] for 4096×4096, 11264×4096 and
//! 4096×11264, keep a [`MatmulWorkspace`] per call site (sized with
//! [`MatmulWorkspace::reserve`] for the weights it serves), and call
//! [`matmul_ws`]; [`Weights::bytes`] gives the packed size for GB/s figures.

mod dense_f32;
mod half;
mod int8;
mod q4_0_act16;
mod q8_0;
mod q8_0_act16;
pub mod reference;
mod store;

use super::cpu::{self, SimdLevel};
use super::error::{check_len, KernelError};
use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

pub use self::half::HalfKind;
pub use self::int8::{quantize_activations, ActivationQuant, IntWeights};
pub use self::q8_0::{
    quantize_q4_0, quantize_q8_0, Q4_0_BLOCK_BYTES, Q8_0_BLOCK, Q8_0_BLOCK_BYTES,
};
pub use self::q8_0_act16::rounding_bound as act16_rounding_bound;
pub use self::store::{
    read_weights, write_weights, PackedParts, StoredWeights, WeightStoreError, WeightsWriter,
    PACKED_LAYOUT, PACKED_LAYOUT_KEY,
};
/// The half-precision element types [`Weights::f16`] and [`Weights::bf16`] take.
pub use ::half::{bf16, f16};

/// Output columns (weight rows) per parallel chunk; fixed, independent of threads.
pub const CHUNK_N: usize = 64;

/// Largest M still computed as repeated matvecs (weights of a chunk stay in cache).
pub const SMALL_M: usize = 4;

/// The storage format of a prepared weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// IEEE f32.
    F32,
    /// IEEE binary16.
    F16,
    /// bfloat16.
    Bf16,
    /// GGML q8_0: blocks of 32 int8 with one f16 scale, value `d * q`.
    Q8_0,
    /// GGML q4_0: blocks of 32 nibbles with one f16 scale, value `d * (q − 8)`.
    Q4_0,
    /// GGML q8_0 weights against activations quantized per block of 32 to
    /// i16 (integer block sums; AVX512-VNNI `vpdpwssd` where the CPU has it).
    Q8_0Act16,
    /// GGML q4_0 weights against the same i16 block-quantized activations
    /// as [`WeightFormat::Q8_0Act16`] (integer block sums, 18 bytes per block).
    Q4_0Act16,
    /// Integer weights with per-output-channel scale and zero point (onnxruntime dynamic quantization).
    Int8,
}

/// A weight `W[N,K]` prepared for [`matmul`].
#[derive(Debug, Clone)]
pub struct Weights {
    n: usize,
    k: usize,
    packed: Packed,
}

/// The kernel-ready buffers; all but int8 may be owned or mapped ([`Buf`]).
#[derive(Debug, Clone)]
enum Packed {
    F32(Buf<f32>),
    Half(self::half::HalfWeights),
    Q8_0(self::q8_0::Q8Weights),
    Q8Act16(self::q8_0_act16::Act16Weights),
    Q4Act16(self::q4_0_act16::Q4Act16Weights),
    Int8(self::int8::Int8Weights),
}

fn check_dims(n: usize, k: usize) -> Result<(), KernelError> {
    if n == 0 || k == 0 {
        return Err(KernelError::Param {
            what: "weight shape",
            detail: format!("N and K must be positive (got N={n}, K={k})"),
        });
    }
    Ok(())
}

impl Weights {
    /// Prepare row-major f32 weights `w[N,K]` (takes ownership: no copy).
    pub fn f32(w: Vec<f32>, n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("f32 weights", n * k, w.len())?;
        Ok(Self {
            n,
            k,
            packed: Packed::F32(w.into()),
        })
    }

    /// Prepare row-major f16 weights `w[N,K]`.
    pub fn f16(w: &[::half::f16], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("f16 weights", n * k, w.len())?;
        let bits = w.iter().map(|v| v.to_bits()).collect::<Vec<_>>().into();
        Ok(Self {
            n,
            k,
            packed: Packed::Half(self::half::HalfWeights {
                kind: HalfKind::F16,
                bits,
            }),
        })
    }

    /// Prepare row-major bf16 weights `w[N,K]`.
    pub fn bf16(w: &[::half::bf16], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("bf16 weights", n * k, w.len())?;
        let bits = w.iter().map(|v| v.to_bits()).collect::<Vec<_>>().into();
        Ok(Self {
            n,
            k,
            packed: Packed::Half(self::half::HalfWeights {
                kind: HalfKind::Bf16,
                bits,
            }),
        })
    }

    /// Prepare GGML `q8_0` bytes (`N·K/32` blocks of 34 bytes: f16 scale, 32 × i8), rows of K.
    pub fn q8_0_from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        let packed = self::q8_0::Q8Weights::from_ggml(bytes, n, k)?;
        Ok(Self {
            n,
            k,
            packed: Packed::Q8_0(packed),
        })
    }

    /// Prepare GGML `q4_0` bytes (`N·K/32` blocks of 18 bytes: f16 scale, 16 bytes of nibbles), rows of K.
    pub fn q4_0_from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        let packed = self::q8_0::Q8Weights::from_ggml_q4(bytes, n, k)?;
        Ok(Self {
            n,
            k,
            packed: Packed::Q8_0(packed),
        })
    }

    /// Prepare GGML `q8_0` bytes for the i16-activation route ([`WeightFormat::Q8_0Act16`]).
    pub fn q8_0_act16_from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        let packed = self::q8_0_act16::Act16Weights::from_ggml(bytes, n, k)?;
        Ok(Self {
            n,
            k,
            packed: Packed::Q8Act16(packed),
        })
    }

    /// Quantize f32 `w[N,K]` to `q8_0` (GGML's reference quantizer) for the i16-activation route.
    pub fn q8_0_act16_from_f32(w: &[f32], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("q8_0 source weights", n * k, w.len())?;
        let bytes = quantize_q8_0(w, k)?;
        Self::q8_0_act16_from_ggml(&bytes, n, k)
    }

    /// Prepare GGML `q4_0` bytes for the i16-activation route ([`WeightFormat::Q4_0Act16`]).
    pub fn q4_0_act16_from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        let packed = self::q4_0_act16::Q4Act16Weights::from_ggml(bytes, n, k)?;
        Ok(Self {
            n,
            k,
            packed: Packed::Q4Act16(packed),
        })
    }

    /// Quantize f32 `w[N,K]` to `q4_0` (GGML's reference quantizer) for the i16-activation route.
    pub fn q4_0_act16_from_f32(w: &[f32], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("q4_0 source weights", n * k, w.len())?;
        let bytes = quantize_q4_0(w, k)?;
        Self::q4_0_act16_from_ggml(&bytes, n, k)
    }

    /// Quantize f32 `w[N,K]` to `q4_0` as GGML's reference quantizer does, then prepare it.
    pub fn q4_0_from_f32(w: &[f32], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("q4_0 source weights", n * k, w.len())?;
        let bytes = quantize_q4_0(w, k)?;
        Self::q4_0_from_ggml(&bytes, n, k)
    }

    /// Quantize f32 `w[N,K]` to `q8_0` exactly as GGML's reference quantizer does, then prepare it.
    pub fn q8_0_from_f32(w: &[f32], n: usize, k: usize) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        check_len("q8_0 source weights", n * k, w.len())?;
        let bytes = quantize_q8_0(w, k)?;
        Self::q8_0_from_ggml(&bytes, n, k)
    }

    /// Prepare integer weights `w[N,K]` with per-channel (length N) or per-tensor
    /// (length 1) `scales` and `zero_points` (onnxruntime dynamic-quantized exports).
    ///
    /// ONNX stores MatMul's B as `[K,N]`: transpose it first with [`transpose`].
    pub fn int8(
        w: IntWeights<'_>,
        n: usize,
        k: usize,
        scales: &[f32],
        zero_points: &[i32],
    ) -> Result<Self, KernelError> {
        Self::int8_stored(w, n, k, scales, zero_points, false)
    }

    /// As [`Weights::int8`] from int8 weights stored `[K, N]` (ONNX's
    /// MatMul B), transposed while packing (no transposed copy first).
    pub fn int8_kn(
        w: &[i8],
        n: usize,
        k: usize,
        scales: &[f32],
        zero_points: &[i32],
    ) -> Result<Self, KernelError> {
        Self::int8_stored(IntWeights::I8(w), n, k, scales, zero_points, true)
    }

    fn int8_stored(
        w: IntWeights<'_>,
        n: usize,
        k: usize,
        scales: &[f32],
        zero_points: &[i32],
        stored_kn: bool,
    ) -> Result<Self, KernelError> {
        check_dims(n, k)?;
        let packed = self::int8::Int8Weights::prepare(w, n, k, scales, zero_points, stored_kn)?;
        Ok(Self {
            n,
            k,
            packed: Packed::Int8(packed),
        })
    }

    /// Output features N (rows of W).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features K (columns of W).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The storage format.
    pub fn format(&self) -> WeightFormat {
        match &self.packed {
            Packed::F32(_) => WeightFormat::F32,
            Packed::Half(h) => match h.kind {
                HalfKind::F16 => WeightFormat::F16,
                HalfKind::Bf16 => WeightFormat::Bf16,
            },
            Packed::Q8_0(q) if q.q4 => WeightFormat::Q4_0,
            Packed::Q8_0(_) => WeightFormat::Q8_0,
            Packed::Q8Act16(_) => WeightFormat::Q8_0Act16,
            Packed::Q4Act16(_) => WeightFormat::Q4_0Act16,
            Packed::Int8(_) => WeightFormat::Int8,
        }
    }

    /// Bytes of packed weight data a matvec streams (for GB/s figures).
    pub fn bytes(&self) -> usize {
        match &self.packed {
            Packed::F32(w) => w.len() * 4,
            Packed::Half(h) => h.bits.len() * 2,
            Packed::Q8_0(q) => q.quants.len() + q.scales.len() * 4,
            Packed::Q8Act16(q) => q.bytes(),
            Packed::Q4Act16(q) => q.bytes(),
            Packed::Int8(w) => w.quants.len() + w.row_sums.len() * 4,
        }
    }
}

/// Transpose a row-major `rows × cols` matrix (e.g. ONNX `[K,N]` weights into `[N,K]`).
pub fn transpose<T: Copy>(src: &[T], rows: usize, cols: usize) -> Result<Vec<T>, KernelError> {
    check_len("transpose source", rows * cols, src.len())?;
    let mut out = Vec::with_capacity(src.len());
    // In 16 × 16 tiles: a tile's 16 source and 16 destination lines stay in
    // L1 (a column walk misses on every read; longer runs at these strides
    // alias into a few cache sets).
    const TILE: usize = 16;
    if rows == 0 || cols == 0 {
        return Ok(out);
    }
    out.resize(src.len(), src[0]);
    for r0 in (0..rows).step_by(TILE) {
        let r1 = (r0 + TILE).min(rows);
        for c0 in (0..cols).step_by(TILE) {
            for c in c0..(c0 + TILE).min(cols) {
                let dst = &mut out[c * rows + r0..c * rows + r1];
                for (d, r) in dst.iter_mut().zip(r0..r1) {
                    *d = src[r * cols + c];
                }
            }
        }
    }
    Ok(out)
}

/// Scratch for [`matmul_ws`]: quantized activations for int8,
/// [`WeightFormat::Q8_0Act16`] and [`WeightFormat::Q4_0Act16`] weights.
///
/// Create it once per call site with the largest `M·K` it will see, so the
/// per-frame path never allocates.
#[derive(Debug, Clone, Default)]
pub struct MatmulWorkspace {
    int8: self::int8::Int8Scratch,
    act16: self::q8_0_act16::Act16Scratch,
}

impl MatmulWorkspace {
    /// A workspace sized for activations up to `max_m × k` (grows on demand otherwise).
    pub fn new(max_m: usize, k: usize) -> Self {
        Self {
            int8: self::int8::Int8Scratch::new(max_m, k),
            act16: self::q8_0_act16::Act16Scratch::new(max_m, k),
        }
    }

    /// Grow so `weights` runs on up to `max_m` rows without allocating.
    pub fn reserve(&mut self, weights: &Weights, max_m: usize) {
        match weights.packed {
            Packed::Q8Act16(_) => self.act16.reserve(max_m, weights.k),
            Packed::Q4Act16(_) => {
                self.act16.reserve(max_m, weights.k);
                self.act16.reserve_offsets(max_m, weights.k);
            }
            _ => {}
        }
    }

    /// 4-byte words held (workspace sizing).
    pub fn words(&self) -> usize {
        self.act16.words()
    }
}

/// Raw view of the output that lanes write in disjoint column ranges.
#[derive(Clone, Copy)]
pub(crate) struct DisjointOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: lanes only write disjoint ranges (see `range_mut`); the borrow of
// the output outlives the fork that uses this view.
unsafe impl Send for DisjointOut {}
// SAFETY: as above.
unsafe impl Sync for DisjointOut {}

impl DisjointOut {
    pub(crate) fn new(out: &mut [f32]) -> Self {
        Self {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        }
    }

    /// A mutable view of `out[start..start + len]`.
    ///
    /// # Safety
    /// No other live reference may overlap this range while it is used.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range_mut(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(
            start + len <= self.len,
            "disjoint output range out of bounds"
        );
        std::slice::from_raw_parts_mut(self.ptr.add(start), len)
    }
}

fn check_call(
    a: &[f32],
    m: usize,
    k: usize,
    w: &Weights,
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<(), KernelError> {
    if k != w.k {
        return Err(KernelError::Param {
            what: "k",
            detail: format!("activations have K={k}, weights K={}", w.k),
        });
    }
    check_len("matmul A", m * k, a.len())?;
    check_len("matmul C", m * w.n, out.len())?;
    if let Some(b) = bias {
        check_len("matmul bias", w.n, b.len())?;
    }
    Ok(())
}

/// `out[M,N] = a[M,K] · Wᵀ (+ bias)` on the best route (allocates int8 scratch when needed).
pub fn matmul(
    a: &[f32],
    m: usize,
    k: usize,
    weights: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let mut ws = MatmulWorkspace::default();
    matmul_ws(a, m, k, weights, bias, out, &mut ws, lanes)
}

/// [`matmul`] with caller-owned scratch (no allocation once the workspace is large enough).
#[allow(clippy::too_many_arguments)]
pub fn matmul_ws(
    a: &[f32],
    m: usize,
    k: usize,
    weights: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    ws: &mut MatmulWorkspace,
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    matmul_with(cpu::simd_level(), a, m, k, weights, bias, out, ws, lanes)
}

/// [`matmul_ws`] on an explicit route, capped at what the CPU supports.
#[allow(clippy::too_many_arguments)]
pub fn matmul_with(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    weights: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    ws: &mut MatmulWorkspace,
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    check_call(a, m, k, weights, bias, out)?;
    if m == 0 {
        return Ok(());
    }
    let level = level.min(cpu::simd_level());
    let n = weights.n;
    match &weights.packed {
        Packed::F32(w) => self::dense_f32::run(level, a, m, k, n, w, bias, out, lanes),
        Packed::Half(h) => self::half::run(level, a, m, k, n, h, bias, out, lanes),
        Packed::Q8_0(q) => self::q8_0::run(level, a, m, k, n, q, bias, out, lanes),
        Packed::Q8Act16(w) => {
            self::q8_0_act16::run(level, a, m, k, n, w, bias, out, &mut ws.act16, lanes)
        }
        Packed::Q4Act16(w) => {
            self::q4_0_act16::run(level, a, m, k, n, w, bias, out, &mut ws.act16, lanes)
        }
        Packed::Int8(w) => self::int8::run(level, a, m, k, n, w, bias, out, &mut ws.int8, lanes),
    }
}

/// Shared driver for the float formats: matvec rows for small M, decoded tiles into sgemm otherwise.
///
/// `rows(level, x, n0, bias_chunk, y)` fills `y` with rows `n0..n0+y.len()`;
/// `tile(n0, rows, k0, kb, dst)` decodes `W[n0..n0+rows, k0..k0+kb]` into `dst` (row-major).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_float<R, T>(
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
    rows: R,
    tile: Option<T>,
) -> Result<(), KernelError>
where
    R: Fn(&[f32], usize, &mut [f32]) + Sync,
    T: Fn(usize, usize, usize, usize, &mut [f32]) + Sync,
{
    if m == 1 {
        lanes.for_each_chunk_mut(out, CHUNK_N, |ci, piece| {
            let n0 = ci * CHUNK_N;
            rows(a, n0, piece);
            add_bias(piece, bias.map(|b| &b[n0..n0 + piece.len()]));
        })?;
        return Ok(());
    }
    let dst = DisjointOut::new(out);
    match tile {
        Some(tile) if m > SMALL_M => {
            lanes.for_each_chunk(n, CHUNK_N, |range| {
                gemm_chunk(a, m, k, n, range, bias, dst, &tile);
            })?;
        }
        _ => {
            lanes.for_each_chunk(n, CHUNK_N, |range| {
                for r in 0..m {
                    // SAFETY: this chunk alone writes columns `range` of every row.
                    let y = unsafe { dst.range_mut(r * n + range.start, range.len()) };
                    rows(&a[r * k..(r + 1) * k], range.start, y);
                    add_bias(y, bias.map(|b| &b[range.clone()]));
                }
            })?;
        }
    }
    Ok(())
}

/// Small M (streaming frames, 2..=[`dense_f32::MULTI_ROWS_M`]): output
/// columns in fixed [`CHUNK_N`] chunks on the lanes, activation rows in
/// groups of [`f32_matvec::MULTI_MAX`]; `group(xs, g, n0, nr, y)` writes the
/// `g` rows' outputs for weight rows `n0..n0 + nr` into `y` (`g` rows of
/// `nr`), each row the bits of its own matvec. No packing, no allocation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_grouped<G>(
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
    group: G,
) -> Result<(), KernelError>
where
    G: Fn(&[f32], usize, usize, usize, &mut [f32]) + Sync,
{
    use super::f32_matvec::MULTI_MAX;
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk(n, CHUNK_N, |range| {
        let nr = range.len();
        let mut y = [0.0f32; MULTI_MAX * CHUNK_N];
        for g0 in (0..m).step_by(MULTI_MAX) {
            let g = MULTI_MAX.min(m - g0);
            group(&a[g0 * k..(g0 + g) * k], g, range.start, nr, &mut y);
            for r in 0..g {
                // SAFETY: this chunk alone writes columns `range` of every row.
                let o = unsafe { dst.range_mut((g0 + r) * n + range.start, nr) };
                o.copy_from_slice(&y[r * nr..(r + 1) * nr]);
                add_bias(o, bias.map(|b| &b[range.clone()]));
            }
        }
    })?;
    Ok(())
}

/// K extent of one decoded weight tile (64 rows × 512 f32 = 128 KiB, L2-resident).
const TILE_K: usize = 512;

#[allow(clippy::too_many_arguments)]
fn gemm_chunk<T>(
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    range: std::ops::Range<usize>,
    bias: Option<&[f32]>,
    dst: DisjointOut,
    tile: &T,
) where
    T: Fn(usize, usize, usize, usize, &mut [f32]),
{
    use super::sgemm::{sgemm, MatRef};
    let nr = range.len();
    let mut scratch = vec![0.0f32; nr * TILE_K.min(k)];
    let mut c = vec![0.0f32; m * nr];
    let mut k0 = 0;
    while k0 < k {
        let kb = TILE_K.min(k - k0);
        let wt = &mut scratch[..nr * kb];
        tile(range.start, nr, k0, kb, wt);
        let a_view = MatRef {
            data: &a[k0..],
            row_stride: k,
            col_stride: 1,
        };
        // Shapes are consistent by construction, so sgemm cannot fail here.
        let done = sgemm(
            m,
            nr,
            kb,
            a_view,
            MatRef::transposed(wt, kb),
            &mut c,
            nr,
            k0 > 0,
        );
        debug_assert!(done.is_ok(), "sgemm rejected consistent shapes");
        k0 += kb;
    }
    for r in 0..m {
        // SAFETY: this chunk alone writes columns `range` of every row.
        let y = unsafe { dst.range_mut(r * n + range.start, nr) };
        y.copy_from_slice(&c[r * nr..(r + 1) * nr]);
        add_bias(y, bias.map(|b| &b[range.clone()]));
    }
}

fn add_bias(y: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for (o, b) in y.iter_mut().zip(b) {
            *o += *b;
        }
    }
}

#[cfg(test)]
mod tests;
