//! Deterministic inputs for the kernel tests: one LCG, so a seed names the
//! same values on every machine and in every test that uses it.

/// The generator's successive 64-bit states from `seed`.
pub fn states(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed | 1;
    std::iter::repeat_with(move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s
    })
}

/// `n` values in `[-0.5, 0.5)` from `seed` (multiples of 2⁻²⁴).
pub fn centered(seed: u64, n: usize) -> Vec<f32> {
    states(seed)
        .take(n)
        .map(|s| ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5)
        .collect()
}

/// `n` values in `[-1, 1)` from `seed` ([`centered`] doubled, exactly).
pub fn symmetric(seed: u64, n: usize) -> Vec<f32> {
    scaled(seed, n, 2.0)
}

/// `n` values in `[-scale/2, scale/2)` from `seed`.
pub fn scaled(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    centered(seed, n).into_iter().map(|v| scale * v).collect()
}
