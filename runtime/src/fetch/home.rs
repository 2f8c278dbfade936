//! The cache directory: `$VOXLANE_HOME`, else `~/.cache/voxlane`.

use super::error::FetchError;
use std::path::PathBuf;

/// Environment variable that overrides the cache directory.
pub const HOME_VAR: &str = "VOXLANE_HOME";

/// The cache directory voxlane keeps models in (not created here).
pub fn voxlane_home() -> Result<PathBuf, FetchError> {
    if let Some(dir) = std::env::var_os(HOME_VAR).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".cache").join("voxlane"))
        .ok_or(FetchError::NoHome)
}
