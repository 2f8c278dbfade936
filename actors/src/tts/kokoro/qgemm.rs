//! Int8 GEMM for `MatMulInteger` layers with the weight laid out for
//! broadcast VNNI: `[n/16][k/4][16][4]`.
//!
//! One `vpdpbusd` multiplies a broadcast group of 4 activation bytes by 16
//! output columns × 4 weights, accumulating 16 outputs at once: no
//! horizontal reductions (the dot-product layout of
//! [`crate::kernels::matmul`] needs one per output). Integer arithmetic is
//! exact modulo 2³², so the result equals [`crate::kernels::matmul`]'s bit
//! for bit. The 256-bit routes run the same packing (AVX-VNNI's
//! `vpdpbusd`, or AVX2's `vpmaddubsw` on split weights, see [`QRoute`]);
//! machines without AVX2 use that kernel instead.
//!
//! `acc[m, n] = Σ_k (qa − za)(w − zw[n]) = Σ qa·w − za·Σw[n] − zw[n]·Σqa + K·za·zw[n]`,
//! then `out = acc · (a_scale · w_scale[n]) + bias[n]` (the export's formula).

use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

use crate::kernels::error::{check_len, KernelError};
use crate::kernels::interleave::interleave4;
use crate::kernels::matmul::quantize_activations;

/// Output columns per block (one 512-bit register of i32).
const NB: usize = 16;
/// Column blocks per register tile (and per parallel chunk unit).
const TILE_B: usize = 4;
/// Activation rows per register tile.
const TILE_R: usize = 4;
/// Output columns per parallel chunk (fixed: results never depend on the budget).
const CHUNK_COLS: usize = NB * TILE_B;
/// Rows and columns of one AMX block.
const BLOCK_AMX: usize = 32;

/// Weights packed for [`PackedInt8::gemm`].
#[derive(Debug, Clone)]
pub struct PackedInt8 {
    k: usize,
    n: usize,
    /// K rounded up to 4.
    kq: usize,
    /// `[n/16 (padded to the chunk)][kq/4][16][4]` (owned, or mapped from a weights cache).
    data: Buf<i8>,
    /// `Σ_k w[k, n]` over the true K.
    col_sums: Vec<i32>,
    /// `K·zw[n] − Σ_k w[k, n]` (wrapping), padded to the chunk: the matvec's
    /// zero-point correction is `za` times it, less `zw·Σa`.
    kzc: Vec<i32>,
    zero: Vec<i32>,
    scale: Vec<f32>,
    /// The kernel that runs these weights.
    route: QRoute,
    /// The AVX2 route's fixes ([`split_pairs`]): `(k, packed column and
    /// amount)` pairs of i32, chunk by chunk (empty on the others).
    fixes: Buf<i32>,
    /// Where each chunk's fixes start in `fixes` (in fixes), one more for the end.
    fix_at: Vec<i32>,
    /// The AVX2 route's fixes as a second packed plane where they are too
    /// many for a list (see [`DENSE_FIXES`]; then `fixes` is empty).
    excess: Buf<i8>,
    /// Whether GEMMs run on AMX tiles (`kq` is then a multiple of 64).
    amx: bool,
}

/// A [`PackedInt8`]'s parts as a weights cache stores them.
#[derive(Debug, Clone, Copy)]
pub struct CachedInt8<'a> {
    /// `[k, n, k padded]`.
    pub dims: [usize; 3],
    /// The route it was packed for.
    pub route: QRoute,
    /// VNNI-layout weights (the AVX2 route's split pairs).
    pub data: &'a [i8],
    /// The AVX2 route's fixes (empty on the others).
    pub fixes: &'a [i32],
    /// Where each chunk's fixes start.
    pub fix_at: &'a [i32],
    /// The AVX2 route's fixes as a plane (empty unless they are many).
    pub excess: &'a [i8],
    /// `Σ_k w[k, n]`.
    pub col_sums: &'a [i32],
    /// The matvec's zero-point correction per column.
    pub kzc: &'a [i32],
    /// Zero point per column.
    pub zero: &'a [i32],
    /// Scale per column.
    pub scale: &'a [f32],
}

/// Which kernel runs the packed weights (chosen from `cpu::features`, so
/// `VOXLANE_SIMD` caps it like every route). All are exact: they agree bit
/// for bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QRoute {
    /// AVX-512 VNNI: `vpdpbusd` on 16 columns at once (AMX where present).
    Vnni,
    /// AVX-VNNI: 256-bit `vpdpbusd` on the same packing, 8 columns at once.
    AvxVnni,
    /// AVX2: `vpmaddubsw` (u8 × i8, 32 products) on two K groups at once,
    /// their sums added in i16, then one `vpmaddwd` by ones, on the VNNI
    /// packing, exact: each i16 lane's four weights are kept where its sum
    /// stays inside i16 and the rest comes back from a short list of fixes
    /// (see `split_lanes`); where those are many, one group at a time, pairs
    /// split and a second plane (see `split_pairs`).
    Avx2,
    /// The readable tile.
    Reference,
}

impl QRoute {
    /// The best route of this CPU.
    pub fn best() -> Self {
        let f = crate::kernels::cpu::features();
        if f.avx512 && f.avx512_vnni {
            Self::Vnni
        } else if f.avx2_fma && f.avx_vnni {
            Self::AvxVnni
        } else if f.avx2_fma {
            Self::Avx2
        } else {
            Self::Reference
        }
    }

    /// Every route this CPU runs (the best first).
    pub fn available() -> Vec<Self> {
        let all = [Self::Vnni, Self::AvxVnni, Self::Avx2, Self::Reference];
        let best = all.iter().position(|&r| r == Self::best()).unwrap_or(3);
        let f = crate::kernels::cpu::features();
        all[best..]
            .iter()
            .copied()
            .filter(|&r| r != Self::AvxVnni || f.avx_vnni)
            .collect()
    }
}

/// Keep every pair of a packed group (`[16][4]`: K pairs `(0, 1)` and
/// `(2, 3)` of each column) where `vpmaddubsw` cannot saturate, and list
/// what was taken off.
///
/// A pair's sum `x₀w₀ + x₁w₁` over u8 activations reaches `255·(w₀⁺ + w₁⁺)`
/// and `−255·(w₀⁻ + w₁⁻)`, so it fits i16 while the positive parts and
/// the negative parts each sum to at most 128 (mixed signs always do).
/// Where a same-signed pair exceeds that, its first weight gives up the
/// excess `c` (|c| ≤ 128), recorded as the fix `(k, column in chunk, c)`:
/// the dense sums plus `Σ x[k]·c` over the fixes are the true sums.
fn split_pairs(group: &mut [i8], k4: usize, col0: usize, fixes: &mut Vec<i32>) {
    for (j, w) in group.chunks_exact_mut(4).enumerate() {
        for e in [0, 2] {
            let (a, b) = (i32::from(w[e]), i32::from(w[e + 1]));
            let excess = if a > 0 && b > 0 && a + b > 128 {
                a + b - 128
            } else if a < 0 && b < 0 && a + b < -128 {
                a + b + 128
            } else {
                continue;
            };
            // |excess| ≤ 128 and a − excess lies between a and −b: i8 both.
            w[e] = (a - excess) as i8;
            fixes.push((4 * k4 + e) as i32);
            fixes.push(pack_fix(col0 + j, excess));
        }
    }
}

/// Keep each i16 lane of the AVX2 route's two-group sums inside i16, and
/// list what was taken off.
///
/// `block` is one packed block (`[k4s][16][4]`). Groups `2m` and `2m + 1`
/// are multiplied by `vpmaddubsw` and added in i16 before widening, so
/// lane `(column j, pair e)` sums four products, `x·w` over K `4·2m + e`,
/// `+ 1`, `4·(2m + 1) + e`, `+ 1` (a last odd group: two). Over u8
/// activations that stays inside i16 while the positive weights and the
/// negative weights each sum to at most 128 in magnitude (as in
/// [`split_pairs`], which then holds for each group's pairs too). Where they
/// exceed it, the largest weights give up the excess, each its own fix
/// `(k, column in chunk, c)`.
fn split_lanes(block: &mut [i8], k4s: usize, col0: usize, fixes: &mut Vec<i32>) {
    for q0 in (0..k4s).step_by(2) {
        let groups = (k4s - q0).min(2);
        for j in 0..NB {
            for e in [0, 2] {
                // (position in the block, k) of the lane's weights.
                let mut lane = [(0usize, 0usize); 4];
                for (i, slot) in lane.iter_mut().take(2 * groups).enumerate() {
                    let (q, t) = (q0 + i / 2, e + i % 2);
                    *slot = ((q * NB + j) * 4 + t, 4 * q + t);
                }
                let lane = &mut lane[..2 * groups];
                for sign in [1i32, -1] {
                    let part = |w: i8| (sign * i32::from(w)).max(0);
                    let mut excess = lane.iter().map(|&(at, _)| part(block[at])).sum::<i32>() - 128;
                    // Largest first: the fewest fixes.
                    lane.sort_by_key(|&(at, _)| std::cmp::Reverse(part(block[at])));
                    for &(at, k) in lane.iter() {
                        if excess <= 0 {
                            break;
                        }
                        let take = part(block[at]).min(excess);
                        // |w| − take keeps the weight's sign: an i8 still.
                        block[at] = (i32::from(block[at]) - sign * take) as i8;
                        fixes.push(k as i32);
                        fixes.push(pack_fix(col0 + j, sign * take));
                        excess -= take;
                    }
                }
            }
        }
    }
}

/// The AVX2 route's split of packed `data` (`kq` bytes per column): the
/// lanes of two groups with a list of fixes, chunk by chunk
/// ([`split_lanes`]); where those are too many for a list, one group at a
/// time, pairs split and the fixes as a plane. Returns the fixes, where
/// each chunk's start and the plane (either the list or the plane is empty).
fn split_avx2(data: &mut [i8], kq: usize) -> (Vec<i32>, Vec<i32>, Vec<i8>) {
    let block_len = (kq / 4) * NB * 4;
    let raw = data.to_vec();
    let (mut fixes, mut fix_at) = (Vec::new(), vec![0i32]);
    for (b, block) in data.chunks_exact_mut(block_len).enumerate() {
        split_lanes(block, kq / 4, (b % TILE_B) * NB, &mut fixes);
        if b % TILE_B == TILE_B - 1 {
            fix_at.push((fixes.len() / 2) as i32);
        }
    }
    if fixes.len() / 2 * DENSE_FIXES <= data.len() / 2 {
        return (fixes, fix_at, Vec::new());
    }
    // Many fixes (weights spread evenly over the i8 range, not the
    // export's): each group's pairs split, the fixes a second plane.
    data.copy_from_slice(&raw);
    fixes.clear();
    fix_at.truncate(1);
    for (b, block) in data.chunks_exact_mut(block_len).enumerate() {
        for (k4, group) in block.chunks_exact_mut(NB * 4).enumerate() {
            split_pairs(group, k4, (b % TILE_B) * NB, &mut fixes);
        }
        if b % TILE_B == TILE_B - 1 {
            fix_at.push((fixes.len() / 2) as i32);
        }
    }
    let plane = fixes_plane(&fixes, &fix_at, kq, data.len());
    fix_at.fill(0);
    (Vec::new(), fix_at, plane)
}

/// Fixes per packed pair past which the AVX2 route keeps them as a second
/// plane instead of a list: a listed fix costs a scalar multiply-add per
/// row, a plane a second `vpmaddubsw` pass (one 16th of a cycle per pair
/// and row): the list wins below about one fix in 32 pairs, and is kept
/// below half that.
const DENSE_FIXES: usize = 64;

/// The fixes `fixes` (chunk by chunk, as `fix_at` bounds them) of a packing
/// with `kq` rows as a plane in the packing's own layout.
fn fixes_plane(fixes: &[i32], fix_at: &[i32], kq: usize, len: usize) -> Vec<i8> {
    let mut plane = vec![0i8; len];
    for (chunk, w) in fix_at.windows(2).enumerate() {
        for fix in fixes[2 * w[0] as usize..2 * w[1] as usize].chunks_exact(2) {
            let (k, (j, c)) = (fix[0] as usize, unpack_fix(fix[1]));
            let b = chunk * TILE_B + j / NB;
            plane[((b * (kq / 4) + k / 4) * NB + j % NB) * 4 + k % 4] = c as i8;
        }
    }
    plane
}

/// A fix's column (in its chunk) and amount as one i32 (`column << 9 | c + 256`).
fn pack_fix(col: usize, c: i32) -> i32 {
    ((col as i32) << 9) | (c + 256)
}

/// A fix's column in its chunk and amount, from [`pack_fix`].
fn unpack_fix(v: i32) -> (usize, i32) {
    ((v >> 9) as usize, (v & 511) - 256)
}

/// Scratch of [`PackedInt8::gemm`]: quantized activations and their row sums.
#[derive(Debug, Clone, Default)]
pub struct QGemmScratch {
    aq: Vec<u8>,
    padded: Vec<u8>,
    sums: Vec<i32>,
}

/// Whether this CPU runs GEMMs on AMX tiles.
fn amx_available() -> bool {
    let f = crate::kernels::cpu::features();
    QRoute::best() == QRoute::Vnni && f.amx_int8
}

/// A packing's padding on `route`: whether GEMMs may take AMX tiles, K
/// padded (to 64 bytes for AMX steps, else to 4) and N padded to the chunk.
fn padded_dims(route: QRoute, k: usize, n: usize) -> (bool, usize, usize) {
    let amx = route == QRoute::Vnni && amx_available();
    let kq = if amx {
        k.div_ceil(64) * 64
    } else {
        k.div_ceil(4) * 4
    };
    (amx, kq, n.div_ceil(CHUNK_COLS) * CHUNK_COLS)
}

/// Whether this CPU has a SIMD route for packed int8 weights (else the
/// dot-product kernel of [`crate::kernels::matmul`] is used).
pub fn available() -> bool {
    QRoute::best() != QRoute::Reference
}

/// Whether cached fixes fit a packing of `k` rows and `np` padded columns
/// on `route`: offsets rising from 0 to the list's end, one per chunk and
/// one more, every fix inside K and its chunk (none but on AVX2).
fn fixes_whole(fixes: &[i32], fix_at: &[i32], route: QRoute, k: usize, np: usize) -> bool {
    let ends = fix_at.first() == Some(&0)
        && fix_at.last().map(|&e| 2 * e as usize) == Some(fixes.len())
        && fix_at.windows(2).all(|w| w[0] <= w[1])
        && fix_at.len() == np / CHUNK_COLS + 1;
    ends && (route == QRoute::Avx2 || fixes.is_empty())
        && fixes.chunks_exact(2).all(|f| {
            let (j, c) = unpack_fix(f[1]);
            (0..k as i32).contains(&f[0]) && j < CHUNK_COLS && (-128..=128).contains(&c)
        })
}

impl PackedInt8 {
    /// Pack `w [k, n]` (ONNX `MatMulInteger` layout) with per-column (or single)
    /// scales and zero points.
    pub fn new(
        k: usize,
        n: usize,
        w: &[i8],
        scale: &[f32],
        zero: &[i8],
    ) -> Result<Self, KernelError> {
        Self::with_route(k, n, w, scale, zero, QRoute::best())
    }

    /// As [`PackedInt8::new`] on `route` (one [`QRoute::available`] lists).
    pub fn with_route(
        k: usize,
        n: usize,
        w: &[i8],
        scale: &[f32],
        zero: &[i8],
        route: QRoute,
    ) -> Result<Self, KernelError> {
        check_len("qgemm weight", k * n, w.len())?;
        if !QRoute::available().contains(&route) {
            return Err(KernelError::Param {
                what: "qgemm route",
                detail: format!("{route:?} does not run on this CPU"),
            });
        }
        let per = |len: usize, what: &'static str| -> Result<(), KernelError> {
            if len == 1 || len == n {
                Ok(())
            } else {
                Err(KernelError::Param {
                    what,
                    detail: format!("need 1 or {n} values, got {len}"),
                })
            }
        };
        per(scale.len(), "qgemm scales")?;
        per(zero.len(), "qgemm zero points")?;
        let at = |v: usize, i: usize| if v == 1 { 0 } else { i };
        let (amx, kq, np) = padded_dims(route, k, n);
        let mut data = vec![0i8; np * kq];
        let (mut fixes, mut fix_at) = (Vec::new(), vec![0i32]);
        let mut col_sums = vec![0i32; n];
        for row in w.chunks_exact(n) {
            for (s, &v) in col_sums.iter_mut().zip(row) {
                *s += i32::from(v);
            }
        }
        // Written in storage order (a scatter from `w`'s rows missed the
        // cache on every store: a third of a model load).
        for (b, block) in data.chunks_exact_mut((kq / 4) * NB * 4).enumerate() {
            let cols = (b * NB).min(n)..((b + 1) * NB).min(n);
            for (k4, group) in block.chunks_exact_mut(NB * 4).enumerate() {
                if cols.len() == NB && 4 * k4 + 4 <= k {
                    // A whole group: four rows of 16 interleaved (vectorizes).
                    let rows: [&[i8]; 4] =
                        std::array::from_fn(|e| &w[(4 * k4 + e) * n + cols.start..][..NB]);
                    interleave4(rows, group);
                } else {
                    for (kk, row) in (4 * k4..(4 * k4 + 4).min(k)).zip(0..) {
                        let src = &w[kk * n..][cols.clone()];
                        for (j, &v) in src.iter().enumerate() {
                            group[j * 4 + row] = v;
                        }
                    }
                }
            }
        }
        let mut zero: Vec<i32> = (0..n).map(|c| i32::from(zero[at(zero.len(), c)])).collect();
        let mut scale: Vec<f32> = (0..n).map(|c| scale[at(scale.len(), c)]).collect();
        let mut kzc: Vec<i32> = (0..n)
            .map(|c| (k as i32).wrapping_mul(zero[c]).wrapping_sub(col_sums[c]))
            .collect();
        let excess = if route == QRoute::Avx2 {
            let (list, at, plane) = split_avx2(&mut data, kq);
            (fixes, fix_at) = (list, at);
            plane
        } else {
            fix_at.resize(np / CHUNK_COLS + 1, 0);
            Vec::new()
        };
        // Padded columns (never stored) keep the per-column vectors whole blocks.
        zero.resize(np, 0);
        scale.resize(np, 0.0);
        kzc.resize(np, 0);
        Ok(Self {
            k,
            n,
            kq,
            data: Buf::owned(data),
            col_sums,
            kzc,
            zero,
            scale,
            route,
            fixes: Buf::owned(fixes),
            fix_at,
            excess: Buf::owned(excess),
            amx,
        })
    }

    /// What a weights cache keeps of this packing: everything but the
    /// route-independent shape, as [`PackedInt8::from_cached`] takes it back.
    pub fn cached(&self) -> CachedInt8<'_> {
        CachedInt8 {
            dims: [self.k, self.n, self.kq],
            route: self.route,
            data: &self.data,
            fixes: &self.fixes,
            fix_at: &self.fix_at,
            excess: &self.excess,
            col_sums: &self.col_sums,
            kzc: &self.kzc,
            zero: &self.zero,
            scale: &self.scale,
        }
    }

    /// A packing of `w [k, n]` back from a weights cache (its packed
    /// weights mapped in place): `None` unless it was packed for this CPU's
    /// route (and AMX padding) with these dimensions, every part whole.
    #[allow(clippy::too_many_arguments)]
    pub fn from_cached(
        k: usize,
        n: usize,
        dims: [usize; 3],
        data: Buf<i8>,
        fixes: Buf<i32>,
        fix_at: Vec<i32>,
        excess: Buf<i8>,
        col_sums: Vec<i32>,
        kzc: Vec<i32>,
        zero: Vec<i32>,
        scale: Vec<f32>,
    ) -> Option<Self> {
        let route = QRoute::best();
        let (amx, kq, np) = padded_dims(route, k, n);
        let whole = dims == [k, n, kq]
            && route != QRoute::Reference
            && data.len() == np * kq
            && col_sums.len() == n
            && [kzc.len(), zero.len(), scale.len()] == [np; 3]
            && fixes_whole(&fixes, &fix_at, route, k, np)
            && (excess.is_empty() || (route == QRoute::Avx2 && fixes.is_empty()))
            && [0, np * kq].contains(&excess.len());
        whole.then_some(Self {
            k,
            n,
            kq,
            data,
            col_sums,
            kzc,
            zero,
            scale,
            route,
            fixes,
            fix_at,
            excess,
            amx,
        })
    }

    /// The kernel these weights run on.
    pub fn route(&self) -> QRoute {
        self.route
    }

    /// Allow the AMX route where the CPU has it (default: on); off keeps
    /// the VNNI route (tests compare the two).
    pub fn set_amx(&mut self, on: bool) {
        self.amx =
            on && self.route == QRoute::Vnni && amx_available() && self.kq.is_multiple_of(64);
    }

    /// `out[m, n] = dequant(MatMulInteger(quant(x[m, k]), W)) (+ bias)`, x quantized as one tensor.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        pool: &impl Fork,
        x: &[f32],
        m: usize,
        bias: Option<&[f32]>,
        out: &mut [f32],
        scratch: &mut QGemmScratch,
    ) -> Result<(), KernelError> {
        let (k, n, kq) = (self.k, self.n, self.kq);
        check_len("qgemm input", m * k, x.len())?;
        check_len("qgemm output", m * n, out.len())?;
        if let Some(b) = bias {
            check_len("qgemm bias", n, b.len())?;
        }
        if m == 0 {
            return Ok(());
        }
        if scratch.aq.len() < m * k {
            scratch.aq.resize(m * k, 0);
        }
        let aq = quantize_activations(x, &mut scratch.aq[..m * k])?;
        scratch.padded.clear();
        // AMX reads whole 32-row blocks: the padding rows are zeros.
        let rows = if self.amx {
            m.div_ceil(BLOCK_AMX) * BLOCK_AMX
        } else {
            m
        };
        scratch.padded.resize(rows * kq, 0);
        scratch.sums.clear();
        for (r, row) in scratch.aq[..m * k].chunks_exact(k).enumerate() {
            scratch.padded[r * kq..r * kq + k].copy_from_slice(row);
            scratch.sums.push(row.iter().map(|&v| i32::from(v)).sum());
        }
        let (a, sums) = (&scratch.padded[..], &scratch.sums[..]);
        let dst = Dst(out.as_mut_ptr());
        pool.for_each_chunk(n, CHUNK_COLS, |cols| {
            let (c0, nc) = (cols.start, cols.len());
            // Per-column constants of the zero-point correction and dequantization.
            let za = i32::from(aq.zero_point);
            let (mut cc, mut zw) = ([0i32; CHUNK_COLS], [0i32; CHUNK_COLS]);
            let (mut sc, mut bb) = ([0.0f32; CHUNK_COLS], [0.0f32; CHUNK_COLS]);
            for j in 0..nc {
                let c = c0 + j;
                zw[j] = self.zero[c];
                cc[j] = (self.k as i32)
                    .wrapping_mul(za)
                    .wrapping_mul(zw[j])
                    .wrapping_sub(za.wrapping_mul(self.col_sums[c]));
                sc[j] = aq.scale * self.scale[c];
                bb[j] = bias.map_or(0.0, |b| b[c]);
            }
            #[cfg(target_arch = "x86_64")]
            if self.amx {
                self.chunk_amx(a, m, c0, nc, sums, (&cc, &zw, &sc, bias.map(|_| &bb)), &dst);
                return;
            }
            let consts = Epilogue {
                cc: &cc[..nc],
                zw: &zw[..nc],
                sc: &sc[..nc],
                bias: bias.map(|_| &bb[..nc]),
            };
            let mut acc = [0i32; TILE_R * CHUNK_COLS];
            let mut r0 = 0;
            while r0 < m {
                let rows = TILE_R.min(m - r0);
                self.tile(a, r0, rows, c0 / NB, &mut acc);
                for r in 0..rows {
                    // SAFETY: this chunk alone writes columns `cols` of every row.
                    let y = unsafe {
                        std::slice::from_raw_parts_mut(dst.get().add((r0 + r) * n + c0), nc)
                    };
                    let dots = &acc[r * CHUNK_COLS..r * CHUNK_COLS + nc];
                    self.finish_row(dots, sums[r0 + r], &consts, y);
                }
                r0 += rows;
            }
        })?;
        Ok(())
    }

    /// One chunk of [`PackedInt8::gemm`] on AMX tiles: blocks of 32 rows ×
    /// 32 columns, each K step 64 bytes of two row tiles × two column blocks
    /// (the packed `[n/16][k/4][16][4]` blocks are AMX's B layout as they are).
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn chunk_amx(
        &self,
        a: &[u8],
        m: usize,
        c0: usize,
        nc: usize,
        sums: &[i32],
        consts: (
            &[i32; CHUNK_COLS],
            &[i32; CHUNK_COLS],
            &[f32; CHUNK_COLS],
            Option<&[f32; CHUNK_COLS]>,
        ),
        dst: &Dst,
    ) {
        use crate::kernels::amx;
        let (cc, zw, sc, bb) = consts;
        let (kq, k4) = (self.kq, self.kq / 4);
        let mut acc = amx::Acc::default();
        // SAFETY: `amx` is set only where AMX-INT8 is detected and permitted.
        unsafe { amx::begin() };
        for j0 in (0..nc).step_by(BLOCK_AMX) {
            let ncp = BLOCK_AMX.min(nc - j0);
            let e = Epilogue {
                cc: &cc[j0..j0 + ncp],
                zw: &zw[j0..j0 + ncp],
                sc: &sc[j0..j0 + ncp],
                bias: bb.map(|b| &b[j0..j0 + ncp]),
            };
            let b = (c0 + j0) / NB;
            // Two column blocks from `b`: inside the data, padded to whole chunks.
            assert!(self.data.len() >= (b + 2) * k4 * NB * 4);
            for r0 in (0..m).step_by(BLOCK_AMX) {
                assert!(a.len() >= (r0 + BLOCK_AMX) * kq);
                // SAFETY: both asserts above bound every tile row read.
                unsafe {
                    let ap = a.as_ptr().add(r0 * kq);
                    let w0 = self.data.as_ptr().add(b * k4 * NB * 4);
                    let w1 = w0.add(k4 * NB * 4);
                    amx::zero();
                    for kc in 0..kq / 64 {
                        let (ao, wo) = (kc * 64, kc * 16 * NB * 4);
                        amx::step_us(
                            ap.add(ao),
                            ap.add(16 * kq + ao),
                            kq,
                            w0.add(wo),
                            w1.add(wo),
                            NB * 4,
                        );
                    }
                    amx::store(&mut acc);
                }
                for r in 0..BLOCK_AMX.min(m - r0) {
                    // SAFETY: this chunk alone writes columns c0..c0+nc of every row.
                    let y = unsafe {
                        std::slice::from_raw_parts_mut(
                            dst.get().add((r0 + r) * self.n + c0 + j0),
                            ncp,
                        )
                    };
                    self.finish_row(&acc.0[r][..ncp], sums[r0 + r], &e, y);
                }
            }
        }
        // SAFETY: as above.
        unsafe { amx::end() };
    }

    /// [`PackedInt8::gemm`] of one row, serial and without bias, bit for bit:
    /// the recurrent step of an LSTM, where a GEMM's per-chunk setup costs
    /// as much as the dot products. The zero-point correction comes from
    /// per-column constants made at pack time, and eight column blocks
    /// accumulate side by side (the chains of one block would wait on
    /// `vpdpbusd`'s latency).
    pub fn gemv(
        &self,
        x: &[f32],
        out: &mut [f32],
        scratch: &mut QGemmScratch,
    ) -> Result<(), KernelError> {
        let (k, kq) = (self.k, self.kq);
        check_len("qgemv input", k, x.len())?;
        check_len("qgemv output", self.n, out.len())?;
        if scratch.aq.len() < k {
            scratch.aq.resize(k, 0);
        }
        let aq = quantize_activations(x, &mut scratch.aq[..k])?;
        scratch.padded.clear();
        scratch.padded.resize(kq, 0);
        scratch.padded[..k].copy_from_slice(&scratch.aq[..k]);
        let a_sum: i32 = scratch.aq[..k].iter().map(|&v| i32::from(v)).sum();
        let za = i32::from(aq.zero_point);
        #[cfg(target_arch = "x86_64")]
        if self.route == QRoute::Vnni {
            // SAFETY: features checked; `padded` holds kq bytes.
            unsafe { vnni::gemv(self, &scratch.padded, za, a_sum, aq.scale, out) };
            return Ok(());
        }
        let mut acc = [0i32; TILE_R * CHUNK_COLS];
        for c0 in (0..self.n).step_by(CHUNK_COLS) {
            let nc = CHUNK_COLS.min(self.n - c0);
            self.tile(&scratch.padded, 0, 1, c0 / NB, &mut acc);
            for (j, o) in out[c0..c0 + nc].iter_mut().enumerate() {
                let c = c0 + j;
                let v = acc[j]
                    .wrapping_add(za.wrapping_mul(self.kzc[c]))
                    .wrapping_sub(self.zero[c].wrapping_mul(a_sum));
                *o = v as f32 * (aq.scale * self.scale[c]);
            }
        }
        Ok(())
    }

    /// `acc[r][j] = Σ_k a[r0 + r, k] · w[k, block0·16 + j]` for one chunk;
    /// `a` rows of `kq` bytes (the AVX2 route's fixes added).
    fn tile(&self, a: &[u8], r0: usize, rows: usize, block0: usize, acc: &mut [i32]) {
        self.tile_route(a, r0, rows, block0, acc);
        if !self.fixes.is_empty() {
            self.add_fixes(a, r0, rows, block0 / TILE_B, acc);
        }
    }

    /// `acc[r][j] += a[r0 + r, k] · c` for every fix `(k, j, c)` of `chunk`.
    fn add_fixes(&self, a: &[u8], r0: usize, rows: usize, chunk: usize, acc: &mut [i32]) {
        let at = |i: usize| self.fix_at[i] as usize;
        for fix in self.fixes[2 * at(chunk)..2 * at(chunk + 1)].chunks_exact(2) {
            let (k, (j, c)) = (fix[0] as usize, unpack_fix(fix[1]));
            for r in 0..rows {
                let x = i32::from(a[(r0 + r) * self.kq + k]);
                let s = &mut acc[r * CHUNK_COLS + j];
                *s = s.wrapping_add(x * c);
            }
        }
    }

    /// The route's own tile: `acc[r][j] = Σ_k a[r0 + r, k] · data[k, j]`.
    fn tile_route(&self, a: &[u8], r0: usize, rows: usize, block0: usize, acc: &mut [i32]) {
        #[cfg(target_arch = "x86_64")]
        {
            // What every route reads: `rows` rows of kq from r0, TILE_B
            // blocks from block0 (the packing pads to whole chunks).
            assert!(rows <= TILE_R && acc.len() >= rows * CHUNK_COLS);
            let blocks_end = (block0 + TILE_B) * self.kq * NB;
            match self.route {
                QRoute::Vnni | QRoute::AvxVnni | QRoute::Avx2 => {
                    assert!(a.len() >= (r0 + rows) * self.kq && self.data.len() >= blocks_end);
                    assert!(self.excess.is_empty() || self.excess.len() == self.data.len());
                }
                QRoute::Reference => {}
            }
            // SAFETY: each route's CPU features were checked when it was
            // chosen ([`QRoute::available`]); the reads are asserted above.
            unsafe {
                match (self.route, rows) {
                    (QRoute::Vnni, 4) => vnni::tile::<4>(self, a, r0, block0, acc),
                    (QRoute::Vnni, 3) => vnni::tile::<3>(self, a, r0, block0, acc),
                    (QRoute::Vnni, 2) => vnni::tile::<2>(self, a, r0, block0, acc),
                    (QRoute::Vnni, _) => vnni::tile::<1>(self, a, r0, block0, acc),
                    (QRoute::AvxVnni, 4) => ymm::tile_vnni::<4>(self, a, r0, block0, acc),
                    (QRoute::AvxVnni, 3) => ymm::tile_vnni::<3>(self, a, r0, block0, acc),
                    (QRoute::AvxVnni, 2) => ymm::tile_vnni::<2>(self, a, r0, block0, acc),
                    (QRoute::AvxVnni, _) => ymm::tile_vnni::<1>(self, a, r0, block0, acc),
                    (QRoute::Avx2, 4) => ymm::tile_avx2_any::<4>(self, a, r0, block0, acc),
                    (QRoute::Avx2, 3) => ymm::tile_avx2_any::<3>(self, a, r0, block0, acc),
                    (QRoute::Avx2, 2) => ymm::tile_avx2_any::<2>(self, a, r0, block0, acc),
                    (QRoute::Avx2, _) => ymm::tile_avx2_any::<1>(self, a, r0, block0, acc),
                    (QRoute::Reference, _) => self.tile_reference(a, r0, rows, block0, acc),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.tile_reference(a, r0, rows, block0, acc);
    }

    /// One output row of a chunk from its dot products (AVX-512 code on the VNNI route).
    fn finish_row(&self, dots: &[i32], a_sum: i32, e: &Epilogue<'_>, y: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        match self.route {
            // SAFETY: AVX-512F is part of the VNNI route's features.
            QRoute::Vnni => return unsafe { vnni::finish_row(dots, a_sum, e, y) },
            // SAFETY: AVX2 is part of both 256-bit routes' features.
            QRoute::AvxVnni | QRoute::Avx2 => return unsafe { ymm::finish_row(dots, a_sum, e, y) },
            QRoute::Reference => {}
        }
        e.apply(dots, a_sum, y);
    }

    /// Readable reference of the tile: plain wrapping dot products.
    fn tile_reference(&self, a: &[u8], r0: usize, rows: usize, block0: usize, acc: &mut [i32]) {
        let k4 = self.kq / 4;
        for r in 0..rows {
            let ar = &a[(r0 + r) * self.kq..(r0 + r + 1) * self.kq];
            for j in 0..CHUNK_COLS {
                let (b, jj) = (block0 + j / NB, j % NB);
                let mut s = 0i32;
                for q in 0..k4 {
                    for e in 0..4 {
                        let w = self.data[((b * k4 + q) * NB + jj) * 4 + e];
                        s = s.wrapping_add(i32::from(ar[q * 4 + e]) * i32::from(w));
                    }
                }
                acc[r * CHUNK_COLS + j] = s;
            }
        }
    }
}

/// Per-column constants of one chunk's dequantization.
struct Epilogue<'a> {
    /// `K·za·zw − za·Σw` per column.
    cc: &'a [i32],
    /// Weight zero points.
    zw: &'a [i32],
    /// `a_scale · w_scale` per column.
    sc: &'a [f32],
    /// The bias, if the layer has one.
    bias: Option<&'a [f32]>,
}

impl Epilogue<'_> {
    /// `y = (Σaw + cc − zw·Σa) · sc (+ bias)`: `Σ(a−za)(w−zw)` with the
    /// zero points folded in, wrapping; zipped equal-length slices so the
    /// loop vectorizes.
    #[inline(always)]
    fn apply(&self, dots: &[i32], a_sum: i32, y: &mut [f32]) {
        let consts = self.cc.iter().zip(self.zw).zip(self.sc);
        for ((o, &d), ((&c, &z), &s)) in y.iter_mut().zip(dots).zip(consts) {
            *o = d.wrapping_add(c).wrapping_sub(z.wrapping_mul(a_sum)) as f32 * s;
        }
        if let Some(bias) = self.bias {
            for (o, &b) in y.iter_mut().zip(bias) {
                *o += b;
            }
        }
    }
}

/// Output pointer shared by lanes writing disjoint columns.
#[derive(Clone, Copy)]
struct Dst(*mut f32);
// SAFETY: lanes write disjoint column ranges (see `gemm`).
unsafe impl Send for Dst {}
// SAFETY: as above.
unsafe impl Sync for Dst {}
impl Dst {
    fn get(&self) -> *mut f32 {
        self.0
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{Epilogue, PackedInt8, CHUNK_COLS, NB, TILE_B};

    use std::arch::x86_64::*;

    /// [`Epilogue::apply`] compiled for AVX-512.
    ///
    /// # Safety
    /// AVX-512F must be available.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn finish_row(dots: &[i32], a_sum: i32, e: &Epilogue<'_>, y: &mut [f32]) {
        e.apply(dots, a_sum, y)
    }

    /// One quantized row `a` (kq bytes) times the packed weights, dequantized
    /// into `out[..n]`: see [`PackedInt8::gemv`].
    ///
    /// # Safety
    /// AVX-512 F/BW/VNNI must be available; `a` holds `p.kq` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemv(
        p: &PackedInt8,
        a: &[u8],
        za: i32,
        a_sum: i32,
        a_scale: f32,
        out: &mut [f32],
    ) {
        let blocks = p.kzc.len() / NB;
        let mut b = 0;
        while b + 8 <= blocks {
            gemv_blocks::<8>(p, a, b, za, a_sum, a_scale, out);
            b += 8;
        }
        while b < blocks {
            gemv_blocks::<4>(p, a, b, za, a_sum, a_scale, out);
            b += 4;
        }
    }

    /// Column blocks `b0..b0 + B` of [`gemv`].
    ///
    /// # Safety
    /// As [`gemv`]; blocks `b0..b0 + B` exist (the packing pads to 4 blocks).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn gemv_blocks<const B: usize>(
        p: &PackedInt8,
        a: &[u8],
        b0: usize,
        za: i32,
        a_sum: i32,
        a_scale: f32,
        out: &mut [f32],
    ) {
        let k4 = p.kq / 4;
        let bstride = k4 * NB * 4;
        let wp = p.data.as_ptr().add(b0 * bstride);
        let mut s = [_mm512_setzero_si512(); B];
        for q in 0..k4 {
            let av = _mm512_set1_epi32((a.as_ptr().add(q * 4) as *const i32).read_unaligned());
            for (j, acc) in s.iter_mut().enumerate() {
                let w = _mm512_loadu_si512(wp.add(j * bstride + q * NB * 4) as *const _);
                *acc = _mm512_dpbusd_epi32(*acc, av, w);
            }
        }
        let (vza, vsum, vsc) = (
            _mm512_set1_epi32(za),
            _mm512_set1_epi32(a_sum),
            _mm512_set1_ps(a_scale),
        );
        for (j, acc) in s.iter().enumerate() {
            let c = (b0 + j) * NB;
            if c >= p.n {
                break;
            }
            let kzc = _mm512_loadu_si512(p.kzc.as_ptr().add(c) as *const _);
            let zw = _mm512_loadu_si512(p.zero.as_ptr().add(c) as *const _);
            let v = _mm512_sub_epi32(
                _mm512_add_epi32(*acc, _mm512_mullo_epi32(vza, kzc)),
                _mm512_mullo_epi32(zw, vsum),
            );
            let sc = _mm512_mul_ps(vsc, _mm512_loadu_ps(p.scale.as_ptr().add(c)));
            let y = _mm512_mul_ps(_mm512_cvtepi32_ps(v), sc);
            let live = (p.n - c).min(NB);
            let mask: __mmask16 = if live == NB { !0 } else { (1u16 << live) - 1 };
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(c), mask, y);
        }
    }

    /// `R` rows × 4 blocks of 16 columns, K in groups of 4 bytes.
    ///
    /// # Safety
    /// AVX-512 F/BW/VNNI must be available; `a` holds rows `r0..r0+R` of `kq`
    /// bytes and the packed weights hold blocks `block0..block0+4`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile<const R: usize>(
        p: &PackedInt8,
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
    ) {
        let k4 = p.kq / 4;
        let mut s = [[_mm512_setzero_si512(); TILE_B]; R];
        let ap = a.as_ptr().add(r0 * p.kq);
        let wp = p.data.as_ptr().add(block0 * k4 * NB * 4);
        let bstride = k4 * NB * 4;
        for q in 0..k4 {
            let mut w = [_mm512_setzero_si512(); TILE_B];
            for (b, v) in w.iter_mut().enumerate() {
                *v = _mm512_loadu_si512(wp.add(b * bstride + q * NB * 4) as *const _);
            }
            for (r, row) in s.iter_mut().enumerate() {
                let g = (ap.add(r * p.kq + q * 4) as *const i32).read_unaligned();
                let av = _mm512_set1_epi32(g);
                for (b, acc) in row.iter_mut().enumerate() {
                    *acc = _mm512_dpbusd_epi32(*acc, av, w[b]);
                }
            }
        }
        for (r, row) in s.iter().enumerate() {
            for (b, v) in row.iter().enumerate() {
                _mm512_storeu_si512(acc.as_mut_ptr().add(r * CHUNK_COLS + b * NB) as *mut _, *v);
            }
        }
    }
}

/// The 256-bit routes, both on the VNNI packing: AVX-VNNI, and AVX2 on split pairs.
#[cfg(target_arch = "x86_64")]
mod ymm {
    use super::{Epilogue, PackedInt8, CHUNK_COLS, NB, TILE_B};

    use crate::kernels::WEIGHT_PREFETCH;
    use std::arch::x86_64::*;

    /// [`Epilogue::apply`] compiled for AVX2.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn finish_row(dots: &[i32], a_sum: i32, e: &Epilogue<'_>, y: &mut [f32]) {
        e.apply(dots, a_sum, y)
    }

    /// `R` rows × 4 blocks of 16 columns with 256-bit `vpdpbusd`, K in groups of 4.
    ///
    /// # Safety
    /// AVX2 and AVX-VNNI must be available; `a` holds rows `r0..r0+R` of
    /// `kq` bytes and the packed data blocks `block0..block0+4`.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn tile_vnni<const R: usize>(
        p: &PackedInt8,
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
    ) {
        tile_with::<R, 1>(p, [&p.data], a, r0, block0, acc, |s, a, [w]| {
            _mm256_dpbusd_avx_epi32(s, a, w)
        });
    }

    /// `R` rows × 4 blocks of 16 columns with `vpmaddubsw` (pairs of u8 ×
    /// i8 into i16) on two K groups, added in i16 (the split lanes keep each
    /// sum inside i16, see `split_lanes`), then `vpmaddwd` by ones (the two
    /// pairs into i32): per 8 K and 8 columns three multiplies, not four.
    ///
    /// # Safety
    /// AVX2 must be available; `a` holds rows `r0..r0+R` of `kq` bytes and
    /// the packed data blocks `block0..block0+4`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2<const R: usize>(
        p: &PackedInt8,
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
    ) {
        let ones = _mm256_set1_epi16(1);
        let (block, rows, groups) = (p.kq * NB, a.as_ptr().add(r0 * p.kq), p.kq / 4);
        let row_group = |r: usize, q: usize| {
            _mm256_set1_epi32((rows.add(r * p.kq + q * 4) as *const i32).read_unaligned())
        };
        for b in 0..TILE_B {
            let wp = p.data.as_ptr().cast::<u8>().add((block0 + b) * block);
            let w =
                |q: usize, h: usize| _mm256_loadu_si256(wp.add(q * NB * 4 + 32 * h) as *const _);
            let mut s = [[_mm256_setzero_si256(); 2]; R];
            // As in `tile_with`: the first rows bring the weights in.
            let ahead = if r0 == 0 { WEIGHT_PREFETCH } else { 0 };
            let mut q = 0;
            while q + 2 <= groups {
                if ahead > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(q * NB * 4 + ahead) as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(
                        wp.wrapping_add(q * NB * 4 + 64 + ahead) as *const i8
                    );
                }
                let (w00, w01, w10, w11) = (w(q, 0), w(q, 1), w(q + 1, 0), w(q + 1, 1));
                for (r, row) in s.iter_mut().enumerate() {
                    let (a0, a1) = (row_group(r, q), row_group(r, q + 1));
                    let lo = _mm256_add_epi16(
                        _mm256_maddubs_epi16(a0, w00),
                        _mm256_maddubs_epi16(a1, w10),
                    );
                    let hi = _mm256_add_epi16(
                        _mm256_maddubs_epi16(a0, w01),
                        _mm256_maddubs_epi16(a1, w11),
                    );
                    row[0] = _mm256_add_epi32(row[0], _mm256_madd_epi16(lo, ones));
                    row[1] = _mm256_add_epi32(row[1], _mm256_madd_epi16(hi, ones));
                }
                q += 2;
            }
            if q < groups {
                // An odd last group on its own.
                let (w0, w1) = (w(q, 0), w(q, 1));
                for (r, row) in s.iter_mut().enumerate() {
                    let av = row_group(r, q);
                    let dot = |w| _mm256_madd_epi16(_mm256_maddubs_epi16(av, w), ones);
                    row[0] = _mm256_add_epi32(row[0], dot(w0));
                    row[1] = _mm256_add_epi32(row[1], dot(w1));
                }
            }
            store(&s, b, acc);
        }
    }

    /// [`tile_avx2`], or [`tile_avx2_planes`] where the fixes are a plane.
    ///
    /// # Safety
    /// As [`tile_avx2`].
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_avx2_any<const R: usize>(
        p: &PackedInt8,
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
    ) {
        if p.excess.is_empty() {
            tile_avx2::<R>(p, a, r0, block0, acc)
        } else {
            tile_avx2_planes::<R>(p, a, r0, block0, acc)
        }
    }

    /// [`tile_avx2`] over both planes, the split pairs and their excess:
    /// each its own `vpmaddubsw` (neither saturates), summed in i32.
    ///
    /// # Safety
    /// As [`tile_avx2`]; the excess plane is as long as the data.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile_avx2_planes<const R: usize>(
        p: &PackedInt8,
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
    ) {
        let ones = _mm256_set1_epi16(1);
        let dot = |a, w| _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), ones);
        tile_with::<R, 2>(
            p,
            [&p.data, &p.excess],
            a,
            r0,
            block0,
            acc,
            |s, a, [w, e]| _mm256_add_epi32(s, _mm256_add_epi32(dot(a, w), dot(a, e))),
        );
    }

    /// The body every 256-bit tile shares, over `P` planes of the VNNI
    /// packing (the data, and the AVX2 route's excess): per block of 16
    /// columns, each step reads 64 bytes of each plane (columns 0–7, 8–15:
    /// 4 K each) and 4 bytes of each row (`dot` multiplies them into the sums).
    ///
    /// # Safety
    /// The caller's CPU features; `a` holds rows `r0..r0+R` of `kq` bytes and
    /// every plane the packed blocks `block0..block0+4`.
    #[inline(always)]
    unsafe fn tile_with<const R: usize, const P: usize>(
        p: &PackedInt8,
        planes: [&[i8]; P],
        a: &[u8],
        r0: usize,
        block0: usize,
        acc: &mut [i32],
        dot: impl Fn(__m256i, __m256i, [__m256i; P]) -> __m256i,
    ) {
        let (block, rows) = (p.kq * NB, a.as_ptr().add(r0 * p.kq));
        for b in 0..TILE_B {
            let wp = planes.map(|w| w.as_ptr().cast::<u8>().add((block0 + b) * block));
            // Per row: columns 0..8 and 8..16 of the block.
            let mut s = [[_mm256_setzero_si256(); 2]; R];
            // The first rows bring the chunk's weights in (later rows find
            // them in cache): ask for them ahead, across 4 KB pages.
            let ahead = if r0 == 0 { WEIGHT_PREFETCH } else { 0 };
            for q in 0..p.kq / 4 {
                if ahead > 0 {
                    for w in wp {
                        _mm_prefetch::<_MM_HINT_T0>(w.wrapping_add(q * NB * 4 + ahead) as *const i8);
                    }
                }
                let half = |h: usize| {
                    wp.map(|w| _mm256_loadu_si256(w.add(q * NB * 4 + 32 * h) as *const _))
                };
                let (w0, w1) = (half(0), half(1));
                for (r, row) in s.iter_mut().enumerate() {
                    let g = (rows.add(r * p.kq + q * 4) as *const i32).read_unaligned();
                    let av = _mm256_set1_epi32(g);
                    row[0] = dot(row[0], av, w0);
                    row[1] = dot(row[1], av, w1);
                }
            }
            store(&s, b, acc);
        }
    }

    /// Block `b`'s sums of every row into `acc` (`[row][CHUNK_COLS]`).
    #[inline(always)]
    unsafe fn store<const R: usize>(s: &[[__m256i; 2]; R], b: usize, acc: &mut [i32]) {
        for (r, row) in s.iter().enumerate() {
            for (h, v) in row.iter().enumerate() {
                let at = acc.as_mut_ptr().add(r * CHUNK_COLS + b * NB + 8 * h);
                _mm256_storeu_si256(at as *mut _, *v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::matmul::{matmul_ws, transpose, IntWeights, MatmulWorkspace, Weights};
    use crate::tts::kokoro::quant::Serial;
    use voxlane_runtime::LanePool;

    #[test]
    fn equals_the_dot_product_kernel_bit_for_bit() {
        let pool = LanePool::new(2).expect("pool");
        let routes = QRoute::available();
        assert!(routes.contains(&QRoute::Reference));
        for &(m, k, n) in &[
            (1, 256, 1024),
            (5, 70, 50),
            (37, 768, 64),
            (9, 3, 17),
            (2, 256, 1040),
            (1, 5, 200),
            (54, 768, 2048),
            (70, 130, 100),
        ] {
            let w: Vec<i8> = (0..k * n).map(|i| ((i * 131 + 7) % 255) as i8).collect();
            let scale: Vec<f32> = (0..n).map(|i| 1e-3 + i as f32 * 1e-5).collect();
            let zero: Vec<i8> = (0..n).map(|i| (i % 5) as i8 - 2).collect();
            let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.01).collect();
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 211) as f32 / 37.0 - 2.5)
                .collect();
            let wt = transpose(&w, k, n).expect("transpose");
            let zp: Vec<i32> = zero.iter().map(|&z| i32::from(z)).collect();
            let reference = Weights::int8(IntWeights::I8(&wt), n, k, &scale, &zp).expect("weights");
            let mut want = vec![0.0f32; m * n];
            matmul_ws(
                &x,
                m,
                k,
                &reference,
                Some(&bias),
                &mut want,
                &mut MatmulWorkspace::default(),
                &pool,
            )
            .expect("matmul");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for &route in &routes {
                let at = format!("{route:?}: m={m} k={k} n={n}");
                let mut packed =
                    PackedInt8::with_route(k, n, &w, &scale, &zero, route).expect("pack");
                assert_eq!(packed.route(), route);
                for amx in [false, true] {
                    let mut got = vec![0.0f32; m * n];
                    packed.set_amx(amx);
                    packed
                        .gemm(
                            &pool,
                            &x,
                            m,
                            Some(&bias),
                            &mut got,
                            &mut QGemmScratch::default(),
                        )
                        .expect("gemm");
                    assert_eq!(bits(&got), bits(&want), "{at}, amx allowed: {amx}");
                }
                // The one-row route equals the GEMM's row (without bias).
                let mut scratch = QGemmScratch::default();
                for r in 0..m.min(3) {
                    let (mut one, mut y) = (vec![0.0f32; n], vec![0.0f32; n]);
                    let xr = &x[r * k..(r + 1) * k];
                    packed
                        .gemm(&Serial, xr, 1, None, &mut one, &mut scratch)
                        .expect("gemm row");
                    packed.gemv(xr, &mut y, &mut scratch).expect("gemv");
                    assert_eq!(bits(&y), bits(&one), "gemv row {r}: {at}");
                }
            }
        }
    }

    #[test]
    fn a_cached_packing_comes_back_whole_or_not_at_all() {
        if !available() {
            eprintln!("skipped: this CPU has no packed int8 route");
            return;
        }
        let (m, k, n) = (3, 70, 50);
        let w: Vec<i8> = (0..k * n).map(|i| ((i * 131 + 7) % 255) as i8).collect();
        let scale: Vec<f32> = (0..n).map(|i| 1e-3 + i as f32 * 1e-5).collect();
        let zero: Vec<i8> = (0..n).map(|i| (i % 5) as i8 - 2).collect();
        let x: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
        let packed = PackedInt8::new(k, n, &w, &scale, &zero).expect("pack");
        let c = packed.cached();
        let back = |k: usize, n: usize, data: &[i8], fixes: &[i32]| {
            PackedInt8::from_cached(
                k,
                n,
                c.dims,
                Buf::owned(data.to_vec()),
                Buf::owned(fixes.to_vec()),
                c.fix_at.to_vec(),
                Buf::owned(c.excess.to_vec()),
                c.col_sums.to_vec(),
                c.kzc.to_vec(),
                c.zero.to_vec(),
                c.scale.to_vec(),
            )
        };
        let again = back(k, n, c.data, c.fixes).expect("a whole packing comes back");
        let run = |p: &PackedInt8| {
            let mut out = vec![0.0f32; m * n];
            p.gemm(&Serial, &x, m, None, &mut out, &mut QGemmScratch::default())
                .expect("gemm");
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(run(&again), run(&packed));
        // Another layer's shape, or a part cut short, is refused.
        assert!(back(k + 4, n, c.data, c.fixes).is_none());
        assert!(back(k, n - 1, c.data, c.fixes).is_none());
        let d = c.data.len();
        assert!(back(k, n, &c.data[..d.saturating_sub(1)], c.fixes).is_none());
        if !c.fixes.is_empty() {
            let f = c.fixes.len();
            assert!(back(k, n, c.data, &c.fixes[..f - 2]).is_none());
            let mut far = c.fixes.to_vec();
            far[0] = k as i32;
            assert!(back(k, n, c.data, &far).is_none(), "a fix past K");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any shape (K = 1, odd K and N, N past a chunk) and any i8 weights
        /// (saturating pairs included): every route this CPU runs returns
        /// the readable route's bits, GEMM and one-row GEMV alike.
        #[test]
        fn every_route_equals_the_readable_tile(
            m in 1usize..7,
            k in 1usize..90,
            n in 1usize..150,
            seed in 0u64..1000,
            mode in 0u32..3,
        ) {
            let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = || {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 33) as u32
            };
            // Uniform i8; only the saturating extremes (±100..±128); or
            // small weights with one extreme in 200 (a list of fixes, where
            // the others take a plane on the AVX2 route).
            let w: Vec<i8> = (0..k * n)
                .map(|_| {
                    let v = next();
                    let mag = 100 + (v % 29) as i32;
                    let extreme = (if v & 1 == 0 { mag.min(127) } else { -mag }) as i8;
                    match mode {
                        0 => v as u8 as i8,
                        1 => extreme,
                        _ if (v >> 8) % 200 == 0 => extreme,
                        _ => ((v >> 8) % 61) as i8 - 30,
                    }
                })
                .collect();
            let x: Vec<f32> = (0..m * k).map(|_| (next() % 2001) as f32 / 400.0 - 2.5).collect();
            let zero: Vec<i8> = (0..n).map(|_| (next() % 7) as i8 - 3).collect();
            let scale: Vec<f32> = (0..n).map(|i| 1e-3 + i as f32 * 1e-5).collect();
            let run = |route: QRoute| {
                let p = PackedInt8::with_route(k, n, &w, &scale, &zero, route).expect("pack");
                let (mut y, mut row) = (vec![0.0f32; m * n], vec![0.0f32; n]);
                let mut scratch = QGemmScratch::default();
                p.gemm(&Serial, &x, m, None, &mut y, &mut scratch).expect("gemm");
                p.gemv(&x[..k], &mut row, &mut scratch).expect("gemv");
                y.extend(row);
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let want = run(QRoute::Reference);
            for route in QRoute::available() {
                proptest::prop_assert_eq!(&run(route), &want, "{:?}", route);
            }
        }
    }

    #[test]
    fn few_fixes_take_a_list_many_a_plane() {
        if !QRoute::available().contains(&QRoute::Avx2) {
            eprintln!("skipped: this CPU has no AVX2 route");
            return;
        }
        let (k, n) = (256, 128);
        // One saturating pair (two weights of 100) per column, or every pair.
        let few: Vec<i8> = (0..k * n)
            .map(|i| if i < 2 * n { 100 } else { 3 })
            .collect();
        let many = vec![100i8; k * n];
        let pack = |w: &[i8]| PackedInt8::with_route(k, n, w, &[0.01], &[0], QRoute::Avx2);
        let (few, many) = (pack(&few).expect("pack"), pack(&many).expect("pack"));
        assert_eq!((few.fixes.len() / 2, few.excess.len()), (n, 0));
        assert_eq!((many.fixes.len(), many.excess.len()), (0, many.data.len()));
    }

    #[test]
    fn split_lanes_keep_every_sum_in_i16_and_give_the_weights_back() {
        // Three groups (two summed, one alone) of 16 columns, chunk columns 32–47.
        let k4s = 3;
        let mut state = 7u64;
        let mut fixes = Vec::new();
        for trial in 0..3000 {
            let block: Vec<i8> = (0..k4s * NB * 4)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let v = (state >> 33) as u32;
                    match trial % 3 {
                        0 => v as u8 as i8,
                        1 => (if v & 1 == 0 { 127 } else { -128 }) as i8,
                        _ => ((v >> 8) % 81) as i8 - 40,
                    }
                })
                .collect();
            let mut split = block.clone();
            fixes.clear();
            split_lanes(&mut split, k4s, 32, &mut fixes);
            let mut back: Vec<i32> = split.iter().map(|&v| i32::from(v)).collect();
            for f in fixes.chunks_exact(2) {
                let (k, (j, c)) = (f[0] as usize, unpack_fix(f[1]));
                assert!((32..48).contains(&j) && k < 4 * k4s && c != 0 && c.abs() <= 128);
                back[((k / 4) * NB + j - 32) * 4 + k % 4] += c;
            }
            let want: Vec<i32> = block.iter().map(|&v| i32::from(v)).collect();
            assert_eq!(back, want, "trial {trial}");
            // Each lane's extremes over u8 activations: 255 × its positive and
            // negative parts; lanes already inside keep their weights.
            for j in 0..NB {
                for e in [0, 2] {
                    for q0 in [0, 2] {
                        let ks: Vec<usize> = (q0..(q0 + 2).min(k4s))
                            .flat_map(|q| [(q * NB + j) * 4 + e, (q * NB + j) * 4 + e + 1])
                            .collect();
                        let part = |v: &[i8], sign: i32| -> i32 {
                            ks.iter().map(|&i| (sign * i32::from(v[i])).max(0)).sum()
                        };
                        for sign in [1, -1] {
                            assert!(255 * part(&split, sign) <= 32767, "trial {trial}");
                            if part(&block, sign) <= 128 {
                                assert_eq!(part(&split, sign), part(&block, sign));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn split_pairs_never_saturate_and_give_the_weights_back() {
        let mut fixes = Vec::new();
        for a in -128..=127i32 {
            for b in -128..=127i32 {
                // Column 3's first K pair and column 5's second, in chunk columns 16–31.
                let mut g = [0i8; 4 * NB];
                (g[12], g[13], g[22], g[23]) = (a as i8, b as i8, b as i8, a as i8);
                let want: Vec<i32> = g.iter().map(|&v| i32::from(v)).collect();
                fixes.clear();
                split_pairs(&mut g, 7, 16, &mut fixes);
                let mut back: Vec<i32> = g.iter().map(|&v| i32::from(v)).collect();
                for f in fixes.chunks_exact(2) {
                    let (j, c) = unpack_fix(f[1]);
                    assert!((16..32).contains(&j) && (28..32).contains(&f[0]));
                    back[(j - 16) * 4 + f[0] as usize - 28] += c;
                }
                assert_eq!(back, want, "pair ({a}, {b})");
                // The sums are linear in each u8 activation: the corners bound them.
                for p in g.chunks_exact(2) {
                    let (w0, w1) = (i32::from(p[0]), i32::from(p[1]));
                    for (x0, x1) in [(0, 255), (255, 0), (255, 255)] {
                        let sum = x0 * w0 + x1 * w1;
                        assert!((-32768..=32767).contains(&sum), "({a}, {b}): {sum}");
                    }
                }
                let same_sign_over =
                    (a > 0 && b > 0 && a + b > 128) || (a < 0 && b < 0 && a + b < -128);
                assert_eq!(
                    fixes.len(),
                    if same_sign_over { 4 } else { 0 },
                    "({a}, {b})"
                );
            }
        }
    }
}
