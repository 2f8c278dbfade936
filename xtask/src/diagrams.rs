//! `cargo xtask diagrams [--check]`: render every machine's table to mermaid.

use std::path::{Path, PathBuf};
use voxlane_machines::core::diagrams::expected_files;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Write (or with `check`, compare) `diagrams/*`.
pub fn run(check: bool) -> Result<(), String> {
    let dir = repo_root().join("diagrams");
    let expected = expected_files();
    let mut stale = Vec::new();
    for (name, text) in &expected {
        let path = dir.join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != *text {
            stale.push(name.clone());
            if !check {
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
    }
    // Files no machine produces any more are stale too.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !expected.iter().any(|(n, _)| *n == name) {
                stale.push(name.clone());
                if !check {
                    std::fs::remove_file(entry.path()).map_err(|e| format!("{name}: {e}"))?;
                }
            }
        }
    }
    if check && !stale.is_empty() {
        return Err(format!(
            "diagrams are stale ({}); run `cargo xtask diagrams`",
            stale.join(", ")
        ));
    }
    println!(
        "diagrams: {} files {}",
        expected.len(),
        if check { "up to date" } else { "written" }
    );
    Ok(())
}
