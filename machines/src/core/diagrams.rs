//! The generated `diagrams/` folder, as data: one `.mmd` per machine plus an index.

use crate::core::mermaid::{render_index, render_mermaid};
use crate::core::registry::all_specs;

/// `(file name, contents)` for every file `diagrams/` must hold.
pub fn expected_files() -> Vec<(String, String)> {
    let specs = all_specs();
    let mut files: Vec<(String, String)> = specs
        .iter()
        .map(|s| (format!("{}.mmd", s.name), render_mermaid(s)))
        .collect();
    files.push(("README.md".to_string(), render_index(&specs)));
    files
}
