//! `voxlane converse`, driven in-process on the tiny fixtures: PersonaPlex
//! with a voice prompt (WAV or NVIDIA's `.pt`) and a text prompt follows
//! NVIDIA's reference tokens and text (to the fixture's float near tie), is
//! the same at every thread budget, writes a reply as long as the input;
//! Moshi through the same wavefront gives `moshi chat`'s reply bit for bit;
//! every bad input is a typed error that leaves no output file.

use std::path::{Path, PathBuf};
use voxlane_machines::cli::{run_args, CliError};
use voxlane_machines::speech::converse::ConverseError;
use voxlane_runtime::io::{read_npy, read_wav, write_wav};

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures")
        .join(dir)
        .join(name)
}

fn pp(name: &str) -> String {
    s(&fixture("personaplex-tiny", name))
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "voxlane-cli-converse-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn voxlane(args: &[String]) -> (Result<(), CliError>, String) {
    let mut out = Vec::new();
    let mut argv = vec!["voxlane".to_string()];
    argv.extend_from_slice(args);
    let r = run_args(argv, &mut out);
    (r, String::from_utf8(out).unwrap())
}

/// `converse` on the PersonaPlex fixture with `extra` flags, writing into `dir`.
fn persona(dir: &Path, extra: &[&str]) -> (Result<(), CliError>, String) {
    let mut args: Vec<String> = [
        "converse",
        "--lm",
        &pp("lm.safetensors"),
        "--mimi",
        &pp("mimi.safetensors"),
        "--tokenizer",
        &pp("tokenizer.model"),
        "--config",
        &pp("config.json"),
        "--no-weights-cache",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([
        pp("user.wav"),
        "-o".into(),
        s(&dir.join("reply.wav")),
        "--text".into(),
        s(&dir.join("reply.json")),
        "--tokens".into(),
        s(&dir.join("reply.npy")),
    ]);
    voxlane(&args)
}

const TEXT_PROMPT: &str = "You work for a bakery. Be polite and brief.";

/// Steps equal to NVIDIA's before the fixture's float near tie (see the actors' test).
const EXACT_STEPS: usize = 9;

#[test]
fn personaplex_conversation_from_the_cli() {
    let mut runs = Vec::new();
    for (threads, voice) in [
        ("1", "voice_prompt.wav"),
        ("2", "voice_prompt.wav"),
        ("2", "voice_prompt.pt"),
    ] {
        let dir = temp_dir(&format!("pp{threads}-{voice}"));
        let (r, said) = persona(
            &dir,
            &[
                "--greedy",
                "--threads",
                threads,
                "--voice-prompt",
                &pp(voice),
                "--text-prompt",
                TEXT_PROMPT,
            ],
        );
        r.unwrap();
        assert!(
            said.contains("PersonaPlex") && said.contains("prompt 74 steps"),
            "{said}"
        );
        let user = read_wav(fixture("personaplex-tiny", "user.wav")).unwrap();
        let reply = read_wav(dir.join("reply.wav")).unwrap();
        assert_eq!(
            (reply.sample_rate, reply.samples.len()),
            (24_000, user.samples.len())
        );
        let tokens = read_npy(dir.join("reply.npy")).unwrap();
        let want = read_npy(fixture("personaplex-tiny", "tokens.npy")).unwrap();
        assert_eq!(tokens.shape, want.shape);
        let n = EXACT_STEPS * want.shape[1];
        assert_eq!(tokens.to_i64()[..n], want.to_i64()[..n]);
        let text: Vec<String> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("reply.json")).unwrap())
                .unwrap();
        let want_text: Vec<String> = serde_json::from_str(
            &std::fs::read_to_string(fixture("personaplex-tiny", "text.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(text.len(), want_text.len());
        assert_eq!(text[..EXACT_STEPS], want_text[..EXACT_STEPS]);
        runs.push((
            std::fs::read(dir.join("reply.wav")).unwrap(),
            tokens.to_i64(),
            text,
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
    // Every budget and either voice prompt format: the same bytes.
    assert!(runs.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn moshi_conversation_equals_moshi_chat() {
    let dir = temp_dir("moshi");
    let pcm = read_npy(fixture("mimi-tiny", "input_pcm.npy"))
        .unwrap()
        .to_f32();
    let wav = dir.join("in.wav");
    write_wav(&wav, 24_000, &pcm).unwrap();
    let common = |cmd: &[&str], lm_flag: &str, out: &str, text: &str| -> Vec<String> {
        let mut v: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
        v.extend(
            [
                lm_flag,
                &s(&fixture("moshi-tiny", "model.safetensors")),
                "--config",
                &s(&fixture("moshi-tiny", "config.json")),
                "--mimi",
                &s(&fixture("mimi-tiny", "model.safetensors")),
                "--mimi-config",
                &s(&fixture("mimi-tiny", "config.json")),
                "--tokenizer",
                &pp("tokenizer.model"),
                "--greedy",
                "--no-weights-cache",
                "--threads",
                "2",
                &s(&wav),
                "-o",
                &s(&dir.join(out)),
                "--text",
                &s(&dir.join(text)),
            ]
            .iter()
            .map(|a| a.to_string()),
        );
        v
    };
    let (r, said) = voxlane(&common(&["converse"], "--lm", "c.wav", "c.json"));
    r.unwrap();
    assert!(said.contains("Moshi"), "{said}");
    voxlane(&common(&["moshi", "chat"], "--model", "m.wav", "m.json"))
        .0
        .unwrap();
    assert_eq!(
        std::fs::read(dir.join("c.wav")).unwrap(),
        std::fs::read(dir.join("m.wav")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("c.json")).unwrap(),
        std::fs::read_to_string(dir.join("m.json")).unwrap()
    );
    // A Moshi LM takes no persona: a typed error, no output.
    let out = dir.join("p.wav");
    let mut args = common(&["converse"], "--lm", "p.wav", "p.json");
    args.extend(["--voice-prompt".into(), pp("voice_prompt.wav")]);
    let (r, _) = voxlane(&args);
    assert!(
        matches!(r, Err(CliError::Converse(ConverseError::NotPersona(_)))),
        "{r:?}"
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_inputs_are_typed_errors_and_leave_no_file() {
    let dir = temp_dir("bad");
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "  \n").unwrap();
    let junk = dir.join("junk.wav");
    std::fs::write(&junk, b"RIFF\x24\x00\x00\x00WAVEfmt junk").unwrap();
    let missing = dir.join("missing.wav");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--voice-prompt".into(), s(&missing)],
            "missing voice prompt",
        ),
        (
            vec!["--voice-prompt".into(), s(&junk)],
            "corrupt voice prompt",
        ),
        (
            vec!["--text-prompt-file".into(), s(&empty)],
            "empty text prompt",
        ),
        (vec!["--text-prompt".into(), "".into()], "empty text prompt"),
        (vec!["--threads".into(), "0".into()], "zero threads"),
        (vec!["--weights".into(), "q3".into()], "unknown weights"),
        (vec!["--temp".into(), "-1".into()], "negative temperature"),
    ];
    for (extra, what) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (r, _) = persona(&dir, &extra);
        assert!(r.is_err(), "{what}: accepted");
        let msg = r.unwrap_err().to_string();
        assert!(!msg.is_empty(), "{what}");
        for f in ["reply.wav", "reply.json", "reply.npy"] {
            assert!(!dir.join(f).exists(), "{what}: left {f}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
