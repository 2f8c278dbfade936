//! `voxlane diagram NAME`: a machine's mermaid diagram, rendered from its
//! transition table (the same text as `diagrams/<family>/NAME.mmd`).

use super::CliError;
use crate::core::mermaid::render_mermaid;
use crate::core::registry::all_specs;
use std::io::Write;

/// Print the diagram of the machine named `machine`.
pub fn run(machine: String, out: &mut dyn Write) -> Result<(), CliError> {
    let spec = all_specs()
        .into_iter()
        .find(|s| s.name == machine)
        .ok_or(CliError::UnknownMachine(machine))?;
    write!(out, "{}", render_mermaid(spec))?;
    Ok(())
}
