//! Mimi streaming speed, one code frame (80 ms of audio) per step, at the
//! fixture's shapes and at the official shapes (synthetic weights):
//! `cargo test --release -p voxlane-tests --test speech mimi_bench -- --ignored --nocapture`.

use std::sync::Arc;
use std::time::Instant;
use voxlane_actors::speech::mimi::{MimiConfig, MimiDecoder, MimiEncoder, MimiModel, MimiWeights};
use voxlane_runtime::LanePool;

/// Median and best per-frame encode/decode times after 5 warm-up frames.
fn bench(name: &str, model: Arc<MimiModel>) {
    let fs = model.frame_size();
    let k = model.num_codebooks();
    for threads in [1, 2] {
        let pool = LanePool::new(threads).unwrap();
        let mut enc = MimiEncoder::new(model.clone()).unwrap();
        let mut dec = MimiDecoder::new(model.clone()).unwrap();
        let pcm: Vec<f32> = (0..fs).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect();
        let mut codes = vec![0; k];
        let mut out = vec![0.0; fs];
        for _ in 0..5 {
            enc.step(&pool, &pcm, &mut codes).unwrap();
            dec.step(&pool, &codes, &mut out).unwrap();
        }
        let n = 30;
        let (mut te, mut td) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let t0 = Instant::now();
            enc.step(&pool, &pcm, &mut codes).unwrap();
            let t1 = Instant::now();
            dec.step(&pool, &codes, &mut out).unwrap();
            te.push((t1 - t0).as_secs_f64() * 1e3);
            td.push(t1.elapsed().as_secs_f64() * 1e3);
        }
        te.sort_by(|a, b| a.partial_cmp(b).unwrap());
        td.sort_by(|a, b| a.partial_cmp(b).unwrap());
        eprintln!("{name} threads {threads}: encode median {:.2} ms (min {:.2}), decode median {:.2} ms (min {:.2})", te[n/2], te[0], td[n/2], td[0]);
    }
}

#[test]
#[ignore = "benchmark: run explicitly"]
fn streaming_frame_times() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/mimi-tiny");
    let cfg = MimiConfig::from_file(dir.join("config.json")).unwrap();
    bench(
        "tiny",
        Arc::new(MimiModel::load(cfg, dir.join("model.safetensors")).unwrap()),
    );
    let cfg = MimiConfig::default();
    bench(
        "official",
        Arc::new(MimiModel::new(cfg.clone(), MimiWeights::synthetic(&cfg, 1)).unwrap()),
    );
}
