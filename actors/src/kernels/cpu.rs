//! Runtime CPU feature detection: the one place SIMD routes are chosen.
//!
//! Detected once per process and cached; kernels read [`features()`] (or take a
//! [`SimdLevel`] chosen at bind time) and never probe the CPU themselves. The
//! microarchitecture levels come from pulp (`V3` = x86-64-v3: AVX2+FMA,
//! `V4` = x86-64-v4: AVX-512 F/BW/CD/DQ/VL); the extensions pulp's levels do
//! not cover (VNNI, BF16, FP16, F16C) from `is_x86_feature_detected!`. `VOXLANE_SIMD=scalar|avx2|avx512` caps the level, so CI machines
//! and tests can force every fallback.

use std::sync::OnceLock;

/// The widest instruction set a kernel may use, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable Rust only.
    Scalar,
    /// AVX2 + FMA (x86-64-v3).
    Avx2,
    /// AVX-512 F/BW/VL/DQ.
    Avx512,
}

/// CPU features relevant to voxlane's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// AVX2 and FMA.
    pub avx2_fma: bool,
    /// AVX-512 F, BW, VL and DQ.
    pub avx512: bool,
    /// AVX512_VNNI (`vpdpbusd`).
    pub avx512_vnni: bool,
    /// AVX512_BF16 (`vdpbf16ps`).
    pub avx512_bf16: bool,
    /// AVX512_FP16.
    pub avx512_fp16: bool,
    /// F16C conversions.
    pub f16c: bool,
}

impl CpuFeatures {
    /// Probe the running CPU (uncached; use [`features`]).
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            Self {
                avx2_fma: pulp::x86::V3::try_new().is_some(),
                avx512: pulp::x86::V4::try_new().is_some(),
                avx512_vnni: is_x86_feature_detected!("avx512vnni"),
                avx512_bf16: is_x86_feature_detected!("avx512bf16"),
                avx512_fp16: is_x86_feature_detected!("avx512fp16"),
                f16c: is_x86_feature_detected!("f16c"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Self::default()
        }
    }

    /// The widest level these features allow.
    pub fn best_level(&self) -> SimdLevel {
        if self.avx512 && self.avx2_fma {
            SimdLevel::Avx512
        } else if self.avx2_fma {
            SimdLevel::Avx2
        } else {
            SimdLevel::Scalar
        }
    }
}

/// The cached features of this CPU, capped by `VOXLANE_SIMD` if set.
pub fn features() -> &'static CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    FEATURES.get_or_init(|| {
        let mut f = CpuFeatures::detect();
        match std::env::var("VOXLANE_SIMD").as_deref() {
            Ok("scalar") => f = CpuFeatures::default(),
            Ok("avx2") => {
                f.avx512 = false;
                f.avx512_vnni = false;
                f.avx512_bf16 = false;
                f.avx512_fp16 = false;
            }
            _ => {}
        }
        f
    })
}

/// The SIMD level kernels use by default on this machine.
pub fn simd_level() -> SimdLevel {
    features().best_level()
}

/// Every level this CPU can run, narrowest first (for tests comparing routes).
pub fn available_levels() -> Vec<SimdLevel> {
    let best = simd_level();
    [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512]
        .into_iter()
        .filter(|l| *l <= best)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_consistent() {
        let f = CpuFeatures::detect();
        assert!(!f.avx512 || f.avx2_fma, "x86-64-v4 implies v3");
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(
                f.avx2_fma,
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
            );
            assert_eq!(f.avx512, f.avx512 && is_x86_feature_detected!("avx512f"));
        }
        let levels = available_levels();
        assert_eq!(levels[0], SimdLevel::Scalar);
        assert!(levels.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*levels.last().unwrap(), simd_level());
        assert_eq!(CpuFeatures::default().best_level(), SimdLevel::Scalar);
    }
}
