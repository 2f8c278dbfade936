//! File formats at voxlane's edges: NumPy `.npy` arrays (fixtures, codes,
//! audio), RIFF WAV audio, a streaming FLAC writer, Ogg pages (Opus streams), and PyTorch `.pt`
//! archives with the restricted pickle reader they need. Writers are atomic:
//! a temp file renamed into place, so a failed write never leaves a partial
//! file behind.

pub mod atomic;
pub mod flac;
pub mod npy;
pub mod ogg;
pub mod pickle;
pub mod torch_pt;
pub mod wav;

pub use atomic::write_atomic;
pub use npy::{read_npy, write_npy, NpyArray, NpyData, NpyError};
pub use wav::{read_wav, write_wav, Wav, WavError};
