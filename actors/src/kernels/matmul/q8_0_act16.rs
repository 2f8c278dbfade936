//! q8_0 weights against activations quantized per 32-value block to i16
//! ([`super::WeightFormat::Q8_0Act16`]): integer block dot products on
//! AVX512-VNNI (`vpdpwssd`: pairs of i16 × i16 into i32; AVX2 `vpmaddwd`
//! elsewhere, the same sums), vectorised over 16
//! output rows, so a block of 16 rows × 32 values takes 16 instructions per
//! activation row instead of the f32 route's widening and FMAs (the f32
//! route is bound by that work, not by the weight bytes, for 1–16 rows).
//!
//! Activations: per row and block `b`, `dx = amax / 32767` and
//! `qx = round(x · 32767 / amax)` (ties to even) (relative error ≤ 2⁻¹⁶ of the block's largest value,
//! far below the q8_0 weights' own). Each output is
//! `Σ_b fma(float(Σ_j qw·qx), dw_b·dx_b, acc)` in block order: integer
//! sums are exact, so the SIMD route and the scalar one give the same bits,
//! and a row's result does not depend on the other rows or the lane split.
//!
//! Layout: per group of 16 weight rows and block `b`, 16 f16 scales (32
//! bytes) then the quants as 16 pairs × 16 rows × 2 bytes (512 bytes): row
//! `n`'s values `2p, 2p + 1` sit together, as `vpdpwssd` pairs them. Rows
//! past N are zero.

use super::{add_bias, DisjointOut, CHUNK_N};
use crate::kernels::cpu::{self, SimdLevel};
use crate::kernels::elementwise::simd::{dispatch, SimdFn, Vf32};
use crate::kernels::error::{check_len, KernelError};
use voxlane_runtime::Fork;

/// Values per block.
const BLOCK: usize = 32;
/// Weight rows per group (one vector of i32 sums).
const GROUP: usize = 16;
/// Bytes of one group's block: 16 f16 scales + 16 × 32 quants.
const GROUP_BLOCK_BYTES: usize = 2 * GROUP + GROUP * BLOCK;
/// Activation rows computed together (accumulators held in registers).
const ROWS: usize = 8;
/// Largest i16 magnitude used (symmetric).
const QMAX: f32 = 32767.0;

const _: () = assert!(CHUNK_N.is_multiple_of(GROUP));

/// Packed weights (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct Act16Weights {
    data: Vec<u8>,
    /// Blocks per row.
    kbs: usize,
}

/// Activation rows quantized for one call (a workspace: no allocation per frame).
#[derive(Debug, Clone, Default)]
pub(super) struct Act16Scratch {
    q: Vec<i16>,
    d: Vec<f32>,
}

impl Act16Scratch {
    /// Room for `max_m` rows of `k` values.
    pub(super) fn new(max_m: usize, k: usize) -> Self {
        let mut s = Self::default();
        s.reserve(max_m, k);
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

    /// 4-byte words held.
    pub(super) fn words(&self) -> usize {
        self.q.len().div_ceil(2) + self.d.len()
    }
}

impl Act16Weights {
    /// From GGML q8_0 bytes (`N·K/32` blocks of f16 scale + 32 × i8).
    pub(super) fn from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        if !k.is_multiple_of(BLOCK) {
            return Err(KernelError::Param {
                what: "k",
                detail: format!("q8_0 needs K divisible by {BLOCK} (got {k})"),
            });
        }
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
                for p in 0..BLOCK / 2 {
                    let at = 2 * GROUP + (p * GROUP + lane) * 2;
                    dst[at..at + 2].copy_from_slice(&src[2 + 2 * p..4 + 2 * p]);
                }
            }
        }
        Ok(Self { data, kbs })
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

impl SimdFn for Quantize<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        for ((x, q), d) in self
            .a
            .chunks_exact(BLOCK)
            .zip(self.q.chunks_exact_mut(BLOCK))
            .zip(self.d.iter_mut())
        {
            let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            *d = amax / QMAX;
            let id = if amax > 0.0 { QMAX / amax } else { 0.0 };
            for (q, v) in q.iter_mut().zip(x) {
                // |v·id| ≤ 32767 (+ rounding): the magic sum rounds it to an
                // integer, ties to even; `as` saturates (NaN → 0).
                *q = ((v * id + ROUND_MAGIC) - ROUND_MAGIC) as i16;
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
    quantize(level, a, m, k, sc);
    let (q, d) = (&sc.q[..], &sc.d[..]);
    let route = match level {
        SimdLevel::Avx512 if cpu::features().avx512_vnni => Route::Vnni,
        SimdLevel::Avx512 | SimdLevel::Avx2 if cpu::features().f16c => Route::Avx2,
        _ => Route::Scalar,
    };
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk(n, CHUNK_N, |range| {
        for g in range.start / GROUP..range.end.div_ceil(GROUP) {
            let n0 = g * GROUP;
            let nr = GROUP.min(n - n0);
            for r0 in (0..m).step_by(ROWS) {
                let rows = ROWS.min(m - r0);
                let mut y = [[0.0f32; GROUP]; ROWS];
                let (qr, dr) = (
                    &q[r0 * k..(r0 + rows) * k],
                    &d[r0 * w.kbs..(r0 + rows) * w.kbs],
                );
                match route {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: VNNI detected; `qr`/`dr` hold `rows` rows of the packed K.
                    Route::Vnni => unsafe { x86::group_avx512(w, g, qr, dr, rows, &mut y) },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: AVX2 (the level is capped at the CPU's) and F16C detected.
                    Route::Avx2 => unsafe { x86::group_avx2(w, g, qr, dr, rows, &mut y) },
                    _ => group_scalar(w, g, qr, dr, rows, &mut y),
                }
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
#[derive(Clone, Copy)]
enum Route {
    /// AVX512-VNNI `vpdpwssd`, 16 rows per vector.
    Vnni,
    /// AVX2 `vpmaddwd`, two vectors of 8 rows.
    Avx2,
    /// Portable.
    Scalar,
}

/// The readable form: `y[r][lane]` for weight rows `16g + lane`.
fn group_scalar(
    w: &Act16Weights,
    g: usize,
    q: &[i16],
    d: &[f32],
    rows: usize,
    y: &mut [[f32; GROUP]; ROWS],
) {
    let k = w.kbs * BLOCK;
    for (r, yr) in y.iter_mut().take(rows).enumerate() {
        for (lane, acc) in yr.iter_mut().enumerate() {
            *acc = 0.0;
            for b in 0..w.kbs {
                let blk = w.block(g, b);
                let dw = ::half::f16::from_le_bytes([blk[2 * lane], blk[2 * lane + 1]]).to_f32();
                let isum: i32 = (0..BLOCK)
                    .map(|j| {
                        let at = 2 * GROUP + ((j / 2) * GROUP + lane) * 2 + j % 2;
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
    use super::{Act16Weights, BLOCK, GROUP, ROWS};
    use std::arch::x86_64::*;

    /// [`super::group_scalar`] with `vpdpwssd`.
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
        y: &mut [[f32; GROUP]; ROWS],
    ) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(rows <= ROWS && q.len() >= rows * k && d.len() >= rows * kbs);
        let mut acc = [_mm512_setzero_ps(); ROWS];
        for b in 0..kbs {
            let blk = w.block(g, b).as_ptr();
            let mut isum = [_mm512_setzero_si512(); ROWS];
            for p in 0..BLOCK / 2 {
                let wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                    blk.add(2 * GROUP + p * 2 * GROUP) as *const __m256i,
                ));
                // Constant-bound loops: the accumulators stay in registers.
                #[allow(clippy::needless_range_loop)]
                for r in 0..ROWS {
                    if r < rows {
                        let pair = (q.as_ptr().add(r * k + b * BLOCK + 2 * p) as *const i32)
                            .read_unaligned();
                        isum[r] = _mm512_dpwssd_epi32(isum[r], wv, _mm512_set1_epi32(pair));
                    }
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk as *const __m256i));
            #[allow(clippy::needless_range_loop)]
            for r in 0..ROWS {
                if r < rows {
                    let s = _mm512_mul_ps(dw, _mm512_set1_ps(d[r * kbs + b]));
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), s, acc[r]);
                }
            }
        }
        for (yr, a) in y.iter_mut().zip(acc).take(rows) {
            _mm512_storeu_ps(yr.as_mut_ptr(), a);
        }
    }

    /// [`super::group_scalar`] with `vpmaddwd` (pairs of i16 into i32, as
    /// `vpdpwssd`), two activation rows at a time.
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
        y: &mut [[f32; GROUP]; ROWS],
    ) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(rows <= ROWS && q.len() >= rows * k && d.len() >= rows * kbs);
        for r0 in (0..rows).step_by(2) {
            let two = rows - r0 >= 2;
            // [row][half of the 16 weight rows]
            let mut acc = [[_mm256_setzero_ps(); 2]; 2];
            for b in 0..kbs {
                let blk = w.block(g, b).as_ptr();
                let mut isum = [[_mm256_setzero_si256(); 2]; 2];
                for p in 0..BLOCK / 2 {
                    let at = blk.add(2 * GROUP + p * 2 * GROUP);
                    let wv = [
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(at as *const __m128i)),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(at.add(16) as *const __m128i)),
                    ];
                    #[allow(clippy::needless_range_loop)]
                    for i in 0..2 {
                        if i == 0 || two {
                            let r = r0 + i;
                            let pair = (q.as_ptr().add(r * k + b * BLOCK + 2 * p) as *const i32)
                                .read_unaligned();
                            let xv = _mm256_set1_epi32(pair);
                            for h in 0..2 {
                                isum[i][h] =
                                    _mm256_add_epi32(isum[i][h], _mm256_madd_epi16(wv[h], xv));
                            }
                        }
                    }
                }
                let dw = [
                    _mm256_cvtph_ps(_mm_loadu_si128(blk as *const __m128i)),
                    _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16) as *const __m128i)),
                ];
                #[allow(clippy::needless_range_loop)]
                for i in 0..2 {
                    if i == 0 || two {
                        let dx = _mm256_set1_ps(d[(r0 + i) * kbs + b]);
                        for h in 0..2 {
                            let s = _mm256_mul_ps(dw[h], dx);
                            acc[i][h] =
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]), s, acc[i][h]);
                        }
                    }
                }
            }
            for i in 0..if two { 2 } else { 1 } {
                _mm256_storeu_ps(y[r0 + i].as_mut_ptr(), acc[i][0]);
                _mm256_storeu_ps(y[r0 + i].as_mut_ptr().add(8), acc[i][1]);
            }
        }
    }
}
