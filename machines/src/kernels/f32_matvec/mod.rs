//! `kernel_f32_matvec`: `y[n] = W[n,k]·x (+ bias)` in the exact, documented
//! accumulation order of `voxlane_actors::kernels::f32_matvec`, as a kernel
//! machine (see [`crate::kernels`] for the shared lifecycle).

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use events::{MatvecParams, MatvecRequest};
pub use machine::{F32Matvec, F32MatvecKernel};
pub use table::SPEC;
