//! `voxlane machines`: every state machine voxlane ships, by name, with one
//! line on what it does (from `core::registry`).

use super::CliError;
use crate::core::registry::all_specs;
use std::io::Write;

/// List the machines.
pub fn run(out: &mut dyn Write) -> Result<(), CliError> {
    for spec in all_specs() {
        writeln!(out, "{:<24} {}", spec.name, spec.doc)?;
    }
    Ok(())
}
