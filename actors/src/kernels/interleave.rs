//! The 4-row byte interleave both int8 packings use: four rows' 16 columns
//! as 16 groups of 4 bytes, the layout `vpmaddubsw`/`vpdpbusd` and the
//! Winograd phases read.

/// `dst[4j + e] = rows[e][j]` for the 16 columns `j` of four byte rows
/// (`u8` or `i8`).
#[inline]
pub(crate) fn interleave4<T: Copy>(rows: [&[T]; 4], dst: &mut [T]) {
    const { assert!(std::mem::size_of::<T>() == 1) };
    assert!(rows.iter().all(|r| r.len() >= 16) && dst.len() >= 64);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; T is one byte (asserted above), the
    // rows hold 16 and `dst` 64 (asserted above).
    unsafe {
        use std::arch::x86_64::*;
        let r: [__m128i; 4] = rows.map(|r| _mm_loadu_si128(r.as_ptr().cast()));
        let (a0, a1) = (_mm_unpacklo_epi8(r[0], r[1]), _mm_unpackhi_epi8(r[0], r[1]));
        let (b0, b1) = (_mm_unpacklo_epi8(r[2], r[3]), _mm_unpackhi_epi8(r[2], r[3]));
        let out = [
            _mm_unpacklo_epi16(a0, b0),
            _mm_unpackhi_epi16(a0, b0),
            _mm_unpacklo_epi16(a1, b1),
            _mm_unpackhi_epi16(a1, b1),
        ];
        for (i, v) in out.into_iter().enumerate() {
            _mm_storeu_si128(dst.as_mut_ptr().add(16 * i).cast(), v);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (j, d) in dst[..64].chunks_exact_mut(4).enumerate() {
        d.copy_from_slice(&[rows[0][j], rows[1][j], rows[2][j], rows[3][j]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave4_matches_its_definition() {
        let rows: [Vec<u8>; 4] =
            std::array::from_fn(|e| (0..16).map(|j| (e * 16 + j) as u8).collect());
        let mut dst = [0u8; 64];
        interleave4(std::array::from_fn(|e| &rows[e][..]), &mut dst);
        for j in 0..16 {
            for e in 0..4 {
                assert_eq!(dst[4 * j + e], rows[e][j]);
            }
        }
    }
}
