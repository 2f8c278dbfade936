//! Errors: the shared kernel rejections (shape, params, lanes, ...).

pub use crate::kernels::KernelMachineError as AttentionError;
