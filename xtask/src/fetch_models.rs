//! `cargo xtask fetch-models`: the `voxlane fetch` download (model, vocab,
//! voices into `$VOXLANE_HOME`), run before the tests in CI.

use voxlane_machines::cli::fetch::fetch_models;
use voxlane_runtime::fetch::Fetcher;

/// Fetch the default models, printing each cached path.
pub fn run() -> Result<(), String> {
    let fetcher = Fetcher::new().map_err(|e| e.to_string())?;
    println!("cache: {}", fetcher.home().display());
    fetch_models(&fetcher, &mut std::io::stdout().lock()).map_err(|e| e.to_string())?;
    Ok(())
}
