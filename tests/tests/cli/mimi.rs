//! `voxlane mimi encode|decode|roundtrip`, driven in-process on the
//! `mimi-tiny` fixture (batch codes == `codes.npy`, `--streaming` codes ==
//! `codes_streaming.npy`, decoded audio within 1e-4 of PyTorch, a WAV round
//! trip equal to the model's own encode + decode), its typed errors (each
//! leaves no output file), and the official shapes without `--config`.

use std::path::{Path, PathBuf};
use voxlane_actors::kernels::matmul::bf16;
use voxlane_actors::speech::mimi::weights::expected_tensors;
use voxlane_actors::speech::mimi::{MimiConfig, MimiModel, MimiWeights};
use voxlane_machines::cli::{run_args, CliError};
use voxlane_machines::speech::mimi_init::MimiInitError;
use voxlane_runtime::io::wav::encode_pcm16;
use voxlane_runtime::io::{read_npy, read_wav, write_npy, write_wav, NpyArray, NpyData};
use voxlane_runtime::weights::{write_safetensors, TensorData};
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/mimi-tiny")
        .join(name)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A fresh temp folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voxlane-cli-mimi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Run `voxlane mimi ARGS...`; the result and what it printed.
fn mimi(args: &[String]) -> (Result<(), CliError>, String) {
    let mut out = Vec::new();
    let mut argv = vec!["voxlane".to_string(), "mimi".to_string()];
    argv.extend_from_slice(args);
    let r = run_args(argv, &mut out);
    (r, String::from_utf8(out).unwrap())
}

/// `SUB --model M --config C EXTRA... INPUT -o OUTPUT` on the fixture model.
fn tiny(sub: &str, extra: &[&str], input: &Path, output: &Path) -> (Result<(), CliError>, String) {
    let mut args = vec![
        sub.to_string(),
        "--model".into(),
        s(&fixture("model.safetensors")),
        "--config".into(),
        s(&fixture("config.json")),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend([s(input), "-o".into(), s(output)]);
    mimi(&args)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn encode_batch_and_streaming_reproduce_the_reference_codes() {
    let dir = temp_dir("encode");
    for (extra, reference) in [
        (vec![], "codes.npy"),
        (vec!["--streaming"], "codes_streaming.npy"),
        (vec!["--streaming", "--threads", "2"], "codes_streaming.npy"),
    ] {
        let out = dir.join("codes.npy");
        let (r, printed) = tiny("encode", &extra, &fixture("input_pcm.npy"), &out);
        r.unwrap();
        assert!(printed.contains("55 frames of 8 codes"), "{printed}");
        let got = read_npy(&out).unwrap();
        let want = read_npy(fixture(reference)).unwrap();
        assert_eq!(got.shape, vec![1, 8, 55]);
        assert!(matches!(got.data, NpyData::I64(_)), "codes are int64");
        assert_eq!(got.to_i64(), want.to_i64(), "{extra:?} vs {reference}");
    }
    assert_eq!(listing(&dir), vec!["codes.npy"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fast_flags_stream_codes_close_to_the_reference() {
    let dir = temp_dir("encode-q8");
    let out = dir.join("codes.npy");
    let q8 = ["--streaming", "--q8", "--q8-convs", "--threads", "2"];
    let all = [&q8[..], &["--bf16-convs"]].concat();
    for extra in [&q8[..], &all[..]] {
        let (r, printed) = tiny("encode", extra, &fixture("input_pcm.npy"), &out);
        r.unwrap();
        assert!(printed.contains("55 frames of 8 codes"), "{printed}");
        let got = read_npy(&out).unwrap().to_i64();
        let want = read_npy(fixture("codes_streaming.npy")).unwrap().to_i64();
        let same = got.iter().zip(&want).filter(|(a, b)| a == b).count();
        eprintln!("{extra:?}: {same}/{} codes equal", want.len());
        assert!(
            same * 100 >= 95 * want.len(),
            "{extra:?}: {same}/{} codes equal",
            want.len()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn decode_batch_and_streaming_match_pytorch_within_1e4() {
    let dir = temp_dir("decode");
    for (extra, reference) in [
        (vec![], "decoded.npy"),
        (vec!["--streaming"], "decoded_streaming.npy"),
    ] {
        let out = dir.join("audio.npy");
        let (r, printed) = tiny("decode", &extra, &fixture("codes.npy"), &out);
        r.unwrap();
        assert!(
            printed.contains("105600 samples from 55 frames"),
            "{printed}"
        );
        let got = read_npy(&out).unwrap();
        assert_eq!(got.shape, vec![1, 1, 105600]);
        assert!(matches!(got.data, NpyData::F32(_)), "audio is float32");
        let want = read_npy(fixture(reference)).unwrap().to_f32();
        let err = max_abs_diff(&got.to_f32(), &want);
        assert!(err <= 1e-4, "{extra:?}: max abs error {err}");
    }
    // A WAV output is the same audio as 24 kHz 16-bit PCM.
    let wav = dir.join("audio.wav");
    tiny("decode", &[], &fixture("codes.npy"), &wav).0.unwrap();
    let w = read_wav(&wav).unwrap();
    assert_eq!((w.sample_rate, w.channels), (24_000, 1));
    let want = read_npy(fixture("decoded.npy")).unwrap().to_f32();
    assert_eq!(w.samples.len(), want.len());
    assert!(max_abs_diff(&w.samples, &want) <= 1.0 / 32767.0 + 1e-4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn roundtrip_a_wav_equals_the_models_encode_then_decode() {
    let dir = temp_dir("roundtrip");
    let pcm = read_npy(fixture("input_pcm.npy")).unwrap().to_f32();
    // Not a whole number of frames: the output keeps the input's length.
    let clip = &pcm[..10 * 1920 + 555];
    let input = dir.join("in.wav");
    write_wav(&input, 24_000, clip).unwrap();
    let out = dir.join("out.wav");
    let (r, printed) = tiny("roundtrip", &[], &input, &out);
    r.unwrap();
    assert!(
        printed.contains("19755 samples through 11 frames"),
        "{printed}"
    );

    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    let model = MimiModel::load(cfg, fixture("model.safetensors")).unwrap();
    let pool = LanePool::new(1).unwrap();
    let heard = read_wav(&input).unwrap().mono();
    let codes = model.encode(&pool, &heard).unwrap();
    assert_eq!(codes.frames, 11);
    let mut audio = model.decode(&pool, &codes).unwrap();
    audio.truncate(heard.len());
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[44..], encode_pcm16(&audio).as_slice());
    assert_eq!(read_wav(&out).unwrap().sample_rate, 24_000);

    // A stereo WAV is downmixed by averaging: equal channels code like mono.
    let stereo = dir.join("stereo.wav");
    std::fs::write(&stereo, stereo_wav(&heard, &heard, 24_000)).unwrap();
    let codes_mono = dir.join("mono.npy");
    let codes_stereo = dir.join("stereo.npy");
    tiny("encode", &[], &input, &codes_mono).0.unwrap();
    tiny("encode", &[], &stereo, &codes_stereo).0.unwrap();
    assert_eq!(
        read_npy(&codes_stereo).unwrap(),
        read_npy(&codes_mono).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// 16-bit stereo WAV bytes of two channels.
fn stereo_wav(left: &[f32], right: &[f32], rate: u32) -> Vec<u8> {
    let l = encode_pcm16(left);
    let r = encode_pcm16(right);
    let mut data = Vec::with_capacity(l.len() * 2);
    for (a, b) in l.chunks_exact(2).zip(r.chunks_exact(2)) {
        data.extend_from_slice(a);
        data.extend_from_slice(b);
    }
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&(rate * 4).to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&(data.len() as u32).to_le_bytes());
    h.extend_from_slice(&data);
    h
}

#[test]
fn errors_are_typed_and_leave_no_output() {
    let dir = temp_dir("errors");
    let out = dir.join("out.npy");
    let pcm = read_npy(fixture("input_pcm.npy")).unwrap().to_f32();

    // No --model: the flag is named.
    let (r, _) = mimi(&[
        "encode".into(),
        s(&fixture("input_pcm.npy")),
        "-o".into(),
        s(&out),
    ]);
    match r {
        Err(
            e @ CliError::MissingFlag {
                flag: "--model", ..
            },
        ) => {
            assert!(e.to_string().contains("--model"), "{e}");
            assert!(e.to_string().contains("no downloadable default"), "{e}");
        }
        other => panic!("expected MissingFlag --model, got {other:?}"),
    }

    // A 16 kHz WAV: the rate found and the rate needed.
    let slow = dir.join("slow.wav");
    write_wav(&slow, 16_000, &pcm[..16_000]).unwrap();
    match tiny("encode", &[], &slow, &out).0 {
        Err(
            e @ CliError::SampleRate {
                found: 16_000,
                needed: 24_000,
                ..
            },
        ) => {
            let msg = e.to_string();
            assert!(
                msg.contains("16000 Hz") && msg.contains("24000 Hz"),
                "{msg}"
            );
        }
        other => panic!("expected SampleRate, got {other:?}"),
    }
    let wav_out = dir.join("out.wav");
    assert!(matches!(
        tiny("roundtrip", &[], &slow, &wav_out).0,
        Err(CliError::SampleRate { found: 16_000, .. })
    ));

    // Bad codes files: a code out of range, floats, the wrong codebook count.
    let mut codes = read_npy(fixture("codes.npy")).unwrap().to_i64();
    codes[3 * 55 + 7] = 256;
    let bad_codes = dir.join("bad_codes.npy");
    write_npy(
        &bad_codes,
        &NpyArray {
            shape: vec![1, 8, 55],
            data: NpyData::I64(codes.clone()),
        },
    )
    .unwrap();
    match tiny("decode", &[], &bad_codes, &wav_out).0 {
        Err(CliError::Input { path, detail }) => {
            assert_eq!(path, bad_codes);
            assert_eq!(detail, "code 256 (codebook 3, frame 7) is outside 0..256");
        }
        other => panic!("expected an Input error, got {other:?}"),
    }
    codes[3 * 55 + 7] = -1;
    write_npy(
        &bad_codes,
        &NpyArray {
            shape: vec![1, 8, 55],
            data: NpyData::I64(codes.clone()),
        },
    )
    .unwrap();
    assert!(matches!(
        tiny("decode", &["--streaming"], &bad_codes, &wav_out).0,
        Err(CliError::Input { detail, .. }) if detail.contains("code -1 (codebook 3, frame 7)")
    ));
    write_npy(
        &bad_codes,
        &NpyArray {
            shape: vec![1, 4, 110],
            data: NpyData::I64(vec![0; 440]),
        },
    )
    .unwrap();
    assert!(matches!(
        tiny("decode", &[], &bad_codes, &wav_out).0,
        Err(CliError::Input { detail, .. }) if detail.starts_with("4 codebooks, the model uses 8")
    ));
    assert!(matches!(
        tiny("decode", &[], &fixture("input_pcm.npy"), &wav_out).0,
        Err(CliError::Input { detail, .. }) if detail.contains("int64 or int32")
    ));
    let not_npy = dir.join("codes.txt");
    std::fs::write(&not_npy, "1 2 3").unwrap();
    assert!(matches!(
        tiny("decode", &[], &not_npy, &wav_out).0,
        Err(CliError::Input { detail, .. }) if detail == "codes must be a .npy file"
    ));

    // --threads 0.
    assert!(matches!(
        tiny(
            "encode",
            &["--threads", "0"],
            &fixture("input_pcm.npy"),
            &out
        )
        .0,
        Err(CliError::Threads(_))
    ));

    // A model file for another config: the tensors are named.
    let mut args = vec![
        "encode".to_string(),
        "--model".into(),
        s(&fixture("model.safetensors")),
    ];
    args.extend([s(&fixture("input_pcm.npy")), "-o".into(), s(&out)]);
    match mimi(&args).0 {
        Err(CliError::MimiInit(MimiInitError::MissingTensors(names))) => {
            assert!(names
                .contains(&"encoder_transformer.transformer.layers.7.linear1.weight".to_string()))
        }
        other => panic!("expected MissingTensors, got {other:?}"),
    }

    // Codes are .npy; a missing model file is named.
    assert!(matches!(
        tiny(
            "encode",
            &[],
            &fixture("input_pcm.npy"),
            &dir.join("codes.wav")
        )
        .0,
        Err(CliError::Output { .. })
    ));
    let (r, _) = mimi(&[
        "decode".into(),
        "--model".into(),
        s(&dir.join("nope.safetensors")),
        s(&fixture("codes.npy")),
        "-o".into(),
        s(&wav_out),
    ]);
    assert!(matches!(
        r,
        Err(CliError::MissingFile { what: "model", .. })
    ));

    assert_eq!(
        listing(&dir),
        vec!["bad_codes.npy", "codes.txt", "slow.wav"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn official_shapes_encode_and_decode_without_config() {
    let cfg = MimiConfig::default();
    let dir = temp_dir("official");
    let model_path = dir.join("mimi-official-bf16.safetensors");
    {
        let w = MimiWeights::synthetic(&cfg, 1);
        let owned: Vec<(String, TensorData, Vec<usize>)> = expected_tensors(&cfg)
            .into_iter()
            .filter(|e| !e.optional)
            .map(|e| {
                let n: usize = e.shape.iter().product();
                let bits: Vec<u16> = match w.peek(&e.name) {
                    Some(v) => v.iter().map(|x| bf16::from_f32(*x).to_bits()).collect(),
                    // Codebooks beyond num_codebooks: checked, never read.
                    None => vec![0; n],
                };
                (e.name, TensorData::BF16(bits), e.shape)
            })
            .collect();
        let refs: Vec<(&str, TensorData, Vec<usize>)> = owned
            .iter()
            .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
            .collect();
        write_safetensors(&model_path, &refs, &[]).unwrap();
    }
    let pcm: Vec<f32> = (0..2 * 1920)
        .map(|i| 0.3 * (i as f32 * 0.05).sin())
        .collect();
    let input = dir.join("in.npy");
    write_npy(
        &input,
        &NpyArray {
            shape: vec![1, 1, pcm.len()],
            data: NpyData::F32(pcm.clone()),
        },
    )
    .unwrap();
    let codes_path = dir.join("codes.npy");
    let run = |sub: &str, extra: &[&str], i: &Path, o: &Path| {
        let mut args = vec![sub.to_string(), "--model".into(), s(&model_path)];
        args.extend(extra.iter().map(|a| a.to_string()));
        args.extend([s(i), "-o".into(), s(o)]);
        mimi(&args)
    };
    let (r, printed) = run("encode", &["--threads", "2"], &input, &codes_path);
    r.unwrap();
    assert!(printed.contains("2 frames of 8 codes"), "{printed}");
    let codes = read_npy(&codes_path).unwrap();
    assert_eq!(codes.shape, vec![1, 8, 2]);

    // The same codes as the model loaded directly from the file, streaming too.
    let model = MimiModel::load(cfg, &model_path).unwrap();
    let pool = LanePool::new(2).unwrap();
    let want = model.encode(&pool, &pcm).unwrap();
    let got: Vec<u32> = codes.to_i64().iter().map(|&c| c as u32).collect();
    assert_eq!(got, want.data);
    assert!(got.iter().all(|&c| c < 2048));
    let streamed = dir.join("codes_streaming.npy");
    run("encode", &["--streaming"], &input, &streamed)
        .0
        .unwrap();
    assert_eq!(read_npy(&streamed).unwrap(), codes);

    let audio_path = dir.join("out.npy");
    let (r, printed) = run("decode", &["--threads", "2"], &codes_path, &audio_path);
    r.unwrap();
    assert!(printed.contains("3840 samples from 2 frames"), "{printed}");
    let audio = read_npy(&audio_path).unwrap();
    assert_eq!(audio.shape, vec![1, 1, 3840]);
    let want_audio = model.decode(&pool, &want).unwrap();
    assert_eq!(audio.to_f32(), want_audio);
    assert!(want_audio.iter().all(|x| x.is_finite()));

    // The fast routes on the official shapes (q8_0 + bf16 tiles), streaming.
    let fast = [
        "--streaming",
        "--q8",
        "--q8-convs",
        "--bf16-convs",
        "--threads",
        "2",
    ];
    let fast_codes = dir.join("codes_fast.npy");
    run("encode", &fast, &input, &fast_codes).0.unwrap();
    let c = read_npy(&fast_codes).unwrap();
    assert_eq!(c.shape, vec![1, 8, 2]);
    assert!(c.to_i64().iter().all(|&v| (0..2048).contains(&v)));
    let fast_audio = dir.join("out_fast.npy");
    run("decode", &fast, &codes_path, &fast_audio).0.unwrap();
    let a = read_npy(&fast_audio).unwrap().to_f32();
    assert_eq!(a.len(), 3840);
    let r = voxlane_tests::pearson(&a, &want_audio);
    assert!(r > 0.99, "fast decode correlation {r} with the f32 decode");
    drop(model);
    std::fs::remove_file(&model_path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_lists_the_mimi_subcommands() {
    let (r, _) = mimi(&["--help".into()]);
    let msg = match r {
        Err(CliError::Usage(m)) => m,
        other => panic!("--help comes back as clap's text, got {other:?}"),
    };
    for sub in ["encode", "decode", "roundtrip"] {
        assert!(
            msg.contains(sub),
            "`voxlane mimi --help` misses `{sub}`:\n{msg}"
        );
    }
    let (r, _) = mimi(&["encode".into(), "--help".into()]);
    let msg = format!("{r:?}");
    for flag in [
        "--model",
        "--config",
        "--threads",
        "--streaming",
        "--q8",
        "--q8-convs",
        "--bf16-convs",
        "--output",
    ] {
        assert!(msg.contains(flag), "`mimi encode --help` misses {flag}");
    }
}
