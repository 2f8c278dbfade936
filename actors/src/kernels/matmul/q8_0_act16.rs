//! q8_0 weights against activations quantized per 32-value block to i16
//! ([`super::WeightFormat::Q8_0Act16`]): integer block dot products on
//! AVX512-VNNI (`vpdpwssd`: pairs of i16 × i16 into i32; AVX2 `vpmaddwd`
//! elsewhere, the same sums), vectorised over 16 output rows: a block of 16
//! rows × 32 values takes 16 instructions per activation row instead of the
//! f32 route's widening and FMAs (which bound that route, not the weight
//! bytes, for a streaming step's 1–16 rows).
//!
//! Activations: per row and block `b`, `dx = amax / 32767` and
//! `qx = round(x · 32767 / amax)` (ties to even): within 2⁻¹⁶ of the
//! block's largest value, far below the q8_0 weights' own error. Each
//! output is `Σ_b fma(float(Σ_j qw·qx), dw_b·dx_b, acc)` in block order:
//! integer sums are exact, so every route gives the same bits, and a row's
//! result does not depend on the other rows or the lane split.
//!
//! Layout: per group of 16 weight rows and block `b`, 16 f16 scales (32
//! bytes) then the quants as 8 quads × 16 rows × 4 bytes (512 bytes): row
//! `n`'s values `4q..4q + 4` sit together, read as two `vpdpwssd` pairs per
//! quad (AMX-INT8's B-tile layout too, but an AMX route on `256·hi + lo`
//! byte planes measured slower: each block's sums must leave the tiles for
//! their scales). Rows past N are zero.
//!
//! The activation quantizer, its scratch and the chunk/group driver
//! ([`run_groups`]) are shared with the q4_0 weights of `q4_0_act16.rs`.

use super::{add_bias, DisjointOut, CHUNK_N};
use crate::kernels::cpu::{self, SimdLevel};
use crate::kernels::elementwise::simd::{dispatch, SimdFn, Vf32};
use crate::kernels::error::{check_len, KernelError};
use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

/// Values per block.
pub(super) const BLOCK: usize = 32;
/// Weight rows per group (one vector of i32 sums).
pub(super) const GROUP: usize = 16;
/// Bytes of one group's block: 16 f16 scales + 16 × 32 quants.
pub(super) const GROUP_BLOCK_BYTES: usize = 2 * GROUP + GROUP * BLOCK;
/// Quads (4 values of a row) per block.
const QUADS: usize = BLOCK / 4;
/// Activation rows computed together (accumulators held in registers).
pub(super) const ROWS: usize = 8;
/// Largest i16 magnitude used (symmetric).
const QMAX: f32 = 32767.0;

const _: () = assert!(CHUNK_N.is_multiple_of(GROUP) && BLOCK == super::Q8_0_BLOCK);

/// Packed weights (see the module docs; owned, or mapped from a packed-weights file).
#[derive(Debug, Clone)]
pub(super) struct Act16Weights {
    pub(super) data: Buf<u8>,
    /// Blocks per row.
    pub(super) kbs: usize,
}

/// Activation rows quantized for one call (a workspace: no allocation per frame).
#[derive(Debug, Clone, Default)]
pub(super) struct Act16Scratch {
    q: Vec<i16>,
    d: Vec<f32>,
    /// `−8·Σ qx` per row and block (the q4_0 route's offset).
    offsets: Vec<i32>,
}

impl Act16Scratch {
    /// Room for `max_m` rows of `k` values (and their block offsets, so
    /// either format runs on it without allocating).
    pub(super) fn new(max_m: usize, k: usize) -> Self {
        let mut s = Self::default();
        s.reserve(max_m, k);
        s.reserve_offsets(max_m, k);
        s
    }

    /// Grow to `max_m` rows of `k` values.
    pub(super) fn reserve(&mut self, max_m: usize, k: usize) {
        if self.q.len() < max_m * k {
            self.q.resize(max_m * k, 0);
        }
        if self.d.len() < max_m * k / BLOCK {
            self.d.resize(max_m * k / BLOCK, 0.0);
        }
    }

    /// Grow the block offsets (the q4_0 route's) to `max_m` rows of `k` values.
    pub(super) fn reserve_offsets(&mut self, max_m: usize, k: usize) {
        if self.offsets.len() < max_m * k / BLOCK {
            self.offsets.resize(max_m * k / BLOCK, 0);
        }
    }

    /// 4-byte words held.
    pub(super) fn words(&self) -> usize {
        self.q.len().div_ceil(2) + self.d.len() + self.offsets.len()
    }

    /// `offsets[i] = −8 · Σ` of quantized block `i` (the first `blocks`).
    fn fill_offsets(&mut self, blocks: usize) {
        let q = self.q.chunks_exact(BLOCK).take(blocks);
        for (o, x) in self.offsets.iter_mut().zip(q) {
            *o = -8 * x.iter().map(|&v| i32::from(v)).sum::<i32>();
        }
    }
}

impl Act16Weights {
    /// From GGML q8_0 bytes (`N·K/32` blocks of f16 scale + 32 × i8).
    pub(super) fn from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        super::q8_0::check_k(k)?;
        let kbs = k / BLOCK;
        check_len("q8_0 bytes", n * kbs * 34, bytes.len())?;
        let groups = n.div_ceil(GROUP);
        let mut data = vec![0u8; groups * kbs * GROUP_BLOCK_BYTES];
        for row in 0..n {
            let (g, lane) = (row / GROUP, row % GROUP);
            for b in 0..kbs {
                let src = &bytes[(row * kbs + b) * 34..][..34];
                let dst = &mut data[(g * kbs + b) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
                dst[2 * lane..2 * lane + 2].copy_from_slice(&src[..2]);
                for q in 0..QUADS {
                    let at = quad_at(q, lane);
                    dst[at..at + 4].copy_from_slice(&src[2 + 4 * q..6 + 4 * q]);
                }
            }
        }
        Ok(Self {
            data: data.into(),
            kbs,
        })
    }

    /// Bytes of packed data for `n` rows of `kbs` blocks (`None` on overflow).
    pub(super) fn packed_len(n: usize, kbs: usize) -> Option<usize> {
        n.div_ceil(GROUP)
            .checked_mul(kbs)?
            .checked_mul(GROUP_BLOCK_BYTES)
    }

    /// Bytes a matvec streams.
    pub(super) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// One group's block `b`.
    fn block(&self, g: usize, b: usize) -> &[u8] {
        &self.data[(g * self.kbs + b) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES]
    }
}

/// Offset of row `lane`'s quad `q` in a group's block.
const fn quad_at(q: usize, lane: usize) -> usize {
    2 * GROUP + (q * GROUP + lane) * 4
}

/// Rounds to nearest even when added and subtracted (|x| < 2²², default rounding).
const ROUND_MAGIC: f32 = 12_582_912.0;

/// Quantize `a: [m, k]` into `sc` (per row and block: scale, i16 values).
fn quantize(level: SimdLevel, a: &[f32], m: usize, k: usize, sc: &mut Act16Scratch) {
    let kbs = k / BLOCK;
    // Grows only past the bind-time size.
    sc.reserve(m, k);
    dispatch(
        level,
        Quantize {
            a,
            q: &mut sc.q[..m * k],
            d: &mut sc.d[..m * kbs],
        },
    );
}

/// [`quantize`]'s loop, compiled for the bound level (it vectorises there).
struct Quantize<'a> {
    a: &'a [f32],
    q: &'a mut [i16],
    d: &'a mut [f32],
}

/// One block's step `amax/32767` and the factor onto its grid (0 for an
/// all-zero block). The largest magnitude comes from the bit patterns
/// (integer max, so it vectorises, and a NaN wins: NaN in, NaN out).
#[inline(always)]
fn block_scale(x: &[f32]) -> (f32, f32) {
    let bits = x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
    let amax = f32::from_bits(bits);
    let id = if amax > 0.0 { QMAX / amax } else { 0.0 };
    (amax / QMAX, id)
}

/// `v` on the block's i16 grid: `v·id + 1.5·2²³` rounds to an integer
/// (ties to even) held in the low mantissa bits, read back as an integer
/// (no float-to-int conversion, so it vectorises), within ±32767.
#[inline(always)]
fn to_grid(v: f32, id: f32) -> i16 {
    let y = v * id + ROUND_MAGIC;
    (y.to_bits() as i32 - ROUND_MAGIC.to_bits() as i32).clamp(-32767, 32767) as i16
}

impl SimdFn for Quantize<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let blocks = self
            .a
            .chunks_exact(BLOCK)
            .zip(self.q.chunks_exact_mut(BLOCK));
        for ((x, q), d) in blocks.zip(self.d.iter_mut()) {
            let id;
            (*d, id) = block_scale(x);
            for (q, v) in q.iter_mut().zip(x) {
                *q = to_grid(*v, id);
            }
        }
    }
}

/// An upper bound on `‖x̂ − x‖₂` for the activations `x̂` this route
/// computes with in place of `row` (each within 0.5 of its block's step
/// `amax/32767`, plus the f32 error of scaling it; bounded here by 0.51).
pub fn rounding_bound(row: &[f32]) -> f32 {
    let s: f64 = row
        .chunks(BLOCK)
        .map(|x| {
            let step = x.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64 / QMAX as f64;
            x.len() as f64 * (0.51 * step).powi(2)
        })
        .sum();
    (s.sqrt() * 1.001) as f32
}

/// `out[M,N] = a · Wᵀ (+ bias)`: rows quantized once, then output columns in
/// fixed [`CHUNK_N`] chunks on the lanes, [`ROWS`] activation rows at a time.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &Act16Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    sc: &mut Act16Scratch,
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let route = Route::for_level(level);
    let group = |g: usize, x: Rows<'_>, y: &mut GroupOut| match route {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: VNNI detected; `x` holds `x.rows` rows of the packed K.
        Route::Vnni => unsafe { x86::group_avx512(w, g, x.q, x.d, x.rows, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 (the level is capped at the CPU's) and F16C detected.
        Route::Avx2 => unsafe { x86::group_avx2(w, g, x.q, x.d, x.rows, y) },
        _ => group_scalar(w, g, x.q, x.d, x.rows, y),
    };
    run_groups(level, a, m, k, n, bias, out, sc, false, lanes, group)
}

/// One group kernel's outputs: `y[r][lane]` for activation row `r` and weight row `16g + lane`.
pub(super) type GroupOut = [[f32; GROUP]; ROWS];

/// Up to [`ROWS`] quantized activation rows, as a group kernel reads them.
#[derive(Clone, Copy)]
pub(super) struct Rows<'a> {
    /// Their i16 values, `rows · K`.
    pub(super) q: &'a [i16],
    /// Their block scales, `rows · K/32`.
    pub(super) d: &'a [f32],
    /// `−8 · Σ q` per block, `rows · K/32` (empty unless asked for).
    pub(super) offsets: &'a [i32],
    /// How many.
    pub(super) rows: usize,
}

/// The driver both i16-activation formats share: quantize the rows once
/// (and, with `offsets`, their blocks' `−8·Σ q`), then for each fixed
/// [`CHUNK_N`] chunk (on the lanes) and each group of [`GROUP`] weight rows
/// in it, `group(g, rows, y)` computes up to [`ROWS`] activation rows.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_groups<G>(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    bias: Option<&[f32]>,
    out: &mut [f32],
    sc: &mut Act16Scratch,
    offsets: bool,
    lanes: &impl Fork,
    group: G,
) -> Result<(), KernelError>
where
    G: Fn(usize, Rows<'_>, &mut GroupOut) + Sync,
{
    let kbs = k / BLOCK;
    quantize(level, a, m, k, sc);
    if offsets {
        // Grows only past the reserved size.
        sc.reserve_offsets(m, k);
        sc.fill_offsets(m * kbs);
    }
    let (q, d) = (&sc.q[..], &sc.d[..]);
    let o = if offsets {
        &sc.offsets[..m * kbs]
    } else {
        &[][..]
    };
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk(n, CHUNK_N, |range| {
        for g in range.start / GROUP..range.end.div_ceil(GROUP) {
            let n0 = g * GROUP;
            let nr = GROUP.min(n - n0);
            for r0 in (0..m).step_by(ROWS) {
                let rows = ROWS.min(m - r0);
                let mut y = [[0.0f32; GROUP]; ROWS];
                let x = Rows {
                    q: &q[r0 * k..(r0 + rows) * k],
                    d: &d[r0 * kbs..(r0 + rows) * kbs],
                    offsets: o.get(r0 * kbs..(r0 + rows) * kbs).unwrap_or_default(),
                    rows,
                };
                group(g, x, &mut y);
                for (r, yr) in y.iter().take(rows).enumerate() {
                    // SAFETY: this chunk alone writes columns n0..n0 + nr of every row.
                    let o = unsafe { dst.range_mut((r0 + r) * n + n0, nr) };
                    o.copy_from_slice(&yr[..nr]);
                    add_bias(o, bias.map(|b| &b[n0..n0 + nr]));
                }
            }
        }
    })?;
    Ok(())
}

/// Which group kernel a call runs (all give the same bits).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// AVX512-VNNI `vpdpwssd`, 16 rows per vector.
    Vnni,
    /// AVX2 `vpmaddwd`, two vectors of 8 rows.
    Avx2,
    /// Portable.
    Scalar,
}

impl Route {
    /// The route for `level` (capped at the CPU's) on this CPU.
    pub(super) fn for_level(level: SimdLevel) -> Self {
        let f = cpu::features();
        match level.min(cpu::simd_level()) {
            SimdLevel::Avx512 if f.avx512_vnni => Route::Vnni,
            SimdLevel::Avx512 | SimdLevel::Avx2 if f.f16c => Route::Avx2,
            _ => Route::Scalar,
        }
    }
}

/// The readable form: `y[r][lane]` for weight rows `16g + lane`.
fn group_scalar(w: &Act16Weights, g: usize, q: &[i16], d: &[f32], rows: usize, y: &mut GroupOut) {
    let k = w.kbs * BLOCK;
    for (r, yr) in y.iter_mut().take(rows).enumerate() {
        for (lane, acc) in yr.iter_mut().enumerate() {
            *acc = 0.0;
            for b in 0..w.kbs {
                let blk = w.block(g, b);
                let dw = ::half::f16::from_le_bytes([blk[2 * lane], blk[2 * lane + 1]]).to_f32();
                let isum: i32 = (0..BLOCK)
                    .map(|j| {
                        let at = quad_at(j / 4, lane) + j % 4;
                        i32::from(blk[at] as i8) * i32::from(q[r * k + b * BLOCK + j])
                    })
                    .sum();
                *acc = (isum as f32).mul_add(dw * d[r * w.kbs + b], *acc);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{quad_at, Act16Weights, GroupOut, BLOCK, QUADS, ROWS};
    use std::arch::x86_64::*;

    /// Sum the two partial dwords of each row in `lo` (rows 0–7) and `hi`
    /// (rows 8–15) into one vector of 16 row sums, in row order.
    #[inline(always)]
    unsafe fn pair_sums(lo: __m512i, hi: __m512i) -> __m512i {
        let lo = _mm512_add_epi32(lo, _mm512_srli_epi64(lo, 32));
        let hi = _mm512_add_epi32(hi, _mm512_srli_epi64(hi, 32));
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        _mm512_permutex2var_epi32(lo, even, hi)
    }

    /// [`super::group_scalar`] with `vpdpwssd`: per quad, rows 0–7 and 8–15
    /// each as one vector of (row, pair) dwords against the activation quad
    /// broadcast as two pairs.
    ///
    /// # Safety
    /// Needs AVX-512F/BW + VNNI; `q` holds `rows` rows of `kbs·32` values
    /// and `d` their `rows · kbs` scales.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn group_avx512(
        w: &Act16Weights,
        g: usize,
        q: &[i16],
        d: &[f32],
        rows: usize,
        y: &mut GroupOut,
    ) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(rows <= ROWS && q.len() >= rows * k && d.len() >= rows * kbs);
        let mut acc = [_mm512_setzero_ps(); ROWS];
        for b in 0..kbs {
            let blk = w.block(g, b).as_ptr();
            let mut isum = [[_mm512_setzero_si512(); 2]; ROWS];
            for qd in 0..QUADS {
                let at = blk.add(quad_at(qd, 0));
                let wv = [
                    _mm512_cvtepi8_epi16(_mm256_loadu_si256(at as *const __m256i)),
                    _mm512_cvtepi8_epi16(_mm256_loadu_si256(at.add(32) as *const __m256i)),
                ];
                // Constant-bound loops: the accumulators stay in registers.
                #[allow(clippy::needless_range_loop)]
                for r in 0..ROWS {
                    if r < rows {
                        let quad = (q.as_ptr().add(r * k + b * BLOCK + 4 * qd) as *const i64)
                            .read_unaligned();
                        let xv = _mm512_set1_epi64(quad);
                        isum[r][0] = _mm512_dpwssd_epi32(isum[r][0], wv[0], xv);
                        isum[r][1] = _mm512_dpwssd_epi32(isum[r][1], wv[1], xv);
                    }
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk as *const __m256i));
            #[allow(clippy::needless_range_loop)]
            for r in 0..ROWS {
                if r < rows {
                    let s = _mm512_mul_ps(dw, _mm512_set1_ps(d[r * kbs + b]));
                    let sums = pair_sums(isum[r][0], isum[r][1]);
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), s, acc[r]);
                }
            }
        }
        for (yr, a) in y.iter_mut().zip(acc).take(rows) {
            _mm512_storeu_ps(yr.as_mut_ptr(), a);
        }
    }

    /// [`super::group_scalar`] with `vpmaddwd` (pairs of i16 into i32, as
    /// `vpdpwssd`), one activation row at a time: four vectors of 4 rows ×
    /// 2 pairs per quad.
    ///
    /// # Safety
    /// Needs AVX2 and F16C; as [`group_avx512`] for the slices.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn group_avx2(
        w: &Act16Weights,
        g: usize,
        q: &[i16],
        d: &[f32],
        rows: usize,
        y: &mut GroupOut,
    ) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(rows <= ROWS && q.len() >= rows * k && d.len() >= rows * kbs);
        for (r, yr) in y.iter_mut().enumerate().take(rows) {
            let mut acc = [_mm256_setzero_ps(); 2];
            for b in 0..kbs {
                let blk = w.block(g, b).as_ptr();
                let mut isum = [_mm256_setzero_si256(); 4];
                for qd in 0..QUADS {
                    let at = blk.add(quad_at(qd, 0));
                    let quad =
                        (q.as_ptr().add(r * k + b * BLOCK + 4 * qd) as *const i64).read_unaligned();
                    let xv = _mm256_set1_epi64x(quad);
                    for (i, s) in isum.iter_mut().enumerate() {
                        let wv =
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(at.add(16 * i) as *const __m128i));
                        *s = _mm256_add_epi32(*s, _mm256_madd_epi16(wv, xv));
                    }
                }
                // hadd pairs rows (0,1 | 4,5 · 2,3 | 6,7): restore row order.
                let sums = [
                    _mm256_permute4x64_epi64(_mm256_hadd_epi32(isum[0], isum[1]), 0b11_01_10_00),
                    _mm256_permute4x64_epi64(_mm256_hadd_epi32(isum[2], isum[3]), 0b11_01_10_00),
                ];
                let dx = _mm256_set1_ps(d[r * kbs + b]);
                for (h, a) in acc.iter_mut().enumerate() {
                    let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h) as *const __m128i));
                    *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), _mm256_mul_ps(dw, dx), *a);
                }
            }
            _mm256_storeu_ps(yr.as_mut_ptr(), acc[0]);
            _mm256_storeu_ps(yr.as_mut_ptr().add(8), acc[1]);
        }
    }
}
