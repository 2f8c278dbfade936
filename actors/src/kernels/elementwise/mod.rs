//! Elementwise hot paths: vectorised math, activations and normalisations.
//!
//! Every public function takes a [`SimdLevel`](crate::kernels::cpu::SimdLevel)
//! (capped at what the CPU supports) so tests can compare each route with the
//! scalar reference.

pub mod activations;
pub mod fast_math;
pub mod norms;
pub(crate) mod simd;
