//! Weight loading: safetensors files, memory-mapped with memmap2, and
//! voxlane's own packed-weights files ([`packed`]), whose kernel-ready
//! buffers are read in place through [`Buf`].
//!
//! Tensors stay in the mapping until a stage binds them; `dtype` says how the
//! bytes read (f32, f16, bf16, and int8/uint8 for quantized weights, whose
//! scales and zero points are separate tensors). voxlane also *writes*
//! safetensors ([`writer`]) for its own converted weight files, so one reader
//! serves official checkpoints and converted models alike.

pub mod buf;
pub mod dtype;
pub mod error;
pub mod file;
pub mod packed;
pub mod writer;

pub use buf::{Buf, Pod};
pub use dtype::DType;
pub use error::WeightError;
pub use file::{TensorView, WeightFile};
pub use packed::{
    PackedEntry, PackedFile, PackedPart, PackedWriter, PartRef, PACKED_ALIGN, PACKED_MAGIC,
    PACKED_VERSION,
};
pub use writer::{write_safetensors, TensorData};
