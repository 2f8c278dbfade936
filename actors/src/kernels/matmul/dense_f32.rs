//! f32 weights: matvec rows from `f32_matvec` (exact 16-lane order), GEMM
//! chunks straight into the `sgemm` tile with W seen transposed (no copy).

use super::{add_bias, run_float, run_grouped, DisjointOut, SMALL_M};
use crate::kernels::cpu::SimdLevel;
use crate::kernels::error::KernelError;
use crate::kernels::f32_matvec;
use crate::kernels::sgemm::{sgemm, MatRef};
use voxlane_runtime::Fork;

thread_local! {
    /// Per-lane GEMM output tile (no allocation per call once grown).
    static TILE: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

type NoTile = fn(usize, usize, usize, usize, &mut [f32]);

/// Output columns per GEMM chunk: wider than [`CHUNK_N`] so each `sgemm`
/// call gets a tile big enough to run at speed; fixed, independent of threads.
const GEMM_CHUNK_N: usize = 256;

/// Up to this many rows take grouped matvecs instead of `sgemm` (which packs
/// and allocates per call): Mimi's streaming steps have at most 16 frames.
pub(crate) const MULTI_ROWS_M: usize = 16;

#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    if (2..=MULTI_ROWS_M).contains(&m) {
        // Weight-bound small M (streaming frames): each weight chunk is read
        // once per group of rows, no packing, no allocation, the bits of per-row matvecs.
        let group = |xs: &[f32], g: usize, n0: usize, nr: usize, y: &mut [f32]| {
            let wr = &w[n0 * k..(n0 + nr) * k];
            f32_matvec::rows_multi(level, xs, g, wr, k, y, nr, nr);
        };
        return run_grouped(a, m, k, n, bias, out, lanes, group);
    }
    if m <= SMALL_M {
        let rows = |x: &[f32], n0: usize, y: &mut [f32]| {
            let wr = &w[n0 * k..(n0 + y.len()) * k];
            f32_matvec::rows(level, x, wr, k, None, y);
        };
        return run_float(a, m, k, n, bias, out, lanes, rows, None::<NoTile>);
    }
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk(n, GEMM_CHUNK_N, |range| {
        let nr = range.len();
        TILE.with(|tile| {
            let mut c = tile.borrow_mut();
            if c.len() < m * nr {
                // Grows once per lane to the largest tile, then frames reuse it.
                c.resize(m * nr, 0.0);
            }
            let c = &mut c[..m * nr];
            let wr = &w[range.start * k..range.end * k];
            // Shapes are consistent by construction, so sgemm cannot fail here.
            let done = sgemm(
                m,
                nr,
                k,
                MatRef::row_major(a, k),
                MatRef::transposed(wr, k),
                c,
                nr,
                false,
            );
            debug_assert!(done.is_ok(), "sgemm rejected consistent shapes");
            for r in 0..m {
                // SAFETY: this chunk alone writes columns `range` of every row.
                let y = unsafe { dst.range_mut(r * n + range.start, nr) };
                y.copy_from_slice(&c[r * nr..(r + 1) * nr]);
                add_bias(y, bias.map(|b| &b[range.clone()]));
            }
        });
    })?;
    Ok(())
}
