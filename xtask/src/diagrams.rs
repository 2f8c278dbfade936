//! `cargo xtask diagrams [--check]`: render every machine's table to mermaid,
//! one subfolder of `diagrams/` per family.

use std::path::{Path, PathBuf};
use voxlane_machines::core::diagrams::expected_files;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file under `dir`, as paths relative to it with `/` separators.
fn files_under(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            files_under(&entry.path(), &rel, out);
        } else {
            out.push(rel);
        }
    }
}

/// Write (or with `check`, compare) `diagrams/**`.
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
                let parent = path.parent().unwrap_or(&dir);
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
                std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
    }
    // Files no machine produces any more (in any subfolder) are stale too.
    let mut on_disk = Vec::new();
    files_under(&dir, "", &mut on_disk);
    on_disk.sort();
    for name in on_disk {
        if !expected.iter().any(|(n, _)| *n == name) {
            if !check {
                std::fs::remove_file(dir.join(&name)).map_err(|e| format!("{name}: {e}"))?;
            }
            stale.push(name);
        }
    }
    // Folders left empty (a family that is gone) go too.
    if !check {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    // Fails, harmlessly, unless the folder is empty.
                    let _ = std::fs::remove_dir(entry.path());
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
