//! Mimi parity with PyTorch `moshi` 0.2.13 on the `mimi-tiny` fixture:
//! batch and streaming codes token-exact, decoded audio within 1e-4,
//! identical bits for thread budgets 1 and 2, and the official shapes
//! running on synthetic weights.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use voxlane_actors::kernels::matmul::{bf16, f16};
use voxlane_actors::speech::mimi::quantizer::Quantizer;
use voxlane_actors::speech::mimi::{
    Codes, MimiConfig, MimiDecoder, MimiEncoder, MimiError, MimiModel, MimiWeights,
};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::weights::{write_safetensors, TensorData, WeightFile};
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/mimi-tiny")
        .join(name)
}

fn model() -> MimiModel {
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    MimiModel::load(cfg, fixture("model.safetensors")).unwrap()
}

fn pcm() -> Vec<f32> {
    read_npy(fixture("input_pcm.npy")).unwrap().to_f32()
}

fn reference_codes(name: &str) -> Codes {
    let a = read_npy(fixture(name)).unwrap();
    assert_eq!(a.shape.len(), 3);
    Codes {
        num_codebooks: a.shape[1],
        frames: a.shape[2],
        data: a.to_i64().iter().map(|&c| c as u32).collect(),
    }
}

/// Print where two code grids differ (first few), then fail.
fn assert_codes_eq(got: &Codes, want: &Codes, what: &str) {
    assert_eq!(
        (got.num_codebooks, got.frames),
        (want.num_codebooks, want.frames)
    );
    let diffs: Vec<(usize, usize, u32, u32)> = got
        .data
        .iter()
        .zip(&want.data)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| (i / got.frames, i % got.frames, *a, *b))
        .collect();
    assert!(
        diffs.is_empty(),
        "{what}: {} of {} codes differ; first (k, t, got, want): {:?}",
        diffs.len(),
        got.data.len(),
        &diffs[..diffs.len().min(10)]
    );
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn stream_encode(model: &Arc<MimiModel>, pool: &LanePool, pcm: &[f32]) -> Codes {
    let (fs, k) = (model.frame_size(), model.num_codebooks());
    let frames = pcm.len() / fs;
    let mut enc = MimiEncoder::new(model.clone()).unwrap();
    let mut data = vec![0; k * frames];
    let mut col = vec![0; k];
    for t in 0..frames {
        enc.step(pool, &pcm[t * fs..(t + 1) * fs], &mut col)
            .unwrap();
        for (kk, c) in col.iter().enumerate() {
            data[kk * frames + t] = *c;
        }
    }
    Codes {
        num_codebooks: k,
        frames,
        data,
    }
}

fn stream_decode(model: &Arc<MimiModel>, pool: &LanePool, codes: &Codes) -> Vec<f32> {
    let fs = model.frame_size();
    let mut dec = MimiDecoder::new(model.clone()).unwrap();
    let mut out = vec![0.0; codes.frames * fs];
    for t in 0..codes.frames {
        let col: Vec<u32> = (0..codes.num_codebooks)
            .map(|k| codes.data[k * codes.frames + t])
            .collect();
        dec.step(pool, &col, &mut out[t * fs..(t + 1) * fs])
            .unwrap();
    }
    out
}

#[test]
fn batch_codes_match_pytorch_exactly() {
    let model = model();
    let pool = LanePool::new(2).unwrap();
    let codes = model.encode(&pool, &pcm()).unwrap();
    assert_codes_eq(&codes, &reference_codes("codes.npy"), "batch encode");
    // A clip that is not whole frames is zero-padded (moshi `pad_for_conv1d`):
    // every frame before the padded one is unchanged (causal).
    let short = model.encode(&pool, &pcm()[..54 * 1920 + 700]).unwrap();
    assert_eq!(short.frames, 55);
    for k in 0..8 {
        assert_eq!(
            short.data[k * 55..k * 55 + 54],
            codes.data[k * 55..k * 55 + 54]
        );
    }
}

#[test]
fn streaming_codes_match_pytorch_exactly() {
    let model = Arc::new(model());
    let pool = LanePool::new(2).unwrap();
    let codes = stream_encode(&model, &pool, &pcm());
    assert_codes_eq(
        &codes,
        &reference_codes("codes_streaming.npy"),
        "streaming encode",
    );
}

#[test]
fn multi_frame_streaming_steps_match_too() {
    // Steps of 5 code frames (10 encoder steps per transformer call).
    let model = model();
    let pool = LanePool::new(2).unwrap();
    let pcm = pcm();
    let (fs, k) = (model.frame_size(), model.num_codebooks());
    let want = reference_codes("codes_streaming.npy");
    let mut st = model.encoder_state(5).unwrap();
    let mut got = vec![0; k * want.frames];
    let mut block = vec![0; k * 5];
    for (b, chunk) in pcm.chunks(5 * fs).enumerate() {
        let n = chunk.len() / fs;
        model
            .encode_step(&pool, &mut st, chunk, &mut block[..k * n])
            .unwrap();
        for kk in 0..k {
            for t in 0..n {
                got[kk * want.frames + b * 5 + t] = block[kk * n + t];
            }
        }
    }
    let got = Codes {
        num_codebooks: k,
        frames: want.frames,
        data: got,
    };
    assert_codes_eq(&got, &want, "5-frame streaming encode");
}

#[test]
fn decoded_audio_matches_pytorch() {
    let model = Arc::new(model());
    let pool = LanePool::new(2).unwrap();
    let codes = reference_codes("codes.npy");
    let want = read_npy(fixture("decoded.npy")).unwrap().to_f32();
    let got = model.decode(&pool, &codes).unwrap();
    let err = max_abs_diff(&got, &want);
    eprintln!("batch decode: max abs error {err:e}");
    assert!(err <= 1e-4, "batch decode max abs error {err}");

    let want = read_npy(fixture("decoded_streaming.npy")).unwrap().to_f32();
    let got = stream_decode(&model, &pool, &codes);
    let err = max_abs_diff(&got, &want);
    eprintln!("streaming decode: max abs error {err:e}");
    assert!(err <= 1e-4, "streaming decode max abs error {err}");
}

#[test]
fn quantized_latent_matches_pytorch() {
    // latent.npy is `decode_latent(codes)`: codebook sums through both output projections.
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    let file = WeightFile::open(fixture("model.safetensors")).unwrap();
    let mut w = MimiWeights::from_file(&cfg, &file).unwrap();
    let q = Quantizer::new(&cfg, &mut w).unwrap();
    let codes = reference_codes("codes.npy");
    let want = read_npy(fixture("latent.npy")).unwrap();
    assert_eq!(want.shape, vec![1, cfg.seanet.dimension, codes.frames]);
    let mut got = vec![0.0; cfg.seanet.dimension * codes.frames];
    let pool = LanePool::new(2).unwrap();
    q.decode(&pool, &codes.data, codes.frames, &mut got, &mut q.scratch())
        .unwrap();
    let err = max_abs_diff(&got, &want.to_f32());
    eprintln!("quantized latent: max abs error {err:e}");
    assert!(err <= 1e-5, "latent max abs error {err}");
}

#[test]
fn identical_bits_for_thread_budgets_1_and_2() {
    let model = Arc::new(model());
    let pcm = pcm();
    let codes = reference_codes("codes.npy");
    let run = |threads: usize| {
        let pool = LanePool::new(threads).unwrap();
        let batch = model.encode(&pool, &pcm).unwrap();
        let stream = stream_encode(&model, &pool, &pcm[..8 * model.frame_size()]);
        let audio = model.decode(&pool, &codes).unwrap();
        let audio_stream = stream_decode(&model, &pool, &codes);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        (batch, stream, bits(&audio), bits(&audio_stream))
    };
    assert!(run(1) == run(2), "results differ between 1 and 2 threads");
}

#[test]
fn reset_restarts_the_stream() {
    let model = Arc::new(model());
    let pool = LanePool::new(1).unwrap();
    let fs = model.frame_size();
    let pcm = pcm();
    let mut enc = MimiEncoder::new(model.clone()).unwrap();
    let k = model.num_codebooks();
    let (mut a, mut b) = (vec![0; k], vec![0; k]);
    enc.step(&pool, &pcm[..fs], &mut a).unwrap();
    enc.step(&pool, &pcm[fs..2 * fs], &mut b).unwrap();
    enc.reset();
    let mut c = vec![0; k];
    enc.step(&pool, &pcm[..fs], &mut c).unwrap();
    assert_eq!(a, c);
    // A wrong frame size is a typed error, not a panic.
    assert!(matches!(
        enc.step(&pool, &pcm[..fs - 1], &mut c),
        Err(MimiError::Input(_))
    ));
    // A state only runs with the model that made it.
    let other = self::model();
    let mut st = other.encoder_state(1).unwrap();
    assert!(matches!(
        model.encode_step(&pool, &mut st, &pcm[..fs], &mut c),
        Err(MimiError::Input(_))
    ));
    let mut dec = MimiDecoder::new(model.clone()).unwrap();
    let mut out = vec![0.0; fs];
    let bad = vec![u32::MAX; k];
    assert!(matches!(
        dec.step(&pool, &bad, &mut out),
        Err(MimiError::Input(_))
    ));
}

#[test]
fn missing_and_unexpected_tensors_are_named() {
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    // The official config against the tiny file: shapes and names disagree.
    let file = WeightFile::open(fixture("model.safetensors")).unwrap();
    assert!(MimiWeights::from_file(&MimiConfig::default(), &file).is_err());
    // Drop one tensor, add a stray one.
    let mut tensors = std::collections::BTreeMap::new();
    for name in file.names() {
        let t = file.get(name).unwrap();
        tensors.insert(name.to_string(), (t.shape.to_vec(), t.to_f32()));
    }
    let gone = "encoder_transformer.transformer.layers.1.linear2.weight";
    let mut fewer = tensors.clone();
    fewer.remove(gone);
    match MimiWeights::from_tensors(&cfg, fewer) {
        Err(MimiError::MissingTensors(names)) => assert_eq!(names, vec![gone.to_string()]),
        other => panic!("expected MissingTensors, got {other:?}"),
    }
    let mut more = tensors.clone();
    more.insert(
        "decoder.model.99.conv.conv.weight".into(),
        (vec![1], vec![0.0]),
    );
    match MimiWeights::from_tensors(&cfg, more) {
        Err(MimiError::UnexpectedTensors(names)) => {
            assert_eq!(names, vec!["decoder.model.99.conv.conv.weight".to_string()])
        }
        other => panic!("expected UnexpectedTensors, got {other:?}"),
    }
    let mut bent = tensors;
    bent.insert(gone.into(), (vec![64, 64], vec![0.0; 64 * 64]));
    assert!(matches!(
        MimiWeights::from_tensors(&cfg, bent),
        Err(MimiError::Shape { .. })
    ));
}

#[test]
fn half_precision_files_load_and_integer_tensors_are_named() {
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    let file = WeightFile::open(fixture("model.safetensors")).unwrap();
    let dir = std::env::temp_dir();
    let pcm = pcm();
    let pool = LanePool::new(2).unwrap();
    let want = reference_codes("codes.npy");
    for (tag, half) in [("bf16", true), ("f16", false)] {
        let owned: Vec<(String, TensorData, Vec<usize>)> = file
            .names()
            .map(|n| {
                let t = file.get(n).unwrap();
                let v = t.to_f32();
                let data = if half {
                    TensorData::BF16(v.iter().map(|x| bf16::from_f32(*x).to_bits()).collect())
                } else {
                    TensorData::F16(v.iter().map(|x| f16::from_f32(*x).to_bits()).collect())
                };
                (n.to_string(), data, t.shape.to_vec())
            })
            .collect();
        let refs: Vec<(&str, TensorData, Vec<usize>)> = owned
            .iter()
            .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
            .collect();
        let path = dir.join(format!(
            "voxlane-mimi-{tag}-{}.safetensors",
            std::process::id()
        ));
        write_safetensors(&path, &refs, &[]).unwrap();
        let model = MimiModel::load(cfg.clone(), &path).unwrap();
        let codes = model.encode(&pool, &pcm).unwrap();
        let same = codes
            .data
            .iter()
            .zip(&want.data)
            .filter(|(a, b)| a == b)
            .count();
        eprintln!(
            "{tag} weights: {same}/{} codes equal to the f32 reference",
            want.data.len()
        );
        assert_eq!(codes.frames, want.frames);
        assert!(codes.data.iter().all(|&c| c < 256));

        // An integer tensor is refused by name.
        let mut bad = refs.clone();
        let victim = "decoder.model.0.conv.conv.bias";
        for t in bad.iter_mut().filter(|t| t.0 == victim) {
            t.1 = TensorData::I32(vec![0; 128]);
        }
        write_safetensors(&path, &bad, &[]).unwrap();
        let f = WeightFile::open(&path).unwrap();
        match MimiWeights::from_file(&cfg, &f) {
            Err(MimiError::Dtype { tensor, .. }) => assert_eq!(tensor, victim),
            other => panic!("expected a Dtype error, got {other:?}"),
        }
        drop(f);
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn official_shapes_run_on_synthetic_weights() {
    let cfg = MimiConfig::default();
    let model = Arc::new(MimiModel::new(cfg.clone(), MimiWeights::synthetic(&cfg, 7)).unwrap());
    assert_eq!(model.frame_size(), 1920);
    assert_eq!(model.num_codebooks(), 8);
    let pool = LanePool::new(2).unwrap();
    let fs = model.frame_size();
    let pcm: Vec<f32> = (0..3 * fs).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect();
    let mut enc = MimiEncoder::new(model.clone()).unwrap();
    let mut dec = MimiDecoder::new(model.clone()).unwrap();
    let mut codes = vec![0; 8];
    let mut out = vec![0.0; fs];
    let mut streamed = Vec::new();
    let (mut t_enc, mut t_dec) = (0.0, 0.0);
    for frame in pcm.chunks_exact(fs) {
        let t0 = Instant::now();
        enc.step(&pool, frame, &mut codes).unwrap();
        let t1 = Instant::now();
        dec.step(&pool, &codes, &mut out).unwrap();
        t_enc += (t1 - t0).as_secs_f64();
        t_dec += t1.elapsed().as_secs_f64();
        assert!(codes.iter().all(|&c| c < 2048));
        assert!(out.iter().all(|x| x.is_finite()));
        streamed.extend_from_slice(&codes);
    }
    eprintln!(
        "official shapes, 2 threads: {:.1} ms/frame encode, {:.1} ms/frame decode",
        t_enc * 1e3 / 3.0,
        t_dec * 1e3 / 3.0
    );
    // Batch over the same three frames gives the same codes.
    let batch = model.encode(&pool, &pcm).unwrap();
    for t in 0..3 {
        for k in 0..8 {
            assert_eq!(batch.data[k * 3 + t], streamed[t * 8 + k]);
        }
    }
    // Same bits for budgets 1 and 2 at the official shapes too.
    let run = |threads: usize| {
        let pool = LanePool::new(threads).unwrap();
        let mut enc = MimiEncoder::new(model.clone()).unwrap();
        let mut dec = MimiDecoder::new(model.clone()).unwrap();
        let (mut codes, mut out) = (vec![0; 8], vec![0.0; fs]);
        let mut bits = Vec::new();
        for frame in pcm.chunks_exact(fs).take(2) {
            enc.step(&pool, frame, &mut codes).unwrap();
            dec.step(&pool, &codes, &mut out).unwrap();
            bits.extend(codes.iter().copied());
            bits.extend(out.iter().map(|x| x.to_bits()));
        }
        bits
    };
    assert!(run(1) == run(2), "official shapes: budgets 1 and 2 differ");
}

#[test]
fn fixture_frame_timing() {
    let model = Arc::new(model());
    let pool = LanePool::new(1).unwrap();
    let pcm = pcm();
    let fs = model.frame_size();
    let frames = pcm.len() / fs;
    let t0 = Instant::now();
    let codes = stream_encode(&model, &pool, &pcm);
    let enc = t0.elapsed().as_secs_f64() / frames as f64;
    let t0 = Instant::now();
    stream_decode(&model, &pool, &codes);
    let dec = t0.elapsed().as_secs_f64() / frames as f64;
    eprintln!(
        "mimi-tiny, 1 thread: {:.3} ms/frame encode, {:.3} ms/frame decode",
        enc * 1e3,
        dec * 1e3
    );
}
