//! `voxlane fetch` (and `cargo xtask fetch-models`): the default Kokoro
//! model, its vocab and voice packs into the cache (`$VOXLANE_HOME`,
//! default `~/.cache/voxlane`), with a progress bar on stderr.

use super::progress::ProgressBar;
use super::CliError;
use std::io::Write;
use std::path::PathBuf;
use voxlane_runtime::fetch::{catalog, Artifact, Fetcher};

/// What `voxlane fetch` downloads: the int8 model, the vocab, the voice packs.
pub const DEFAULT_MODELS: [Artifact<'static>; 3] = [
    catalog::KOKORO_INT8,
    catalog::KOKORO_VOCAB,
    catalog::KOKORO_VOICES_JA,
];

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
