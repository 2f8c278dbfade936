//! `voxlane moshi tokens|chat`, driven in-process: greedy tokens equal
//! PyTorch's on the `moshi-tiny` fixture (every thread budget), seeds
//! reproduce sampled runs, the converted-weights cache is written then
//! mapped, a chat's text and audio are the executor's tokens through the
//! tokenizer and Mimi's streaming decoder, the official 7B shape runs on
//! random q4_0 weights, and every bad input is a typed error that leaves no
//! output file.

use std::path::{Path, PathBuf};
use voxlane_machines::cli::{run_args, CliError};
use voxlane_runtime::io::{read_npy, read_wav, write_npy, write_wav, NpyArray, NpyData};

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures")
        .join(dir)
        .join(name)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voxlane-cli-moshi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn moshi(args: &[String]) -> (Result<(), CliError>, String) {
    let mut out = Vec::new();
    let mut argv = vec!["voxlane".to_string(), "moshi".to_string()];
    argv.extend_from_slice(args);
    let r = run_args(argv, &mut out);
    (r, String::from_utf8(out).unwrap())
}

/// `tokens` on the tiny model with `extra` flags.
fn tokens(extra: &[&str], input: &Path, output: &Path) -> (Result<(), CliError>, String) {
    let mut args: Vec<String> = vec![
        "tokens".into(),
        "--model".into(),
        s(&fixture("moshi-tiny", "model.safetensors")),
        "--config".into(),
        s(&fixture("moshi-tiny", "config.json")),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([s(input), "-o".into(), s(output)]);
    moshi(&args)
}

fn i64s(path: &Path) -> (Vec<usize>, Vec<i64>) {
    let a = read_npy(path).unwrap();
    (a.shape.clone(), a.to_i64())
}

#[test]
fn tokens_equal_pytorch_greedy_for_every_budget() {
    let dir = temp_dir("greedy");
    let want = i64s(&fixture("moshi-tiny", "greedy_tokens.npy"));
    for threads in ["1", "2", "3"] {
        let out = dir.join(format!("t{threads}.npy"));
        let (r, said) = tokens(
            &["--greedy", "--threads", threads, "--no-weights-cache"],
            &fixture("moshi-tiny", "user_codes.npy"),
            &out,
        );
        r.unwrap();
        assert!(
            said.contains("54 steps × 9 tokens from 55 frames"),
            "{said}"
        );
        assert_eq!(i64s(&out), want, "{threads} threads");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn seeds_reproduce_sampled_runs_and_the_cache_maps_weights() {
    let dir = temp_dir("seed");
    let cache = dir.join("cache");
    let codes = fixture("moshi-tiny", "user_codes.npy");
    let run = |seed: &str, name: &str, weights: &str| {
        let out = dir.join(name);
        let c = s(&cache);
        let (r, said) = tokens(
            &[
                "--seed",
                seed,
                "--weights",
                weights,
                "--weights-cache",
                &c,
                "--top-p",
                "0.9",
            ],
            &codes,
            &out,
        );
        r.unwrap();
        (i64s(&out).1, said)
    };
    let (a, said) = run("7", "a.npy", "q8_0");
    assert!(said.contains("weights converted, kept in"), "{said}");
    let (b, said) = run("7", "b.npy", "q8_0");
    assert!(said.contains("weights mapped from"), "{said}");
    assert_eq!(
        a, b,
        "the same seed, converted or mapped weights: the same tokens"
    );
    let (c, _) = run("8", "c.npy", "q8_0");
    assert_ne!(a, c, "another seed draws other tokens");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_inputs_are_typed_errors_without_output() {
    let dir = temp_dir("bad");
    let out = dir.join("out.npy");
    let codes = fixture("moshi-tiny", "user_codes.npy");
    let wrong_shape = dir.join("wrong_shape.npy");
    write_npy(
        &wrong_shape,
        &NpyArray {
            shape: vec![1, 7, 3],
            data: NpyData::I64(vec![1; 21]),
        },
    )
    .unwrap();
    let out_of_range = dir.join("range.npy");
    write_npy(
        &out_of_range,
        &NpyArray {
            shape: vec![1, 8, 2],
            data: NpyData::I64(vec![256; 16]),
        },
    )
    .unwrap();
    let floats = dir.join("floats.npy");
    write_npy(
        &floats,
        &NpyArray {
            shape: vec![1, 8, 2],
            data: NpyData::F32(vec![0.5; 16]),
        },
    )
    .unwrap();
    for (extra, input, want) in [
        (vec![], wrong_shape.clone(), "the model uses 8"),
        (vec![], out_of_range.clone(), "outside 0..256"),
        (vec![], floats.clone(), "int64"),
        (vec!["--threads", "0"], codes.clone(), "--threads"),
        (vec!["--temp", "-1"], codes.clone(), "temperature"),
        (vec!["--top-p", "1.5"], codes.clone(), "top-p"),
        (vec!["--text-top-k", "0"], codes.clone(), "top-k"),
        (vec!["--weights", "q5"], codes.clone(), "--weights q5"),
        (vec![], dir.join("missing.npy"), "does not exist"),
    ] {
        let (r, _) = tokens(&extra, &input, &out);
        let e = r.expect_err(&format!("{extra:?} {input:?} should fail"));
        assert!(
            e.to_string().contains(want),
            "{extra:?}: `{e}` lacks `{want}`"
        );
    }
    let (r, _) = moshi(&["tokens".into(), s(&codes), "-o".into(), s(&out)]);
    assert!(r.unwrap_err().to_string().contains("--model"));
    let (r, _) = tokens(&[], &codes, &dir.join("out.wav"));
    assert!(r.unwrap_err().to_string().contains(".npy"));
    // A model whose tensors do not match the config: named.
    let (r, _) = moshi(&[
        "tokens".into(),
        "--model".into(),
        s(&fixture("personaplex-tiny", "lm.safetensors")),
        "--config".into(),
        s(&fixture("moshi-tiny", "config.json")),
        "--no-weights-cache".into(),
        s(&codes),
        "-o".into(),
        s(&out),
    ]);
    assert!(r.unwrap_err().to_string().contains("moshi weights"));
    // Nothing was written, not even a partial file.
    assert_eq!(
        listing(&dir),
        vec!["floats.npy", "range.npy", "wrong_shape.npy"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chat_speaks_the_executor_tokens_through_mimi() {
    let dir = temp_dir("chat");
    // The Mimi fixture's input as a 24 kHz WAV.
    let pcm = read_npy(fixture("mimi-tiny", "input_pcm.npy"))
        .unwrap()
        .to_f32();
    let wav = dir.join("in.wav");
    write_wav(&wav, 24_000, &pcm).unwrap();
    let pcm = read_wav(&wav).unwrap().mono();
    let (out, text) = (dir.join("reply.wav"), dir.join("reply.json"));
    let args: Vec<String> = [
        "chat",
        "--model",
        &s(&fixture("moshi-tiny", "model.safetensors")),
        "--config",
        &s(&fixture("moshi-tiny", "config.json")),
        "--mimi",
        &s(&fixture("mimi-tiny", "model.safetensors")),
        "--mimi-config",
        &s(&fixture("mimi-tiny", "config.json")),
        "--tokenizer",
        &s(&fixture("personaplex-tiny", "tokenizer.model")),
        "--greedy",
        "--no-weights-cache",
        "--threads",
        "2",
        &s(&wav),
        "-o",
        &s(&out),
        "--text",
        &s(&text),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let (r, said) = moshi(&args);
    r.unwrap();
    let reply = read_wav(&out).unwrap();
    assert_eq!(
        (reply.sample_rate, reply.samples.len()),
        (24_000, pcm.len()),
        "{said}"
    );
    // The same codes through `tokens`: the streaming encoder's codes of this audio.
    let codes = dir.join("codes.npy");
    let mut argv: Vec<String> = ["mimi", "encode", "--streaming", "--model"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    argv.extend([
        s(&fixture("mimi-tiny", "model.safetensors")),
        "--config".into(),
        s(&fixture("mimi-tiny", "config.json")),
        s(&wav),
        "-o".into(),
        s(&codes),
    ]);
    let mut sink = Vec::new();
    run_args(
        std::iter::once("voxlane".to_string()).chain(argv),
        &mut sink,
    )
    .unwrap();
    let toks = dir.join("toks.npy");
    tokens(&["--greedy", "--no-weights-cache"], &codes, &toks)
        .0
        .unwrap();
    let (shape, t) = i64s(&toks);
    let steps = shape[0];
    // Text pieces: the text tokens through the tokenizer (PAD / EPAD for 3 / 0).
    let pieces: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(&text).unwrap()).unwrap();
    assert_eq!(pieces.len(), steps);
    let spm =
        voxlane_actors::text::SentencePiece::open(fixture("personaplex-tiny", "tokenizer.model"))
            .unwrap();
    for (i, p) in pieces.iter().enumerate() {
        let id = t[i * 9] as u32;
        let want = match id {
            0 => "EPAD".to_string(),
            3 => "PAD".to_string(),
            _ => spm.id_to_piece(id).unwrap().replace('\u{2581}', " "),
        };
        assert_eq!(p, &want, "step {i}");
    }
    // Audio: the agent codes through Mimi's streaming decoder, then zeros to the input's length.
    let agent: Vec<i64> = (0..8)
        .flat_map(|k| (0..steps).map(move |i| (k, i)))
        .map(|(k, i)| t[i * 9 + 1 + k])
        .collect();
    let agent_npy = dir.join("agent.npy");
    write_npy(
        &agent_npy,
        &NpyArray {
            shape: vec![1, 8, steps],
            data: NpyData::I64(agent),
        },
    )
    .unwrap();
    let decoded = dir.join("decoded.npy");
    let argv: Vec<String> = ["voxlane", "mimi", "decode", "--streaming", "--model"]
        .iter()
        .map(|a| a.to_string())
        .chain([
            s(&fixture("mimi-tiny", "model.safetensors")),
            "--config".into(),
            s(&fixture("mimi-tiny", "config.json")),
            s(&agent_npy),
            "-o".into(),
            s(&decoded),
        ])
        .collect();
    run_args(argv, &mut sink).unwrap();
    let want = read_npy(&decoded).unwrap().to_f32();
    let n = want.len().min(pcm.len());
    // The WAV holds 16-bit samples: compare within two quantization steps.
    let err = reply.samples[..n]
        .iter()
        .zip(&want[..n])
        .map(|(a, b)| (a - b.clamp(-1.0, 1.0)).abs())
        .fold(0.0, f32::max);
    assert!(err <= 2.0 / 32767.0, "max error {err}");
    assert!(reply.samples[n..].iter().all(|&v| v == 0.0));
    assert!(
        want[..n].iter().any(|v| v.abs() > 1e-3),
        "the reply is not silent"
    );
    // Bad chat inputs: typed, nothing written.
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    let mut a = args.clone();
    let i = a.iter().position(|x| x == "--tokenizer").unwrap();
    a[i + 1] = s(&dir.join("missing.model"));
    let o = a.iter().position(|x| x == "-o").unwrap();
    a[o + 1] = s(&bad.join("x.wav"));
    let tpos = a.iter().position(|x| x == "--text").unwrap();
    a[tpos + 1] = s(&bad.join("x.json"));
    assert!(moshi(&a).0.unwrap_err().to_string().contains("tokenizer"));
    let mut a2 = args.clone();
    let m = a2.iter().position(|x| x == "--mimi").unwrap();
    a2.remove(m + 1);
    a2.remove(m);
    let o = a2.iter().position(|x| x == "-o").unwrap();
    a2[o + 1] = s(&bad.join("x.wav"));
    assert!(moshi(&a2).0.unwrap_err().to_string().contains("--mimi"));
    assert!(listing(&bad).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn official_shape_runs_on_random_q4_weights() {
    let dir = temp_dir("official");
    let codes = dir.join("codes.npy");
    let data: Vec<i64> = (0..8 * 3).map(|i| (i * 97) % 2048).collect();
    write_npy(
        &codes,
        &NpyArray {
            shape: vec![1, 8, 3],
            data: NpyData::I64(data),
        },
    )
    .unwrap();
    let out = dir.join("out.npy");
    let (r, said) = moshi(&[
        "tokens".into(),
        "--random-weights".into(),
        "1".into(),
        "--weights".into(),
        "q4_0".into(),
        "--threads".into(),
        "2".into(),
        s(&codes),
        "-o".into(),
        s(&out),
    ]);
    r.unwrap();
    assert!(said.contains("2 steps × 9 tokens from 3 frames"), "{said}");
    let (shape, t) = i64s(&out);
    assert_eq!(shape, vec![2, 9]);
    assert!(t
        .chunks(9)
        .all(|r| r[0] < 32000 && r[1..].iter().all(|&c| (0..2048).contains(&c))));
    std::fs::remove_dir_all(&dir).unwrap();
}
