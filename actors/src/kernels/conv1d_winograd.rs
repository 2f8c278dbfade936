//! Winograd F(6,3) for the AVX2 int8 dense conv (stride 1, one group).
//!
//! Taps are taken three at a time (a last group of two zero-padded, a last
//! single tap run directly); per group and tile of six outputs spaced by
//! the dilation, eight transformed inputs `Bᵀx` meet eight transformed
//! weights `G·w`, and `Aᵀ` of their products gives `360·Σ x·w`: 8
//! multiplies per 6 outputs × 3 taps instead of 18 — 4/9 of the direct
//! route's `vpmaddwd`s on every tap group (F(4,3) took 1/2).
//!
//! Exact in wrapping i32 arithmetic, so the route returns the direct
//! route's bits: the interpolation points are 0, ±1, ±2, ±½ and ∞, each
//! slot scaled so `Bᵀ`, `G` and `Aᵀ` are integers; the transformed weights
//! fit i16 (`|G·w| ≤ 90·128`), the transformed u8 inputs too (`|Bᵀx| ≤
//! 50·255`), and the ×360 comes off by an exact division (shift by 3,
//! multiply by 45⁻¹ mod 2³², sign-extend 29 bits), which holds while the
//! true sum fits 29 bits — [`eligible`] bounds `c_in · k` so that it
//! always does.
//!
//! Data layouts (all i16 lanes hold 4 consecutive input channels per frame,
//! the pairs `vpmaddwd` sums):
//! - phases `[cb][r0][c][q][4]` u8: input frame `d·(6q + c) + r0` (`r0` the
//!   dilation phase, `c` the residue mod 6), anything past the input;
//! - transformed, per unit of [`UNIT_Q`] tiles, `[slot][r0][cb][ρ][q][4]`
//!   i16: group `g` (at most four) reads residue `3g mod 6` from phase tile
//!   `q + 3g div 6`, its row shifted so every group reads tile `q`. One
//!   GEMM call's reads (every channel block and group of one slot and
//!   phase) are one contiguous, cache-line aligned run: strided rows missed
//!   L1 on every load (the weight stream evicts them), and split lines cost
//!   the tile ~15% more; then, for a tail tap, the unit's input frames it
//!   reads, widened, `[r0][j][cb][q][4]` i16 (output `6q + j` of phase
//!   `r0`), so its reads are one run too;
//! - weights `[slot][co block][cb][group][MR][4]` i16.

use super::conv1d::Conv1dParams;

/// Transformed values per tile.
pub(super) const SLOTS: usize = 8;
/// Outputs per tile.
pub(super) const OUTS: usize = 6;
/// Taps per group.
pub(super) const TAPS: usize = 3;
/// Most dilation the route takes (its output rows hold `6·d·UNIT_Q` frames).
pub(super) const MAX_DILATION: usize = 8;
/// Most taps the route takes: four groups, one transformed row each.
pub(super) const MAX_KERNEL: usize = 13;
/// Most `c_in · k` terms: keeps `|Σ x·w| < 2²⁸` (255·128·8192 = 2²⁸ − …), so
/// the exact division recovers every sum.
pub(super) const MAX_TERMS: usize = 8192;
/// Tiles per GEMM unit (two 8-tile vectors).
pub(super) const UNIT_Q: usize = 16;
/// Output frames a transform batch aims for per lane (bounds the
/// transformed buffer; a batch ends in a barrier, so more lanes take more).
const BATCH_FRAMES: usize = 1024;
/// Units a batch holds per lane at least, so each lane's units are its own
/// (transformed and multiplied by the lane, no barrier between; see
/// [`Geometry::new`]).
pub(super) const UNITS_PER_LANE: usize = 4;
/// Most lanes a batch grows for ([`Geometry::new`]).
pub(super) const MAX_BATCH_LANES: usize = 4;

/// Inputs per tile (`OUTS + TAPS − 1`).
const INS: usize = OUTS + TAPS - 1;
/// `Bᵀ` (rows: slots; columns: inputs `x[q·6·d + u·d]`), rows scaled
/// (by 4, or 2 for the ±½ points) to integers: what [`bt_rows`] computes
/// by shared sums (the tests hold it to this).
#[cfg(test)]
const BT: [[i32; INS]; SLOTS] = [
    [4, 0, -21, 0, 21, 0, -4, 0],
    [0, 4, 4, -17, -17, 4, 4, 0],
    [0, -4, 4, 17, -17, -4, 4, 0],
    [0, 2, 1, -10, -5, 8, 4, 0],
    [0, -2, 1, 10, -5, -8, 4, 0],
    [0, 4, 8, -5, -10, 1, 2, 0],
    [0, -4, 8, 5, -10, -1, 2, 0],
    [0, -4, 0, 21, 0, -21, 0, 4],
];
/// `G` (rows: slots; columns: taps), rows scaled to integers so that
/// `Aᵀ` (in [`untransform`]) is one too at the overall scale [`SCALE`].
pub(super) const G: [[i32; TAPS]; SLOTS] = [
    [90, 0, 0],
    [-20, -20, -20],
    [-20, 20, -20],
    [1, 2, 4],
    [1, -2, 4],
    [4, 2, 1],
    [4, -2, 1],
    [0, 0, 90],
];
/// What the transforms multiply every sum by (2³·45; [`unscale`] divides it out).
#[cfg(test)]
const SCALE: i32 = 360;

/// Whether a dense conv with these parameters runs on this route.
pub(super) fn eligible(p: &Conv1dParams) -> bool {
    p.groups == 1
        && p.stride == 1
        && p.c_in > 1
        && p.kernel >= TAPS
        && p.dilation <= MAX_DILATION
        && p.kernel <= MAX_KERNEL
        && p.c_in * p.kernel <= MAX_TERMS
}

/// Winograd tap groups of a `k`-tap kernel: whole groups of three, and a
/// last group of two zero-padded; a last single tap is a [`tail`] instead.
pub(super) fn groups(k: usize) -> usize {
    if tail(k) {
        k / TAPS
    } else {
        k.div_ceil(TAPS)
    }
}

/// Whether the last tap runs directly (`k ≡ 1 mod 3`): six multiplies per
/// six outputs instead of a zero-padded group's eight.
pub(super) fn tail(k: usize) -> bool {
    k > TAPS && k % TAPS == 1
}

/// Phase tiles the transformed row of group `g` is shifted by.
fn row_shift(g: usize) -> usize {
    TAPS * g / OUTS
}

/// Packed weight bytes for `c_out` outputs in blocks of `mr`, `cbs` channel
/// blocks, `k` taps: the groups' slots, then the tail tap's weights.
pub(super) fn weights_len(c_out: usize, mr: usize, cbs: usize, k: usize) -> usize {
    tail_offset(c_out, mr, cbs, k)
        + if tail(k) {
            c_out.div_ceil(mr) * cbs * mr * 4 * 2
        } else {
            0
        }
}

/// Byte offset of the tail tap's weights (`[co block][cb][mr][4]` i16).
pub(super) fn tail_offset(c_out: usize, mr: usize, cbs: usize, k: usize) -> usize {
    c_out.div_ceil(mr) * SLOTS * cbs * groups(k) * mr * 4 * 2
}

/// Index (in i16 units) of the tail weight of `(output o, input ci)`.
fn tail_index(o: usize, ci: usize, mr: usize, c_out: usize, cbs: usize, k: usize) -> usize {
    let (b, r) = (o / mr, o % mr);
    tail_offset(c_out, mr, cbs, k) / 2 + ((b * cbs + ci / 4) * mr + r) * 4 + ci % 4
}

/// Index (in i16 units) of `(output o, input ci, group g, slot)` in the
/// packing of `blocks` output blocks: slot-major, so a unit's blocks stream
/// one slot's weights in order.
#[allow(clippy::too_many_arguments)]
fn weight_index(
    o: usize,
    ci: usize,
    g: usize,
    slot: usize,
    mr: usize,
    blocks: usize,
    cbs: usize,
    k: usize,
) -> usize {
    let (b, r) = (o / mr, o % mr);
    ((((slot * blocks + b) * cbs + ci / 4) * groups(k) + g) * mr + r) * 4 + ci % 4
}

/// Pack shifted i8 weights `w: [c_out][c_in][k]` as little-endian i16
/// `G·w`, `[slot][co block][ci/4][tap group][mr][4]`.
pub(super) fn pack_weights(p: &Conv1dParams, mr: usize, cbs: usize, w: &[i8]) -> Vec<i8> {
    let (cin, k) = (p.c_in, p.kernel);
    let mut out = vec![0i8; weights_len(p.c_out, mr, cbs, k)];
    for o in 0..p.c_out {
        for ci in 0..cin {
            let row = &w[(o * cin + ci) * k..][..k];
            if tail(k) {
                let i = 2 * tail_index(o, ci, mr, p.c_out, cbs, k);
                let [lo, hi] = (row[k - 1] as i16).to_le_bytes();
                out[i] = lo as i8;
                out[i + 1] = hi as i8;
            }
            for g in 0..groups(k) {
                // Taps past the kernel (a padded group) are zero; a tail is not a group's.
                let tap = |j: usize| {
                    let t = TAPS * g + j;
                    if t < k && !(tail(k) && t == k - 1) {
                        row[t] as i32
                    } else {
                        0
                    }
                };
                for (slot, coef) in G.iter().enumerate() {
                    let u = (0..TAPS).map(|j| coef[j] * tap(j)).sum::<i32>();
                    let i = 2 * weight_index(o, ci, g, slot, mr, p.c_out.div_ceil(mr), cbs, k);
                    let [lo, hi] = (u as i16).to_le_bytes();
                    out[i] = lo as i8;
                    out[i + 1] = hi as i8;
                }
            }
        }
    }
    out
}

/// The shifted weight `(o, ci, tap)` back from a packing (rows 0, 1 and 7
/// of `G` invert it): re-packing for another route.
#[allow(clippy::too_many_arguments)]
pub(super) fn weight_of(
    packed: &[i8],
    o: usize,
    ci: usize,
    tap: usize,
    mr: usize,
    c_out: usize,
    cbs: usize,
    k: usize,
) -> i32 {
    if tail(k) && tap == k - 1 {
        let i = 2 * tail_index(o, ci, mr, c_out, cbs, k);
        return i16::from_le_bytes([packed[i] as u8, packed[i + 1] as u8]) as i32;
    }
    let g = tap / TAPS;
    let u = |slot: usize| {
        let i = 2 * weight_index(o, ci, g, slot, mr, c_out.div_ceil(mr), cbs, k);
        i16::from_le_bytes([packed[i] as u8, packed[i + 1] as u8]) as i32
    };
    let (w0, w2) = (u(0) / 90, u(SLOTS - 1) / 90);
    match tap % TAPS {
        0 => w0,
        1 => -u(1) / 20 - w0 - w2,
        _ => w2,
    }
}

/// 45⁻¹ mod 2³² ([`SCALE`] is 2³·45).
const INV45: i32 = 0xA4FA_4FA5u32 as i32;

/// `Σ x·w` from the transformed-domain sum `360·Σ x·w` (wrapped), exactly.
#[inline(always)]
pub(super) fn unscale(v: i32) -> i32 {
    // The low 29 bits of (v >> 3)·45⁻¹ are those of Σ x·w.
    (v >> 3).wrapping_mul(INV45).wrapping_shl(3) >> 3
}

/// How one conv call's tiles are laid out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// Dilation (phases per input).
    pub d: usize,
    /// Channel blocks of 4.
    pub cbs: usize,
    /// Tap groups, each reading its own residue (`3g mod 6`) and row.
    pub rhos: usize,
    /// Tiles per phase covering every output (whole units).
    pub tiles: usize,
    /// Units per transform batch.
    pub batch_units: usize,
    /// Tiles per phase of the phase buffer.
    pub pq: usize,
    /// Taps (a tail tap's rows follow the slots in a unit).
    pub k: usize,
}

impl Geometry {
    /// The layout for `t_out` outputs of a conv with parameters `p` on `lanes` threads.
    pub fn new(p: &Conv1dParams, t_out: usize, lanes: usize) -> Self {
        let d = p.dilation;
        let cbs = p.c_in.div_ceil(4);
        let unit_frames = OUTS * d * UNIT_Q;
        let units = t_out.div_ceil(unit_frames).max(1);
        let tiles = units * UNIT_Q;
        let lanes = lanes.clamp(1, MAX_BATCH_LANES);
        let batch_units = (BATCH_FRAMES * lanes / unit_frames)
            .max(UNITS_PER_LANE * lanes)
            .clamp(1, units);
        // A unit's transform reads a phase tile past its 16 and its rows'
        // shift (at most 1); the tail tap reads whole vectors from tile
        // q + (k + 4) div 6.
        let pq = tiles + 4 + (p.kernel + 4) / OUTS + UNIT_Q;
        Self {
            d,
            cbs,
            rhos: groups(p.kernel),
            tiles,
            batch_units,
            pq,
            k: p.kernel,
        }
    }

    /// Bytes of the phase buffer.
    pub fn phase_len(&self) -> usize {
        self.cbs * self.d * OUTS * self.pq * 4
    }

    /// Units (of [`UNIT_Q`] tiles) per phase.
    pub fn units(&self) -> usize {
        self.tiles / UNIT_Q
    }

    /// i16 values of one transformed unit (the tail tap's rows too).
    pub fn unit_len(&self) -> usize {
        self.tail_at()
            + if tail(self.k) {
                self.d * OUTS * self.cbs * ROW
            } else {
                0
            }
    }

    /// Offset (i16) of the tail tap's rows in a transformed unit.
    fn tail_at(&self) -> usize {
        SLOTS * self.d * self.row_len()
    }

    /// Offset (i16) in a transformed unit of the tail tap's row for output
    /// `j` of each tile of phase `r0` (channel blocks [`ROW`] values apart).
    pub fn tail_row_at(&self, r0: usize, j: usize) -> usize {
        self.tail_at() + (r0 * OUTS + j) * self.cbs * ROW
    }

    /// i16 values one GEMM call reads: every channel block and group of
    /// one slot and phase.
    pub fn row_len(&self) -> usize {
        self.cbs * self.rhos * ROW
    }

    /// Offset (i16) of slot `slot`, phase `r0` in a transformed unit.
    pub fn row_at(&self, slot: usize, r0: usize) -> usize {
        (slot * self.d + r0) * self.row_len()
    }

    /// i16 values of the transformed buffer (one batch).
    pub fn transformed_len(&self) -> usize {
        self.batch_units * self.unit_len()
    }

    /// Byte offset in the phase buffer of phase `r0`, residue `c`, tile `q`
    /// (channel block 0; blocks are [`Geometry::phase_len`] / cbs apart).
    pub fn phase_at(&self, r0: usize, c: usize, q: usize) -> usize {
        ((r0 * OUTS + c) * self.pq + q) * 4
    }
}

/// Fill channel block `cb`'s phases (`dst`, `phase_len / cbs` bytes) from
/// the padded input `xpad: [c_in][tp]`.
pub(super) fn pack_phases(
    geo: &Geometry,
    xpad: &[u8],
    c_in: usize,
    tp: usize,
    cb: usize,
    dst: &mut [u8],
) {
    let (d, pq) = (geo.d, geo.pq);
    let nch = 4.min(c_in - 4 * cb);
    // Bytes not written here (frames past the input, a partial block's
    // missing channels) keep whatever an earlier call left: the first only
    // reach outputs past `t_out` (each output's transformed sum is exact
    // whatever its neighbours hold), the second meet zero weights.
    let rows: [&[u8]; 4] = std::array::from_fn(|j| {
        if j < nch {
            &xpad[(4 * cb + j) * tp..][..tp]
        } else {
            &[]
        }
    });
    // With dilation, every phase's first frames in whole blocks at once
    // (the same `m` range of every phase).
    let done = if nch == 4 && d > 1 {
        dilated_blocks(rows, d, pq, dst)
    } else {
        0
    };
    for r0 in 0..d.min(tp) {
        // Frames d·m + r0 of this phase; frame m goes to residue m mod 6, tile m div 6.
        let count = (tp - r0).div_ceil(d).min(OUTS * pq);
        let base = &mut dst[r0 * OUTS * pq * 4..][..OUTS * pq * 4];
        let mut m = done.min(count);
        // Whole blocks of 24 frames (4 tiles): a 24-frame × 4-channel
        // interleave, then each residue's 4 tiles as one 16-byte row; the
        // channels' frames are loaded in place (a copy first stalls its
        // loads on store forwarding).
        if nch == 4 && d == 1 {
            while m + BLOCK <= count {
                let src: [&[u8]; 4] = std::array::from_fn(|j| &rows[j][m..m + BLOCK]);
                let q = m / OUTS;
                for (c, r) in residue_rows(src).iter().enumerate() {
                    base[(c * pq + q) * 4..][..16].copy_from_slice(r);
                }
                m += BLOCK;
            }
        }
        for m in m..count {
            let at = ((m % OUTS) * pq + m / OUTS) * 4;
            for (j, row) in rows.iter().enumerate().take(nch) {
                base[at + j] = row[d * m + r0];
            }
        }
    }
}

/// Frames [`pack_phases`] moves at a time: 4 tiles.
const BLOCK: usize = 4 * OUTS;

/// Tiles per phase [`dilated_blocks`] moves at a time.
const DTILES: usize = 8;

/// With dilation `d`, the first whole blocks of `6·d·DTILES` input frames
/// of 4 channels `rows` into the phases `dst` (as [`pack_phases`] lays
/// them out); returns the frames per phase done. In a block, frame
/// `6d·t + e` is phase `e mod d`, residue `e div d`, tile `t`: the block's
/// frames are interleaved into 4-channel words in registers (contiguous
/// loads, not a byte gather at stride `d` per phase), then each of the
/// `6d` (phase, residue) pairs takes every `6d`-th word.
fn dilated_blocks(rows: [&[u8]; 4], d: usize, pq: usize, dst: &mut [u8]) -> usize {
    let span = OUTS * d * DTILES;
    let blocks = (rows[0].len() / span).min(pq / DTILES);
    let mut words = [0u32; OUTS * MAX_DILATION * DTILES];
    for b in 0..blocks {
        let f0 = b * span;
        for (i, w) in words[..span].chunks_exact_mut(16).enumerate() {
            let src: [&[u8; 16]; 4] = std::array::from_fn(|j| {
                rows[j][f0 + 16 * i..][..16]
                    .try_into()
                    .expect("a 16-byte piece")
            });
            interleave4(src, w.try_into().expect("16 words"));
        }
        for e in 0..OUTS * d {
            let (r0, c) = (e % d, e / d);
            let at = ((r0 * OUTS + c) * pq + b * DTILES) * 4;
            for (t, o) in dst[at..][..4 * DTILES].chunks_exact_mut(4).enumerate() {
                o.copy_from_slice(&words[e + OUTS * d * t].to_le_bytes());
            }
        }
    }
    blocks * DTILES * OUTS
}

/// Four channels' 16 frames as 16 words `[frame](channel bytes)`.
#[inline(always)]
fn interleave4(src: [&[u8; 16]; 4], out: &mut [u32; 16]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; 16-byte loads of 16-byte arrays and
    // 16-byte stores into the 64-byte `out`.
    unsafe {
        use std::arch::x86_64::*;
        let v: [__m128i; 4] = src.map(|r| _mm_loadu_si128(r.as_ptr().cast()));
        let (t0, t1) = (_mm_unpacklo_epi8(v[0], v[1]), _mm_unpackhi_epi8(v[0], v[1]));
        let (t2, t3) = (_mm_unpacklo_epi8(v[2], v[3]), _mm_unpackhi_epi8(v[2], v[3]));
        let u = [
            _mm_unpacklo_epi16(t0, t2),
            _mm_unpackhi_epi16(t0, t2),
            _mm_unpacklo_epi16(t1, t3),
            _mm_unpackhi_epi16(t1, t3),
        ];
        for (k, x) in u.iter().enumerate() {
            _mm_storeu_si128(out[4 * k..].as_mut_ptr().cast(), *x);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (f, o) in out.iter_mut().enumerate() {
        *o = u32::from_le_bytes([src[0][f], src[1][f], src[2][f], src[3][f]]);
    }
}

/// 24 frames of 4 channels (`src[j][f]`) → per residue `c`, its 4 tiles'
/// frames `6t + c` as `[tile][channel]` (`out[c][4t + j] = src[j][6t + c]`).
#[inline(always)]
fn residue_rows(src: [&[u8]; 4]) -> [[u8; 16]; OUTS] {
    let src: [&[u8]; 4] = src.map(|r| &r[..BLOCK]);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; unaligned 16- and 8-byte loads inside
    // the 24-byte rows, and 16-byte stores of 16-byte arrays.
    unsafe {
        use std::arch::x86_64::*;
        let lo: [__m128i; 4] = std::array::from_fn(|j| _mm_loadu_si128(src[j].as_ptr().cast()));
        let hi: [__m128i; 4] =
            std::array::from_fn(|j| _mm_loadl_epi64(src[j][16..].as_ptr().cast()));
        // Channel pairs, then 4-channel frames: u[k] = frames 4k..4k+4.
        let (t0, t1) = (
            _mm_unpacklo_epi8(lo[0], lo[1]),
            _mm_unpackhi_epi8(lo[0], lo[1]),
        );
        let (t2, t3) = (
            _mm_unpacklo_epi8(lo[2], lo[3]),
            _mm_unpackhi_epi8(lo[2], lo[3]),
        );
        let (h0, h2) = (
            _mm_unpacklo_epi8(hi[0], hi[1]),
            _mm_unpacklo_epi8(hi[2], hi[3]),
        );
        let u = [
            _mm_unpacklo_epi16(t0, t2),
            _mm_unpackhi_epi16(t0, t2),
            _mm_unpacklo_epi16(t1, t3),
            _mm_unpackhi_epi16(t1, t3),
            _mm_unpacklo_epi16(h0, h2),
            _mm_unpackhi_epi16(h0, h2),
        ]
        .map(|v| _mm_castsi128_ps(v));
        // Residues c and c + 1 (c even) take frames c, c + 1 of tiles 0–3:
        // word pairs gathered from two frame vectors, then split even/odd.
        let pair = |x: __m128, y: __m128| {
            [
                _mm_castps_si128(_mm_shuffle_ps::<0x88>(x, y)),
                _mm_castps_si128(_mm_shuffle_ps::<0xDD>(x, y)),
            ]
        };
        let [r0, r1] = pair(
            _mm_shuffle_ps::<0xE4>(u[0], u[1]),
            _mm_shuffle_ps::<0xE4>(u[3], u[4]),
        );
        let [r2, r3] = pair(
            _mm_shuffle_ps::<0x4E>(u[0], u[2]),
            _mm_shuffle_ps::<0x4E>(u[3], u[5]),
        );
        let [r4, r5] = pair(
            _mm_shuffle_ps::<0xE4>(u[1], u[2]),
            _mm_shuffle_ps::<0xE4>(u[4], u[5]),
        );
        let mut out = [[0u8; 16]; OUTS];
        for (d, v) in out.iter_mut().zip([r0, r1, r2, r3, r4, r5]) {
            _mm_storeu_si128(d.as_mut_ptr().cast(), v);
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::array::from_fn(|c| std::array::from_fn(|b| src[b % 4][c + OUTS * (b / 4)]))
}

/// Transform the unit of tiles `q..q + UNIT_Q` of every channel block,
/// group and phase into `dst` ([`Geometry::unit_len`] values) from the
/// phases of every channel block.
pub(super) fn transform_unit(geo: &Geometry, phases: &[u8], q: usize, dst: &mut [i16]) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::features().avx2_fma {
        // SAFETY: AVX2 was detected.
        return unsafe { transform_unit_avx2(geo, phases, q, dst) };
    }
    transform_unit_body(geo, phases, q, dst)
}

/// [`transform_unit`] compiled for AVX2 (its rows vectorize 16 lanes wide).
///
/// # Safety
/// Needs AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transform_unit_avx2(geo: &Geometry, phases: &[u8], q: usize, dst: &mut [i16]) {
    transform_unit_body(geo, phases, q, dst)
}

/// Values in one transformed row of a unit (its tiles × 4 channels).
pub(super) const ROW: usize = UNIT_Q * 4;

#[inline(always)]
fn transform_unit_body(geo: &Geometry, phases: &[u8], q: usize, dst: &mut [i16]) {
    let (d, pq, rhos) = (geo.d, geo.pq, geo.rhos);
    let plen = geo.phase_len() / geo.cbs;
    // The eight slots' regions (slot s holds rows (s, r0) for every phase).
    let stride = geo.row_at(1, 0);
    for cb in 0..geo.cbs {
        let src = &phases[cb * plen..][..plen];
        for g in 0..rhos {
            let rho = (TAPS * g) % OUTS;
            for r0 in 0..d {
                // x_u = phase (ρ + u) mod 6 from tile q + (ρ + u) div 6, past
                // the row's shift.
                let x: [&[u8]; INS] = std::array::from_fn(|u| {
                    let (c, dq) = ((rho + u) % OUTS, row_shift(g) + (rho + u) / OUTS);
                    &src[(r0 * OUTS + c) * pq * 4 + (q + dq) * 4..][..ROW]
                });
                let at = geo.row_at(0, r0) + (cb * rhos + g) * ROW;
                bt_rows(&x, dst, stride, at);
            }
        }
    }
    if tail(geo.k) {
        // Output d·(6i + j) + r0 of the tail tap reads phase (j + k − 1)
        // mod 6 at tile i + (j + k − 1) div 6; widened here once, not by
        // every output block's GEMM.
        for r0 in 0..d {
            for j in 0..OUTS {
                let e = j + geo.k - 1;
                let row = geo.tail_row_at(r0, j);
                for cb in 0..geo.cbs {
                    let src =
                        &phases[cb * plen + geo.phase_at(r0, e % OUTS, q + e / OUTS)..][..ROW];
                    for (o, &x) in dst[row + cb * ROW..][..ROW].iter_mut().zip(src) {
                        *o = x as i16;
                    }
                }
            }
        }
    }
}

/// The bytes of an i16 slice (for the byte-addressed tiles).
pub(super) fn bytes_of(v: &[i16]) -> &[u8] {
    // SAFETY: i16 has no padding and u8 alignment is 1; same memory, twice the length.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// `Bᵀx` of one row: `out[s][at + i] = Σ_u Bᵀ[s][u]·x[u][i]` (i16; within
/// ±50·255), all eight slots in one pass over the inputs (`Bᵀ`'s shared
/// sums, and the loop vectorizes).
#[inline(always)]
fn bt_rows(x: &[&[u8]; INS], out: &mut [i16], stride: usize, at: usize) {
    let x: [&[u8]; INS] = std::array::from_fn(|u| &x[u][..ROW]);
    // One slot row after another, `stride` apart: a single base pointer
    // (eight output slices and eight inputs spill the loop's registers).
    let out = &mut out[at..][..(SLOTS - 1) * stride + ROW];
    for h in (0..ROW).step_by(16) {
        let mut r = [[0i16; 16]; SLOTS];
        for i in 0..16 {
            let v: [i16; INS] = std::array::from_fn(|u| x[u][h + i] as i16);
            // Rows 1–6 pair up as p ± q: the even inputs' sum and the odd ones'.
            let (e1, d1) = (4 * (v[2] + v[6]) - 17 * v[4], 4 * (v[1] + v[5]) - 17 * v[3]);
            let (e3, d3) = (v[2] + 4 * v[6] - 5 * v[4], 2 * v[1] + 8 * v[5] - 10 * v[3]);
            let (e5, d5) = (8 * v[2] + 2 * v[6] - 10 * v[4], 4 * v[1] + v[5] - 5 * v[3]);
            r[0][i] = 4 * (v[0] - v[6]) + 21 * (v[4] - v[2]);
            r[1][i] = e1 + d1;
            r[2][i] = e1 - d1;
            r[3][i] = e3 + d3;
            r[4][i] = e3 - d3;
            r[5][i] = e5 + d5;
            r[6][i] = e5 - d5;
            r[7][i] = 4 * (v[7] - v[1]) + 21 * (v[3] - v[5]);
        }
        for (s, rs) in r.iter().enumerate() {
            out[s * stride + h..][..16].copy_from_slice(rs);
        }
    }
}

/// Output transform of tile sums `acc[slot][i]` (`N` tiles of one row and
/// phase `r0`) into frames `d·(6i + j) + r0` of `row`, unscaled, plus a tail
/// tap's direct sums `tail[j][i]` where the kernel has one.
pub(super) fn untransform<const N: usize>(
    acc: &[&[i32; N]; SLOTS],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::features().avx2_fma {
        if d == 1 && N.is_multiple_of(8) {
            // SAFETY: AVX2 was detected.
            return unsafe { untransform_d1_avx2(acc, tail, row) };
        }
        // SAFETY: AVX2 was detected.
        return unsafe { untransform_avx2(acc, tail, d, r0, row) };
    }
    untransform_body(acc, tail, d, r0, row)
}

/// [`untransform`] without dilation, 8 tiles a step: the six outputs of
/// each tile gathered in registers (a 4 × 8 and a 2 × 8 transpose) and
/// stored as a 4-word and a 2-word vector (the lane-wise body scatters them
/// one `i32` at a time).
///
/// # Safety
/// Needs AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn untransform_d1_avx2<const N: usize>(
    m: &[&[i32; N]; SLOTS],
    tail: Option<[&[i32; N]; OUTS]>,
    row: &mut [i32],
) {
    use std::arch::x86_64::*;
    let row = &mut row[..OUTS * N];
    let inv45 = _mm256_set1_epi32(INV45);
    // `unscale`, lane-wise.
    let unscale = |v: __m256i| {
        _mm256_srai_epi32::<3>(_mm256_slli_epi32::<3>(_mm256_mullo_epi32(
            _mm256_srai_epi32::<3>(v),
            inv45,
        )))
    };
    let add = |a, b| _mm256_add_epi32(a, b);
    let sub = |a, b| _mm256_sub_epi32(a, b);
    for i in (0..N).step_by(8) {
        // SAFETY: i + 8 ≤ N, within every [i32; N]; the stores within `row` (6N).
        let ld = |v: &[i32; N]| _mm256_loadu_si256(v[i..].as_ptr().cast());
        let s: [__m256i; SLOTS] = std::array::from_fn(|k| ld(m[k]));
        let (a, b) = (add(s[1], s[2]), sub(s[1], s[2]));
        let (c, e) = (add(s[3], s[4]), sub(s[3], s[4]));
        let (f, h) = (add(s[5], s[6]), sub(s[5], s[6]));
        let mut y = [
            unscale(add(add(s[0], a), add(c, _mm256_slli_epi32::<5>(f)))),
            unscale(add(
                b,
                add(_mm256_slli_epi32::<1>(e), _mm256_slli_epi32::<4>(h)),
            )),
            unscale(add(
                a,
                add(_mm256_slli_epi32::<2>(c), _mm256_slli_epi32::<3>(f)),
            )),
            unscale(add(
                b,
                add(_mm256_slli_epi32::<3>(e), _mm256_slli_epi32::<2>(h)),
            )),
            unscale(add(
                a,
                add(_mm256_slli_epi32::<4>(c), _mm256_slli_epi32::<1>(f)),
            )),
            unscale(add(add(b, _mm256_slli_epi32::<5>(e)), add(h, s[7]))),
        ];
        if let Some(t) = tail {
            for (yj, tj) in y.iter_mut().zip(t) {
                *yj = add(*yj, ld(tj));
            }
        }
        // Outputs 0–3 of each tile: pairs, then quads (tile l | tile l + 4
        // per 128-bit lane); outputs 4–5: pairs.
        let (t0, t1) = (
            _mm256_unpacklo_epi32(y[0], y[1]),
            _mm256_unpackhi_epi32(y[0], y[1]),
        );
        let (t2, t3) = (
            _mm256_unpacklo_epi32(y[2], y[3]),
            _mm256_unpackhi_epi32(y[2], y[3]),
        );
        let u = [
            _mm256_unpacklo_epi64(t0, t2),
            _mm256_unpackhi_epi64(t0, t2),
            _mm256_unpacklo_epi64(t1, t3),
            _mm256_unpackhi_epi64(t1, t3),
        ];
        let p = [
            _mm256_unpacklo_epi32(y[4], y[5]),
            _mm256_unpackhi_epi32(y[4], y[5]),
        ];
        let dst = &mut row[OUTS * i..][..OUTS * 8];
        for l in 0..8 {
            // Tile l: quad u[l % 4] in lane l / 4; its pair p[(l / 2) % 2],
            // lane l / 4, half l % 2.
            let (quad, pair) = if l < 4 {
                (
                    _mm256_castsi256_si128(u[l]),
                    _mm256_castsi256_si128(p[(l / 2) % 2]),
                )
            } else {
                (
                    _mm256_extracti128_si256::<1>(u[l - 4]),
                    _mm256_extracti128_si256::<1>(p[(l / 2) % 2]),
                )
            };
            let pair = if l % 2 == 0 {
                pair
            } else {
                _mm_unpackhi_epi64(pair, pair)
            };
            let o = dst[OUTS * l..].as_mut_ptr();
            _mm_storeu_si128(o.cast(), quad);
            _mm_storel_epi64(o.add(4).cast(), pair);
        }
    }
}

/// [`untransform`] compiled for AVX2 (`vpmulld` for the exact division).
///
/// # Safety
/// Needs AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn untransform_avx2<const N: usize>(
    acc: &[&[i32; N]; SLOTS],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    untransform_body(acc, tail, d, r0, row)
}

#[inline(always)]
fn untransform_body<const N: usize>(
    m: &[&[i32; N]; SLOTS],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    // Aᵀ by its shared sums (a, b = m1 ± m2; c, e = m3 ± m4; f, h = m5 ±
    // m6): y_j = (a or b) + 2^j·(c or e) + 2^(5−j)·(f or h), m0 in y0, m7 in
    // y5; lane-wise, so it vectorizes.
    let mut y = [[0i32; N]; OUTS];
    for i in 0..N {
        let (a, b) = (m[1][i].wrapping_add(m[2][i]), m[1][i].wrapping_sub(m[2][i]));
        let (c, e) = (m[3][i].wrapping_add(m[4][i]), m[3][i].wrapping_sub(m[4][i]));
        let (f, h) = (m[5][i].wrapping_add(m[6][i]), m[5][i].wrapping_sub(m[6][i]));
        for (j, yj) in y.iter_mut().enumerate() {
            let (ab, ce, fh) = if j % 2 == 0 { (a, c, f) } else { (b, e, h) };
            let v = ab
                .wrapping_add(ce.wrapping_shl(j as u32))
                .wrapping_add(fh.wrapping_shl(5 - j as u32));
            yj[i] = match j {
                0 => v.wrapping_add(m[0][i]),
                5 => v.wrapping_add(m[SLOTS - 1][i]),
                _ => v,
            };
        }
        for yj in y.iter_mut() {
            yj[i] = unscale(yj[i]);
        }
    }
    if let Some(t) = tail {
        for (yj, tj) in y.iter_mut().zip(t) {
            for (v, s) in yj.iter_mut().zip(tj) {
                *v = v.wrapping_add(*s);
            }
        }
    }
    for (j, yj) in y.iter().enumerate() {
        for (i, v) in yj.iter().enumerate() {
            row[d * (OUTS * i + j) + r0] = *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Aᵀ` (rows: outputs; columns: slots), as [`untransform`] computes it.
    const AT: [[i32; SLOTS]; OUTS] = [
        [1, 1, 1, 1, 1, 32, 32, 0],
        [0, 1, -1, 2, -2, 16, -16, 0],
        [0, 1, 1, 4, 4, 8, 8, 0],
        [0, 1, -1, 8, -8, 4, -4, 0],
        [0, 1, 1, 16, 16, 2, 2, 0],
        [0, 1, -1, 32, -32, 1, -1, 1],
    ];

    /// The transforms are exact: `Aᵀ[(G·w) ⊙ (Bᵀx)] = 360·Σ w·x`, and
    /// every transformed value fits i16 (each row's largest sum).
    #[test]
    fn transforms_are_exact_at_the_extremes() {
        let sum_abs = |r: &[i32]| r.iter().map(|v| v.abs()).sum::<i32>();
        assert!(BT.iter().all(|r| sum_abs(r) * 255 <= i16::MAX as i32));
        assert!(G.iter().all(|r| sum_abs(r) * 128 <= i16::MAX as i32));
        for (x, w) in [
            ([255i32; INS], [-128i32; 3]),
            ([0, 255, 0, 255, 0, 255, 0, 255], [127, -128, 127]),
            ([17, 3, 250, 1, 99, 0, 200, 45], [-1, 77, -128]),
        ] {
            let v: [i32; SLOTS] = std::array::from_fn(|s| (0..INS).map(|u| BT[s][u] * x[u]).sum());
            let u: [i32; SLOTS] = std::array::from_fn(|s| (0..3).map(|j| G[s][j] * w[j]).sum());
            for (j, a) in AT.iter().enumerate() {
                let y: i32 = (0..SLOTS).map(|s| a[s] * u[s] * v[s]).sum();
                let want: i32 = (0..3).map(|t| w[t] * x[j + t]).sum();
                assert_eq!(y, SCALE * want);
                assert_eq!(unscale(y), want);
            }
        }
    }

    /// [`bt_rows`]' shared sums are `Bᵀ`, and [`untransform`] (every route
    /// this CPU runs, with and without dilation and a tail) is `Aᵀ`.
    #[test]
    fn transforms_match_their_matrices() {
        let rows: [Vec<u8>; INS] =
            std::array::from_fn(|u| (0..ROW).map(|i| ((i * 37 + u * 101) % 256) as u8).collect());
        let x: [&[u8]; INS] = std::array::from_fn(|u| &rows[u][..]);
        let stride = ROW + 5;
        let mut buf = vec![0i16; SLOTS * stride];
        bt_rows(&x, &mut buf, stride, 3);
        for s in 0..SLOTS {
            for i in 0..ROW {
                let want: i32 = (0..INS).map(|u| BT[s][u] * rows[u][i] as i32).sum();
                assert_eq!(buf[s * stride + 3 + i] as i32, want, "slot {s} lane {i}");
            }
        }
        const N: usize = 16;
        let m: [[i32; N]; SLOTS] = std::array::from_fn(|s| {
            std::array::from_fn(|i| SCALE * ((s * 7919 + i * 104_729) % 20_011) as i32 - 36_000_000)
        });
        let t: [[i32; N]; OUTS] =
            std::array::from_fn(|j| std::array::from_fn(|i| (j * 31 + i) as i32));
        let mr: [&[i32; N]; SLOTS] = std::array::from_fn(|s| &m[s]);
        let tr: [&[i32; N]; OUTS] = std::array::from_fn(|j| &t[j]);
        for d in [1, 3] {
            for with_tail in [false, true] {
                let mut row = vec![0i32; d * OUTS * N];
                let r0 = d - 1;
                untransform(&mr, with_tail.then_some(tr), d, r0, &mut row);
                for i in 0..N {
                    for (j, a) in AT.iter().enumerate() {
                        let y = (0..SLOTS)
                            .fold(0i32, |acc, s| acc.wrapping_add(a[s].wrapping_mul(m[s][i])));
                        let want = unscale(y).wrapping_add(if with_tail { t[j][i] } else { 0 });
                        assert_eq!(
                            row[d * (OUTS * i + j) + r0],
                            want,
                            "d {d} tile {i} output {j}"
                        );
                    }
                }
            }
        }
    }

    /// The exact division holds through wrapping, over the whole bound.
    #[test]
    fn unscale_recovers_every_sum_in_range() {
        let bound = 255 * 128 * MAX_TERMS as i64;
        assert!(bound < 1 << 28);
        for v in [-bound, -bound + 1, -1, 0, 1, 12345, bound - 1, bound] {
            let v = v as i32;
            assert_eq!(unscale(v.wrapping_mul(SCALE)), v);
        }
    }

    #[test]
    fn packed_weights_invert() {
        for k in [3, 4, 5, 7, 11] {
            let p = Conv1dParams::new(5, 7, k);
            let cbs = 2;
            let w: Vec<i8> = (0..p.weight_len())
                .map(|i| ((i * 37 + 11) % 256) as u8 as i8)
                .collect();
            let packed = pack_weights(&p, 6, cbs, &w);
            assert_eq!(packed.len(), weights_len(7, 6, cbs, k));
            for o in 0..7 {
                for ci in 0..5 {
                    for tap in 0..k {
                        let got = weight_of(&packed, o, ci, tap, 6, 7, cbs, k);
                        assert_eq!(got, w[(o * 5 + ci) * k + tap] as i32, "k {k}");
                    }
                }
            }
        }
    }
}
