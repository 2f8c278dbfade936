//! Winograd F(6,3) and F(6,4) for the AVX2 int8 dense conv (stride 1, one
//! group).
//!
//! Taps are taken three ([`Kind::F63`]) or four ([`Kind::F64`]) at a time
//! (a last short group zero-padded, a last single tap run directly); per
//! group and tile of six outputs spaced by the dilation, 8 (9) transformed
//! inputs `Bᵀx` meet 8 (9) transformed weights `G·w`, and `Aᵀ` of their
//! products gives a fixed multiple of `Σ x·w`: 8 multiplies per 6 outputs
//! × 3 taps instead of 18 (4/9 of the direct route's `vpmaddwd`s), 9 per 6
//! × 4 instead of 24 (3/8). Each conv takes the kind with fewer multiplies
//! for its kernel ([`Kind::for_kernel`]): k 7 is 18 as two F(6,4) groups,
//! 22 as F(6,3) (two groups and a direct tap); k 11 is 27 against 32.
//!
//! Exact in wrapping i32 arithmetic, so the route returns the direct
//! route's bits. The inputs are centered (`x − 128`, i8) and the sum's
//! `128·Σw` added back with the zero-point correction. F(6,3)'s points are
//! 0, ±1, ±2, ±½ and ∞; F(6,4) adds 3. Each slot is scaled so `Bᵀ`, `G`
//! and `Aᵀ` are integers; the transformed weights fit i16 (`|G·w| ≤
//! 225·128`), the transformed inputs too (`|Bᵀx| ≤ 200·128`), and the
//! scale (360 = 2³·45, 12600 = 2³·1575) comes off by an exact division
//! (shift by 3, multiply by the odd part's inverse mod 2³², sign-extend 29
//! bits), which holds while the true sum fits 29 bits — [`eligible`] bounds
//! `c_in · k` so that it always does.
//!
//! Data layouts (all i16 lanes hold 4 consecutive input channels per frame,
//! the pairs `vpmaddwd` sums):
//! - phases `[cb][r0][c][q][4]` i8 (`x − 128`): input frame `d·(6q + c) +
//!   r0` (`r0` the dilation phase, `c` the residue mod 6), anything past
//!   the input;
//! - transformed, per unit of [`UNIT_Q`] tiles, `[slot][r0][cb][ρ][q][4]`
//!   i16: group `g` (at most four) of `T` taps reads residue `T·g mod 6`
//!   from phase tile `q + T·g div 6`, its row shifted so every group reads
//!   tile `q`. One
//!   GEMM call's reads (every channel block and group of one slot and
//!   phase) are one contiguous, cache-line aligned run: strided rows missed
//!   L1 on every load (the weight stream evicts them), and split lines cost
//!   the tile ~15% more; then, for a tail tap, the unit's input frames it
//!   reads, widened, `[r0][j][cb][q][4]` i16 (output `6q + j` of phase
//!   `r0`), so its reads are one run too;
//! - weights `[slot][co block][cb][group][MR][4]` i16.

use super::conv1d::Conv1dParams;
use super::interleave::interleave4;

/// Outputs per tile.
pub(super) const OUTS: usize = 6;
/// Taps per group of F(6,3).
const TAPS: usize = 3;
/// Transformed values per tile of F(6,3).
pub(super) const SLOTS: usize = 8;
/// Transformed values per tile of F(6,4).
pub(super) const SLOTS4: usize = 9;

/// Which transform a conv's tap groups take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// F(6,3): groups of three taps, 8 slots.
    F63,
    /// F(6,4): groups of four taps, 9 slots.
    F64,
}

impl Kind {
    /// The kind with fewer multiplies per output for a `k`-tap kernel
    /// (F(6,3) on a tie: its transforms are cheaper).
    pub fn for_kernel(k: usize) -> Self {
        if Kind::F64.multiplies(k) < Kind::F63.multiplies(k) {
            Kind::F64
        } else {
            Kind::F63
        }
    }

    /// Taps per group.
    pub const fn taps(self) -> usize {
        match self {
            Kind::F63 => 3,
            Kind::F64 => 4,
        }
    }

    /// Transformed values per tile.
    pub const fn slots(self) -> usize {
        match self {
            Kind::F63 => SLOTS,
            Kind::F64 => SLOTS4,
        }
    }

    /// Multiplies per 6 outputs and input channel of a `k`-tap kernel.
    fn multiplies(self, k: usize) -> usize {
        self.slots() * groups(k, self) + if tail(k, self) { OUTS } else { 0 }
    }

    /// `G`'s row for `slot`.
    fn g(self, slot: usize) -> &'static [i32] {
        match self {
            Kind::F63 => &G[slot],
            Kind::F64 => &G4[slot],
        }
    }
}
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

/// Inputs per tile of F(6,3) (`OUTS + TAPS − 1`).
const INS: usize = OUTS + TAPS - 1;
/// Inputs per tile of F(6,4).
const INS4: usize = INS + 1;
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

/// F(6,4)'s `G` (points 0, ±1, ±2, ±½, 3, ∞), rows scaled so `Aᵀ` (in
/// [`untransform`]) is `7·(±1, ±2^j)`, `2^(5−j)`, `3^j` and 14 at the
/// overall scale [`SCALE4`]; `|G·w| ≤ 225·128`.
const G4: [[i32; 4]; SLOTS4] = [
    [-150, 0, 0, 0],
    [50, 50, 50, 50],
    [25, -25, 25, -25],
    [-5, -10, -20, -40],
    [-1, 2, -4, 8],
    [-56, -28, -14, -7],
    [-40, 20, -10, 5],
    [3, 9, 27, 81],
    [0, 0, 0, 225],
];
/// F(6,4)'s overall scale (2³·1575).
#[cfg(test)]
const SCALE4: i32 = 12600;

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

/// Winograd tap groups of a `k`-tap kernel: whole groups, and a last short
/// group zero-padded; a last single tap is a [`tail`] instead.
pub(super) fn groups(k: usize, kind: Kind) -> usize {
    if tail(k, kind) {
        k / kind.taps()
    } else {
        k.div_ceil(kind.taps())
    }
}

/// Whether the last tap runs directly (`k ≡ 1` mod the group's taps): six
/// multiplies per six outputs instead of a zero-padded group's 8 or 9.
pub(super) fn tail(k: usize, kind: Kind) -> bool {
    k > kind.taps() && k % kind.taps() == 1
}

/// Phase tiles the transformed row of group `g` is shifted by.
fn row_shift(g: usize, kind: Kind) -> usize {
    kind.taps() * g / OUTS
}

/// Packed weight bytes for `c_out` outputs in blocks of `mr`, `cbs` channel
/// blocks, `k` taps: the groups' slots, then the tail tap's weights.
pub(super) fn weights_len(c_out: usize, mr: usize, cbs: usize, k: usize) -> usize {
    tail_offset(c_out, mr, cbs, k)
        + if tail(k, Kind::for_kernel(k)) {
            c_out.div_ceil(mr) * cbs * mr * 4 * 2
        } else {
            0
        }
}

/// Byte offset of the tail tap's weights (`[co block][cb][mr][4]` i16).
pub(super) fn tail_offset(c_out: usize, mr: usize, cbs: usize, k: usize) -> usize {
    let kind = Kind::for_kernel(k);
    c_out.div_ceil(mr) * kind.slots() * cbs * groups(k, kind) * mr * 4 * 2
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
    let groups = groups(k, Kind::for_kernel(k));
    ((((slot * blocks + b) * cbs + ci / 4) * groups + g) * mr + r) * 4 + ci % 4
}

/// Pack shifted i8 weights `w: [c_out][c_in][k]` as little-endian i16
/// `G·w`, `[slot][co block][ci/4][tap group][mr][4]`.
pub(super) fn pack_weights(p: &Conv1dParams, mr: usize, cbs: usize, w: &[i8]) -> Vec<i8> {
    let (cin, k) = (p.c_in, p.kernel);
    let kind = Kind::for_kernel(k);
    let taps = kind.taps();
    let mut out = vec![0i8; weights_len(p.c_out, mr, cbs, k)];
    for o in 0..p.c_out {
        for ci in 0..cin {
            let row = &w[(o * cin + ci) * k..][..k];
            if tail(k, kind) {
                let i = 2 * tail_index(o, ci, mr, p.c_out, cbs, k);
                let [lo, hi] = (row[k - 1] as i16).to_le_bytes();
                out[i] = lo as i8;
                out[i + 1] = hi as i8;
            }
            for g in 0..groups(k, kind) {
                // Taps past the kernel (a padded group) are zero; a tail is not a group's.
                let tap = |j: usize| {
                    let t = taps * g + j;
                    if t < k && !(tail(k, kind) && t == k - 1) {
                        row[t] as i32
                    } else {
                        0
                    }
                };
                for slot in 0..kind.slots() {
                    let coef = kind.g(slot);
                    let u = (0..taps).map(|j| coef[j] * tap(j)).sum::<i32>();
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

/// The shifted weight `(o, ci, tap)` back from a packing (F(6,3): rows 0,
/// 1 and 7 of `G` invert it; F(6,4): rows 0, 1, 2 and 8): re-packing for
/// another route.
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
    let kind = Kind::for_kernel(k);
    if tail(k, kind) && tap == k - 1 {
        let i = 2 * tail_index(o, ci, mr, c_out, cbs, k);
        return i16::from_le_bytes([packed[i] as u8, packed[i + 1] as u8]) as i32;
    }
    let g = tap / kind.taps();
    let u = |slot: usize| {
        let i = 2 * weight_index(o, ci, g, slot, mr, c_out.div_ceil(mr), cbs, k);
        i16::from_le_bytes([packed[i] as u8, packed[i + 1] as u8]) as i32
    };
    match kind {
        Kind::F63 => {
            let (w0, w2) = (u(0) / 90, u(SLOTS - 1) / 90);
            match tap % TAPS {
                0 => w0,
                1 => -u(1) / 20 - w0 - w2,
                _ => w2,
            }
        }
        Kind::F64 => {
            // w0 + w1 + w2 + w3 and w0 − w1 + w2 − w3 from slots 1 and 2.
            let (w0, w3) = (u(0) / -150, u(SLOTS4 - 1) / 225);
            let (p, m) = (u(1) / 50, u(2) / 25);
            match tap % 4 {
                0 => w0,
                1 => (p - m) / 2 - w3,
                2 => (p + m) / 2 - w0,
                _ => w3,
            }
        }
    }
}

/// 45⁻¹ mod 2³² ([`SCALE`] is 2³·45).
const INV45: i32 = 0xA4FA_4FA5u32 as i32;
/// 1575⁻¹ mod 2³² (F(6,4)'s scale is 2³·1575).
const INV1575: i32 = 0xCA33_0997u32 as i32;

/// `Σ x·w` from the transformed-domain sum `360·Σ x·w` (wrapped), exactly.
#[inline(always)]
pub(super) fn unscale(v: i32) -> i32 {
    // The low 29 bits of (v >> 3)·45⁻¹ are those of Σ x·w.
    (v >> 3).wrapping_mul(INV45).wrapping_shl(3) >> 3
}

/// `Σ x·w` from F(6,4)'s `12600·Σ x·w` (wrapped), exactly.
#[inline(always)]
fn unscale4(v: i32) -> i32 {
    (v >> 3).wrapping_mul(INV1575).wrapping_shl(3) >> 3
}

/// How one conv call's tiles are laid out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Geometry {
    /// The transform.
    pub kind: Kind,
    /// Dilation (phases per input).
    pub d: usize,
    /// Channel blocks of 4.
    pub cbs: usize,
    /// Tap groups, each reading its own residue (`T·g mod 6`) and row.
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
        let kind = Kind::for_kernel(p.kernel);
        let cbs = p.c_in.div_ceil(4);
        let unit_frames = OUTS * d * UNIT_Q;
        let units = t_out.div_ceil(unit_frames).max(1);
        let tiles = units * UNIT_Q;
        let lanes = lanes.clamp(1, MAX_BATCH_LANES);
        let batch_units = (BATCH_FRAMES * lanes / unit_frames)
            .max(UNITS_PER_LANE * lanes)
            .clamp(1, units);
        // A unit's transform reads phase tiles up to 2 past its 16 and its
        // rows' shift (at most 2); the tail tap reads whole vectors from
        // tile q + (k + 4) div 6.
        let pq = tiles + 4 + (p.kernel + 4) / OUTS + UNIT_Q;
        Self {
            kind,
            d,
            cbs,
            rhos: groups(p.kernel, kind),
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
            + if tail(self.k, self.kind) {
                self.d * OUTS * self.cbs * ROW
            } else {
                0
            }
    }

    /// Offset (i16) of the tail tap's rows in a transformed unit.
    fn tail_at(&self) -> usize {
        self.kind.slots() * self.d * self.row_len()
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
/// the padded input `xpad: [c_in][tp]`, centered: each byte `x ^ 0x80`,
/// the bits of `x − 128` as i8.
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
                base[at + j] = row[d * m + r0] ^ 0x80;
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
    // Frame f's 4 channels at bytes 4f..4f + 4.
    let mut words = [0u8; 4 * OUTS * MAX_DILATION * DTILES];
    for b in 0..blocks {
        let f0 = b * span;
        for (i, w) in words[..4 * span].chunks_exact_mut(64).enumerate() {
            interleave4(std::array::from_fn(|j| &rows[j][f0 + 16 * i..]), w);
        }
        for e in 0..OUTS * d {
            let (r0, c) = (e % d, e / d);
            let at = ((r0 * OUTS + c) * pq + b * DTILES) * 4;
            for (t, o) in dst[at..][..4 * DTILES].chunks_exact_mut(4).enumerate() {
                let f = e + OUTS * d * t;
                let word = u32::from_le_bytes(words[4 * f..][..4].try_into().expect("4 bytes"));
                // Centered: each byte ^ 0x80.
                o.copy_from_slice(&(word ^ 0x8080_8080).to_le_bytes());
            }
        }
    }
    blocks * DTILES * OUTS
}

/// 24 frames of 4 channels (`src[j][f]`) → per residue `c`, its 4 tiles'
/// frames `6t + c` as `[tile][channel]`, centered (`out[c][4t + j] =
/// src[j][6t + c] ^ 0x80`).
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
        let center = _mm_set1_epi8(-128);
        for (d, v) in out.iter_mut().zip([r0, r1, r2, r3, r4, r5]) {
            _mm_storeu_si128(d.as_mut_ptr().cast(), _mm_xor_si128(v, center));
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::array::from_fn(|c| std::array::from_fn(|b| src[b % 4][c + OUTS * (b / 4)] ^ 0x80))
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
    // The slots' regions (slot s holds rows (s, r0) for every phase).
    let stride = geo.row_at(1, 0);
    let kind = geo.kind;
    for g in 0..rhos {
        let rho = (kind.taps() * g) % OUTS;
        for r0 in 0..d {
            // x_u = phase (ρ + u) mod 6 from tile q + (ρ + u) div 6, past
            // the row's shift: offsets in every channel block's phases
            // (worked out once, not per block).
            let off: [usize; INS4] = std::array::from_fn(|u| {
                let (c, dq) = ((rho + u) % OUTS, row_shift(g, kind) + (rho + u) / OUTS);
                (r0 * OUTS + c) * pq * 4 + (q + dq) * 4
            });
            for cb in 0..geo.cbs {
                let src = &phases[cb * plen..][..plen];
                let at = geo.row_at(0, r0) + (cb * rhos + g) * ROW;
                match kind {
                    Kind::F63 => bt_rows(&rows_at(src, &off), dst, stride, at),
                    Kind::F64 => bt_rows4(&rows_at(src, &off), dst, stride, at),
                }
            }
        }
    }
    if tail(geo.k, kind) {
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
                        *o = x as i8 as i16;
                    }
                }
            }
        }
    }
}

/// The first `I` transform input rows of `src` at offsets `off` (a loop:
/// `array::from_fn` was left a call per row).
#[inline(always)]
fn rows_at<'a, const I: usize>(src: &'a [u8], off: &[usize; INS4]) -> [&'a [u8]; I] {
    let mut x: [&[u8]; I] = [&[]; I];
    for (r, &o) in x.iter_mut().zip(off) {
        *r = &src[o..][..ROW];
    }
    x
}

/// The bytes of an i16 slice (for the byte-addressed tiles).
pub(super) fn bytes_of(v: &[i16]) -> &[u8] {
    // SAFETY: i16 has no padding and u8 alignment is 1; same memory, twice the length.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// F(6,3)'s `Bᵀv` by its shared sums (|v| ≤ 512 keeps every sum in i16).
#[inline(always)]
fn bt8(v: [i16; INS]) -> [i16; SLOTS] {
    // Rows 1–6 pair up as p ± q: the even inputs' sum and the odd ones'.
    let (e1, d1) = (4 * (v[2] + v[6]) - 17 * v[4], 4 * (v[1] + v[5]) - 17 * v[3]);
    let (e3, d3) = (v[2] + 4 * v[6] - 5 * v[4], 2 * v[1] + 8 * v[5] - 10 * v[3]);
    let (e5, d5) = (8 * v[2] + 2 * v[6] - 10 * v[4], 4 * v[1] + v[5] - 5 * v[3]);
    [
        4 * (v[0] - v[6]) + 21 * (v[4] - v[2]),
        e1 + d1,
        e1 - d1,
        e3 + d3,
        e3 - d3,
        e5 + d5,
        e5 - d5,
        4 * (v[7] - v[1]) + 21 * (v[3] - v[5]),
    ]
}

/// `Bᵀx` of one row of centered inputs: `out[s][at + i] = Σ_u Bᵀ[s][u]·x[u][i]`
/// (i16; within ±50·128), all eight slots in one pass over the inputs (the
/// loop vectorizes).
#[inline(always)]
fn bt_rows(x: &[&[u8]; INS], out: &mut [i16], stride: usize, at: usize) {
    let x: [&[u8]; INS] = std::array::from_fn(|u| &x[u][..ROW]);
    // One slot row after another, `stride` apart: a single base pointer
    // (eight output slices and eight inputs spill the loop's registers).
    let out = &mut out[at..][..(SLOTS - 1) * stride + ROW];
    for h in (0..ROW).step_by(16) {
        let mut r = [[0i16; 16]; SLOTS];
        for i in 0..16 {
            let b = bt8(std::array::from_fn(|u| x[u][h + i] as i8 as i16));
            for (rs, v) in r.iter_mut().zip(b) {
                rs[i] = v;
            }
        }
        for (s, rs) in r.iter().enumerate() {
            out[s * stride + h..][..16].copy_from_slice(rs);
        }
    }
}

/// F(6,4)'s `Bᵀx` of one row of centered inputs (within ±200·128), as
/// [`bt_rows`]. Its points are F(6,3)'s and 3, so a row for a point `p`
/// of both is F(6,3)'s times `(x − 3)`: F(6,3)'s sums of `z_u = x_{u+1} −
/// 3·x_u` give slots 0–6 and ∞ (slot 8); point 3's row is F(6,3)'s ∞ row
/// on `x` itself.
#[inline(always)]
fn bt_rows4(x: &[&[u8]; INS4], out: &mut [i16], stride: usize, at: usize) {
    let x: [&[u8]; INS4] = std::array::from_fn(|u| &x[u][..ROW]);
    let out = &mut out[at..][..(SLOTS4 - 1) * stride + ROW];
    for h in (0..ROW).step_by(16) {
        let mut r = [[0i16; 16]; SLOTS4];
        for i in 0..16 {
            let v: [i16; INS4] = std::array::from_fn(|u| x[u][h + i] as i8 as i16);
            let b = bt8(std::array::from_fn(|u| v[u + 1] - 3 * v[u]));
            for (rs, v) in r.iter_mut().zip(&b[..7]) {
                rs[i] = *v;
            }
            r[7][i] = 4 * (v[7] - v[1]) + 21 * (v[3] - v[5]);
            r[8][i] = b[7];
        }
        for (s, rs) in r.iter().enumerate() {
            out[s * stride + h..][..16].copy_from_slice(rs);
        }
    }
}

/// Output transform of tile sums `acc[slot][i]` (`N` tiles of one row and
/// phase `r0`; `S` slots: 8 for F(6,3), 9 for F(6,4)) into frames
/// `d·(6i + j) + r0` of `row`, unscaled, plus a tail tap's direct sums
/// `tail[j][i]` where the kernel has one.
pub(super) fn untransform<const N: usize, const S: usize>(
    acc: &[&[i32; N]; S],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    const { assert!(S == SLOTS || S == SLOTS4) };
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

/// `Aᵀ` of one tile's slot sums `m` (lane-wise on any integer-like `V`),
/// unscaled: F(6,3) by its shared sums (a, b = m1 ± m2; c, e = m3 ± m4;
/// f, h = m5 ± m6): `y_j = (a|b) + 2^j·(c|e) + 2^(5−j)·(f|h)`, m0 in y0, m7
/// in y5; F(6,4): `y_j = 7·((a|b) + 2^j·(c|e)) + 2^(5−j)·(f|h) + 3^j·m7`,
/// 7·m0 in y0, 14·m8 in y5.
#[inline(always)]
fn at_rows<V: Copy, const S: usize>(
    m: [V; S],
    add: impl Fn(V, V) -> V,
    sub: impl Fn(V, V) -> V,
    shl: impl Fn(V, u32) -> V,
    unscale: impl Fn(V, bool) -> V,
) -> [V; OUTS] {
    let (a, b) = (add(m[1], m[2]), sub(m[1], m[2]));
    let (c, e) = (add(m[3], m[4]), sub(m[3], m[4]));
    let (f, h) = (add(m[5], m[6]), sub(m[5], m[6]));
    let pair = |j: usize| {
        if j.is_multiple_of(2) {
            (a, c, f)
        } else {
            (b, e, h)
        }
    };
    // Loops, not `array::from_fn` (left a call per output).
    let mut y = [m[0]; OUTS];
    if S == SLOTS {
        for (j, yj) in y.iter_mut().enumerate() {
            let (ab, ce, fh) = pair(j);
            let mut v = add(ab, add(shl(ce, j as u32), shl(fh, 5 - j as u32)));
            if j == 0 {
                v = add(v, m[0]);
            } else if j == OUTS - 1 {
                v = add(v, m[SLOTS - 1]);
            }
            *yj = unscale(v, false);
        }
    } else {
        let seven = |v: V| sub(shl(v, 3), v);
        let mut p3 = m[7];
        for (j, yj) in y.iter_mut().enumerate() {
            let (ab, ce, fh) = pair(j);
            let mut inner = add(ab, shl(ce, j as u32));
            if j == 0 {
                inner = add(inner, m[0]);
            } else if j == OUTS - 1 {
                inner = add(inner, shl(m[SLOTS4 - 1], 1));
            }
            let v = add(add(seven(inner), shl(fh, 5 - j as u32)), p3);
            // 3^(j+1)·m7 for the next output.
            p3 = add(p3, shl(p3, 1));
            *yj = unscale(v, true);
        }
    }
    y
}

/// The six unscaled outputs (plus the tail's) of tiles `i..i + 8` in
/// vectors: [`at_rows`] lane-wise on AVX2.
///
/// # Safety
/// Needs AVX2; `i + 8 ≤ N`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn outputs_avx2<const N: usize, const S: usize>(
    m: &[&[i32; N]; S],
    tail: Option<[&[i32; N]; OUTS]>,
    i: usize,
) -> [std::arch::x86_64::__m256i; OUTS] {
    use std::arch::x86_64::*;
    let (inv45, inv1575) = (_mm256_set1_epi32(INV45), _mm256_set1_epi32(INV1575));
    // `unscale` / `unscale4`, lane-wise.
    let unscale = |v: __m256i, four: bool| {
        _mm256_srai_epi32::<3>(_mm256_slli_epi32::<3>(_mm256_mullo_epi32(
            _mm256_srai_epi32::<3>(v),
            if four { inv1575 } else { inv45 },
        )))
    };
    let add = |a, b| _mm256_add_epi32(a, b);
    let sub = |a, b| _mm256_sub_epi32(a, b);
    let shl = |a, n: u32| _mm256_sll_epi32(a, _mm_cvtsi32_si128(n as i32));
    // SAFETY: i + 8 ≤ N, within every [i32; N].
    let ld = |v: &[i32; N]| _mm256_loadu_si256(v[i..i + 8].as_ptr().cast());
    let mut s = [_mm256_setzero_si256(); S];
    for (v, mk) in s.iter_mut().zip(m) {
        *v = ld(mk);
    }
    let mut y = at_rows(s, add, sub, shl, unscale);
    if let Some(t) = tail {
        for (yj, tj) in y.iter_mut().zip(t) {
            *yj = add(*yj, ld(tj));
        }
    }
    y
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
unsafe fn untransform_d1_avx2<const N: usize, const S: usize>(
    m: &[&[i32; N]; S],
    tail: Option<[&[i32; N]; OUTS]>,
    row: &mut [i32],
) {
    use std::arch::x86_64::*;
    let row = &mut row[..OUTS * N];
    for i in (0..N).step_by(8) {
        // SAFETY: AVX2 as this function; i + 8 ≤ N.
        let y = unsafe { outputs_avx2(m, tail, i) };
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

/// [`untransform`] with dilation on AVX2: `Aᵀ` on 8 tiles a step in
/// vectors (as without dilation), the outputs then stored `d` apart.
///
/// # Safety
/// Needs AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn untransform_avx2<const N: usize, const S: usize>(
    m: &[&[i32; N]; S],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    use std::arch::x86_64::*;
    if !N.is_multiple_of(8) {
        return untransform_body(m, tail, d, r0, row);
    }
    let row = &mut row[..d * OUTS * N];
    for i in (0..N).step_by(8) {
        // SAFETY: AVX2 as this function; i + 8 ≤ N.
        let y = unsafe { outputs_avx2(m, tail, i) };
        let mut out = [[0i32; 8]; OUTS];
        for (o, v) in out.iter_mut().zip(y) {
            _mm256_storeu_si256(o.as_mut_ptr().cast(), v);
        }
        for l in 0..8 {
            for (j, o) in out.iter().enumerate() {
                row[d * (OUTS * (i + l) + j) + r0] = o[l];
            }
        }
    }
}

#[inline(always)]
fn untransform_body<const N: usize, const S: usize>(
    m: &[&[i32; N]; S],
    tail: Option<[&[i32; N]; OUTS]>,
    d: usize,
    r0: usize,
    row: &mut [i32],
) {
    // Lane-wise, so it vectorizes.
    let mut y = [[0i32; N]; OUTS];
    for i in 0..N {
        let mut mi = [0i32; S];
        for (v, ms) in mi.iter_mut().zip(m) {
            *v = ms[i];
        }
        let v = at_rows(
            mi,
            i32::wrapping_add,
            i32::wrapping_sub,
            i32::wrapping_shl,
            |v, four| if four { unscale4(v) } else { unscale(v) },
        );
        for (yj, v) in y.iter_mut().zip(v) {
            yj[i] = v;
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

    /// F(6,4)'s `Bᵀ` (rows: slots; columns: inputs), as [`bt_rows4`] computes it.
    const BT4: [[i32; INS4]; SLOTS4] = [
        [-12, 4, 63, -21, -63, 21, 12, -4, 0],
        [0, -12, -8, 55, 34, -29, -8, 4, 0],
        [0, 12, -16, -47, 68, -5, -16, 4, 0],
        [0, -6, -1, 31, 5, -29, -4, 4, 0],
        [0, 6, -5, -29, 25, 19, -20, 4, 0],
        [0, -12, -20, 23, 25, -13, -5, 2, 0],
        [0, 12, -28, -7, 35, -7, -7, 2, 0],
        [0, -4, 0, 21, 0, -21, 0, 4, 0],
        [0, 12, -4, -63, 21, 63, -21, -12, 4],
    ];

    /// F(6,4)'s `Aᵀ`, as [`untransform`] computes it.
    const AT4: [[i32; SLOTS4]; OUTS] = [
        [7, 7, 7, 7, 7, 32, 32, 1, 0],
        [0, 7, -7, 14, -14, 16, -16, 3, 0],
        [0, 7, 7, 28, 28, 8, 8, 9, 0],
        [0, 7, -7, 56, -56, 4, -4, 27, 0],
        [0, 7, 7, 112, 112, 2, 2, 81, 0],
        [0, 7, -7, 224, -224, 1, -1, 243, 14],
    ];

    /// The centered inputs' extremes, and a few mixed rows.
    fn extremes<const I: usize, const T: usize>() -> Vec<([i32; I], [i32; T])> {
        fn alt<const L: usize>(a: i32, b: i32) -> [i32; L] {
            std::array::from_fn(|i| if i % 2 == 0 { a } else { b })
        }
        vec![
            ([-128; I], [-128; T]),
            ([127; I], [-128; T]),
            (alt(-128, 127), alt(127, -128)),
            (alt(127, -128), alt(-128, 127)),
            (
                std::array::from_fn(|i| (i as i32 * 97 % 256) - 128),
                std::array::from_fn(|i| (i as i32 * 61 % 256) - 128),
            ),
        ]
    }

    /// The transforms are exact: `Aᵀ[(G·w) ⊙ (Bᵀx)] = 360·Σ w·x` (F(6,4):
    /// 12600), and every transformed value of centered inputs fits i16
    /// (each row's largest sum).
    #[test]
    fn transforms_are_exact_at_the_extremes() {
        let sum_abs = |r: &[i32]| r.iter().map(|v| v.abs()).sum::<i32>();
        assert!(BT.iter().all(|r| sum_abs(r) * 128 <= i16::MAX as i32));
        assert!(G.iter().all(|r| sum_abs(r) * 128 <= i16::MAX as i32));
        assert!(BT4.iter().all(|r| sum_abs(r) * 128 <= i16::MAX as i32));
        assert!(G4.iter().all(|r| sum_abs(r) * 128 <= i16::MAX as i32));
        for (x, w) in extremes::<INS4, 4>() {
            let v: [i32; SLOTS4] =
                std::array::from_fn(|s| (0..INS4).map(|u| BT4[s][u] * x[u]).sum());
            let u: [i32; SLOTS4] = std::array::from_fn(|s| (0..4).map(|j| G4[s][j] * w[j]).sum());
            for (j, a) in AT4.iter().enumerate() {
                let y: i32 = (0..SLOTS4).map(|s| a[s] * u[s] * v[s]).sum();
                let want: i32 = (0..4).map(|t| w[t] * x[j + t]).sum();
                assert_eq!(y, SCALE4 * want);
                assert_eq!(unscale4(y), want);
            }
        }
        for (x, w) in [
            ([255i32; INS], [-128i32; 3]),
            ([0, 255, 0, 255, 0, 255, 0, 255], [127, -128, 127]),
            ([17, 3, 250, 1, 99, 0, 200, 45], [-1, 77, -128]),
        ]
        .into_iter()
        .chain(extremes::<INS, 3>())
        {
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

    /// [`bt_rows`]' and [`bt_rows4`]'s sums are `Bᵀ` on the centered
    /// inputs, and [`untransform`] (every route this CPU runs, with and
    /// without dilation and a tail) is `Aᵀ`, for both kinds.
    #[test]
    fn transforms_match_their_matrices() {
        let rows: [Vec<u8>; INS4] =
            std::array::from_fn(|u| (0..ROW).map(|i| ((i * 37 + u * 101) % 256) as u8).collect());
        // The phases hold `x − 128` as i8 bits.
        let centered = |u: usize, i: usize| rows[u][i] as i8 as i32;
        let stride = ROW + 5;
        let mut buf = vec![0i16; SLOTS4 * stride];
        bt_rows(&std::array::from_fn(|u| &rows[u][..]), &mut buf, stride, 3);
        for s in 0..SLOTS {
            for i in 0..ROW {
                let want: i32 = (0..INS).map(|u| BT[s][u] * centered(u, i)).sum();
                assert_eq!(buf[s * stride + 3 + i] as i32, want, "slot {s} lane {i}");
            }
        }
        bt_rows4(&std::array::from_fn(|u| &rows[u][..]), &mut buf, stride, 3);
        for s in 0..SLOTS4 {
            for i in 0..ROW {
                let want: i32 = (0..INS4).map(|u| BT4[s][u] * centered(u, i)).sum();
                assert_eq!(
                    buf[s * stride + 3 + i] as i32,
                    want,
                    "F(6,4) slot {s} lane {i}"
                );
            }
        }
        check_untransform::<SLOTS>(&AT, SCALE, unscale);
        check_untransform::<SLOTS4>(&AT4, SCALE4, unscale4);
    }

    fn check_untransform<const S: usize>(at: &[[i32; S]; OUTS], scale: i32, un: fn(i32) -> i32) {
        const N: usize = 16;
        let m: [[i32; N]; S] = std::array::from_fn(|s| {
            std::array::from_fn(|i| {
                scale.wrapping_mul(((s * 7919 + i * 104_729) % 20_011) as i32 - 10_000)
            })
        });
        let t: [[i32; N]; OUTS] =
            std::array::from_fn(|j| std::array::from_fn(|i| (j * 31 + i) as i32));
        let mr: [&[i32; N]; S] = std::array::from_fn(|s| &m[s]);
        let tr: [&[i32; N]; OUTS] = std::array::from_fn(|j| &t[j]);
        for d in [1, 3] {
            for with_tail in [false, true] {
                let mut row = vec![0i32; d * OUTS * N];
                let r0 = d - 1;
                untransform(&mr, with_tail.then_some(tr), d, r0, &mut row);
                for i in 0..N {
                    for (j, a) in at.iter().enumerate() {
                        let y = (0..S)
                            .fold(0i32, |acc, s| acc.wrapping_add(a[s].wrapping_mul(m[s][i])));
                        let want = un(y).wrapping_add(if with_tail { t[j][i] } else { 0 });
                        assert_eq!(
                            row[d * (OUTS * i + j) + r0],
                            want,
                            "S {S} d {d} tile {i} output {j}"
                        );
                    }
                }
            }
        }
    }

    /// The exact divisions hold through wrapping, over the whole bound.
    #[test]
    fn unscale_recovers_every_sum_in_range() {
        let bound = 128 * 128 * MAX_TERMS as i64;
        assert!(bound < 1 << 28);
        for v in [-bound, -bound + 1, -1, 0, 1, 12345, bound - 1, bound] {
            let v = v as i32;
            assert_eq!(unscale(v.wrapping_mul(SCALE)), v);
            assert_eq!(unscale4(v.wrapping_mul(SCALE4)), v);
        }
    }

    /// Each kernel takes the kind with fewer multiplies.
    #[test]
    fn kinds_follow_the_multiplies() {
        let kinds: Vec<Kind> = (3..=13).map(Kind::for_kernel).collect();
        use Kind::{F63 as T, F64 as F};
        assert_eq!(kinds, [T, F, F, T, F, F, T, F, F, F, F]);
        assert_eq!(Kind::F64.multiplies(7), 18);
        assert_eq!(Kind::F63.multiplies(7), 22);
        assert_eq!(Kind::F64.multiplies(11), 27);
        assert_eq!(Kind::F63.multiplies(11), 32);
    }

    #[test]
    fn packed_weights_invert() {
        for k in [3, 4, 5, 6, 7, 9, 11, 13] {
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
