//! The bf16 route of the stride-1 dense conv ([`super::conv1d::Conv1dRoute::Bf16`]):
//! weights and inputs rounded to bf16 (round to nearest even), products
//! summed in f32. On AMX-BF16 (`tdpbf16ps`) one 32 × 32 block of output
//! channels × frames takes four tiles per K step of 32 input channels and
//! one tap; without tiles, AVX512-BF16's `vdpbf16ps` computes the same
//! block from vectors (Zen 4, Cooper Lake), and portable code emulates it
//! elsewhere.
//!
//! A bf16 × bf16 product is exact in f32; the tiles and `vdpbf16ps` add a
//! step's products in the hardware's order, the emulation one by one (the
//! same bits at every SIMD level), so the three agree to f32 rounding, not
//! bit for bit, each within f32 rounding of the f64 reference. Lanes split
//! output time and channel blocks, never a sum, so on one CPU the bits do
//! not depend on the thread budget.
//!
//! Reference: [`super::conv1d::conv1d_reference`] on the rounded values
//! ([`round_bf16`]); the f32 sums stay within f32 rounding of its f64 sums.
//!
//! Layouts: the weights as A tiles `[group][co block][ci block][tap][32 rows][32 ci]`
//! (zero rows and channels past the shape); the padded input as B rows of
//! channel pairs `[group][ci pair][frame]`, each `u32` the pair's two bf16
//! (even channel in the low half), with [`BLOCK`] zero frames of slack so a
//! block may run past the last output.

use voxlane_runtime::Fork;

use super::conv1d::{Conv1dParams, SharedOut, TIME_CHUNK};
use super::cpu::{features, SimdLevel};
use super::elementwise::simd::{dispatch, SimdFn, Vf32};
use super::error::KernelError;

/// Output channels (two 16-row A tiles), frames (two 16-column B tiles) and
/// input channels (16 pairs) of one block step.
pub const BLOCK: usize = 32;
/// Parallel units aimed for (as the f32 direct route).
const MIN_UNITS: usize = 8;
/// Channel pairs per parallel chunk of the input packing.
const PACK_PAIRS: usize = 4;

/// `x` rounded to bf16 (nearest, ties to even; NaN stays NaN), as bits.
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

/// The f32 value of bf16 bits (exact).
#[inline(always)]
pub fn from_bf16(b: u16) -> f32 {
    half::bf16::from_bits(b).to_f32()
}

/// `v` rounded to bf16 values, as f32 (the reference's inputs).
pub fn round_bf16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| from_bf16(to_bf16(*x))).collect()
}

/// A stride-1 dense conv's weights as bf16 A tiles.
#[derive(Debug, Clone)]
pub(crate) struct Bf16Conv {
    /// `[group][co block][ci block][tap][32][32]` bf16 bits.
    w: Vec<u16>,
    groups: usize,
    cig: usize,
    cog: usize,
    kernel: usize,
    dilation: usize,
    /// Input-channel blocks of [`BLOCK`] per group.
    kcs: usize,
    /// How blocks are computed.
    kind: Kind,
    /// AMX tiles allowed (tests turn them off to reach the vector route).
    allow_amx: bool,
}

/// How a block's sums are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// AMX-BF16 tiles.
    Amx,
    /// AVX512-BF16 `vdpbf16ps`.
    Dot,
    /// Portable emulation (vectorised per level).
    Emulated,
}

/// The block kind for `level` on this CPU.
fn kind_at(level: SimdLevel, allow_amx: bool) -> Kind {
    let f = features();
    match level {
        SimdLevel::Avx512 if allow_amx && f.amx_bf16 => Kind::Amx,
        SimdLevel::Avx512 if f.avx512_bf16 => Kind::Dot,
        _ => Kind::Emulated,
    }
}

impl Bf16Conv {
    /// Pack torch-layout weights `[c_out, c_in/groups, kernel]` of a stride-1 conv.
    pub(crate) fn new(p: &Conv1dParams, weight: &[f32], level: SimdLevel) -> Self {
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let (kcs, blocks) = (cig.div_ceil(BLOCK), cog.div_ceil(BLOCK));
        let mut w = vec![0u16; p.groups * blocks * kcs * k * BLOCK * BLOCK];
        for g in 0..p.groups {
            for o in 0..cog {
                let (b, m) = (o / BLOCK, o % BLOCK);
                for i in 0..cig {
                    let (kc, c) = (i / BLOCK, i % BLOCK);
                    for tap in 0..k {
                        let at =
                            ((((g * blocks + b) * kcs + kc) * k + tap) * BLOCK + m) * BLOCK + c;
                        w[at] = to_bf16(weight[((g * cog + o) * cig + i) * k + tap]);
                    }
                }
            }
        }
        Self {
            w,
            groups: p.groups,
            cig,
            cog,
            kernel: k,
            dilation: p.dilation,
            kcs,
            kind: kind_at(level, true),
            allow_amx: true,
        }
    }

    /// Follow the conv's SIMD level (tiles and `vdpbf16ps` only at the AVX-512 level).
    pub(crate) fn set_level(&mut self, level: SimdLevel) {
        self.kind = kind_at(level, self.allow_amx);
    }

    /// Allow AMX tiles at the AVX-512 level (default: on) for `level`.
    pub(crate) fn set_amx(&mut self, on: bool, level: SimdLevel) {
        self.allow_amx = on;
        self.set_level(level);
    }

    /// Whether blocks run on AMX tiles.
    pub(crate) fn uses_amx(&self) -> bool {
        self.kind == Kind::Amx
    }

    /// Frames per packed pair row for `tp` padded frames (with the slack).
    fn row(tp: usize) -> usize {
        tp + BLOCK
    }

    /// `u32` pairs the packed input of `tp` padded frames takes.
    pub(crate) fn pack_len(&self, tp: usize) -> usize {
        self.groups * self.kcs * (BLOCK / 2) * Self::row(tp)
    }

    /// `out: [c_out, t_out] = conv(xpad: [c_in, tp])` (+ bias), `pairs` the
    /// packing scratch ([`Bf16Conv::pack_len`] long at least).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward(
        &self,
        pool: &impl Fork,
        level: SimdLevel,
        xpad: &[f32],
        tp: usize,
        bias: Option<&[f32]>,
        out: &mut [f32],
        pairs: &mut [u32],
    ) -> Result<(), KernelError> {
        let (row, span) = (Self::row(tp), (self.kernel - 1) * self.dilation + 1);
        let t_out = tp + 1 - span;
        let pairs = &mut pairs[..self.pack_len(tp)];
        let per_group = self.kcs * BLOCK / 2;
        pool.for_each_chunk_mut(pairs, PACK_PAIRS * row, |i, chunk| {
            for (j, dst) in chunk.chunks_exact_mut(row).enumerate() {
                let (g, pair) = (
                    (i * PACK_PAIRS + j) / per_group,
                    (i * PACK_PAIRS + j) % per_group,
                );
                let channel =
                    |c: usize| (c < self.cig).then(|| &xpad[(g * self.cig + c) * tp..][..tp]);
                dispatch(
                    level,
                    PackPair {
                        even: channel(2 * pair),
                        odd: channel(2 * pair + 1),
                        dst,
                    },
                );
            }
        })?;
        let pairs = &*pairs;
        let blocks = self.cog.div_ceil(BLOCK);
        let time_chunks = t_out.div_ceil(TIME_CHUNK);
        let parts = MIN_UNITS.div_ceil(time_chunks).clamp(1, blocks);
        let per_part = blocks.div_ceil(parts);
        let parts = blocks.div_ceil(per_part);
        let dst = SharedOut(out.as_mut_ptr());
        assert!(out.len() >= self.groups * self.cog * t_out);
        pool.for_each_chunk(time_chunks * parts, 1, |units| {
            for u in units {
                let (tc, part) = (u / parts, u % parts);
                let t0 = tc * TIME_CHUNK;
                let b0 = part * per_part;
                let chunk = Chunk {
                    conv: self,
                    pairs,
                    row,
                    t_out,
                    bias,
                    out: dst,
                    level,
                };
                chunk.run(
                    t0..(t0 + TIME_CHUNK).min(t_out),
                    b0..(b0 + per_part).min(blocks),
                );
            }
        })?;
        Ok(())
    }
}

/// One packed pair row: `dst[f] = bf16(even[f]) | bf16(odd[f]) << 16`, zeros
/// for a missing channel and the slack.
struct PackPair<'a> {
    even: Option<&'a [f32]>,
    odd: Option<&'a [f32]>,
    dst: &'a mut [u32],
}

impl SimdFn for PackPair<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        // Scalar code inside the level's trampoline: it vectorises there.
        let tp = self.even.map_or(0, <[f32]>::len);
        let (head, tail) = self.dst.split_at_mut(tp);
        match (self.even, self.odd) {
            (Some(e), Some(o)) => {
                for ((d, a), b) in head.iter_mut().zip(e).zip(o) {
                    *d = to_bf16(*a) as u32 | (to_bf16(*b) as u32) << 16;
                }
            }
            (Some(e), None) => {
                for (d, a) in head.iter_mut().zip(e) {
                    *d = to_bf16(*a) as u32;
                }
            }
            _ => head.fill(0),
        }
        tail.fill(0);
    }
}

/// Frames × channel blocks of one parallel unit.
struct Chunk<'a> {
    conv: &'a Bf16Conv,
    pairs: &'a [u32],
    row: usize,
    t_out: usize,
    bias: Option<&'a [f32]>,
    /// `[c_out, t_out]`; this unit alone writes its frames of its blocks' rows.
    out: SharedOut,
    level: SimdLevel,
}

impl Chunk<'_> {
    fn run(&self, frames: std::ops::Range<usize>, block_range: std::ops::Range<usize>) {
        let c = self.conv;
        let blocks = c.cog.div_ceil(BLOCK);
        let wblock = c.kcs * c.kernel * BLOCK * BLOCK;
        let group_pairs = c.kcs * (BLOCK / 2) * self.row;
        let mut acc = Block::default();
        let tiles = Tiles::begin(c.kind, self.level);
        for g in 0..c.groups {
            let x = &self.pairs[g * group_pairs..(g + 1) * group_pairs];
            for b in block_range.clone() {
                let rows = BLOCK.min(c.cog - b * BLOCK);
                let co0 = g * c.cog + b * BLOCK;
                let w = &c.w[(g * blocks + b) * wblock..(g * blocks + b + 1) * wblock];
                let mut t = frames.start;
                while t < frames.end {
                    let n = BLOCK.min(frames.end - t);
                    // Every frame a block reads, slack included, is in its rows.
                    assert!(t + BLOCK + (c.kernel - 1) * c.dilation <= self.row);
                    tiles.block(c, x, w, self.row, t, &mut acc);
                    for (r, sums) in acc.0.iter().take(rows).enumerate() {
                        let co = co0 + r;
                        let bias = self.bias.map_or(0.0, |b| b[co]);
                        // SAFETY: co < c_out and t + n ≤ t_out; frames t..t + n
                        // of this block's rows belong to this unit alone.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                self.out.ptr().add(co * self.t_out + t),
                                n,
                            )
                        };
                        for (d, s) in dst.iter_mut().zip(sums) {
                            *d = s + bias;
                        }
                    }
                    t += n;
                }
            }
        }
    }
}

/// One block's f32 sums `[32 channels][32 frames]`.
#[cfg(target_arch = "x86_64")]
type Block = super::amx::Acc<f32>;

/// One block's f32 sums `[32 channels][32 frames]`.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Default)]
struct Block([[f32; BLOCK]; BLOCK]);

/// The tile state of one unit: configured on entry, released on drop.
struct Tiles {
    kind: Kind,
    /// The emulation's SIMD level.
    level: SimdLevel,
}

impl Tiles {
    fn begin(kind: Kind, level: SimdLevel) -> Self {
        #[cfg(target_arch = "x86_64")]
        if kind == Kind::Amx {
            // SAFETY: `amx` is set only where AMX-BF16 was detected with the
            // OS's permission for the tile state (`cpu::features`).
            unsafe { super::amx::begin() };
        }
        Self { kind, level }
    }

    /// `acc[m][f] = Σ_{kc, tap, i} w[m, 32·kc + i, tap] · x[32·kc + i, t + f + tap·d]`.
    #[inline(always)]
    fn block(&self, c: &Bf16Conv, x: &[u32], w: &[u16], row: usize, t: usize, acc: &mut Block) {
        assert!(
            x.len() >= c.kcs * (BLOCK / 2) * row && w.len() >= c.kcs * c.kernel * BLOCK * BLOCK
        );
        #[cfg(target_arch = "x86_64")]
        match self.kind {
            // SAFETY: tiles configured by `begin`; every tile row read lies
            // in `x` / `w` (asserted here and by the caller: t + 32 + (k − 1)·d ≤ row).
            Kind::Amx => return unsafe { amx_block(c, x, w, row, t, acc) },
            // SAFETY: AVX512-BF16 detected (`kind_at`); reads as for the tiles.
            Kind::Dot => return unsafe { dot_block(c, x, w, row, t, acc) },
            Kind::Emulated => {}
        }
        dispatch(
            self.level,
            Emulated {
                c,
                x,
                w,
                row,
                t,
                acc,
            },
        );
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.kind == Kind::Amx {
            // SAFETY: as in `begin`; returns the tile state to init.
            unsafe { super::amx::end() };
        }
    }
}

/// The tile steps of one block.
///
/// # Safety
/// After [`super::amx::begin`] on an AMX-BF16 CPU; `x` holds `kcs · 16`
/// rows of `row` pairs, `w` `kcs · kernel` A-tile pairs, and
/// `t + 32 + (kernel − 1)·dilation ≤ row`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn amx_block(c: &Bf16Conv, x: &[u32], w: &[u16], row: usize, t: usize, acc: &mut Block) {
    use super::amx;
    amx::zero();
    let (xp, mut wp) = (x.as_ptr(), w.as_ptr());
    let stride = 4 * row;
    for kc in 0..c.kcs {
        let xc = xp.wrapping_add(kc * (BLOCK / 2) * row + t);
        for tap in 0..c.kernel {
            let b0 = xc.wrapping_add(tap * c.dilation) as *const u16;
            amx::step_bf16(
                wp,
                wp.wrapping_add(16 * BLOCK),
                2 * BLOCK,
                b0,
                b0.wrapping_add(32),
                stride,
            );
            wp = wp.wrapping_add(BLOCK * BLOCK);
        }
    }
    amx::store(acc);
}

/// [`amx_block`] with `vdpbf16ps`: eight channel rows × 32 frames at a
/// time, each instruction 16 frames × one channel pair (its own rounding
/// order inside a pair, as the tiles have theirs).
///
/// # Safety
/// Needs AVX-512F + AVX512-BF16; reads as [`amx_block`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn dot_block(c: &Bf16Conv, x: &[u32], w: &[u16], row: usize, t: usize, acc: &mut Block) {
    use std::arch::x86_64::*;
    const R: usize = 8;
    assert!(t + BLOCK + (c.kernel - 1) * c.dilation <= row);
    for m0 in (0..BLOCK).step_by(R) {
        let mut a = [[_mm512_setzero_ps(); 2]; R];
        for kc in 0..c.kcs {
            for tap in 0..c.kernel {
                let wt = w.as_ptr().add((kc * c.kernel + tap) * BLOCK * BLOCK);
                for kr in 0..BLOCK / 2 {
                    let xr = x
                        .as_ptr()
                        .add((kc * BLOCK / 2 + kr) * row + t + tap * c.dilation);
                    let x0: __m512bh = std::mem::transmute(_mm512_loadu_si512(xr as *const _));
                    let x1: __m512bh =
                        std::mem::transmute(_mm512_loadu_si512(xr.add(16) as *const _));
                    // Constant-bound loop: the accumulators stay in registers.
                    #[allow(clippy::needless_range_loop)]
                    for r in 0..R {
                        let pair =
                            (wt.add((m0 + r) * BLOCK + 2 * kr) as *const i32).read_unaligned();
                        let wv: __m512bh = std::mem::transmute(_mm512_set1_epi32(pair));
                        a[r][0] = _mm512_dpbf16_ps(a[r][0], x0, wv);
                        a[r][1] = _mm512_dpbf16_ps(a[r][1], x1, wv);
                    }
                }
            }
        }
        for (r, ar) in a.iter().enumerate() {
            let dst = acc.0[m0 + r].as_mut_ptr();
            _mm512_storeu_ps(dst, ar[0]);
            _mm512_storeu_ps(dst.add(16), ar[1]);
        }
    }
}

/// [`amx_block`]'s sums in portable code: exact products added one by one
/// in (ci block, tap, channel) order. The tiles' own summation order inside
/// a step is the hardware's (it differs in the last bits), so the two routes
/// agree to f32 rounding, not bit for bit. Compiled per SIMD level (the
/// frame loop vectorises; products are exact, so every level's bits agree).
struct Emulated<'a> {
    c: &'a Bf16Conv,
    x: &'a [u32],
    w: &'a [u16],
    row: usize,
    t: usize,
    acc: &'a mut Block,
}

impl SimdFn for Emulated<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let Emulated {
            c,
            x,
            w,
            row,
            t,
            acc,
        } = self;
        emulated_block(c, x, w, row, t, acc);
    }
}

#[inline(always)]
fn emulated_block(c: &Bf16Conv, x: &[u32], w: &[u16], row: usize, t: usize, acc: &mut Block) {
    for a in acc.0.iter_mut() {
        a.fill(0.0);
    }
    for kc in 0..c.kcs {
        for tap in 0..c.kernel {
            let a = &w[(kc * c.kernel + tap) * BLOCK * BLOCK..][..BLOCK * BLOCK];
            for kr in 0..BLOCK / 2 {
                let xr = &x[(kc * BLOCK / 2 + kr) * row + t + tap * c.dilation..][..BLOCK];
                for (m, sums) in acc.0.iter_mut().enumerate() {
                    let (w0, w1) = (
                        from_bf16(a[m * BLOCK + 2 * kr]),
                        from_bf16(a[m * BLOCK + 2 * kr + 1]),
                    );
                    for (s, p) in sums.iter_mut().zip(xr) {
                        *s += w0 * from_bf16(*p as u16);
                        *s += w1 * from_bf16((*p >> 16) as u16);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv1d::{conv1d_reference, Conv1d, Conv1dRoute, Conv1dWorkspace, PadMode};
    use crate::kernels::cpu::available_levels;
    use crate::kernels::test_rng::centered as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    fn run(conv: &Conv1d, pool: &LanePool, x: &[f32], t: usize) -> Vec<f32> {
        let p = conv.params();
        let mut out = vec![f32::NAN; p.c_out * p.out_len(t).unwrap()];
        let mut ws = Conv1dWorkspace::new();
        conv.forward(pool, x, t, &mut out, &mut ws).unwrap();
        out
    }

    #[test]
    fn rounding_is_nearest_even() {
        for (x, want) in [
            (1.0f32, 0x3f80u16),
            (f32::from_bits(0x3f80_8000), 0x3f80), // tie, even stays
            (f32::from_bits(0x3f81_8000), 0x3f82), // tie, odd rounds up
            (f32::from_bits(0x3f80_8001), 0x3f81),
            (-2.5, 0xc020),
            (f32::INFINITY, 0x7f80),
        ] {
            assert_eq!(to_bf16(x), want, "{x}");
        }
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(0x3fc0), 1.5);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]

        #[test]
        fn matches_reference_on_rounded_values(
            cig in 2usize..40, cog in 1usize..40, k in 1usize..5, s in 1usize..4,
            d in 1usize..3, g in 1usize..3, pad in 0usize..4, t in 1usize..150,
            bias in any::<bool>(), seed in any::<u64>(),
        ) {
            let p = Conv1dParams::new(cig * g, cog * g, k)
                .stride(s)
                .dilation(d)
                .groups(g)
                .padding(pad, pad)
                .pad_mode(PadMode::Zeros);
            let t = t.max(p.span());
            let w = rnd_vec(seed, p.weight_len());
            let b = rnd_vec(seed ^ 5, p.c_out);
            let x = rnd_vec(seed ^ 11, p.c_in * t);
            let bias = bias.then_some(&b[..]);
            let want = conv1d_reference(&p, &round_bf16(&w), bias, &round_bf16(&x), t).unwrap();
            let aw: Vec<f32> = w.iter().map(|v| v.abs()).collect();
            let ax: Vec<f32> = x.iter().map(|v| v.abs()).collect();
            let mag = conv1d_reference(&p, &aw, None, &ax, t).unwrap();
            let pool = LanePool::new(2).unwrap();
            let mut conv = Conv1d::with_route(p, &w, bias, Conv1dRoute::Bf16).unwrap();
            // Every level, and the AVX-512 one without tiles (`vdpbf16ps`).
            for (level, amx) in available_levels().into_iter().map(|l| (l, true)).chain([(SimdLevel::Avx512, false)]) {
                conv.set_level(level);
                conv.set_bf16_amx(amx);
                let got = run(&conv, &pool, &x, t);
                for i in 0..want.len() {
                    let bound = 1e-5 * mag[i] + 1e-6;
                    prop_assert!((got[i] - want[i]).abs() <= bound,
                        "{:?} {:?} amx {} element {}: {} vs {}", p, level, amx, i, got[i], want[i]);
                }
            }
        }
    }

    /// Shapes the tiles meet in Mimi (64 → 32 residual convs, strided
    /// downsampling, transposed-conv phases) plus partial blocks and groups.
    fn model_shapes() -> Vec<(Conv1dParams, usize)> {
        vec![
            (Conv1dParams::new(64, 32, 3).dilation(2), 390),
            (Conv1dParams::new(32, 64, 1), 200),
            (Conv1dParams::new(64, 128, 8).stride(4), 388),
            (Conv1dParams::new(40, 50, 3).groups(2).padding(2, 0), 77),
            (Conv1dParams::new(96, 33, 2).padding(1, 0), 41),
        ]
    }

    #[test]
    fn tiles_and_emulation_track_the_reference_at_model_sizes() {
        let pool = LanePool::new(2).unwrap();
        for (i, (p, t)) in model_shapes().into_iter().enumerate() {
            let w = rnd_vec(i as u64, p.weight_len());
            let b = rnd_vec(i as u64 + 50, p.c_out);
            let x = rnd_vec(i as u64 + 100, p.c_in * t);
            let want = conv1d_reference(&p, &round_bf16(&w), Some(&b), &round_bf16(&x), t).unwrap();
            let mut conv = Conv1d::with_route(p, &w, Some(&b), Conv1dRoute::Bf16).unwrap();
            assert_eq!(conv.uses_bf16_tiles(), features().amx_bf16);
            let tiles = run(&conv, &pool, &x, t);
            conv.set_bf16_amx(false);
            assert!(!conv.uses_bf16_tiles());
            let dot = run(&conv, &pool, &x, t);
            conv.set_bf16_amx(true);
            conv.set_level(SimdLevel::Scalar);
            assert!(!conv.uses_bf16_tiles());
            let emulated = run(&conv, &pool, &x, t);
            // The emulation's vector routes: exact products, the same bits
            // (the AVX-512 level is `vdpbf16ps` where the CPU has AVX512-BF16).
            for level in available_levels() {
                conv.set_level(level);
                let dot = level == SimdLevel::Avx512 && features().avx512_bf16;
                if !conv.uses_bf16_tiles() && !dot {
                    let got = run(&conv, &pool, &x, t);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&emulated), "{p:?} {level:?}");
                }
            }
            for got in [&tiles, &dot, &emulated] {
                let err = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(err < 2e-5, "{p:?}: max error {err}");
            }
            // Rounding to bf16 matters: the f32 conv is measurably elsewhere.
            let exact = conv1d_reference(&p, &w, Some(&b), &x, t).unwrap();
            let off = tiles
                .iter()
                .zip(&exact)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(off > 1e-4, "{p:?}: bf16 route equals the f32 conv ({off})");
        }
    }

    #[test]
    fn bit_identical_across_budgets() {
        for (i, (p, t)) in model_shapes().into_iter().enumerate() {
            let w = rnd_vec(i as u64, p.weight_len());
            let x = rnd_vec(i as u64 + 100, p.c_in * t);
            let conv = Conv1d::with_route(p, &w, None, Conv1dRoute::Bf16).unwrap();
            let one = run(&conv, &LanePool::new(1).unwrap(), &x, t);
            for lanes in [2, 3] {
                let got = run(&conv, &LanePool::new(lanes).unwrap(), &x, t);
                assert!(
                    one.iter()
                        .zip(&got)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{p:?} at {lanes} lanes"
                );
            }
        }
    }
}
