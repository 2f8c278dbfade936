//! Moshi against PyTorch `moshi` 0.2.13 on the `moshi-tiny` fixture.

use super::*;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_runtime::io::npy::read_npy;
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/moshi-tiny"
    ))
    .join(name)
}

fn tiny() -> (MoshiConfig, Arc<MoshiLm>) {
    let cfg = MoshiConfig::from_file(&fixture("config.json")).unwrap();
    let lm = MoshiLm::load(&cfg, &fixture("model.safetensors"), LmWeights::AsStored).unwrap();
    (cfg, Arc::new(lm))
}

/// `user_codes.npy` `[1, 8, T]` as frames of 8 codes.
fn user_frames() -> Vec<Vec<u32>> {
    let a = read_npy(fixture("user_codes.npy")).unwrap();
    let (k, t) = (a.shape[1], a.shape[2]);
    let v = a.to_i64();
    (0..t)
        .map(|i| (0..k).map(|c| v[c * t + i] as u32).collect())
        .collect()
}

fn greedy_run(lm: &Arc<MoshiLm>, threads: usize) -> Vec<Vec<u32>> {
    let pool = LanePool::new(threads).unwrap();
    let mut s = MoshiSession::new(lm.clone(), StreamSampling::GREEDY, 0).unwrap();
    let mut out = Vec::new();
    for f in user_frames() {
        if let Some(frame) = s.step(&pool, &f).unwrap() {
            out.push(frame.to_vec());
        }
    }
    out
}

#[test]
fn greedy_tokens_equal_pytorch() {
    let (_, lm) = tiny();
    let want = read_npy(fixture("greedy_tokens.npy")).unwrap();
    let (steps, cols) = (want.shape[0], want.shape[1]);
    let want: Vec<Vec<u32>> = want
        .to_i64()
        .chunks(cols)
        .map(|r| r.iter().map(|&v| v as u32).collect())
        .collect();
    let got = greedy_run(&lm, 1);
    assert_eq!(got.len(), steps);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "step {i}");
    }
}
