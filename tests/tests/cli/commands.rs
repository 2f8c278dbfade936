//! The `voxlane` CLI, driven in-process through `cli::run_args`.

use voxlane_machines::cli::{check_speak, run_args, CliError};

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
    for sub in ["speak", "fetch", "info", "machines", "diagram"] {
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
    // The route the bind cache and the bench rows are named after.
    let route = voxlane_actors::kernels::cpu::route_name();
    assert!(
        out.contains(&format!("route:      {route} (int8 GEMM: ")),
        "{out}"
    );
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
        voxlane_machines::core::mermaid::render_mermaid(
            &voxlane_machines::pool::lane_dispatch::SPEC
        )
    );
    let (r, _) = run(&["diagram", "no_such_machine"]);
    assert!(matches!(r, Err(CliError::UnknownMachine(m)) if m == "no_such_machine"));
    // `--json`: every registered machine with its whole table.
    let (r, out) = run(&["machines", "--json"]);
    r.unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let machines = v["machines"].as_array().unwrap();
    let specs = voxlane_machines::core::registry::all_specs();
    assert_eq!(machines.len(), specs.len());
    let wf = machines
        .iter()
        .find(|m| m["name"] == "speech_wavefront")
        .unwrap();
    assert_eq!(wf["family"], "speech");
    assert_eq!(wf["initial"], "unbound");
    let spec = &voxlane_machines::speech::wavefront::SPEC;
    assert_eq!(
        wf["edges"].as_array().unwrap().len(),
        spec.transitions.len()
    );
    assert_eq!(wf["events"].as_array().unwrap().len(), spec.events.len());
    assert_eq!(wf["edges"][0]["guard"], spec.transitions[0].guard);
}

/// A fresh temp folder for one test.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("voxlane-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Validate `speak` with `stdin` as standard input (no synthesis: that is
/// `speak_e2e.rs`).
fn speak(args: &[&str], stdin: &str) -> Result<(), CliError> {
    let mut argv = vec!["voxlane", "speak"];
    argv.extend_from_slice(args);
    check_speak(argv, &mut stdin.as_bytes()).map(|_| ())
}

/// The names in a folder, sorted.
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A voices archive with one voice, `a_voice`.
fn voices_file(dir: &std::path::Path) -> String {
    use voxlane_actors::tts::voices::{encode_npz, VoicePack, STYLE_DIM};
    let pack = VoicePack::from_rows(vec![0.25; 4 * STYLE_DIM]).unwrap();
    let path = dir.join("voices.npz");
    std::fs::write(&path, encode_npz(&[("a_voice", &pack)]).unwrap()).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn speak_validates_text() {
    let dir = temp_dir("text");
    let out = dir.join("out.wav");
    let out = out.to_str().unwrap();
    for text in ["", "   ", "... ,!"] {
        let r = speak(&["-o", out, text], "");
        assert!(matches!(r, Err(CliError::EmptyText)), "{text:?}: {r:?}");
    }
    let r = speak(&["-o", out], "");
    assert!(matches!(r, Err(CliError::EmptyText)), "{r:?}");
    // `-` reads stdin.
    let r = speak(&["-o", out, "-"], " \n\t ");
    assert!(matches!(r, Err(CliError::EmptyText)), "{r:?}");
    let r = speak(&["-o", out, "-"], "Hello from stdin.");
    assert!(r.is_ok(), "{r:?}");
    let r = speak(&["Hello"], "");
    assert!(matches!(r, Err(CliError::MissingOutput)), "{r:?}");
    assert!(listing(&dir).is_empty(), "{:?}", listing(&dir));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn speak_validates_speed_threads_and_files() {
    let dir = temp_dir("flags");
    let out = dir.join("out.wav");
    let out = out.to_str().unwrap();
    for speed in ["0.49", "2.01", "0", "-1", "NaN", "inf"] {
        let flag = format!("--speed={speed}");
        let r = speak(&["-o", out, &flag, "hi"], "");
        assert!(matches!(r, Err(CliError::Speed(_))), "{speed}: {r:?}");
    }
    for speed in ["0.5", "2.0", "1.25"] {
        let r = speak(&["-o", out, "--speed", speed, "--stream", "hi"], "");
        assert!(r.is_ok(), "{speed}: {r:?}");
    }
    let r = speak(&["-o", out, "--threads", "0", "hi"], "");
    assert!(matches!(r, Err(CliError::Threads(_))), "{r:?}");
    let missing = dir.join("no-model.onnx");
    let r = speak(&["-o", out, "--model", missing.to_str().unwrap(), "hi"], "");
    assert!(
        matches!(r, Err(CliError::MissingFile { what: "model", .. })),
        "{r:?}"
    );
    let r = speak(&["-o", out, "--speed", "fast", "hi"], "");
    assert!(matches!(r, Err(CliError::Usage(_))), "{r:?}");
    assert!(listing(&dir).is_empty(), "{:?}", listing(&dir));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn speak_rejects_unwritable_output_without_leaving_files() {
    let dir = temp_dir("output");
    let nowhere = dir.join("missing-folder").join("out.wav");
    let r = speak(&["-o", nowhere.to_str().unwrap(), "hi"], "");
    assert!(matches!(r, Err(CliError::Output { .. })), "{r:?}");
    let r = speak(&["-o", dir.to_str().unwrap(), "hi"], "");
    assert!(matches!(r, Err(CliError::Output { .. })), "{r:?}");
    // A regular file where a folder should be.
    std::fs::write(dir.join("file"), b"x").unwrap();
    let under_file = dir.join("file").join("out.wav");
    let r = speak(&["-o", under_file.to_str().unwrap(), "hi"], "");
    assert!(matches!(r, Err(CliError::Output { .. })), "{r:?}");
    assert_eq!(listing(&dir), ["file"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn speak_checks_voices() {
    let dir = temp_dir("voices");
    let voices = voices_file(&dir);
    let out = dir.join("out.wav");
    let out = out.to_str().unwrap();
    let r = speak(
        &["-o", out, "--voices", &voices, "--voice", "nobody", "hi"],
        "",
    );
    let msg = match r {
        Err(e @ CliError::Voice(_)) => e.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(msg.contains("nobody") && msg.contains("a_voice"), "{msg}");
    let r = speak(
        &[
            "-o",
            out,
            "--voices",
            &voices,
            "--voice",
            "a_voice:0.5,nobody:0.5",
            "hi",
        ],
        "",
    );
    assert!(matches!(r, Err(CliError::Voice(_))), "{r:?}");
    let r = speak(
        &["-o", out, "--voices", &voices, "--voice", "a_voice:x", "hi"],
        "",
    );
    assert!(matches!(r, Err(CliError::Voice(_))), "{r:?}");
    let r = speak(
        &["-o", out, "--voices", &voices, "--voice", "a_voice", "hi"],
        "",
    );
    assert!(r.is_ok(), "{r:?}");
    let r = speak(
        &[
            "-o",
            out,
            "--voices",
            &voices,
            "--voice",
            "a_voice:0.7,a_voice:0.3",
            "hi",
        ],
        "",
    );
    assert!(r.is_ok(), "{r:?}");
    let not_npz = dir.join("bad.npz");
    std::fs::write(&not_npz, b"nope").unwrap();
    let r = speak(
        &["-o", out, "--voices", not_npz.to_str().unwrap(), "hi"],
        "",
    );
    assert!(matches!(r, Err(CliError::Voice(_))), "{r:?}");
    assert_eq!(listing(&dir), ["bad.npz", "voices.npz"]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn fetch_puts_the_default_models_in_the_cache() {
    use voxlane_machines::cli::fetch::{fetch_models, DEFAULT_MODELS};
    // The same cache CI fills with `cargo xtask fetch-models` (fetched here if empty).
    let fetcher = voxlane_runtime::fetch::Fetcher::new().unwrap();
    let mut out = Vec::new();
    let paths = fetch_models(&fetcher, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(paths.len(), DEFAULT_MODELS.len());
    for (artifact, path) in DEFAULT_MODELS.iter().zip(&paths) {
        assert!(path.is_file(), "{}", path.display());
        assert_eq!(path, &fetcher.path_of(artifact));
        assert!(out.contains(artifact.file), "{out}");
    }
    // A second run finds everything cached.
    let mut again = Vec::new();
    fetch_models(&fetcher, &mut again).unwrap();
    let again = String::from_utf8(again).unwrap();
    assert_eq!(
        again.matches(" cached ").count(),
        DEFAULT_MODELS.len(),
        "{again}"
    );
}

#[test]
fn info_starts_a_pinned_pool() {
    let (r, out) = run(&["info", "--threads", "2", "--pin"]);
    r.unwrap();
    assert!(out.contains("pinned:     true"), "{out}");
    assert!(out.contains("threads:    2"), "{out}");
}
