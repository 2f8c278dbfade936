//! Progress reports for a CLI progress bar.

/// Which step of a fetch is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Downloading wheels; `done`/`total` count packages.
    Download,
    /// Extracting, hashing and writing the file; `done`/`total` count bytes.
    Assemble,
}

/// One progress report: `done` of `total` units of `stage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The running step.
    pub stage: Stage,
    /// Units finished.
    pub done: u64,
    /// Units in all.
    pub total: u64,
}
