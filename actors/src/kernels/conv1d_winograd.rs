//! Winograd F(4,3) for the AVX2 int8 dense conv (stride 1, one group).
//!
//! Taps are taken three at a time (a last group of two zero-padded, a last
//! single tap run directly); per group and tile of four outputs spaced by
//! the dilation, six transformed inputs `Bᵀx` meet six transformed weights
//! `24·G·w`, and `Aᵀ` of their products gives `24·Σ x·w`: 6 multiplies per
//! 4 outputs × 3 taps instead of 12 — half the `vpmaddwd`s of the direct
//! route on every tap group.
//!
//! Exact in wrapping i32 arithmetic, so the route returns the direct
//! route's bits: the transformed weights fit i16 (`|24·G·w| ≤ 24·128`), the
//! transformed u8 inputs too (`|Bᵀx| ≤ 10·255`), and the ×24 comes off by an
//! exact division (shift by 3, multiply by 3⁻¹ mod 2³², sign-extend 29 bits),
//! which holds while the true sum fits 29 bits — [`eligible`] bounds
//! `c_in · k` so that it always does.
//!
//! Data layouts (all i16 lanes hold 4 consecutive input channels per frame,
//! the pairs `vpmaddwd` sums):
//! - phases `[cb][r0][c][q][4]` u8: input frame `d·(4q + c) + r0` (`r0` the
//!   dilation phase, `c` the residue mod 4), anything past the input;
//! - transformed, per unit of [`UNIT_Q`] tiles, `[slot][r0][cb][ρ][q][4]`
//!   i16: group `g` (at most four) reads residue `3g mod 4` from phase tile
//!   `q + 3g div 4`, its row shifted so every group reads tile `q`. One
//!   GEMM call's reads (every channel block and group of one slot and
//!   phase) are one contiguous, cache-line aligned run: strided rows missed
//!   L1 on every load (the weight stream evicts them), and split lines cost
//!   the tile ~15% more; then, for a tail tap, the unit's input frames it
//!   reads, widened, `[r0][j][cb][q][4]` i16 (output `4q + j` of phase
//!   `r0`), so its reads are one run too;
//! - weights `[slot][co block][cb][group][MR][4]` i16.

use super::conv1d::Conv1dParams;

/// Transformed values per tile.
pub(super) const SLOTS: usize = 6;
/// Outputs per tile.
pub(super) const OUTS: usize = 4;
/// Taps per group.
pub(super) const TAPS: usize = 3;
/// Most dilation the route takes (its output rows hold `4·d·UNIT_Q` frames).
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

/// `Bᵀ` (rows: slots; columns: inputs `x[q·4·d + u·d]`).
pub(super) const BT: [[i32; 6]; SLOTS] = [
    [4, 0, -5, 0, 1, 0],
    [0, -4, -4, 1, 1, 0],
    [0, 4, -4, -1, 1, 0],
    [0, -2, -1, 2, 1, 0],
    [0, 2, -1, -2, 1, 0],
    [0, 4, 0, -5, 0, 1],
];
/// `24·G` (rows: slots; columns: taps).
pub(super) const G24: [[i32; TAPS]; SLOTS] = [
    [6, 0, 0],
    [-4, -4, -4],
    [-4, 4, -4],
    [1, 2, 4],
    [1, -2, 4],
    [0, 0, 24],
];

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

/// Whether the last tap runs directly (`k ≡ 1 mod 3`): four multiplies per
/// four outputs instead of a zero-padded group's six.
pub(super) fn tail(k: usize) -> bool {
    k > TAPS && k % TAPS == 1
}

/// Phase tiles the transformed row of group `g` is shifted by.
fn row_shift(g: usize) -> usize {
    TAPS * g / 4
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
/// `24·G·w`, `[slot][co block][ci/4][tap group][mr][4]`.
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
                for (slot, coef) in G24.iter().enumerate() {
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

/// The shifted weight `(o, ci, tap)` back from a packing (rows 0, 1 and 5
/// of `24·G` invert it): re-packing for another route.
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
    let (w0, w2) = (u(0) / 6, u(5) / 24);
    match tap % TAPS {
        0 => w0,
        1 => -u(1) / 4 - w0 - w2,
        _ => w2,
    }
}

/// `Σ x·w` from the transformed-domain sum `24·Σ x·w` (wrapped), exactly.
#[inline(always)]
pub(super) fn unscale(v: i32) -> i32 {
    // 3⁻¹ mod 2³²: the low 29 bits of (v >> 3)·3⁻¹ are those of Σ x·w.
    const INV3: i32 = 0xAAAA_AAABu32 as i32;
    (v >> 3).wrapping_mul(INV3).wrapping_shl(3) >> 3
}

/// How one conv call's tiles are laid out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// Dilation (phases per input).
    pub d: usize,
    /// Channel blocks of 4.
    pub cbs: usize,
    /// Tap groups, each reading its own residue (`3g mod 4`) and row.
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
        // A unit's transform reads 2 phase tiles past its 16 and its rows'
        // shift (at most 2); the tail tap reads whole vectors from tile
        // q + (k + 2) div 4.
        let pq = tiles + 4 + (p.kernel + 2) / 4 + UNIT_Q;
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
        self.cbs * self.d * 4 * self.pq * 4
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
        ((r0 * 4 + c) * self.pq + q) * 4
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
    for r0 in 0..d.min(tp) {
        // Frames d·m + r0 of this phase; frame m goes to phase m mod 4, tile m div 4.
        let count = (tp - r0).div_ceil(d).min(4 * pq);
        let base = &mut dst[r0 * 4 * pq * 4..][..4 * pq * 4];
        let mut m = 0;
        // Whole blocks of 16 frames (4 tiles): a 16-frame × 4-channel
        // transpose; without dilation, four 16-byte loads.
        if nch == 4 && d == 1 {
            while m + 16 <= count {
                let src: [[u8; 16]; 4] =
                    std::array::from_fn(|j| rows[j][m..m + 16].try_into().unwrap_or([0; 16]));
                store_block(base, pq, m, &transpose16x4(&src));
                m += 16;
            }
        } else {
            while m + 16 <= count {
                let mut src = [[0u8; 16]; 4];
                for (s, row) in src.iter_mut().zip(&rows).take(nch) {
                    for (i, x) in s.iter_mut().enumerate() {
                        *x = row[d * (m + i) + r0];
                    }
                }
                store_block(base, pq, m, &transpose16x4(&src));
                m += 16;
            }
        }
        for m in m..count {
            let at = (m % 4) * pq * 4 + (m / 4) * 4;
            for (j, row) in rows.iter().enumerate().take(nch) {
                base[at + j] = row[d * m + r0];
            }
        }
    }
}

/// Store a transposed 16-frame block from frame `m` (a multiple of 16).
#[inline(always)]
fn store_block(base: &mut [u8], pq: usize, m: usize, out: &[[u8; 16]; 4]) {
    for (c, o) in out.iter().enumerate() {
        base[c * pq * 4 + m..][..16].copy_from_slice(o);
    }
}

/// 16 frames of 4 channels (`src[j][f]`) → per phase `c`, its 4 tiles'
/// frames `4i + c` as `[tile][channel]` (`out[c][4i + j] = src[j][4i + c]`).
#[inline(always)]
fn transpose16x4(src: &[[u8; 16]; 4]) -> [[u8; 16]; 4] {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; unaligned loads and stores of 16-byte arrays.
    unsafe {
        use std::arch::x86_64::*;
        let r: [__m128i; 4] = std::array::from_fn(|j| _mm_loadu_si128(src[j].as_ptr().cast()));
        // Channel pairs, then 4-channel frames: u[k] = frames 4k..4k+4.
        let (t0, t1) = (_mm_unpacklo_epi8(r[0], r[1]), _mm_unpackhi_epi8(r[0], r[1]));
        let (t2, t3) = (_mm_unpacklo_epi8(r[2], r[3]), _mm_unpackhi_epi8(r[2], r[3]));
        let (u0, u1) = (_mm_unpacklo_epi16(t0, t2), _mm_unpackhi_epi16(t0, t2));
        let (u2, u3) = (_mm_unpacklo_epi16(t1, t3), _mm_unpackhi_epi16(t1, t3));
        // A 4 × 4 transpose of those frames (dwords): phase c takes dword c of each.
        let (v0, v1) = (_mm_unpacklo_epi32(u0, u1), _mm_unpackhi_epi32(u0, u1));
        let (v2, v3) = (_mm_unpacklo_epi32(u2, u3), _mm_unpackhi_epi32(u2, u3));
        let o = [
            _mm_unpacklo_epi64(v0, v2),
            _mm_unpackhi_epi64(v0, v2),
            _mm_unpacklo_epi64(v1, v3),
            _mm_unpackhi_epi64(v1, v3),
        ];
        let mut out = [[0u8; 16]; 4];
        for (d, v) in out.iter_mut().zip(o) {
            _mm_storeu_si128(d.as_mut_ptr().cast(), v);
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::array::from_fn(|c| std::array::from_fn(|f| src[f % 4][4 * (f / 4) + c]))
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
    // The six slots' regions (slot s holds rows (s, r0) for every phase).
    let stride = geo.row_at(1, 0);
    let (s0, rest) = dst.split_at_mut(stride);
    let (s1, rest) = rest.split_at_mut(stride);
    let (s2, rest) = rest.split_at_mut(stride);
    let (s3, rest) = rest.split_at_mut(stride);
    let (s4, rest) = rest.split_at_mut(stride);
    let mut slots = [s0, s1, s2, s3, s4, &mut rest[..stride]];
    for cb in 0..geo.cbs {
        let src = &phases[cb * plen..][..plen];
        for g in 0..rhos {
            let rho = (TAPS * g) % 4;
            for r0 in 0..d {
                // x_u = phase (ρ + u) mod 4 from tile q + (ρ + u) div 4, past
                // the row's shift.
                let x: [&[u8]; 6] = std::array::from_fn(|u| {
                    let (c, dq) = ((rho + u) % 4, row_shift(g) + (rho + u) / 4);
                    &src[(r0 * 4 + c) * pq * 4 + (q + dq) * 4..][..ROW]
                });
                let at = geo.row_at(0, r0) + (cb * rhos + g) * ROW;
                bt_rows(&x, &mut slots, at);
            }
        }
    }
    if tail(geo.k) {
        // Output d·(4i + j) + r0 of the tail tap reads phase (j + k − 1)
        // mod 4 at tile i + (j + k − 1) div 4; widened here once, not by
        // every output block's GEMM.
        for r0 in 0..d {
            for j in 0..OUTS {
                let e = j + geo.k - 1;
                let row = geo.tail_row_at(r0, j);
                for cb in 0..geo.cbs {
                    let src = &phases[cb * plen + geo.phase_at(r0, e % 4, q + e / 4)..][..ROW];
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
/// ±1275·2), all six slots in one pass over the inputs (Bᵀ's constants fold,
/// and the loop vectorizes).
#[inline(always)]
fn bt_rows(x: &[&[u8]; 6], out: &mut [&mut [i16]; SLOTS], at: usize) {
    let x: [&[u8]; 6] = std::array::from_fn(|u| &x[u][..ROW]);
    let [o0, o1, o2, o3, o4, o5] = out;
    let (o0, o1, o2) = (
        &mut o0[at..][..ROW],
        &mut o1[at..][..ROW],
        &mut o2[at..][..ROW],
    );
    let (o3, o4, o5) = (
        &mut o3[at..][..ROW],
        &mut o4[at..][..ROW],
        &mut o5[at..][..ROW],
    );
    let row = |s: usize, v: &[i16; 6]| (0..6).fold(0i16, |a, u| a + BT[s][u] as i16 * v[u]);
    for i in 0..ROW {
        let v: [i16; 6] = std::array::from_fn(|u| x[u][i] as i16);
        o0[i] = row(0, &v);
        o1[i] = row(1, &v);
        o2[i] = row(2, &v);
        o3[i] = row(3, &v);
        o4[i] = row(4, &v);
        o5[i] = row(5, &v);
    }
}

/// Output transform of tile sums `acc[slot][i]` (`N` tiles of one row and
/// phase `r0`) into frames `d·(4i + j) + r0` of `row`, unscaled, plus a tail
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

/// [`untransform`] without dilation, 8 tiles a step: the four outputs of
/// each tile interleaved in registers (a 4 × 8 transpose) and stored as
/// whole vectors (the lane-wise body scatters them one `i32` at a time).
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
    let inv3 = _mm256_set1_epi32(0xAAAA_AAABu32 as i32);
    // `unscale`, lane-wise.
    let unscale = |v: __m256i| {
        _mm256_srai_epi32::<3>(_mm256_slli_epi32::<3>(_mm256_mullo_epi32(
            _mm256_srai_epi32::<3>(v),
            inv3,
        )))
    };
    for i in (0..N).step_by(8) {
        // SAFETY: i + 8 ≤ N, within every [i32; N]; the stores within `row` (4N).
        let ld = |v: &[i32; N]| _mm256_loadu_si256(v[i..].as_ptr().cast());
        let s: [__m256i; SLOTS] = std::array::from_fn(|k| ld(m[k]));
        let (a, b) = (_mm256_add_epi32(s[1], s[2]), _mm256_sub_epi32(s[1], s[2]));
        let (c, e) = (_mm256_add_epi32(s[3], s[4]), _mm256_sub_epi32(s[3], s[4]));
        let mut y = [
            unscale(_mm256_add_epi32(_mm256_add_epi32(s[0], a), c)),
            unscale(_mm256_add_epi32(b, _mm256_slli_epi32::<1>(e))),
            unscale(_mm256_add_epi32(a, _mm256_slli_epi32::<2>(c))),
            unscale(_mm256_add_epi32(
                _mm256_add_epi32(b, _mm256_slli_epi32::<3>(e)),
                s[5],
            )),
        ];
        if let Some(t) = tail {
            for (yj, tj) in y.iter_mut().zip(t) {
                *yj = _mm256_add_epi32(*yj, ld(tj));
            }
        }
        // Frames 4(i + l) + j: pairs, then quads (tile l | tile l + 4 per
        // 128-bit lane), then the lanes put in order.
        let (t0, t1) = (
            _mm256_unpacklo_epi32(y[0], y[1]),
            _mm256_unpackhi_epi32(y[0], y[1]),
        );
        let (t2, t3) = (
            _mm256_unpacklo_epi32(y[2], y[3]),
            _mm256_unpackhi_epi32(y[2], y[3]),
        );
        let (u0, u1) = (_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2));
        let (u2, u3) = (_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3));
        let out = [
            _mm256_permute2x128_si256::<0x20>(u0, u1),
            _mm256_permute2x128_si256::<0x20>(u2, u3),
            _mm256_permute2x128_si256::<0x31>(u0, u1),
            _mm256_permute2x128_si256::<0x31>(u2, u3),
        ];
        let dst = &mut row[OUTS * i..][..32];
        for (k, v) in out.into_iter().enumerate() {
            _mm256_storeu_si256(dst[8 * k..].as_mut_ptr().cast(), v);
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
    // Aᵀ by its shared sums: y0 = m0 + a + c, y1 = b + 2e, y2 = a + 4c,
    // y3 = b + 8e + m5 (a, b = m1 ± m2; c, e = m3 ± m4); lane-wise, so it vectorizes.
    let mut y = [[0i32; N]; OUTS];
    for i in 0..N {
        let (a, b) = (m[1][i].wrapping_add(m[2][i]), m[1][i].wrapping_sub(m[2][i]));
        let (c, e) = (m[3][i].wrapping_add(m[4][i]), m[3][i].wrapping_sub(m[4][i]));
        y[0][i] = unscale(m[0][i].wrapping_add(a).wrapping_add(c));
        y[1][i] = unscale(b.wrapping_add(e.wrapping_shl(1)));
        y[2][i] = unscale(a.wrapping_add(c.wrapping_shl(2)));
        y[3][i] = unscale(b.wrapping_add(e.wrapping_shl(3)).wrapping_add(m[5][i]));
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

    /// The scale the weight transform carries (its fractions' denominator).
    const SCALE: i32 = 24;
    /// `Aᵀ` (rows: outputs; columns: slots), as [`untransform`] computes it.
    const AT: [[i32; SLOTS]; OUTS] = [
        [1, 1, 1, 1, 1, 0],
        [0, 1, -1, 2, -2, 0],
        [0, 1, 1, 4, 4, 0],
        [0, 1, -1, 8, -8, 1],
    ];

    /// The transforms are exact: `Aᵀ[(24·G·w) ⊙ (Bᵀx)] = 24·Σ w·x`.
    #[test]
    fn transforms_are_exact_at_the_extremes() {
        for (x, w) in [
            ([255i32; 6], [-128i32; 3]),
            ([0, 255, 0, 255, 0, 255], [127, -128, 127]),
            ([17, 3, 250, 1, 99, 0], [-1, 77, -128]),
        ] {
            let v: [i32; 6] = std::array::from_fn(|s| (0..6).map(|u| BT[s][u] * x[u]).sum());
            let u: [i32; 6] = std::array::from_fn(|s| (0..3).map(|j| G24[s][j] * w[j]).sum());
            assert!(v.iter().all(|v| i16::try_from(*v).is_ok()));
            assert!(u.iter().all(|u| i16::try_from(*u).is_ok()));
            for (j, a) in AT.iter().enumerate() {
                let y: i32 = (0..6).map(|s| a[s] * u[s] * v[s]).sum();
                let want: i32 = (0..3).map(|t| w[t] * x[j + t]).sum();
                assert_eq!(y, SCALE * want);
                assert_eq!(unscale(y), want);
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
