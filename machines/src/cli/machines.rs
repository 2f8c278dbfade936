//! `voxlane machines`: every state machine voxlane ships, by name, with one
//! line on what it does (from `core::registry`); `--json` gives each
//! machine's family, states, events and edges as data.

use super::CliError;
use crate::core::registry::{all_specs, FAMILIES};
use crate::core::table::MachineSpec;
use serde_json::{json, Value};
use std::io::Write;

/// One machine as JSON: its table, nothing else.
pub fn spec_json(family: &str, spec: &MachineSpec) -> Value {
    json!({
        "name": spec.name,
        "family": family,
        "doc": spec.doc,
        "initial": spec.initial,
        "states": spec.states.iter().map(|s| json!({
            "name": s.name, "parent": s.parent, "superstate": s.superstate, "doc": s.doc,
        })).collect::<Vec<_>>(),
        "events": spec.events,
        "edges": spec.transitions.iter().map(|t| json!({
            "from": t.from, "event": t.event, "guard": t.guard, "action": t.action, "to": t.to,
        })).collect::<Vec<_>>(),
    })
}

/// List the machines (as JSON with `json`).
pub fn run(json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    if json {
        let all: Vec<Value> = FAMILIES
            .iter()
            .flat_map(|f| f.specs.iter().map(move |s| spec_json(f.name, s)))
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "machines": all }))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        writeln!(out, "{text}")?;
        return Ok(());
    }
    for spec in all_specs() {
        writeln!(out, "{:<24} {}", spec.name, spec.doc)?;
    }
    Ok(())
}
