//! The weight reader on a real PyTorch-written safetensors file.

use voxlane_runtime::weights::{DType, WeightError, WeightFile};

fn fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/mimi-tiny/model.safetensors")
}

#[test]
fn reads_official_mimi_layout() {
    let w = WeightFile::open(fixture()).unwrap();
    assert_eq!(w.names().count(), 126);
    let t = w
        .require_shape("decoder.model.0.conv.conv.weight", &[128, 64, 7])
        .unwrap();
    assert_eq!(t.dtype, DType::F32);
    let v = t.to_f32();
    assert_eq!(v.len(), 128 * 64 * 7);
    assert!(v.iter().all(|x| x.is_finite()));
    assert!(v.iter().any(|x| *x != 0.0));
    assert!(w.names().any(|n| n.starts_with("quantizer.rvq_first")));
}

#[test]
fn a_truncated_copy_is_a_clear_error() {
    let bytes = std::fs::read(fixture()).unwrap();
    let p = std::env::temp_dir().join(format!("voxlane-trunc-{}.safetensors", std::process::id()));
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let err = WeightFile::open(&p).unwrap_err();
    std::fs::remove_file(&p).unwrap();
    assert!(matches!(err, WeightError::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("truncated"));
}
