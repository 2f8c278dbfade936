//! Generated diagrams: a snapshot per machine (under `snapshots/<family>/`),
//! and the files on disk must equal what the machines produce.

use voxlane_machines::core::diagrams::expected_files;
use voxlane_machines::core::mermaid::render_mermaid;
use voxlane_machines::core::registry::{all_specs, FAMILIES};

#[test]
fn diagram_snapshots() {
    for family in FAMILIES {
        for spec in family.specs {
            spec.validate().unwrap();
            let dir = format!("../../../snapshots/{}", family.name);
            insta::with_settings!({ snapshot_path => dir, prepend_module_to_snapshot => false }, {
                insta::assert_snapshot!(spec.name, render_mermaid(spec));
            });
        }
    }
}

#[test]
fn diagrams_on_disk_are_fresh() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../diagrams");
    for (name, text) in expected_files() {
        let on_disk = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(
            on_disk == text,
            "diagrams/{name} is stale or missing: run `cargo xtask diagrams`"
        );
    }
}

#[test]
fn every_machine_has_unique_name_and_edges() {
    let specs = all_specs();
    for (i, a) in specs.iter().enumerate() {
        assert!(!a.transitions.is_empty(), "{} has no edges", a.name);
        for b in &specs[i + 1..] {
            assert_ne!(a.name, b.name);
        }
    }
}
