//! `cargo xtask fetch-models`: the `voxlane fetch` download (model, vocab,
//! voices into `$VOXLANE_HOME`, the model converted once to voxlane weights),
//! run before the tests in CI.

use voxlane_machines::cli::fetch::{converted_model, fetch_models};
use voxlane_runtime::fetch::Fetcher;

/// Fetch the default models, printing each cached path.
pub fn run() -> Result<(), String> {
    let fetcher = Fetcher::new().map_err(|e| e.to_string())?;
    println!("cache: {}", fetcher.home().display());
    let mut out = std::io::stdout().lock();
    let paths = fetch_models(&fetcher, &mut out).map_err(|e| e.to_string())?;
    if let Some(onnx) = paths.first() {
        converted_model(onnx, &mut out).map_err(|e| e.to_string())?;
    }
    Ok(())
}
