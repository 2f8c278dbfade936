//! Mimi bind contract on the `mimi-tiny` fixture: transformer linear routes
//! (f32, native half, q8_0), q8_0 codes still ≥ 95% equal to PyTorch's, the
//! native-half route bit-identical to f32 on the same values, and workspace
//! rules that predict every session's size.

use std::collections::BTreeMap;
use std::path::PathBuf;
use voxlane_actors::kernels::matmul::{bf16, WeightFormat};
use voxlane_actors::speech::mimi::contract::Q8_FORMAT;
use voxlane_actors::speech::mimi::weights::expected_tensors;
use voxlane_actors::speech::mimi::{
    BindContract, Codes, MimiConfig, MimiModel, MimiOptions, MimiWeights,
};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::weights::{write_safetensors, TensorData, WeightFile};
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/mimi-tiny")
        .join(name)
}

fn cfg() -> MimiConfig {
    MimiConfig::from_file(fixture("config.json")).unwrap()
}

fn reference_codes() -> Codes {
    let a = read_npy(fixture("codes.npy")).unwrap();
    Codes {
        num_codebooks: a.shape[1],
        frames: a.shape[2],
        data: a.to_i64().iter().map(|&c| c as u32).collect(),
    }
}

/// Linears with a route choice: 4 per layer in 2 transformers, plus projections.
fn linear_count(cfg: &MimiConfig) -> usize {
    let t = &cfg.transformer;
    let proj =
        usize::from(t.input_dimension != t.d_model) + usize::from(t.output_dimension != t.d_model);
    2 * (4 * t.num_layers + proj)
}

#[test]
fn default_contract_routes_every_linear_to_f32() {
    let cfg = cfg();
    let model = MimiModel::load(cfg.clone(), fixture("model.safetensors")).unwrap();
    let c = model.contract();
    assert_eq!(c.routes().len(), linear_count(&cfg));
    let (n, bytes) = c.route_total(WeightFormat::F32);
    assert_eq!(n, linear_count(&cfg));
    let expect: usize = c.routes().iter().map(|r| 4 * r.shape[0] * r.shape[1]).sum();
    assert_eq!(bytes, expect);
    assert_eq!(c.route_total(WeightFormat::Q8_0).0, 0);
    assert_eq!(c.route_total(Q8_FORMAT).0, 0);
    assert!(c.routes()[0].name.contains("_transformer."));
}

#[test]
fn workspace_rules_predict_session_sizes() {
    let model = MimiModel::load(cfg(), fixture("model.safetensors")).unwrap();
    let c = model.contract();
    for frames in [1, 3, 7] {
        let enc = model.encoder_state(frames).unwrap().floats() * 4;
        let dec = model.decoder_state(frames).unwrap().floats() * 4;
        assert_eq!(
            c.encoder_workspace().bytes(frames),
            enc,
            "encoder, {frames} frames"
        );
        assert_eq!(
            c.decoder_workspace().bytes(frames),
            dec,
            "decoder, {frames} frames"
        );
    }
    assert!(c.encoder_workspace().per_frame > 0 && c.encoder_workspace().fixed > 0);
    let (e, d) = c.streamed_bytes();
    assert!(e > c.route_total(WeightFormat::F32).1 / 2 && d > 0);
}

/// Share of `got` codes equal to PyTorch's on the fixture, and of the first
/// (semantic) codebook's.
fn code_agreement(model: &MimiModel) -> (f64, f64) {
    let pool = LanePool::new(2).unwrap();
    let pcm = read_npy(fixture("input_pcm.npy")).unwrap().to_f32();
    let got = model.encode(&pool, &pcm).unwrap();
    let want = reference_codes();
    assert_eq!(
        (got.num_codebooks, got.frames),
        (want.num_codebooks, want.frames)
    );
    let same = got
        .data
        .iter()
        .zip(&want.data)
        .filter(|(a, b)| a == b)
        .count();
    let first_same = (0..want.frames)
        .filter(|&t| got.data[t] == want.data[t])
        .count();
    (
        same as f64 / want.data.len() as f64,
        first_same as f64 / want.frames as f64,
    )
}

#[test]
fn q8_transformer_codes_stay_close_to_pytorch() {
    let cfg = cfg();
    let q8 = MimiOptions {
        q8_transformer: true,
        q8_convs: false,
        bf16_convs: false,
        nvidia_ring: false,
    };
    let model = MimiModel::load_with(cfg.clone(), fixture("model.safetensors"), q8).unwrap();
    let c = model.contract();
    assert_eq!(c.options(), q8);
    assert_eq!(c.route_total(Q8_FORMAT).0, linear_count(&cfg));
    assert_eq!(c.route_total(WeightFormat::F32).0, 0);
    // q8_0 weights take 34 bytes per 32 values.
    let f32_model = MimiModel::load(cfg, fixture("model.safetensors")).unwrap();
    assert!(c.streamed_bytes().0 < f32_model.contract().streamed_bytes().0);

    let (share, first) = code_agreement(&model);
    eprintln!("q8_0 transformer: {:.1}% codes equal", share * 100.0);
    assert!(share >= 0.95, "only {:.1}% of codes equal", share * 100.0);
    // The first (semantic) codebook is the most robust: it must match almost everywhere.
    assert!(first >= 0.95, "first codebook {:.1}%", first * 100.0);
}

#[test]
fn q8_convs_route_the_deep_convs_and_codes_stay_close_to_pytorch() {
    let cfg = cfg();
    let both = MimiOptions {
        q8_transformer: true,
        q8_convs: true,
        bf16_convs: false,
        nvidia_ring: false,
    };
    let model = MimiModel::load_with(cfg.clone(), fixture("model.safetensors"), both).unwrap();
    let linears_only = MimiModel::load_with(
        cfg.clone(),
        fixture("model.safetensors"),
        MimiOptions {
            q8_transformer: true,
            q8_convs: false,
            bf16_convs: false,
            nvidia_ring: false,
        },
    )
    .unwrap();
    let c = model.contract();
    let convs = c.route_total(Q8_FORMAT).0 - linear_count(&cfg);
    assert!(convs > 0, "no conv was routed to q8_0");
    // Every q8_0 conv is a weight the model has, with whole 32-value blocks.
    let names: Vec<String> = expected_tensors(&cfg).into_iter().map(|e| e.name).collect();
    for r in c.routes().iter().skip(linear_count(&cfg)) {
        assert!(names.contains(&r.name), "{} is not a model tensor", r.name);
        assert!(r.name.ends_with(".weight") && r.shape[1] % 32 == 0, "{r:?}");
    }
    for (with, without) in [
        (
            c.streamed_bytes().0,
            linears_only.contract().streamed_bytes().0,
        ),
        (
            c.streamed_bytes().1,
            linears_only.contract().streamed_bytes().1,
        ),
    ] {
        assert!(
            with < without,
            "q8_0 convs read {with} bytes, f32 convs {without}"
        );
    }
    let (share, first) = code_agreement(&model);
    eprintln!("q8_0 linears + convs: {:.1}% codes equal", share * 100.0);
    assert!(share >= 0.95, "only {:.1}% of codes equal", share * 100.0);
    assert!(first >= 0.95, "first codebook {:.1}%", first * 100.0);
    // Decoding: the q8_0 convs' audio stays close to the f32 model's.
    let pool = LanePool::new(2).unwrap();
    let codes = reference_codes();
    let f32_model = MimiModel::load(cfg, fixture("model.safetensors")).unwrap();
    let want = f32_model.decode(&pool, &codes).unwrap();
    let got = model.decode(&pool, &codes).unwrap();
    let r = voxlane_tests::pearson(&got, &want);
    eprintln!("q8_0 linears + convs: decoded audio correlation {r:.6} ({convs} q8_0 convs)");
    assert!(r >= 0.99, "decoded audio correlation {r}");
}

#[test]
fn bf16_convs_route_the_long_convs_and_codes_stay_close_to_pytorch() {
    let cfg = cfg();
    let names: Vec<String> = expected_tensors(&cfg).into_iter().map(|e| e.name).collect();
    let pool = LanePool::new(2).unwrap();
    let f32_model = MimiModel::load(cfg.clone(), fixture("model.safetensors")).unwrap();
    let want_audio = f32_model.decode(&pool, &reference_codes()).unwrap();
    for q8 in [false, true] {
        let opts = MimiOptions {
            q8_transformer: q8,
            q8_convs: q8,
            bf16_convs: true,
            nvidia_ring: false,
        };
        let model = MimiModel::load_with(cfg.clone(), fixture("model.safetensors"), opts).unwrap();
        let c = model.contract();
        let bf16: Vec<_> = c
            .routes()
            .iter()
            .filter(|r| r.format == WeightFormat::Bf16)
            .collect();
        // Both SEANets have long layers with ≥ 16 channels on each side.
        for side in ["encoder.model.", "decoder.model."] {
            assert!(
                bf16.iter().any(|r| r.name.starts_with(side)),
                "no bf16 conv in the {side}"
            );
        }
        for r in &bf16 {
            assert!(names.contains(&r.name), "{} is not a model tensor", r.name);
            assert!(r.name.ends_with(".weight") && !r.name.contains("transformer"));
            assert_eq!(
                c.routes().iter().filter(|o| o.name == r.name).count(),
                1,
                "{} has two routes",
                r.name
            );
        }
        // The bf16 routes read half the bytes of their f32 weights.
        assert!(c.streamed_bytes().0 < f32_model.contract().streamed_bytes().0);
        for frames in [1, 4] {
            assert_eq!(
                c.encoder_workspace().bytes(frames),
                model.encoder_state(frames).unwrap().floats() * 4
            );
            assert_eq!(
                c.decoder_workspace().bytes(frames),
                model.decoder_state(frames).unwrap().floats() * 4
            );
        }
        let (share, first) = code_agreement(&model);
        eprintln!(
            "bf16 convs (q8_0 {q8}): {:.1}% codes equal, first codebook {:.1}%",
            share * 100.0,
            first * 100.0
        );
        assert!(share >= 0.95, "only {:.1}% of codes equal", share * 100.0);
        assert!(first >= 0.95, "first codebook {:.1}%", first * 100.0);
        let got = model.decode(&pool, &reference_codes()).unwrap();
        let r = voxlane_tests::pearson(&got, &want_audio);
        eprintln!("bf16 convs (q8_0 {q8}): decoded audio correlation {r:.6}");
        assert!(r >= 0.99, "decoded audio correlation {r}");
        // The rounding is real: decoded audio is not the f32 model's.
        assert!(got.iter().zip(&want_audio).any(|(a, b)| a != b));
    }
}

#[test]
fn native_half_route_equals_f32_route_on_the_same_values() {
    let cfg = cfg();
    let file = WeightFile::open(fixture("model.safetensors")).unwrap();
    // Every tensor rounded to bf16, stored as bf16 (native route) and as f32 (f32 route).
    let mut rounded: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    let mut owned = Vec::new();
    for n in file.names() {
        let t = file.get(n).unwrap();
        let bits: Vec<u16> = t
            .to_f32()
            .iter()
            .map(|x| bf16::from_f32(*x).to_bits())
            .collect();
        let vals: Vec<f32> = bits.iter().map(|b| bf16::from_bits(*b).to_f32()).collect();
        rounded.insert(n.to_string(), (t.shape.to_vec(), vals));
        owned.push((n.to_string(), TensorData::BF16(bits), t.shape.to_vec()));
    }
    let refs: Vec<(&str, TensorData, Vec<usize>)> = owned
        .iter()
        .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
        .collect();
    let path = std::env::temp_dir().join(format!(
        "voxlane-mimi-contract-bf16-{}.safetensors",
        std::process::id()
    ));
    write_safetensors(&path, &refs, &[]).unwrap();
    let half = MimiModel::load(cfg.clone(), &path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        half.contract().route_total(WeightFormat::Bf16).0,
        linear_count(&cfg)
    );
    // bf16 linears read half the bytes of f32 ones.
    let w = MimiWeights::from_tensors(&cfg, rounded).unwrap();
    let plan = BindContract::plan(&cfg, &w, MimiOptions::default()).unwrap();
    assert_eq!(plan.route_total(WeightFormat::F32).0, linear_count(&cfg));
    assert_eq!(
        2 * half.contract().route_total(WeightFormat::Bf16).1,
        plan.route_total(WeightFormat::F32).1
    );
    let full = MimiModel::bind(cfg.clone(), w, plan).unwrap();

    let pool = LanePool::new(2).unwrap();
    let pcm = read_npy(fixture("input_pcm.npy")).unwrap().to_f32();
    let a = half.encode(&pool, &pcm).unwrap();
    let b = full.encode(&pool, &pcm).unwrap();
    assert_eq!(a.data, b.data, "codes differ between bf16 and f32 routes");
    let da = half.decode(&pool, &a).unwrap();
    let db = full.decode(&pool, &b).unwrap();
    assert_eq!(
        da.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        db.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "decoded audio differs between bf16 and f32 routes"
    );
    // The tensor list the contract covers is the config's.
    let linears = expected_tensors(&cfg)
        .iter()
        .filter(|e| {
            e.name.contains("_transformer.") && e.name.ends_with("weight") && e.shape.len() == 2
        })
        .count();
    assert_eq!(linears, linear_count(&cfg));
}
