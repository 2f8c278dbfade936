//! Parity of the native Kokoro front half (PL-BERT, prosody predictor, text
//! encoder) with onnxruntime on the int8 export, over the fixture cases.
//!
//! The model must be in the voxlane cache: the tests fail (not skip) when it
//! is not, asking to run `cargo xtask fetch-models`.

use std::path::PathBuf;
use std::sync::OnceLock;

use voxlane_actors::tts::kokoro::front::{FrontOutput, FrontWorkspace, KokoroFront};
use voxlane_runtime::fetch::{catalog, Fetcher};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::LanePool;

const CASES: usize = 3;

fn fixture(case: usize, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/kokoro")
        .join(format!("case{case}"))
        .join(format!("{name}.npy"))
}

fn f32s(case: usize, name: &str) -> Vec<f32> {
    read_npy(fixture(case, name))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
        .to_f32()
}

fn front() -> &'static KokoroFront {
    static FRONT: OnceLock<KokoroFront> = OnceLock::new();
    FRONT.get_or_init(|| {
        let fetcher = Fetcher::new().expect("voxlane home");
        let path = fetcher.cached(&catalog::KOKORO_INT8).unwrap_or_else(|| {
            panic!(
                "the Kokoro int8 model is not in the cache ({}): run `cargo xtask fetch-models`",
                fetcher.path_of(&catalog::KOKORO_INT8).display()
            )
        });
        KokoroFront::open(&path).expect("load Kokoro front")
    })
}

struct Case {
    tokens: Vec<i64>,
    style: Vec<f32>,
    durations: Vec<usize>,
}

fn case(i: usize) -> Case {
    Case {
        tokens: read_npy(fixture(i, "tokens")).expect("tokens").to_i64(),
        style: f32s(i, "style"),
        durations: f32s(i, "durations_clipped")
            .iter()
            .map(|&d| d as usize)
            .collect(),
    }
}

/// Pearson correlation and max |a − b|.
fn compare(a: &[f32], b: &[f32]) -> (f64, f32) {
    assert_eq!(a.len(), b.len(), "lengths differ");
    let n = a.len() as f64;
    let ma = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let mb = b.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb, mut max) = (0.0, 0.0, 0.0, 0.0f32);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (f64::from(x) - ma, f64::from(y) - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
        max = max.max((x - y).abs());
    }
    (sab / (saa * sbb).sqrt(), max)
}

/// The predictor alone: from onnxruntime's `d_en`, every duration is equal.
#[test]
fn durations_from_reference_d_en_are_exact() {
    let pool = LanePool::new(2).expect("pool");
    for i in 0..CASES {
        let c = case(i);
        let got = front()
            .durations_from_d_en(
                &pool,
                &f32s(i, "d_en"),
                &c.style,
                1.0,
                &mut FrontWorkspace::default(),
            )
            .expect("durations");
        let want = f32s(i, "durations");
        let equal = got
            .rounded
            .iter()
            .zip(&want)
            .filter(|(a, b)| a == b)
            .count();
        eprintln!(
            "case{i}: durations from reference d_en equal {equal}/{}",
            want.len()
        );
        assert_eq!(got.rounded, want, "case{i}");
    }
}

/// End to end. PL-BERT is 12 passes of one int8 layer, so a last-bit float
/// difference anywhere would move activations across quantization steps and
/// grow (d_en corr ≈ 0.99 with generic LayerNorm/softmax/tanh); with every
/// float op following onnxruntime's kernels `d_en` is bit-exact, and at least
/// 95% of durations must be equal, the rest within ±1.
#[test]
fn durations_match_onnxruntime() {
    let pool = LanePool::new(2).expect("pool");
    for i in 0..CASES {
        let c = case(i);
        let out = front()
            .run(
                &pool,
                &c.tokens,
                &c.style,
                1.0,
                &mut FrontWorkspace::default(),
            )
            .expect("front");
        let want = f32s(i, "durations");
        let got = &out.durations.rounded;
        let equal = got.iter().zip(&want).filter(|(a, b)| a == b).count();
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let (corr, max) = compare(&out.d_en, &f32s(i, "d_en"));
        eprintln!(
            "case{i}: durations equal {equal}/{} (worst |Δ| {worst}), frames {} vs {}; d_en corr {corr:.6} max|Δ| {max:e}",
            want.len(),
            out.frames(),
            c.durations.iter().sum::<usize>()
        );
        assert!(
            equal * 100 >= 95 * want.len(),
            "case{i}: only {equal}/{} durations equal",
            want.len()
        );
        assert!(worst <= 1.0, "case{i}: a duration is off by {worst}");
        assert!(corr >= 0.9999, "case{i}: d_en correlation {corr}");
    }
}

fn run_reference_durations(i: usize, threads: usize) -> FrontOutput {
    let c = case(i);
    let pool = LanePool::new(threads).expect("pool");
    front()
        .run_with_durations(
            &pool,
            &c.tokens,
            &c.style,
            &c.durations,
            &mut FrontWorkspace::default(),
        )
        .expect("front")
}

#[test]
fn asr_f0_n_match_onnxruntime_given_reference_durations() {
    for i in 0..CASES {
        let out = run_reference_durations(i, 2);
        for (name, got) in [("asr", &out.asr), ("f0", &out.f0), ("n", &out.n)] {
            let (corr, max) = compare(got, &f32s(i, name));
            eprintln!("case{i}: {name} corr {corr:.6} max|Δ| {max:.4}");
            assert!(corr >= 0.99, "case{i}: {name} correlation {corr}");
        }
    }
}

/// The predictor alone (onnxruntime's d_en and durations in): F0 and N are
/// near exact, the LSTMs' gate functions being the only float difference.
#[test]
fn f0_n_from_reference_d_en_and_durations_are_near_exact() {
    use voxlane_actors::tts::kokoro::prosody::ProsodyWorkspace;
    let pool = LanePool::new(2).expect("pool");
    let p = front().prosody();
    for i in 0..CASES {
        let c = case(i);
        let d_en = f32s(i, "d_en");
        let t = c.tokens.len();
        let s = &c.style[128..];
        let mut ws = ProsodyWorkspace::default();
        let features = p.encode(&pool, &d_en, s, t, &mut ws).expect("encode");
        let (f0, n) = p
            .f0_n(&pool, &features, t, &c.durations, s, &mut ws)
            .expect("f0/n");
        for (name, got) in [("f0", &f0), ("n", &n)] {
            let (corr, max) = compare(got, &f32s(i, name));
            eprintln!("case{i}: {name} from reference d_en corr {corr:.7} max|Δ| {max:.5}");
            assert!(corr >= 0.9999, "case{i}: {name} correlation {corr}");
        }
    }
}

#[test]
fn outputs_are_bit_identical_for_thread_budgets_1_and_2() {
    let a = run_reference_durations(0, 1);
    let b = run_reference_durations(0, 2);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.d_en), bits(&b.d_en), "d_en");
    assert_eq!(bits(&a.asr), bits(&b.asr), "asr");
    assert_eq!(bits(&a.f0), bits(&b.f0), "f0");
    assert_eq!(bits(&a.n), bits(&b.n), "n");
}

#[test]
fn bad_inputs_are_typed_errors() {
    let pool = LanePool::new(1).expect("pool");
    let c = case(0);
    let mut ws = FrontWorkspace::default();
    let f = front();
    assert!(f.run(&pool, &[0, 9999, 0], &c.style, 1.0, &mut ws).is_err());
    assert!(f
        .run(&pool, &c.tokens, &c.style[..10], 1.0, &mut ws)
        .is_err());
    assert!(f.run(&pool, &c.tokens, &c.style, 0.0, &mut ws).is_err());
    assert!(f.run(&pool, &[], &c.style, 1.0, &mut ws).is_err());
    assert!(f.run(&pool, &c.tokens, &c.style, 1e-30, &mut ws).is_err());
    let huge = vec![usize::MAX / 2; c.tokens.len()];
    assert!(f
        .run_with_durations(&pool, &c.tokens, &c.style, &huge, &mut ws)
        .is_err());
    let too_long = vec![0i64; 600];
    assert!(f.run(&pool, &too_long, &c.style, 1.0, &mut ws).is_err());
}

#[test]
fn resolver_errors_name_the_node() {
    use voxlane_actors::tts::kokoro::graph::{KokoroError, KokoroGraph};
    use voxlane_runtime::onnx::OnnxModel;
    front();
    let fetcher = Fetcher::new().expect("voxlane home");
    let path = fetcher.path_of(&catalog::KOKORO_INT8);
    let model = OnnxModel::open(&path).expect("model");
    let g = KokoroGraph::new(&model);
    match g.qlinear("/no/such/MatMul_quant") {
        Err(KokoroError::MissingNode(n)) => assert_eq!(n, "/no/such/MatMul_quant"),
        other => panic!("expected MissingNode, got {other:?}"),
    }
    let conv = "/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant";
    match g.qlinear(conv) {
        Err(KokoroError::BadNode { node, .. }) => assert_eq!(node, conv),
        other => panic!("expected BadNode, got {other:?}"),
    }
    let c = g.qconv(conv).expect("qconv");
    assert_eq!(
        (c.params.c_in, c.params.c_out, c.params.kernel),
        (512, 512, 5)
    );
    assert_eq!((c.params.pad_left, c.params.pad_right), (2, 2));
    assert!(c.bias.is_some());
    let l = g
        .qlstm("/encoder/text_encoder/lstm/LSTM_quant")
        .expect("qlstm");
    assert_eq!((l.input, l.hidden, l.dirs), (512, 256, 2));
}
