//! `.npy` and WAV readers on the shared fixtures NumPy and onnxruntime wrote.

use voxlane_runtime::io::{read_npy, read_wav, NpyData};

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures")
        .join(rel)
}

#[test]
fn reads_kokoro_fixture_tensors_and_audio() {
    let tokens = read_npy(fixture("kokoro/case0/tokens.npy")).unwrap();
    assert_eq!(tokens.shape[0], 1);
    let ids = tokens.to_i64();
    assert_eq!(
        (ids[0], *ids.last().unwrap()),
        (0, 0),
        "padded with 0 at both ends"
    );
    assert!(ids[1..ids.len() - 1].iter().all(|&t| t > 0));
    let audio = read_npy(fixture("kokoro/case0/audio.npy")).unwrap();
    assert!(matches!(audio.data, NpyData::F32(_)));
    let wav = read_wav(fixture("kokoro/case0/audio.wav")).unwrap();
    assert_eq!((wav.sample_rate, wav.channels), (24_000, 1));
    let reference = audio.to_f32();
    assert_eq!(wav.samples.len(), reference.len());
    // The WAV is the 16-bit rendering of the same audio.
    let max_err = wav
        .samples
        .iter()
        .zip(&reference)
        .map(|(a, b)| (a - b.clamp(-1.0, 1.0)).abs())
        .fold(0.0, f32::max);
    assert!(max_err < 2e-4, "wav vs npy max error {max_err}");
}

#[test]
fn reads_mimi_codes() {
    let codes = read_npy(fixture("mimi-tiny/codes.npy")).unwrap();
    assert_eq!(codes.shape, vec![1, 8, 55]);
    assert!(codes.to_i64().iter().all(|&c| (0..256).contains(&c)));
}
