//! `voxlane fetch` (and `cargo xtask fetch-models`): the default Kokoro
//! model, its vocab and voice packs into the cache (`$VOXLANE_HOME`,
//! default `~/.cache/voxlane`), with a progress bar on stderr.

use super::progress::ProgressBar;
use super::CliError;
use std::io::Write;
use std::path::{Path, PathBuf};
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_runtime::fetch::{catalog, Artifact, Fetcher};
use voxlane_runtime::onnx::voxlane::FILE_TAG;
use voxlane_runtime::onnx::{convert, OnnxModel};

/// What `voxlane fetch` downloads: the int8 model, the vocab, the voice packs.
pub const DEFAULT_MODELS: [Artifact<'static>; 3] = [
    catalog::KOKORO_INT8,
    catalog::KOKORO_VOCAB,
    catalog::KOKORO_VOICES_JA,
];

/// `voxlane fetch`: fetch [`DEFAULT_MODELS`] into the cache and convert the
/// model to voxlane weights beside it.
pub fn run(out: &mut dyn Write) -> Result<(), CliError> {
    let fetcher = Fetcher::new()?;
    let paths = fetch_models(&fetcher, out)?;
    if let Some(onnx) = paths.first() {
        converted_model(onnx, out)?;
    }
    Ok(())
}

/// Fetch [`DEFAULT_MODELS`] with `fetcher`, reporting each file's path on
/// `out` and progress on stderr; returns the paths in order.
pub fn fetch_models(fetcher: &Fetcher, out: &mut dyn Write) -> Result<Vec<PathBuf>, CliError> {
    let mut paths = Vec::with_capacity(DEFAULT_MODELS.len());
    for artifact in &DEFAULT_MODELS {
        let path = match fetcher.cached(artifact) {
            Some(path) => {
                writeln!(out, "{:<24} cached   {}", artifact.file, path.display())?;
                path
            }
            None => {
                let mut bar = ProgressBar::stderr(artifact.file);
                let result = fetcher.ensure(artifact, |p| bar.update(p));
                bar.finish(if result.is_ok() { "" } else { "failed" });
                let path = result?;
                writeln!(out, "{:<24} fetched  {}", artifact.file, path.display())?;
                path
            }
        };
        paths.push(path);
    }
    Ok(paths)
}

/// The voxlane weight file of the fetched ONNX model at `onnx`, converted
/// once into the cache beside it (named after the source's sha256, so a new
/// source converts again) and reused after that; the conversion is written
/// atomically, so an interrupted one leaves nothing behind.
pub fn converted_model(onnx: &Path, out: &mut dyn Write) -> Result<PathBuf, CliError> {
    let sha_file = PathBuf::from(format!("{}.sha256", onnx.display()));
    let sha = std::fs::read_to_string(&sha_file).unwrap_or_default();
    let tag: String = sha.trim().chars().take(16).collect();
    if tag.len() < 16 || !tag.chars().all(|c| c.is_ascii_hexdigit()) {
        // Not a verified cache entry: use the ONNX file as it is.
        return Ok(onnx.to_path_buf());
    }
    let stem = onnx
        .file_stem()
        .map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned());
    let vxw = onnx.with_file_name(format!("{stem}-{tag}-{FILE_TAG}.vxw"));
    if vxw.is_file() {
        writeln!(out, "{:<24} cached   {}", "voxlane weights", vxw.display())?;
        return Ok(vxw);
    }
    // An older format's conversion of this source (and its bind caches)
    // is never read again: free its space.
    remove_older_conversions(onnx, &format!("{stem}-{tag}"), &vxw);
    let model = OnnxModel::open(onnx).map_err(KokoroError::from)?;
    let sha = sha.trim().to_string();
    let source = onnx
        .file_name()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    convert(
        &model,
        &vxw,
        &[("voxlane.source", &source), ("voxlane.source_sha256", &sha)],
    )
    .map_err(KokoroError::from)?;
    writeln!(out, "{:<24} converted {}", "voxlane weights", vxw.display())?;
    Ok(vxw)
}

/// Remove `prefix….vxw` / `prefix….vxp` files beside `onnx` other than
/// `keep` (a conversion in another format and the packings bound from it).
fn remove_older_conversions(onnx: &Path, prefix: &str, keep: &Path) {
    let Some(dir) = onnx.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let keep_stem = keep.file_stem().map(|s| s.to_string_lossy().into_owned());
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = keep_stem.as_deref().is_some_and(|k| name.starts_with(k));
        let old = name.starts_with(prefix) && (name.ends_with(".vxw") || name.ends_with(".vxp"));
        if old && !ours && path != keep {
            let _ = std::fs::remove_file(&path);
        }
    }
}
