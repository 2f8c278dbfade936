//! Integer weights as exported by onnxruntime's dynamic quantization
//! (`DynamicQuantizeLinear` + `MatMulInteger`, or `DynamicQuantizeMatMul`).
//!
//! * Activations are quantized per tensor to u8 exactly like
//!   `DynamicQuantizeLinear`: range widened to include 0, `scale = (max-min)/255`
//!   (1 when the range is empty), `zp = round_half_even(clamp(-min/scale, 0, 255))`,
//!   `q = clamp(round_half_even(x/scale) + zp, 0, 255)`.
//! * `acc[m,n] = Σ_k (qa - za)·(qw - zw[n])` in wrapping i32 arithmetic.
//! * `out = (acc as f32) · (a_scale · w_scale[n]) + bias[n]`.
//!
//! uint8 weights are stored shifted to int8 (`w - 128`, zero point likewise),
//! which leaves every `(qw - zw)` unchanged; the kernels compute `Σ qa·qw` with
//! `vpdpbusd` (u8 × i8) or widening `pmaddwd`, then subtract the zero-point
//! terms with precomputed sums. All of it is exact modulo 2³², so every route
//! equals the direct reference bit for bit.

use super::{DisjointOut, CHUNK_N};
use crate::kernels::cpu::{self, SimdLevel};
use crate::kernels::error::{check_len, KernelError};
use voxlane_runtime::Fork;

/// Row padding of packed weights and quantized activations (one 512-bit load).
const KPAD: usize = 64;
/// Activation rows per register tile.
const MB: usize = 4;

/// Integer weight data `W[N,K]`, row-major.
#[derive(Debug, Clone, Copy)]
pub enum IntWeights<'a> {
    /// Signed 8-bit weights (zero points in -128..=127).
    I8(&'a [i8]),
    /// Unsigned 8-bit weights (zero points in 0..=255).
    U8(&'a [u8]),
}

/// Per-tensor activation quantization parameters (as `DynamicQuantizeLinear` computes them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActivationQuant {
    /// Step between quantized values.
    pub scale: f32,
    /// The u8 value representing 0.0.
    pub zero_point: u8,
}

impl ActivationQuant {
    /// Parameters for a whole activation tensor (scalar reference range).
    pub fn for_tensor(a: &[f32]) -> Self {
        let [lo, hi] = super::super::quantize::range_scalar(a);
        Self::from_range(lo, hi)
    }

    /// Parameters for a tensor whose `[min(0, x…), max(0, x…)]` is `[lo, hi]`.
    pub fn from_range(lo: f32, hi: f32) -> Self {
        let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
        let zp = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even();
        Self {
            scale,
            zero_point: zp as u8,
        }
    }

    /// Quantize one value.
    ///
    /// `round_ties_even` is a libm call (`rintf`) on the baseline target and
    /// dominated quantization. Adding and subtracting 1.5·2²³ rounds to an
    /// integer half-to-even exactly for |x| < 2²²; clamping to ±1024 first
    /// keeps x there without changing the result, which saturates at 0..=255
    /// once the zero point (0..=255) is added.
    #[inline]
    pub fn quantize(&self, v: f32) -> u8 {
        const MAGIC: f32 = 12_582_912.0;
        let x = (v / self.scale).clamp(-1024.0, 1024.0);
        (((x + MAGIC) - MAGIC) + self.zero_point as f32).clamp(0.0, 255.0) as u8
    }
}

/// Quantize `a` per tensor into `dst` (same length), returning the parameters used.
pub fn quantize_activations(a: &[f32], dst: &mut [u8]) -> Result<ActivationQuant, KernelError> {
    check_len("quantized activations", a.len(), dst.len())?;
    let [lo, hi] = super::super::quantize::range(a);
    let p = ActivationQuant::from_range(lo, hi);
    super::super::quantize::quantize_into(p, a, dst);
    Ok(p)
}

/// Packed integer weights.
#[derive(Debug, Clone)]
pub(super) struct Int8Weights {
    /// `N × kp` signed quants (uint8 shifted by -128), rows zero-padded to `kp`.
    pub(super) quants: Vec<i8>,
    /// Padded row length (multiple of 64).
    kp: usize,
    /// Zero point per row, in the shifted domain.
    zero: Vec<i32>,
    /// Scale per row.
    scale: Vec<f32>,
    /// `Σ_k quants[n,k]` per row (over the true K).
    pub(super) row_sums: Vec<i32>,
}

fn per_channel<T: Copy>(what: &'static str, v: &[T], n: usize) -> Result<Vec<T>, KernelError> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(KernelError::Param {
            what,
            detail: format!("need 1 or N={n} values, got {l}"),
        }),
    }
}

impl Int8Weights {
    /// Pack weights stored `[n, k]` (rows of W), or `[k, n]` with `stored_kn`
    /// (ONNX's MatMul B, transposed straight into the padded rows).
    pub(super) fn prepare(
        w: IntWeights<'_>,
        n: usize,
        k: usize,
        scales: &[f32],
        zero_points: &[i32],
        stored_kn: bool,
    ) -> Result<Self, KernelError> {
        let scale = per_channel("int8 scales", scales, n)?;
        let zps = per_channel("int8 zero points", zero_points, n)?;
        let (len, range, shift) = match w {
            IntWeights::I8(d) => (d.len(), -128..=127, 0),
            IntWeights::U8(d) => (d.len(), 0..=255, 128),
        };
        check_len("int8 weights", n * k, len)?;
        if let Some(z) = zps.iter().find(|z| !range.contains(*z)) {
            return Err(KernelError::Param {
                what: "int8 zero points",
                detail: format!("{z} is outside {range:?}"),
            });
        }
        // Stored value `i`, uint8 shifted to int8.
        let value = |i: usize| match w {
            IntWeights::I8(d) => d[i],
            IntWeights::U8(d) => (d[i] as i32 - 128) as i8,
        };
        let kp = k.div_ceil(KPAD) * KPAD;
        let mut quants = vec![0i8; n * kp];
        if stored_kn {
            // In 16 × 16 tiles: 16 source and 16 destination rows stay in L1;
            // whole tiles by a register transpose (a model's load time).
            const TILE: usize = 16;
            let (bytes, flip): (&[u8], u8) = match w {
                IntWeights::I8(d) => (bytemuck_i8(d), 0),
                IntWeights::U8(d) => (d, 0x80),
            };
            for r0 in (0..k).step_by(TILE) {
                let r1 = (r0 + TILE).min(k);
                for c0 in (0..n).step_by(TILE) {
                    if r1 - r0 == TILE && c0 + TILE <= n {
                        let src: [[u8; TILE]; TILE] = std::array::from_fn(|i| {
                            let row = &bytes[(r0 + i) * n + c0..][..TILE];
                            // uint8 − 128 is the top bit flipped.
                            std::array::from_fn(|j| row[j] ^ flip)
                        });
                        for (j, col) in transpose16(&src).iter().enumerate() {
                            let dst = &mut quants[(c0 + j) * kp + r0..][..TILE];
                            for (d, v) in dst.iter_mut().zip(col) {
                                *d = *v as i8;
                            }
                        }
                        continue;
                    }
                    for c in c0..(c0 + TILE).min(n) {
                        let dst = &mut quants[c * kp + r0..c * kp + r1];
                        for (d, r) in dst.iter_mut().zip(r0..r1) {
                            *d = value(r * n + c);
                        }
                    }
                }
            }
        } else {
            for r in 0..n {
                let dst = &mut quants[r * kp..r * kp + k];
                match w {
                    IntWeights::I8(d) => dst.copy_from_slice(&d[r * k..(r + 1) * k]),
                    IntWeights::U8(_) => {
                        for (i, o) in dst.iter_mut().enumerate() {
                            *o = value(r * k + i);
                        }
                    }
                }
            }
        }
        let row_sums = quants
            .chunks_exact(kp.max(1))
            .take(n)
            .map(|row| row[..k].iter().fold(0i32, |s, &v| s.wrapping_add(v as i32)))
            .collect();
        Ok(Self {
            quants,
            kp,
            zero: zps.iter().map(|z| z - shift).collect(),
            scale,
            row_sums,
        })
    }
}

/// `i8` bytes as `u8` (same size and alignment).
fn bytemuck_i8(v: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have the same size, alignment and valid bit patterns.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) }
}

/// The transpose of a 16 × 16 byte matrix (`out[j][i] = m[i][j]`).
fn transpose16(m: &[[u8; 16]; 16]) -> [[u8; 16]; 16] {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; unaligned loads and stores of 16-byte rows.
    unsafe {
        use std::arch::x86_64::*;
        // Four rounds interleaving rows i and i + 8 byte by byte: each round
        // moves one bit of the row index into the column index.
        let mut x: [__m128i; 16] = std::array::from_fn(|i| _mm_loadu_si128(m[i].as_ptr().cast()));
        for _ in 0..4 {
            let y = x;
            for i in 0..8 {
                x[2 * i] = _mm_unpacklo_epi8(y[i], y[i + 8]);
                x[2 * i + 1] = _mm_unpackhi_epi8(y[i], y[i + 8]);
            }
        }
        let mut out = [[0u8; 16]; 16];
        for (o, v) in out.iter_mut().zip(x) {
            _mm_storeu_si128(o.as_mut_ptr().cast(), v);
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::array::from_fn(|j| std::array::from_fn(|i| m[i][j]))
}

/// Quantized activations of one call, rows padded like the weights.
#[derive(Debug, Clone, Default)]
pub(super) struct Int8Scratch {
    a_q: Vec<u8>,
    a_sums: Vec<i32>,
}

impl Int8Scratch {
    pub(super) fn new(max_m: usize, k: usize) -> Self {
        let kp = k.div_ceil(KPAD) * KPAD;
        Self {
            a_q: Vec::with_capacity(max_m * kp),
            a_sums: Vec::with_capacity(max_m),
        }
    }

    fn fill(&mut self, a: &[f32], m: usize, k: usize, kp: usize) -> ActivationQuant {
        let p = ActivationQuant::for_tensor(&a[..m * k]);
        // resize only allocates when a larger shape than reserved shows up.
        self.a_q.clear();
        self.a_q.resize(m * kp, 0);
        self.a_sums.clear();
        for r in 0..m {
            let dst = &mut self.a_q[r * kp..r * kp + k];
            let mut sum = 0i32;
            for (d, &v) in dst.iter_mut().zip(&a[r * k..(r + 1) * k]) {
                *d = p.quantize(v);
                sum = sum.wrapping_add(*d as i32);
            }
            self.a_sums.push(sum);
        }
        p
    }
}

/// Which integer dot-product kernel a level maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntRoute {
    Scalar,
    Avx2,
    Vnni,
}

fn route(level: SimdLevel) -> IntRoute {
    match level {
        SimdLevel::Avx512 if cpu::features().avx512_vnni => IntRoute::Vnni,
        // Without VNNI, AVX-512 machines use the exact AVX2 widening route.
        SimdLevel::Avx512 | SimdLevel::Avx2 => IntRoute::Avx2,
        SimdLevel::Scalar => IntRoute::Scalar,
    }
}

/// `acc[r*nr + c] = Σ_k a[r,k]·w[c,k]` (wrapping) for `mr ≤ MB` activation rows.
fn dots(route: IntRoute, a: &[u8], mr: usize, w: &[i8], nr: usize, kp: usize, acc: &mut [i32]) {
    match route {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the route was derived from detected features; a holds mr rows
        // and w holds nr rows of kp (a multiple of 64), acc holds mr*nr.
        IntRoute::Vnni => unsafe { x86::dots_vnni(a, mr, w, nr, kp, acc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        IntRoute::Avx2 => unsafe { x86::dots_avx2(a, mr, w, nr, kp, acc) },
        _ => {
            for r in 0..mr {
                for c in 0..nr {
                    let ar = &a[r * kp..(r + 1) * kp];
                    let wr = &w[c * kp..(c + 1) * kp];
                    acc[r * nr + c] = ar
                        .iter()
                        .zip(wr)
                        .fold(0i32, |s, (&x, &y)| s.wrapping_add(x as i32 * y as i32));
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &Int8Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    scratch: &mut Int8Scratch,
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let kp = w.kp;
    let p = scratch.fill(a, m, k, kp);
    let (a_q, a_sums) = (&scratch.a_q[..], &scratch.a_sums[..]);
    let route = route(level);
    let za = p.zero_point as i32;
    let kz = (k as i32).wrapping_mul(za);
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk(n, CHUNK_N, |range| {
        let nr = range.len();
        let wq = &w.quants[range.start * kp..range.end * kp];
        let mut acc = [0i32; MB * CHUNK_N];
        let mut r0 = 0;
        while r0 < m {
            let mr = MB.min(m - r0);
            dots(
                route,
                &a_q[r0 * kp..(r0 + mr) * kp],
                mr,
                wq,
                nr,
                kp,
                &mut acc[..mr * nr],
            );
            for r in 0..mr {
                // SAFETY: this chunk alone writes columns `range` of every row.
                let y = unsafe { dst.range_mut((r0 + r) * n + range.start, nr) };
                for (c, o) in y.iter_mut().enumerate() {
                    let col = range.start + c;
                    let zw = w.zero[col];
                    // Σ(a-za)(w-zw) = Σaw - za·Σw - zw·Σa + K·za·zw
                    let v = acc[r * nr + c]
                        .wrapping_sub(za.wrapping_mul(w.row_sums[col]))
                        .wrapping_sub(zw.wrapping_mul(a_sums[r0 + r]))
                        .wrapping_add(kz.wrapping_mul(zw));
                    *o = dequantize(v, p.scale, w.scale[col], bias.map(|b| b[col]));
                }
            }
            r0 += mr;
        }
    })?;
    Ok(())
}

/// The one dequantization formula, shared with the reference.
#[inline]
pub(super) fn dequantize(acc: i32, a_scale: f32, w_scale: f32, bias: Option<f32>) -> f32 {
    let v = acc as f32 * (a_scale * w_scale);
    match bias {
        Some(b) => v + b,
        None => v,
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    macro_rules! tiled {
        ($name:ident, $tile:ident, $mr:literal, $nr:literal) => {
            /// Cover `mr × nr` outputs with full tiles and single-row/column edges.
            ///
            /// # Safety
            /// As the tile function; `a` holds `mr` rows, `w` `nr` rows of `kp`.
            pub(super) unsafe fn $name(
                a: &[u8],
                mr: usize,
                w: &[i8],
                nr: usize,
                kp: usize,
                acc: &mut [i32],
            ) {
                let (ap, wp) = (a.as_ptr(), w.as_ptr());
                let mut r = 0;
                while r < mr {
                    let rows = if mr - r >= $mr { $mr } else { 1 };
                    let mut c = 0;
                    while c < nr {
                        let cols = if nr - c >= $nr { $nr } else { 1 };
                        let (a0, w0) = (ap.add(r * kp), wp.add(c * kp));
                        let o = &mut acc[r * nr + c..];
                        match (rows, cols) {
                            ($mr, $nr) => $tile::<$mr, $nr>(a0, w0, kp, o, nr),
                            ($mr, _) => $tile::<$mr, 1>(a0, w0, kp, o, nr),
                            (_, $nr) => $tile::<1, $nr>(a0, w0, kp, o, nr),
                            _ => $tile::<1, 1>(a0, w0, kp, o, nr),
                        }
                        c += cols;
                    }
                    r += rows;
                }
            }
        };
    }

    /// `MR × NR` register tile with `vpdpbusd` (u8 × i8 → i32, wrapping).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")]
    unsafe fn tile_vnni<const MR: usize, const NR: usize>(
        a: *const u8,
        w: *const i8,
        kp: usize,
        out: &mut [i32],
        ld: usize,
    ) {
        let mut acc = [[_mm512_setzero_si512(); NR]; MR];
        let mut i = 0;
        while i < kp {
            let mut wv = [_mm512_setzero_si512(); NR];
            for (c, v) in wv.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(w.add(c * kp + i) as *const _);
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let av = _mm512_loadu_si512(a.add(r * kp + i) as *const _);
                for (c, s) in row.iter_mut().enumerate() {
                    *s = _mm512_dpbusd_epi32(*s, av, wv[c]);
                }
            }
            i += 64;
        }
        for (r, row) in acc.iter().enumerate() {
            for (c, s) in row.iter().enumerate() {
                out[r * ld + c] = _mm512_reduce_add_epi32(*s);
            }
        }
    }

    /// `MR × NR` register tile widening to i16 and using `vpmaddwd` (exact, no saturation).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile_avx2<const MR: usize, const NR: usize>(
        a: *const u8,
        w: *const i8,
        kp: usize,
        out: &mut [i32],
        ld: usize,
    ) {
        let mut acc = [[_mm256_setzero_si256(); NR]; MR];
        let mut i = 0;
        while i < kp {
            let mut wv = [_mm256_setzero_si256(); NR];
            for (c, v) in wv.iter_mut().enumerate() {
                *v = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.add(c * kp + i) as *const _));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let av = _mm256_cvtepu8_epi16(_mm_loadu_si128(a.add(r * kp + i) as *const _));
                for (c, s) in row.iter_mut().enumerate() {
                    *s = _mm256_add_epi32(*s, _mm256_madd_epi16(av, wv[c]));
                }
            }
            i += 16;
        }
        for (r, row) in acc.iter().enumerate() {
            for (c, s) in row.iter().enumerate() {
                let v = _mm_add_epi32(
                    _mm256_castsi256_si128(*s),
                    _mm256_extracti128_si256::<1>(*s),
                );
                let v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
                let v = _mm_add_epi32(v, _mm_shuffle_epi32::<1>(v));
                out[r * ld + c] = _mm_cvtsi128_si32(v);
            }
        }
    }

    tiled!(dots_vnni_inner, tile_vnni, 4, 4);
    tiled!(dots_avx2_inner, tile_avx2, 2, 4);

    /// VNNI route.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ + VNNI; shapes as in `dots`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")]
    pub(super) unsafe fn dots_vnni(
        a: &[u8],
        mr: usize,
        w: &[i8],
        nr: usize,
        kp: usize,
        acc: &mut [i32],
    ) {
        dots_vnni_inner(a, mr, w, nr, kp, acc)
    }

    /// AVX2 route.
    ///
    /// # Safety
    /// Needs AVX2; shapes as in `dots`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots_avx2(
        a: &[u8],
        mr: usize,
        w: &[i8],
        nr: usize,
        kp: usize,
        acc: &mut [i32],
    ) {
        dots_avx2_inner(a, mr, w, nr, kp, acc)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn transpose16_transposes() {
        let m: [[u8; 16]; 16] =
            std::array::from_fn(|i| std::array::from_fn(|j| (i * 16 + j) as u8));
        let t = super::transpose16(&m);
        for i in 0..16 {
            for j in 0..16 {
                assert_eq!(t[j][i], m[i][j], "({i}, {j})");
            }
        }
    }
}
