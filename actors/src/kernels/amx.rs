//! AMX tile blocks, shared by the int8 conv and GEMM routes and the bf16
//! conv route: one configuration (eight tiles of 16 rows × 64 bytes), a
//! 32 × 32 block of four accumulator tiles, and its dot-product steps
//! (`tdpbsud`: signed A × unsigned B, `tdpbusd`: unsigned A × signed B, both
//! i32 sums that wrap modulo 2³² as `vpdpbusd`'s do, so AMX routes equal the
//! VNNI routes bit for bit; `tdpbf16ps`: bf16 pairs into f32 sums).
//!
//! Only reached where [`super::cpu::features`] reports `amx_int8` /
//! `amx_bf16` (which include Linux's permission for the tile state); each
//! block of work runs between [`begin`] and [`end`] on its own thread.

use std::arch::asm;

/// Rows (and columns) of one accumulator block.
pub const BLOCK: usize = 32;

/// `ldtilecfg`'s 64 bytes: palette 1, tiles 0–3 the accumulators (16 × 16
/// i32), 4–5 the A pair, 6–7 the B pair; every tile 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn new() -> Self {
        let mut c = [0u8; 64];
        c[0] = 1;
        for t in 0..8 {
            c[16 + 2 * t] = 64;
            c[48 + t] = 16;
        }
        Self(c)
    }
}

/// One block's sums: `[32 A rows][32 B columns]` of i32 (int8 steps) or f32 (bf16 steps).
#[repr(C, align(64))]
pub struct Acc<T = i32>(pub [[T; BLOCK]; BLOCK]);

impl<T: Copy + Default> Default for Acc<T> {
    fn default() -> Self {
        Self([[T::default(); BLOCK]; BLOCK])
    }
}

/// Configure the tiles on this thread.
///
/// # Safety
/// Needs AMX-TILE with the OS's permission for the tile state.
pub unsafe fn begin() {
    let cfg = TileConfig::new();
    asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
}

/// Release the tiles (the thread's tile state returns to init, so context
/// switches stop saving it).
///
/// # Safety
/// As [`begin`].
pub unsafe fn end() {
    asm!("tilerelease", options(nostack, nomem));
}

/// Zero the four accumulator tiles.
///
/// # Safety
/// After [`begin`].
#[inline(always)]
pub unsafe fn zero() {
    asm!(
        "tilezero tmm0",
        "tilezero tmm1",
        "tilezero tmm2",
        "tilezero tmm3",
        options(nostack, nomem)
    );
}

/// One K step of 64 bytes, `C[i][j] += A_i · B_j`, as `$op`: `a0`/`a1` 16
/// rows each of 64 bytes at `a_stride`; `b0`/`b1` 16 rows (K groups of 4
/// bytes: four int8 or two bf16) of 16 columns × 4 bytes at `b_stride`.
macro_rules! step {
    ($(#[$doc:meta])* $name:ident, $op:literal, $a:ty, $b:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// After [`begin`]; all 64 rows of 64 bytes must be readable.
        #[inline(always)]
        pub unsafe fn $name(a0: *const $a, a1: *const $a, a_stride: usize, b0: *const $b, b1: *const $b, b_stride: usize) {
            asm!(
                "tileloadd tmm4, [{a0} + {sa}*1]",
                "tileloadd tmm5, [{a1} + {sa}*1]",
                "tileloadd tmm6, [{b0} + {sb}*1]",
                "tileloadd tmm7, [{b1} + {sb}*1]",
                concat!($op, " tmm0, tmm4, tmm6"),
                concat!($op, " tmm1, tmm4, tmm7"),
                concat!($op, " tmm2, tmm5, tmm6"),
                concat!($op, " tmm3, tmm5, tmm7"),
                a0 = in(reg) a0,
                a1 = in(reg) a1,
                sa = in(reg) a_stride,
                b0 = in(reg) b0,
                b1 = in(reg) b1,
                sb = in(reg) b_stride,
                options(nostack, readonly)
            );
        }
    };
}

step!(
    /// A K step with A signed (i8) and B unsigned (u8): `tdpbsud`.
    step_su, "tdpbsud", i8, u8
);
step!(
    /// A K step with A unsigned (u8) and B signed (i8): `tdpbusd`.
    step_us, "tdpbusd", u8, i8
);
step!(
    /// A K step of bf16 pairs (raw bits) into f32 sums: `tdpbf16ps` (each
    /// product is exact in f32 and added with round-to-nearest-even;
    /// subnormal inputs and results are flushed to zero).
    step_bf16, "tdpbf16ps", u16, u16
);

/// Store the accumulators: `acc[i][j]` = A row `i` · B column `j` (`T`: the
/// steps' sum type, i32 or f32).
///
/// # Safety
/// After [`begin`].
#[inline(always)]
pub unsafe fn store<T: Copy>(acc: &mut Acc<T>) {
    const { assert!(std::mem::size_of::<T>() == 4) };
    let c = acc.0.as_mut_ptr() as *mut T;
    asm!(
        "tilestored [{c0} + {s}*1], tmm0",
        "tilestored [{c1} + {s}*1], tmm1",
        "tilestored [{c2} + {s}*1], tmm2",
        "tilestored [{c3} + {s}*1], tmm3",
        c0 = in(reg) c,
        c1 = in(reg) c.add(16),
        c2 = in(reg) c.add(16 * BLOCK),
        c3 = in(reg) c.add(16 * BLOCK + 16),
        s = in(reg) 4 * BLOCK,
        options(nostack)
    );
}
