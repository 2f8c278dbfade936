//! Single-threaded strided f32 GEMM tile, backed by the `gemm` crate.
//!
//! The crate is built without rayon and always called with
//! `Parallelism::None`, so it can never start threads of its own: voxlane's
//! lanes decide the parallel split (on output columns, in fixed chunks) and
//! call this inside one lane.
//!
//! `gemm::gemm` picks the CPU's widest kernels itself (AVX-512 here), past
//! `VOXLANE_SIMD`; below AVX-512 this module calls the crate's AVX2 or scalar
//! microkernels by name instead, so a capped run (CI, `bench … avx2` rows)
//! runs what an AVX2-only or plain CPU runs.

use super::cpu::{features, SimdLevel};
use super::error::{check_len, KernelError};

/// A row-major or strided view of a matrix operand.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a> {
    /// Backing storage.
    pub data: &'a [f32],
    /// Element stride between rows.
    pub row_stride: usize,
    /// Element stride between columns.
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A dense row-major `rows × cols` view.
    pub fn row_major(data: &'a [f32], cols: usize) -> Self {
        Self {
            data,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose of a dense row-major `rows × cols` matrix, seen as `cols × rows`.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        Self {
            data,
            row_stride: 1,
            col_stride: cols,
        }
    }

    fn max_index(&self, rows: usize, cols: usize) -> usize {
        if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * self.row_stride + (cols - 1) * self.col_stride + 1
        }
    }
}

/// `C[m,n] (+)= A[m,k] · B[k,n]`; `accumulate` adds into `c`, else overwrites it.
///
/// `c` is dense row-major with row stride `ldc`. Runs at the process's level
/// ([`features`], capped by `VOXLANE_SIMD`).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<(), KernelError> {
    sgemm_at(features().best_level(), m, n, k, a, b, c, ldc, accumulate)
}

/// [`sgemm`] on the gemm crate's kernels for `level` (AVX-512, AVX2+FMA or
/// scalar; a level the CPU lacks falls to the next one it has).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_at(
    level: SimdLevel,
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) -> Result<(), KernelError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if ldc < n {
        return Err(KernelError::Param {
            what: "ldc",
            detail: format!("row stride {ldc} < n {n}"),
        });
    }
    if a.data.len() < a.max_index(m, k) {
        check_len("sgemm A", a.max_index(m, k), a.data.len())?;
    }
    if b.data.len() < b.max_index(k, n) {
        check_len("sgemm B", b.max_index(k, n), b.data.len())?;
    }
    if c.len() < (m - 1) * ldc + n {
        check_len("sgemm C", (m - 1) * ldc + n, c.len())?;
    }
    if k == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].fill(0.0);
            }
        }
        return Ok(());
    }
    let dst = Operand {
        ptr: c.as_mut_ptr(),
        cs: 1,
        rs: ldc as isize,
    };
    let lhs = Operand {
        ptr: a.data.as_ptr(),
        cs: a.col_stride as isize,
        rs: a.row_stride as isize,
    };
    let rhs = Operand {
        ptr: b.data.as_ptr(),
        cs: b.col_stride as isize,
        rs: b.row_stride as isize,
    };
    // SAFETY: every index the call touches was bounds-checked above; strides
    // fit in isize for any slice that exists.
    unsafe { run(level, m, n, k, dst, accumulate, lhs, rhs) };
    Ok(())
}

/// A matrix operand as the gemm crate takes it: base, column and row stride.
#[derive(Clone, Copy)]
struct Operand<P> {
    ptr: P,
    cs: isize,
    rs: isize,
}

/// One call of the crate's generic driver on the microkernels of module
/// `$kernels` (`$lanes` f32 per register), as its own `gemm_basic` makes it.
macro_rules! driver {
    ($simd:expr, $lanes:literal, $kernels:path, $m:expr, $n:expr, $k:expr, $dst:expr, $read:expr, $lhs:expr, $rhs:expr) => {{
        use $kernels as u;
        gemm_common::gemm::gemm_basic_generic::<
            _,
            f32,
            $lanes,
            { u::MR_DIV_N * $lanes },
            { u::NR },
            { u::MR_DIV_N },
            { u::H_M },
            { u::H_N },
        >(
            $simd,
            $m,
            $n,
            $k,
            $dst.ptr,
            $dst.cs,
            $dst.rs,
            $read,
            $lhs.ptr,
            $lhs.cs,
            $lhs.rs,
            $rhs.ptr,
            $rhs.cs,
            $rhs.rs,
            1.0,
            1.0,
            false,
            false,
            false,
            |a, b, c| a * b + c,
            &u::UKR,
            &u::H_UKR,
            false,
            gemm::Parallelism::None,
        )
    }};
}

/// Call the gemm crate's kernels for `level`.
///
/// # Safety
/// Every element the strides reach for `m × n` (dst), `m × k` (lhs) and
/// `k × n` (rhs) must be in bounds; strides must be non-negative.
#[allow(clippy::too_many_arguments)]
unsafe fn run(
    level: SimdLevel,
    m: usize,
    n: usize,
    k: usize,
    dst: Operand<*mut f32>,
    read_dst: bool,
    lhs: Operand<*const f32>,
    rhs: Operand<*const f32>,
) {
    if level >= SimdLevel::Avx512 {
        gemm::gemm(
            m,
            n,
            k,
            dst.ptr,
            dst.cs,
            dst.rs,
            read_dst,
            lhs.ptr,
            lhs.cs,
            lhs.rs,
            rhs.ptr,
            rhs.cs,
            rhs.rs,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
        return;
    }
    // `gemm::gemm`'s own first step (its microkernels want a column-major
    // destination): a row-major `C = A·B` is computed as `Cᵀ = Bᵀ·Aᵀ`.
    let (m, n, dst, lhs, rhs) = if dst.cs.abs() < dst.rs.abs() {
        let t = |o: Operand<*const f32>| Operand {
            ptr: o.ptr,
            cs: o.rs,
            rs: o.cs,
        };
        let d = Operand {
            ptr: dst.ptr,
            cs: dst.rs,
            rs: dst.cs,
        };
        (n, m, d, t(rhs), t(lhs))
    } else {
        (m, n, dst, lhs, rhs)
    };
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx2 {
        if let Some(simd) = gemm_common::simd::V3::try_new() {
            return driver!(
                simd,
                8,
                gemm_f32::microkernel::fma::f32,
                m,
                n,
                k,
                dst,
                read_dst,
                lhs,
                rhs
            );
        }
    }
    let scalar = gemm_common::simd::Scalar;
    driver!(
        scalar,
        1,
        gemm_f32::microkernel::scalar::f32,
        m,
        n,
        k,
        dst,
        read_dst,
        lhs,
        rhs
    )
}

/// Readable reference for [`sgemm`], used by tests.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_reference(
    m: usize,
    n: usize,
    k: usize,
    a: MatRef<'_>,
    b: MatRef<'_>,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                acc += a.data[i * a.row_stride + p * a.col_stride] as f64
                    * b.data[p * b.row_stride + j * b.col_stride] as f64;
            }
            let dst = &mut c[i * ldc + j];
            *dst = if accumulate {
                *dst + acc as f32
            } else {
                acc as f32
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use proptest::prelude::*;

    proptest! {
        /// Every level this CPU runs (AVX-512, AVX2 and scalar kernels of
        /// the gemm crate) against the f64 reference: a row-major `C` goes
        /// through the transposed path, and `n = 1` (`ldc = 1`) the direct one.
        #[test]
        fn matches_reference(m in 1usize..20, n in 1usize..40, k in 1usize..70, acc in any::<bool>(), seed in any::<u64>()) {
            let mut s = seed;
            let mut rnd = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5 };
            let a: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..n * k).map(|_| rnd()).collect();
            let c0: Vec<f32> = (0..m * n).map(|_| rnd()).collect();
            let mut r = c0.clone();
            // B given as W[n,k] row-major, used transposed.
            sgemm_reference(m, n, k, MatRef::row_major(&a, k), MatRef::transposed(&b, k), &mut r, n, acc);
            for level in available_levels() {
                let mut c = c0.clone();
                sgemm_at(level, m, n, k, MatRef::row_major(&a, k), MatRef::transposed(&b, k), &mut c, n, acc).unwrap();
                for i in 0..m * n {
                    let bound: f32 = 1e-5 * (0..k).map(|p| (a[(i / n) * k + p] * b[(i % n) * k + p]).abs()).sum::<f32>() + 1e-6;
                    let slack = if acc { 1e-6 * c0[i].abs() } else { 0.0 };
                    prop_assert!((c[i] - r[i]).abs() <= bound + slack, "{:?}: element {} differs: {} vs {}", level, i, c[i], r[i]);
                }
            }
        }
    }
}
