//! The `voxlane` CLI, driven in-process through `cli::run_args`.

use voxlane_machines::cli::{run_args, CliError};

fn run(args: &[&str]) -> (Result<(), CliError>, String) {
    let mut out = Vec::new();
    let mut argv = vec!["voxlane"];
    argv.extend_from_slice(args);
    let r = run_args(argv, &mut out);
    (r, String::from_utf8(out).unwrap())
}

#[test]
fn help_lists_subcommands() {
    let (r, _) = run(&["--help"]);
    let msg = match r {
        Err(CliError::Usage(m)) => m,
        other => panic!("--help should come back as clap's display text, got {other:?}"),
    };
    for sub in ["speak", "info", "machines", "diagram"] {
        assert!(msg.contains(sub), "--help misses `{sub}`:\n{msg}");
    }
}

#[test]
fn zero_threads_is_typed_error() {
    let (r, out) = run(&["info", "--threads", "0"]);
    assert!(matches!(r, Err(CliError::Threads(_))), "{r:?}");
    assert!(out.is_empty());
    let (r, _) = run(&["speak", "--threads", "0", "hello"]);
    assert!(matches!(r, Err(CliError::Threads(_))), "{r:?}");
}

#[test]
fn info_reports_budget() {
    let (r, out) = run(&["info", "--threads", "3"]);
    r.unwrap();
    assert!(
        out.contains("threads:    3 (the caller plus 2 lane workers)"),
        "{out}"
    );
    assert!(out.contains("simd level:"));
}

#[test]
fn machines_and_diagram_come_from_the_tables() {
    let (r, out) = run(&["machines"]);
    r.unwrap();
    assert!(out.contains("lane_dispatch"));
    let (r, out) = run(&["diagram", "lane_dispatch"]);
    r.unwrap();
    assert_eq!(
        out,
        voxlane_machines::core::diagram::render_mermaid(&voxlane_machines::lane_dispatch::SPEC)
    );
    let (r, _) = run(&["diagram", "no_such_machine"]);
    assert!(matches!(r, Err(CliError::UnknownMachine(m)) if m == "no_such_machine"));
}
