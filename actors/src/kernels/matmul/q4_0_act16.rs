//! GGML q4_0 weights against activations quantized per 32-value block to
//! i16 ([`super::WeightFormat::Q4_0Act16`]): the integer block sums of
//! [`super::q8_0_act16`] (same activation quantizer, scratch and driver; the
//! same `Σ_b fma(float(Σ_j (q_j − 8)·qx_j), dw_b·dx_b, acc)` in block order,
//! so every route gives the same bits) on weights of half the bytes.
//!
//! Why: a streaming step's matvec should run at the memory's speed, but the
//! f32 route of `q8_0.rs` widens every nibble to f32 and spends two FMAs per
//! weight, which bounds it far below the read bandwidth. Here one 64-byte
//! load gives 16 rows × 8 values, split into i16 words by masks and shifts
//! (no widening shuffles) for four `vpdpwssd` (AVX2: `vpmaddwd`), and
//! dword lane `i` of every vector is weight row `16g + i` (no reduction
//! across lanes). The `− 8` is folded exactly: each block's integer sum
//! starts at `−8·Σ qx`, computed once per activation row and block.
//!
//! Layout (as compact as GGML's, 18 bytes per row and block): per group of
//! 16 weight rows and block `b`, 16 f16 scales (32 bytes), then 4 loads of
//! 64 bytes, each 32 little-endian u16 words: word `2·row + e` of load `l`
//! holds in its nibble `s` (bits `4s..4s + 4`) GGML's nibble `q` (0..=15)
//! of the row's value `8l + 2s + e`. Nibble `s` of every word of a load is
//! then the 16 rows × the value pair `(8l + 2s, 8l + 2s + 1)`, against that
//! pair of i16 activations broadcast as a dword. Rows past N have scale 0
//! and `q = 8`.

use super::q8_0_act16::{run_groups, Act16Scratch, GroupOut, Route, Rows, BLOCK, GROUP, ROWS};
use crate::kernels::cpu::SimdLevel;
use crate::kernels::error::{check_len, KernelError};
use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

/// Bytes of one group's block: 16 f16 scales + 16 rows × 16 bytes of nibbles.
pub(super) const GROUP_BLOCK_BYTES: usize = 2 * GROUP + GROUP * BLOCK / 2;
/// 64-byte loads (16 rows × 8 values) per group's block.
const LOADS: usize = BLOCK / 8;
/// Bytes of a GGML q4_0 block.
const GGML_BLOCK_BYTES: usize = super::Q4_0_BLOCK_BYTES;

const _: () = assert!(GROUP == 16 && BLOCK == 32 && GROUP_BLOCK_BYTES == 288);

/// Packed weights (see the module docs; owned, or mapped from a packed-weights file).
#[derive(Debug, Clone)]
pub(super) struct Q4Act16Weights {
    pub(super) data: Buf<u8>,
    /// Blocks per row.
    pub(super) kbs: usize,
}

/// Where value `j` (0..32) of row `lane` sits in a group's block: the byte
/// offset and the nibble (0 low, 1 high) in it.
const fn nibble_at(lane: usize, j: usize) -> (usize, usize) {
    let (l, s, e) = (j / 8, (j % 8) / 2, j % 2);
    (2 * GROUP + 64 * l + 2 * (2 * lane + e) + s / 2, s % 2)
}

impl Q4Act16Weights {
    /// From GGML q4_0 bytes (`N·K/32` blocks of f16 scale + 16 bytes of
    /// nibbles: byte `j` holds value `j` low, `16 + j` high).
    pub(super) fn from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        super::q8_0::check_k(k)?;
        let kbs = k / BLOCK;
        check_len("q4_0 bytes", n * kbs * GGML_BLOCK_BYTES, bytes.len())?;
        let len = Self::packed_len(n, kbs).ok_or_else(|| KernelError::Param {
            what: "weight shape",
            detail: format!("N={n}, K={k} overflows"),
        })?;
        let mut data = vec![0u8; len];
        for row in 0..n.div_ceil(GROUP) * GROUP {
            let (g, lane) = (row / GROUP, row % GROUP);
            for b in 0..kbs {
                let dst = &mut data[(g * kbs + b) * GROUP_BLOCK_BYTES..][..GROUP_BLOCK_BYTES];
                let Some(src) = bytes
                    .get((row * kbs + b) * GGML_BLOCK_BYTES..)
                    .filter(|_| row < n)
                else {
                    // Padding: scale 0, every value q = 8 (zero).
                    for l in 0..LOADS {
                        let at = nibble_at(lane, 8 * l).0;
                        dst[at..at + 4].fill(0x88);
                    }
                    continue;
                };
                dst[2 * lane..2 * lane + 2].copy_from_slice(&src[..2]);
                // GGML's value j: byte 2 + j % 16, low nibble for j < 16.
                let q = |j: usize| u16::from(src[2 + j % 16] >> (4 * (j / 16))) & 0xF;
                for l in 0..LOADS {
                    for e in 0..2 {
                        let j = 8 * l + e;
                        let word = q(j) | q(j + 2) << 4 | q(j + 4) << 8 | q(j + 6) << 12;
                        let at = nibble_at(lane, j).0;
                        dst[at..at + 2].copy_from_slice(&word.to_le_bytes());
                    }
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

    /// One group's blocks, in order (the SIMD routes step through them).
    fn group(&self, g: usize) -> &[u8] {
        &self.data[g * self.kbs * GROUP_BLOCK_BYTES..][..self.kbs * GROUP_BLOCK_BYTES]
    }
}

/// Value `j` of row `lane` in a group's block: `q − 8`, in −8..=7.
fn value(blk: &[u8], lane: usize, j: usize) -> i32 {
    let (at, hi) = nibble_at(lane, j);
    i32::from((blk[at] >> (4 * hi)) & 0xF) - 8
}

/// `out[M,N] = a · Wᵀ (+ bias)` on [`super::q8_0_act16`]'s driver (rows
/// quantized once, fixed [`super::CHUNK_N`] chunks on the lanes).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &Q4Act16Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    sc: &mut Act16Scratch,
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let route = Route::for_level(level);
    let group = |g: usize, x: Rows<'_>, y: &mut GroupOut| match route {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: VNNI detected; `x` holds `x.rows` rows of the packed K.
        Route::Vnni => unsafe { x86::group_avx512(w, g, x, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 (the level is capped at the CPU's) and F16C detected.
        Route::Avx2 => unsafe { x86::group_avx2(w, g, x, y) },
        _ => group_scalar(w, g, x, y),
    };
    run_groups(level, a, m, k, n, bias, out, sc, true, lanes, group)
}

/// The readable form: `y[r][lane]` for weight rows `16g + lane`, each
/// block's sum `Σ_j (q_j − 8)·qx_j` (the offsets are for the SIMD routes).
fn group_scalar(w: &Q4Act16Weights, g: usize, x: Rows<'_>, y: &mut GroupOut) {
    let k = w.kbs * BLOCK;
    for (r, yr) in y.iter_mut().take(x.rows).enumerate() {
        for (lane, acc) in yr.iter_mut().enumerate() {
            *acc = 0.0;
            for b in 0..w.kbs {
                let blk = w.block(g, b);
                let dw = ::half::f16::from_le_bytes([blk[2 * lane], blk[2 * lane + 1]]).to_f32();
                let isum: i32 = (0..BLOCK)
                    .map(|j| value(blk, lane, j) * i32::from(x.q[r * k + b * BLOCK + j]))
                    .sum();
                *acc = (isum as f32).mul_add(dw * x.d[r * w.kbs + b], *acc);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GroupOut, Q4Act16Weights, Rows, BLOCK, GROUP, GROUP_BLOCK_BYTES, LOADS, ROWS};
    use std::arch::asm;
    use std::arch::x86_64::*;

    /// `vpdpwssd acc, w, [p]{1to16}`: `acc + w · (the i16 pair at p)` per dword.
    ///
    /// Inline asm, as LLVM's generic x86-64 tuning splits the accumulating
    /// intrinsic into `vpmaddwd` + `vpaddd` and a separate `vpbroadcastd`
    /// (≈ 30 more vector ops per block; the M = 1 loop measured ≈ 15 %
    /// slower that way on Zen 4, where the multiplies bound it).
    ///
    /// # Safety
    /// Needs AVX-512F + VNNI; `p` readable for 4 bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn dpwssd_pair(acc: __m512i, w: __m512i, p: *const i16) -> __m512i {
        let mut acc = acc;
        asm!(
            "vpdpwssd {acc}, {w}, dword ptr [{p}]{{1to16}}",
            acc = inout(zmm_reg) acc,
            w = in(zmm_reg) w,
            p = in(reg) p,
            options(pure, readonly, nostack, preserves_flags)
        );
        acc
    }

    /// [`super::group_scalar`] with `vpdpwssd`, monomorphised on the row
    /// count so the accumulators stay in registers.
    ///
    /// # Safety
    /// Needs AVX-512F/BW + VNNI; `x` holds `x.rows ≤ 8` rows of `kbs·32`
    /// values with their `kbs` scales and offsets each.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn group_avx512(w: &Q4Act16Weights, g: usize, x: Rows<'_>, y: &mut GroupOut) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(x.rows <= ROWS && x.q.len() >= x.rows * k);
        assert!(x.d.len() >= x.rows * kbs && x.offsets.len() >= x.rows * kbs);
        match x.rows {
            1 => group_one(w, g, x, y),
            2 => group_rows::<2>(w, g, x, y),
            3 => group_rows::<3>(w, g, x, y),
            4 => group_rows::<4>(w, g, x, y),
            5 => group_rows::<5>(w, g, x, y),
            6 => group_rows::<6>(w, g, x, y),
            7 => group_rows::<7>(w, g, x, y),
            _ => group_rows::<8>(w, g, x, y),
        }
    }

    /// One block's integer sums scaled into `acc`: `fma(float(s), dw·dx, acc)`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn scale(acc: __m512, s: __m512i, blk: *const u8, dx: f32) -> __m512 {
        let dw = _mm512_cvtph_ps(_mm256_loadu_si256(blk as *const __m256i));
        _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(s),
            _mm512_mul_ps(dw, _mm512_set1_ps(dx)),
            acc,
        )
    }

    /// One activation row (a streaming step's matvec), the fewest vector ops
    /// per load: nibbles 0 and 3 masked and shifted to ×1 into `s`, nibbles
    /// 1 and 2 masked in place at ×16 into `t` (`|t| < 2³¹`), so
    /// `s + t / 16` (exact: `t` is a multiple of 16) is the block's sum.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn group_one(w: &Q4Act16Weights, g: usize, x: Rows<'_>, y: &mut GroupOut) {
        let kbs = w.kbs;
        let (m0, m1) = (_mm512_set1_epi16(0x000F), _mm512_set1_epi16(0x00F0));
        let base = w.group(g).as_ptr();
        let mut acc = _mm512_setzero_ps();
        for b in 0..kbs {
            let blk = base.add(b * GROUP_BLOCK_BYTES);
            let mut s = _mm512_set1_epi32(x.offsets[b]);
            let mut t = _mm512_setzero_si512();
            for l in 0..LOADS {
                let v = _mm512_loadu_si512(blk.add(2 * GROUP + 64 * l) as *const __m512i);
                let p = x.q.as_ptr().add(b * BLOCK + 8 * l);
                s = dpwssd_pair(s, _mm512_and_si512(v, m0), p);
                t = dpwssd_pair(t, _mm512_and_si512(v, m1), p.add(2));
                let n2 = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m1);
                t = dpwssd_pair(t, n2, p.add(4));
                s = dpwssd_pair(s, _mm512_srli_epi16::<12>(v), p.add(6));
            }
            let s = _mm512_add_epi32(s, _mm512_srai_epi32::<4>(t));
            acc = scale(acc, s, blk, x.d[b]);
        }
        _mm512_storeu_ps(y[0].as_mut_ptr(), acc);
    }

    /// `R` activation rows: each load's four nibble vectors (shifted and
    /// masked to ×1) are shared by the rows, one accumulator per row.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn group_rows<const R: usize>(
        w: &Q4Act16Weights,
        g: usize,
        x: Rows<'_>,
        y: &mut GroupOut,
    ) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        let m0 = _mm512_set1_epi16(0x000F);
        let base = w.group(g).as_ptr();
        let mut acc = [_mm512_setzero_ps(); R];
        for b in 0..kbs {
            let blk = base.add(b * GROUP_BLOCK_BYTES);
            let mut s: [__m512i; R] =
                std::array::from_fn(|r| _mm512_set1_epi32(x.offsets[r * kbs + b]));
            for l in 0..LOADS {
                let v = _mm512_loadu_si512(blk.add(2 * GROUP + 64 * l) as *const __m512i);
                let wv = [
                    _mm512_and_si512(v, m0),
                    _mm512_and_si512(_mm512_srli_epi16::<4>(v), m0),
                    _mm512_and_si512(_mm512_srli_epi16::<8>(v), m0),
                    _mm512_srli_epi16::<12>(v),
                ];
                for (r, s) in s.iter_mut().enumerate() {
                    let p = x.q.as_ptr().add(r * k + b * BLOCK + 8 * l);
                    for (i, wv) in wv.iter().enumerate() {
                        *s = dpwssd_pair(*s, *wv, p.add(2 * i));
                    }
                }
            }
            for (r, (a, s)) in acc.iter_mut().zip(s).enumerate() {
                *a = scale(*a, s, blk, x.d[r * kbs + b]);
            }
        }
        for (yr, a) in y.iter_mut().zip(acc) {
            _mm512_storeu_ps(yr.as_mut_ptr(), a);
        }
    }

    /// [`super::group_scalar`] with `vpmaddwd` (pairs of i16 into i32, as
    /// `vpdpwssd`), one activation row at a time, rows 0–7 and 8–15 in two
    /// vectors (the two 32-byte halves of each load).
    ///
    /// # Safety
    /// Needs AVX2 and F16C; as [`group_avx512`] for `x`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn group_avx2(w: &Q4Act16Weights, g: usize, x: Rows<'_>, y: &mut GroupOut) {
        let (kbs, k) = (w.kbs, w.kbs * BLOCK);
        assert!(x.rows <= ROWS && x.q.len() >= x.rows * k);
        assert!(x.d.len() >= x.rows * kbs && x.offsets.len() >= x.rows * kbs);
        let m0 = _mm256_set1_epi16(0x000F);
        let base = w.group(g).as_ptr();
        for (r, yr) in y.iter_mut().enumerate().take(x.rows) {
            let mut acc = [_mm256_setzero_ps(); 2];
            for b in 0..kbs {
                let blk = base.add(b * GROUP_BLOCK_BYTES);
                let mut isum = [_mm256_set1_epi32(x.offsets[r * kbs + b]); 2];
                for l in 0..LOADS {
                    let p = x.q.as_ptr().add(r * k + b * BLOCK + 8 * l) as *const i32;
                    for (h, s) in isum.iter_mut().enumerate() {
                        let at = blk.add(2 * GROUP + 64 * l + 32 * h);
                        let v = _mm256_loadu_si256(at as *const __m256i);
                        let wv = [
                            _mm256_and_si256(v, m0),
                            _mm256_and_si256(_mm256_srli_epi16::<4>(v), m0),
                            _mm256_and_si256(_mm256_srli_epi16::<8>(v), m0),
                            _mm256_srli_epi16::<12>(v),
                        ];
                        for (i, wv) in wv.iter().enumerate() {
                            let xv = _mm256_set1_epi32(p.add(i).read_unaligned());
                            *s = _mm256_add_epi32(*s, _mm256_madd_epi16(*wv, xv));
                        }
                    }
                }
                let dx = _mm256_set1_ps(x.d[r * kbs + b]);
                for (h, (a, s)) in acc.iter_mut().zip(isum).enumerate() {
                    let dw = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16 * h) as *const __m128i));
                    *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dx), *a);
                }
            }
            _mm256_storeu_ps(yr.as_mut_ptr(), acc[0]);
            _mm256_storeu_ps(yr.as_mut_ptr().add(8), acc[1]);
        }
    }
}
