//! Compute kernels, one module each: a readable scalar reference beside the
//! SIMD routes chosen at runtime through [`cpu`].

#[cfg(target_arch = "x86_64")]
pub mod amx;
pub mod attention;
pub mod conv1d;
pub mod conv1d_bf16;
pub mod conv1d_int8;
mod conv1d_winograd;
pub mod conv_transpose1d;
pub mod cpu;
pub mod elementwise;
pub mod error;
pub mod f32_matvec;
pub(crate) mod interleave;
pub mod lstm;
pub mod matmul;
pub mod quantize;
pub mod sgemm;
#[cfg(test)]
pub(crate) mod test_rng;

pub use error::KernelError;

/// Bytes ahead of their reads the int8 tiles ask for weights, on the pass
/// that brings a block's weights in: hardware prefetchers stop at 4 KB
/// pages (measured on Kokoro's decoder convs, weights cold: 2–4 KB alike,
/// 8 KB worse).
pub(crate) const WEIGHT_PREFETCH: usize = 4096;
