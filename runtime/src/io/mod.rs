//! File formats at voxlane's edges: NumPy `.npy` arrays (fixtures, codes,
//! audio) and RIFF WAV audio. Writers are atomic: a temp file renamed into
//! place, so a failed write never leaves a partial file behind.

pub mod atomic;
pub mod npy;
pub mod pickle;
pub mod torch_pt;
pub mod wav;

pub use atomic::write_atomic;
pub use npy::{read_npy, write_npy, NpyArray, NpyData, NpyError};
pub use wav::{read_wav, write_wav, Wav, WavError};
