//! A float (fp32) Kokoro graph loads natively: its weights are quantized at
//! load time with onnxruntime `quantize_dynamic`'s scheme (weight norm folded
//! first), so it runs on the int8 kernels and speaks like the int8 export;
//! converted to voxlane weights it speaks the same, and the public `Tts` API
//! (what `voxlane speak --model F` uses) speaks with it.
//!
//! The fp32 file is a stand-in for kokoro-onnx's `kokoro-v1.0.onnx` built by
//! `actors/src/tts/kokoro/tools/make_fp32_reference.py` into
//! `$VOXLANE_HOME/test-fp32/kokoro-v1.0.fp32-reference.onnx` (override with
//! `VOXLANE_KOKORO_FP32`); without it (CI has no onnx/numpy tooling for it)
//! the test prints why and passes, unless `VOXLANE_REQUIRE_FP32` is set (CI builds
//! the graph and sets it).

use std::path::PathBuf;
use voxlane_actors::tts::kokoro::pipeline::KokoroTts;
use voxlane_machines::cli::fetch::fetch_models;
use voxlane_machines::tts::{SynthOptions, Tts, TtsPaths};
use voxlane_runtime::fetch::Fetcher;
use voxlane_runtime::io::read_npy;
use voxlane_runtime::onnx::{convert, OnnxModel};
use voxlane_runtime::LanePool;
use voxlane_tests::{bits, pearson};

fn fp32_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VOXLANE_KOKORO_FP32") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("VOXLANE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/voxlane")))?;
    let p = home.join("test-fp32/kokoro-v1.0.fp32-reference.onnx");
    p.is_file().then_some(p)
}

#[test]
fn fp32_graph_speaks_like_the_int8_export() {
    let Some(fp32) = fp32_path() else {
        assert!(
            std::env::var_os("VOXLANE_REQUIRE_FP32").is_none(),
            "VOXLANE_REQUIRE_FP32 is set but the fp32 Kokoro graph is missing"
        );
        eprintln!(
            "skipped: no fp32 Kokoro graph (run actors/src/tts/kokoro/tools/make_fp32_reference.py \
             or set VOXLANE_KOKORO_FP32)"
        );
        return;
    };
    let fetcher = Fetcher::new().expect("voxlane home");
    let files = fetch_models(&fetcher, &mut Vec::new())
        .unwrap_or_else(|e| panic!("Kokoro files: {e} (run `cargo xtask fetch-models`)"));

    let case =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kokoro/case0");
    let tokens = read_npy(case.join("tokens.npy")).unwrap().to_i64();
    let style = read_npy(case.join("style.npy")).unwrap().to_f32();
    let fixture = read_npy(case.join("audio.npy")).unwrap().to_f32();
    let pool = LanePool::new(2).unwrap();

    let mut int8 = KokoroTts::open(&files[0]).expect("int8 model");
    let mut float = KokoroTts::open(&fp32).expect("fp32 model");
    let a = int8
        .synthesize(&tokens, &style, 1.0, &pool)
        .unwrap()
        .to_vec();
    let b = float
        .synthesize(&tokens, &style, 1.0, &pool)
        .unwrap()
        .to_vec();
    assert_eq!(a.len(), b.len(), "fp32 durations differ from int8");
    let r_int8 = pearson(&a, &b);
    let r_fixture = pearson(&b, &fixture);
    eprintln!(
        "fp32 vs int8 path: r = {r_int8:.6}; fp32 vs onnxruntime int8 fixture: r = {r_fixture:.6}"
    );
    assert!(r_int8 >= 0.99, "fp32 vs int8 correlation {r_int8}");
    assert!(r_fixture >= 0.99, "fp32 vs fixture correlation {r_fixture}");

    // The conversion `voxlane fetch` applies (ONNX → voxlane weights) keeps
    // what the fp32 graph needs (its `Constant`s, the weight-norm chains).
    let dir = std::env::temp_dir().join(format!("voxlane-fp32-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vxw = dir.join("kokoro-fp32.vxw");
    convert(&OnnxModel::open(&fp32).unwrap(), &vxw, &[]).unwrap();
    let mut converted = KokoroTts::open(&vxw).expect("converted fp32 model");
    let c = converted
        .synthesize(&tokens, &style, 1.0, &pool)
        .unwrap()
        .to_vec();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        bits(&b),
        bits(&c),
        "converted fp32 weights speak differently"
    );

    // The public API `voxlane speak --model F` uses.
    let mut tts = Tts::load(
        &TtsPaths {
            model: fp32,
            vocab: files[1].clone(),
            voices: files[2].clone(),
        },
        2,
    )
    .expect("Tts::load on the fp32 graph");
    let opts = SynthOptions::default();
    let audio = tts.synthesize_all("Hello there.", &opts).expect("speak");
    assert!(audio.len() > 12_000 && audio.iter().all(|v| v.is_finite()));
}
