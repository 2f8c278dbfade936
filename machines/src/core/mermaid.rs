//! Mermaid rendering of transition tables.
//!
//! The only source of `diagrams/<family>/*.mmd` is [`render_mermaid`] over a
//! machine's `TRANSITIONS`; `cargo xtask diagrams` writes the files (laid out
//! by [`super::diagrams`]) and `--check` (plus a test) fails when they drift.

use super::table::{MachineSpec, StateSpec, ALWAYS};
use std::fmt::Write as _;

/// The edge label: `event [guard] / action`.
fn label(event: &str, guard: &str, action: &str) -> String {
    if guard == ALWAYS {
        format!("{event} / {action}")
    } else {
        format!("{event} [{guard}] / {action}")
    }
}

fn write_state(out: &mut String, spec: &MachineSpec, s: &StateSpec, depth: usize) {
    let pad = "    ".repeat(depth);
    if s.superstate {
        let _ = writeln!(out, "{pad}state {} {{", s.name);
        for child in spec.states.iter().filter(|c| c.parent == Some(s.name)) {
            write_state(out, spec, child, depth + 1);
        }
        let _ = writeln!(out, "{pad}}}");
    } else {
        let _ = writeln!(out, "{pad}{}: {}", s.name, s.name);
    }
}

/// A state note as mermaid's state-diagram parser accepts it: a colon would end
/// the note's name part, so it becomes a dash.
fn note_text(doc: &str) -> String {
    doc.replace(':', " -").replace(';', ",")
}

/// Render `spec` as a mermaid `stateDiagram-v2`.
pub fn render_mermaid(spec: &MachineSpec) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {}\n---", spec.name);
    let _ = writeln!(out, "stateDiagram-v2");
    let _ = writeln!(out, "    [*] --> {}", spec.initial);
    for s in spec.states.iter().filter(|s| s.parent.is_none()) {
        write_state(&mut out, spec, s, 1);
    }
    for t in spec.transitions {
        let _ = writeln!(
            out,
            "    {} --> {} : {}",
            t.from,
            t.to,
            label(t.event, t.guard, t.action)
        );
    }
    for s in spec.states {
        let _ = writeln!(out, "    note right of {}: {}", s.name, note_text(s.doc));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::note_text;

    #[test]
    fn note_text_has_no_colon_or_semicolon() {
        let t = note_text("stages loaded: a second load; rejected");
        assert_eq!(t, "stages loaded - a second load, rejected");
    }
}
