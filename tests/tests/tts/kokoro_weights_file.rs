//! voxlane's own Kokoro weight file: converted from the int8 ONNX export it
//! speaks bit-identically, and a truncated or corrupt file is a typed error
//! naming what is wrong.

use std::time::Instant;
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_actors::tts::kokoro::pipeline::KokoroTts;
use voxlane_runtime::fetch::catalog::KOKORO_INT8;
use voxlane_runtime::fetch::fetcher::Fetcher;
use voxlane_runtime::io::read_npy;
use voxlane_runtime::onnx::{convert, OnnxError, OnnxModel};
use voxlane_runtime::LanePool;

fn onnx_path() -> std::path::PathBuf {
    let fetcher = Fetcher::new().expect("no cache directory (set VOXLANE_HOME or HOME)");
    fetcher
        .cached(&KOKORO_INT8)
        .expect("the Kokoro model is not cached: run `cargo xtask fetch-models`")
}

#[test]
fn converted_weights_speak_bit_identically_and_damage_is_typed() {
    let onnx = onnx_path();
    let dir = std::env::temp_dir().join(format!("voxlane-vxw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vxw = dir.join("kokoro.vxw");
    let done = convert(&OnnxModel::open(&onnx).unwrap(), &vxw, &[]).unwrap();
    assert_eq!(done.nodes, 3614);

    let case =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kokoro/case0");
    let tokens = read_npy(case.join("tokens.npy")).unwrap().to_i64();
    let style = read_npy(case.join("style.npy")).unwrap().to_f32();
    let pool = LanePool::new(2).unwrap();
    let t0 = Instant::now();
    let mut a = KokoroTts::open(&onnx).unwrap();
    let t_onnx = t0.elapsed();
    let t0 = Instant::now();
    let mut b = KokoroTts::open(&vxw).unwrap();
    let t_vxw = t0.elapsed();
    eprintln!("open: onnx {t_onnx:?}, voxlane weights {t_vxw:?}");
    let wa = a.synthesize(&tokens, &style, 1.0, &pool).unwrap().to_vec();
    let wb = b.synthesize(&tokens, &style, 1.0, &pool).unwrap().to_vec();
    assert!(wa.len() > 24_000);
    assert_eq!(
        wa.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        wb.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );

    // A truncated copy: the header survives, the tensors do not.
    let bytes = std::fs::read(&vxw).unwrap();
    let cut = dir.join("cut.vxw");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    match KokoroTts::open(&cut) {
        Err(KokoroError::Onnx(OnnxError::Truncated { detail, .. })) => {
            assert!(detail.contains("tensor"), "{detail}")
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    // A header cut short.
    std::fs::write(&cut, &bytes[..100]).unwrap();
    assert!(matches!(
        KokoroTts::open(&cut),
        Err(KokoroError::Onnx(OnnxError::Truncated { .. }))
    ));
    // A corrupt graph description.
    let mut bad = bytes.clone();
    let at = bad
        .windows(7)
        .position(|w| w == b"\\\"op\\\":")
        .expect("graph JSON in the header");
    bad[at + 3] = b'X';
    std::fs::write(&cut, &bad).unwrap();
    match KokoroTts::open(&cut) {
        Err(KokoroError::Onnx(OnnxError::Malformed { detail, .. })) => {
            assert!(detail.contains("op"), "{detail}")
        }
        other => panic!("expected a malformed-file error, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
