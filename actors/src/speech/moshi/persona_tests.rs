//! PersonaPlex against NVIDIA's reference on the `personaplex-tiny` fixture.

use super::*;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_runtime::io::npy::read_npy;
use voxlane_runtime::weights::WeightFile;
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/personaplex-tiny"
    ))
    .join(name)
}

fn config_json() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("config.json")).unwrap()).unwrap()
}

fn ids(v: &serde_json::Value, key: &str) -> Vec<u32> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// `[1, 8, T]` codes as frames of 8.
fn frames(name: &str) -> Vec<Vec<u32>> {
    let a = read_npy(fixture(name)).unwrap();
    let (k, t) = (a.shape[1], a.shape[2]);
    let v = a.to_i64();
    (0..t)
        .map(|i| (0..k).map(|c| v[c * t + i] as u32).collect())
        .collect()
}

fn model() -> Arc<MoshiLm> {
    let text = std::fs::read_to_string(fixture("config.json")).unwrap();
    let cfg = MoshiConfig::from_json(&text).unwrap();
    Arc::new(MoshiLm::load(&cfg, &fixture("lm.safetensors"), LmWeights::AsStored).unwrap())
}

/// The prompt phase after the voice prompt: silence, the text prompt, silence.
fn system_prompts(s: &mut PersonaSession, pool: &LanePool, cfg: &serde_json::Value) {
    let (silence, sine) = (ids(cfg, "silence_tokens"), ids(cfg, "sine_tokens"));
    let n = cfg["silence_frames"].as_u64().unwrap() as usize;
    for _ in 0..n {
        s.step(pool, Some(&sine), Some(&silence), Some(3)).unwrap();
    }
    for t in ids(cfg, "text_prompt_ids") {
        s.step(pool, Some(&sine), Some(&silence), Some(t)).unwrap();
    }
    for _ in 0..n {
        s.step(pool, Some(&sine), Some(&silence), Some(3)).unwrap();
    }
}

/// Per call, every stream's greedy pick: top-two logit margin and tokens.
type Margins = Vec<Vec<(f32, u32, u32)>>;

/// The conversation's output frames and [`Margins`].
fn conversation(s: &mut PersonaSession, pool: &LanePool) -> (Vec<Vec<i64>>, Margins) {
    let (mut out, mut margins) = (Vec::new(), Vec::new());
    for u in frames("user_codes.npy") {
        if let Some(f) = s.step(pool, Some(&u), None, None).unwrap() {
            out.push(f.iter().map(|&v| i64::from(v)).collect());
        }
        margins.push(s.margins.clone());
    }
    (out, margins)
}

/// Our tokens equal NVIDIA's step for step until the first greedy pick whose
/// two best logits lie within `TIE` of each other, where the reference took
/// our runner-up: float rounding decides such a tie (the reference's exact
/// arithmetic is not ours), and from there on the runs part. Returns the
/// steps that matched.
fn assert_matches_until_a_tie(got: &[Vec<i64>], margins: &[Vec<(f32, u32, u32)>]) -> usize {
    const TIE: f32 = 1e-3;
    let want = reference_tokens();
    assert_eq!(got.len(), want.len());
    let dep = got[0].len() - 1;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if g == w {
            continue;
        }
        // Output step i holds call i − 1's text and first codebook (delay 0) and call i's others.
        let s = g.iter().zip(w).position(|(a, b)| a != b).unwrap();
        let call = if s <= 1 {
            i.checked_sub(1).expect("a prompt-phase token differs")
        } else {
            i
        };
        let (margin, best, second) = margins[call][s];
        assert!(
            margin < TIE && best as i64 == g[s] && second as i64 == w[s] && s <= dep,
            "step {i} stream {s}: ours {} vs reference {}, margin {margin} (top two {best}, {second})",
            g[s],
            w[s]
        );
        return i;
    }
    got.len()
}

fn reference_tokens() -> Vec<Vec<i64>> {
    let a = read_npy(fixture("tokens.npy")).unwrap();
    a.to_i64().chunks(a.shape[1]).map(<[i64]>::to_vec).collect()
}

#[test]
fn voice_prompt_codes_then_prompts_give_the_reference_tokens() {
    let cfg = config_json();
    let pool = LanePool::new(2).unwrap();
    let mut s = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    let sine = ids(&cfg, "sine_tokens");
    for agent in frames("voice_prompt_codes.npy") {
        s.step(&pool, Some(&sine), Some(&agent), Some(3)).unwrap();
    }
    system_prompts(&mut s, &pool, &cfg);
    assert_eq!(
        s.gen().offset(),
        cfg["prompt_steps"].as_u64().unwrap() as usize
    );
    let (got, margins) = conversation(&mut s, &pool);
    let matched = assert_matches_until_a_tie(&got, &margins);
    assert!(matched >= 9, "only {matched} steps matched");
}

#[test]
fn saved_voice_prompt_embeddings_give_the_reference_tokens() {
    let cfg = config_json();
    let pool = LanePool::new(1).unwrap();
    let f = WeightFile::open(fixture("voice_prompt_embeddings.safetensors")).unwrap();
    let emb = f.require("embeddings").unwrap();
    let (n, dim) = (emb.shape[0], emb.shape[3]);
    let values = emb.to_f32();
    let cache = f.require("cache").unwrap().to_i64();
    let mut s = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    for e in values.chunks_exact(dim).take(n) {
        s.step_embedding(&pool, e, 3).unwrap();
    }
    s.gen_mut().restore_cache(&cache).unwrap();
    system_prompts(&mut s, &pool, &cfg);
    let (got, margins) = conversation(&mut s, &pool);
    assert!(assert_matches_until_a_tie(&got, &margins) >= 9);
    // The saved embeddings replay the voice prompt exactly: the same tokens as its codes.
    let mut from_codes = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    let sine = ids(&cfg, "sine_tokens");
    for agent in frames("voice_prompt_codes.npy") {
        from_codes
            .step(&pool, Some(&sine), Some(&agent), Some(3))
            .unwrap();
    }
    system_prompts(&mut from_codes, &pool, &cfg);
    assert_eq!(conversation(&mut from_codes, &pool).0, got);
}

#[test]
fn batched_prefill_equals_stepping_the_prompts() {
    let cfg = config_json();
    let pool = LanePool::new(2).unwrap();
    let (sine, silence) = (ids(&cfg, "sine_tokens"), ids(&cfg, "silence_tokens"));
    let n = cfg["silence_frames"].as_u64().unwrap() as usize;
    let call = |agent: Vec<u32>, text| PromptFrame {
        user: sine.clone(),
        agent,
        text,
    };
    let mut calls: Vec<PromptFrame> = frames("voice_prompt_codes.npy")
        .into_iter()
        .map(|a| call(a, 3))
        .collect();
    calls.extend(std::iter::repeat_n(call(silence.clone(), 3), n));
    calls.extend(
        ids(&cfg, "text_prompt_ids")
            .into_iter()
            .map(|t| call(silence.clone(), t)),
    );
    calls.extend(std::iter::repeat_n(call(silence.clone(), 3), n));
    let mut stepped = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    for c in &calls {
        stepped
            .step(&pool, Some(&c.user), Some(&c.agent), Some(c.text))
            .unwrap();
    }
    let mut batched = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    batched.prefill(&pool, &calls).unwrap();
    assert_eq!(batched.gen().offset(), stepped.gen().offset());
    assert_eq!(batched.gen().cache(), stepped.gen().cache());
    // The conversation after either prompt: the same tokens and the same logits, bit for bit.
    let (a, ma) = conversation(&mut stepped, &pool);
    let (b, mb) = conversation(&mut batched, &pool);
    assert_eq!(a, b);
    let bits = |m: &Margins| {
        m.iter()
            .flatten()
            .map(|x| x.0.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&ma), bits(&mb));
    // After a conversation call the agent's delayed codebooks were sampled,
    // not provided: a prefill there is refused, not silently wrong.
    let mut s = PersonaSession::new(model(), StreamSampling::GREEDY, 0).unwrap();
    s.prefill(&pool, &calls[..3]).unwrap();
    s.step(&pool, Some(&sine), None, None).unwrap();
    let e = s.prefill(&pool, &calls[3..4]).unwrap_err();
    assert!(e.to_string().contains("not provided"), "{e}");
}
