//! Runtime CPU feature detection: the one place SIMD routes are chosen.
//!
//! Detected once per process and cached; kernels read [`features()`] (or take a
//! [`SimdLevel`] chosen at bind time) and never probe the CPU themselves. The
//! microarchitecture levels come from pulp (`V3` = x86-64-v3: AVX2+FMA,
//! `V4` = x86-64-v4: AVX-512 F/BW/CD/DQ/VL); the extensions pulp's levels do
//! not cover (VNNI, AVX-VNNI, BF16, FP16, F16C) from `is_x86_feature_detected!`; AMX
//! from CPUID, XCR0 and Linux's tile-state permission. `VOXLANE_SIMD=scalar|avx2|avxvnni|avx512`
//! caps the level (`avx2`: plain AVX2+FMA, no AVX-VNNI; `avxvnni`: AVX2 plus
//! AVX-VNNI where the CPU has it; `avx512`: no AMX), so CI machines and tests
//! can force every fallback.

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
    /// AVX-VNNI (`vpdpbusd` on 256-bit registers: Alder Lake and later, Zen 5).
    pub avx_vnni: bool,
    /// AVX512_BF16 (`vdpbf16ps`).
    pub avx512_bf16: bool,
    /// AVX512_FP16.
    pub avx512_fp16: bool,
    /// F16C conversions.
    pub f16c: bool,
    /// AMX-TILE + AMX-INT8 with the OS's permission for the tile state.
    pub amx_int8: bool,
    /// AMX-TILE + AMX-BF16 with the OS's permission for the tile state.
    pub amx_bf16: bool,
}

impl CpuFeatures {
    /// Probe the running CPU (uncached; use [`features`]).
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let tiles = amx::detect();
            Self {
                avx2_fma: pulp::x86::V3::try_new().is_some(),
                avx512: pulp::x86::V4::try_new().is_some(),
                avx512_vnni: is_x86_feature_detected!("avx512vnni"),
                avx_vnni: is_x86_feature_detected!("avxvnni"),
                avx512_bf16: is_x86_feature_detected!("avx512bf16"),
                avx512_fp16: is_x86_feature_detected!("avx512fp16"),
                f16c: is_x86_feature_detected!("f16c"),
                amx_int8: tiles.int8,
                amx_bf16: tiles.bf16,
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
            Ok(cap @ ("avx2" | "avxvnni")) => {
                f.avx512 = false;
                f.avx512_vnni = false;
                f.avx512_bf16 = false;
                f.avx512_fp16 = false;
                f.amx_int8 = false;
                f.amx_bf16 = false;
                f.avx_vnni &= cap == "avxvnni";
            }
            Ok("avx512") => {
                f.amx_int8 = false;
                f.amx_bf16 = false;
            }
            _ => {}
        }
        f
    })
}

/// AMX detection: CPUID, the OS's XSAVE support, and Linux's per-process
/// permission for the 8 KiB tile state (asked for once, here).
#[cfg(target_arch = "x86_64")]
mod amx {
    use std::arch::asm;
    use std::arch::x86_64::__cpuid_count;

    /// Which tile dot products this process may run.
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct Tiles {
        pub(super) int8: bool,
        pub(super) bf16: bool,
    }

    pub(super) fn detect() -> Tiles {
        let leaf7 = __cpuid_count(7, 0);
        let bit = |b: u32| (leaf7.edx >> b) & 1 == 1;
        let (tile, bf16, int8) = (bit(24), bit(22), bit(25));
        let osxsave = (__cpuid_count(1, 0).ecx >> 27) & 1 == 1;
        if !(tile && (int8 || bf16) && osxsave && os_tile_state()) {
            return Tiles::default();
        }
        Tiles { int8, bf16 }
    }

    fn os_tile_state() -> bool {
        let (lo, _hi): (u32, u32);
        // SAFETY: OSXSAVE is set, so `xgetbv` with ECX = 0 is defined.
        unsafe {
            asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") _hi, options(nomem, nostack))
        };
        // XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA).
        (lo >> 17) & 3 == 3 && request_tile_state()
    }

    #[cfg(target_os = "linux")]
    fn request_tile_state() -> bool {
        // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): without it
        // the first tile instruction raises SIGILL.
        const SYS_ARCH_PRCTL: i64 = 158;
        const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
        const XFEATURE_XTILEDATA: i64 = 18;
        let ret: i64;
        // SAFETY: a plain syscall with integer arguments; it only changes
        // this process's permitted XSAVE features.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack)
            )
        };
        ret == 0
    }

    #[cfg(not(target_os = "linux"))]
    fn request_tile_state() -> bool {
        false
    }
}

/// The SIMD level kernels use by default on this machine.
pub fn simd_level() -> SimdLevel {
    features().best_level()
}

/// The default route in words, for bench reports: the level and the int8
/// extensions the kernels take on it (`avx2`, `avx2+avxvnni`, `avx512+vnni+amx`, ...).
pub fn route_name() -> String {
    let (f, level) = (features(), simd_level());
    let mut name = format!("{level:?}").to_lowercase();
    if level == SimdLevel::Avx512 && f.avx512_vnni {
        name += "+vnni";
    } else if level >= SimdLevel::Avx2 && f.avx_vnni {
        name += "+avxvnni";
    }
    if level == SimdLevel::Avx512 && f.amx_int8 {
        name += "+amx";
    }
    name
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

    #[test]
    fn route_name_names_the_level_and_the_int8_extension() {
        let (f, name) = (features(), route_name());
        let level = format!("{:?}", simd_level()).to_lowercase();
        assert!(name.starts_with(&level), "{name} for {level}");
        assert_eq!(
            name.contains("avxvnni"),
            f.avx_vnni && !name.contains("+vnni")
        );
        assert_eq!(
            name.contains("+amx"),
            simd_level() == SimdLevel::Avx512 && f.amx_int8
        );
        // No AVX-VNNI outside its caps: VOXLANE_SIMD=avx2 is plain AVX2.
        if std::env::var("VOXLANE_SIMD").as_deref() == Ok("avx2") {
            assert!(!f.avx_vnni && !f.avx512);
        }
    }
}
