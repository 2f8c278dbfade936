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

/// Every logit of a greedy run (text, then each codebook), per call.
fn logits_run(
    lm: &Arc<MoshiLm>,
    threads: usize,
    forced: Option<&[Vec<u32>]>,
) -> (Vec<Vec<u32>>, Vec<Vec<f32>>) {
    let pool = LanePool::new(threads).unwrap();
    let mut s = MoshiSession::new(lm.clone(), StreamSampling::GREEDY, 0).unwrap();
    let (mut tokens, mut logits) = (Vec::new(), Vec::new());
    for (i, f) in user_frames().iter().enumerate() {
        let mut frame_logits = Vec::new();
        // Calls pick (text, audio) for their own frame; teacher forcing replays them.
        let force = forced.map(|fr| &fr[i]);
        s.step_with(
            &pool,
            f,
            session::Forced {
                text: force.map(|v| v[0]),
                audio: force.map(|v| &v[1..]),
            },
            &mut |_, l| frame_logits.push(l.to_vec()),
        )
        .unwrap();
        // What this call picked: argmax of each logits row (greedy).
        let picked: Vec<u32> = frame_logits
            .iter()
            .map(|l| crate::speech::sampler::argmax(l) as u32)
            .collect();
        tokens.push(force.cloned().unwrap_or(picked));
        logits.push(frame_logits.concat());
    }
    (tokens, logits)
}

#[test]
fn tokens_and_logits_are_bit_identical_for_every_budget() {
    let (_, lm) = tiny();
    let (t1, l1) = logits_run(&lm, 1, None);
    for threads in 2..=4 {
        let (t, l) = logits_run(&lm, threads, None);
        assert_eq!(t, t1, "{threads} threads");
        let bits = |v: &[Vec<f32>]| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(bits(&l) == bits(&l1), "{threads} threads: logits differ");
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn quantized_routes_track_f32_logits() {
    let (cfg, lm) = tiny();
    let (tokens, reference) = logits_run(&lm, 2, None);
    for (weights, min_cos) in [
        (LmWeights::Bf16, 0.999),
        (LmWeights::Q8_0, 0.99),
        (LmWeights::Q4_0, 0.95),
    ] {
        let q = Arc::new(MoshiLm::load(&cfg, &fixture("model.safetensors"), weights).unwrap());
        let (_, logits) = logits_run(&q, 2, Some(&tokens));
        let mut worst = 1.0f64;
        let (mut agree, mut total) = (0usize, 0usize);
        for (call, (lq, lf)) in logits.iter().zip(&reference).enumerate() {
            // Per stream: text logits, then each codebook's.
            let mut off = 0;
            for (s, width) in std::iter::once(cfg.text_card)
                .chain(std::iter::repeat_n(cfg.card, cfg.dep_q))
                .enumerate()
            {
                let c = cosine(&lq[off..off + width], &lf[off..off + width]);
                worst = worst.min(c);
                let a = crate::speech::sampler::argmax(&lq[off..off + width]) as u32;
                agree += usize::from(a == tokens[call][s]);
                total += 1;
                off += width;
            }
        }
        eprintln!(
            "{}: worst logits cosine {worst:.5}, greedy agreement {agree}/{total} ({:.1}%)",
            weights.name(),
            100.0 * agree as f64 / total as f64
        );
        assert!(
            worst >= min_cos,
            "{}: worst cosine {worst} < {min_cos}",
            weights.name()
        );
    }
}

#[test]
fn sampled_runs_repeat_per_seed_for_every_budget() {
    let (_, lm) = tiny();
    let run = |threads: usize, seed: u64| {
        let pool = LanePool::new(threads).unwrap();
        let mut s = MoshiSession::new(lm.clone(), StreamSampling::default(), seed).unwrap();
        let mut out = Vec::new();
        for f in user_frames() {
            if let Some(frame) = s.step(&pool, &f).unwrap() {
                out.extend_from_slice(frame);
            }
        }
        out
    };
    let a = run(1, 7);
    assert_eq!(run(3, 7), a);
    assert_ne!(run(1, 8), a, "another seed should draw other tokens");
}

#[test]
fn planned_state_size_matches_the_allocation() {
    let (cfg, lm) = tiny();
    for t in [1, 3, 70] {
        assert_eq!(
            model::state_floats(&cfg, t),
            lm.state(t).unwrap().floats(),
            "max_t {t}"
        );
    }
}

#[test]
fn converted_weights_cache_maps_the_same_model() {
    let (cfg, lm) = tiny();
    let dir = std::env::temp_dir().join(format!("voxlane-moshi-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = fixture("model.safetensors");
    for weights in [LmWeights::AsStored, LmWeights::Q8_0] {
        let (first, used) = MoshiLm::load_cached(&cfg, &path, weights, &dir).unwrap();
        assert!(matches!(used, CacheUse::Written(_)), "{used:?}");
        let (second, used) = MoshiLm::load_cached(&cfg, &path, weights, &dir).unwrap();
        let CacheUse::Hit(file) = used else {
            panic!("{used:?}")
        };
        let (a, b) = (Arc::new(first), Arc::new(second));
        assert_eq!(
            logits_run(&a, 2, None).1,
            logits_run(&b, 2, None).1,
            "{weights:?}"
        );
        // A damaged cache is rebuilt, not trusted.
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
        let (_, used) = MoshiLm::load_cached(&cfg, &path, weights, &dir).unwrap();
        assert!(matches!(used, CacheUse::Written(_)), "{used:?}");
    }
    let (_, reference) = logits_run(&lm, 2, None);
    let (cached, _) = MoshiLm::load_cached(&cfg, &path, LmWeights::AsStored, &dir).unwrap();
    assert_eq!(logits_run(&Arc::new(cached), 1, None).1, reference);
    std::fs::remove_dir_all(&dir).unwrap();
}
