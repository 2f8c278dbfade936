//! voxlane data plane: kernels (a scalar reference plus SIMD paths chosen at
//! runtime) and model math. Plain structs and functions; the state machines
//! that guard them live in `voxlane-machines`.

#![warn(missing_docs)]

pub mod kernels;
pub mod speech;
/// Text tokenizers (SentencePiece) for the speech models' text side.
pub mod text;
pub mod tts;
