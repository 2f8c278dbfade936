//! The Moshi machines: `moshi_executor` reproduces PyTorch `moshi`'s greedy
//! tokens on the `moshi-tiny` fixture through every edge of a frame (the
//! temporal step, the text token, the depformer per codebook), forced tokens
//! replay, the lanes route gives the serial route's bits for every budget,
//! every guard path returns its typed error, and both machines obey their
//! tables (every state × every event: no undeclared edge, every edge reached).

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::moshi::{LmWeights, MoshiConfig, StreamSampling};
use voxlane_actors::speech::sampler::SamplingParams;
use voxlane_machines::core::Slot;
use voxlane_machines::speech::logits_sampler::{
    self, Configure, LogitsSampler, SamplerMachineError,
};
use voxlane_machines::speech::moshi_executor::{
    self, BindSession, Event, Initialize, MoshiExecutor, MoshiExecutorError, Reply, Step,
    WeightsSource,
};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::LanePool;
use voxlane_tests::{assert_all_reached, assert_declared};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/moshi-tiny")
        .join(name)
}

fn tiny_config() -> MoshiConfig {
    MoshiConfig::from_file(&fixture("config.json")).unwrap()
}

fn init(cfg: MoshiConfig, weights: WeightsSource, threads: usize) -> Initialize {
    Initialize {
        config: cfg,
        weights,
        route: LmWeights::AsStored,
        pool: Arc::new(LanePool::new(threads).unwrap()),
        cache_dir: None,
    }
}

fn greedy_session() -> BindSession {
    BindSession {
        sampling: StreamSampling::GREEDY,
        seed: 0,
        capacity_bytes: None,
    }
}

/// A wide enough random model that frames take the lanes route (dim ≥ 256).
fn wide_config() -> MoshiConfig {
    let mut c = tiny_config();
    c.dim = 256;
    c.dim_feedforward = 4 * 256 + 8;
    c.num_heads = 4;
    c
}

fn user_frames() -> Vec<Vec<u32>> {
    let a = read_npy(fixture("user_codes.npy")).unwrap();
    let (k, t) = (a.shape[1], a.shape[2]);
    let v = a.to_i64();
    (0..t)
        .map(|i| (0..k).map(|c| v[c * t + i] as u32).collect())
        .collect()
}

fn ready(threads: usize) -> MoshiExecutor {
    let mut ex = MoshiExecutor::new();
    ex.initialize(init(
        tiny_config(),
        WeightsSource::File(fixture("model.safetensors")),
        threads,
    ))
    .unwrap();
    ex.bind_session(greedy_session()).unwrap();
    ex
}

fn run(ex: &mut MoshiExecutor, frames: &[Vec<u32>], forced: Option<&[Vec<u32>]>) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let force = forced.map(|v| &v[i]);
        let step = Step {
            other_codes: f,
            forced_text: force.map(|v| v[0]),
            forced_audio: force.map(|v| &v[1..]),
        };
        if let Some(t) = ex.frame(step).unwrap() {
            out.push(t.as_slice().to_vec());
        }
    }
    out
}

#[test]
fn executor_reproduces_pytorch_greedy_tokens() {
    let want = read_npy(fixture("greedy_tokens.npy")).unwrap();
    let cols = want.shape[1];
    let want: Vec<Vec<u32>> = want
        .to_i64()
        .chunks(cols)
        .map(|r| r.iter().map(|&v| v as u32).collect())
        .collect();
    let mut ex = ready(1);
    let got = run(&mut ex, &user_frames(), None);
    assert_eq!(got, want);
    // After reset_session the same run repeats.
    assert!(matches!(ex.handle(&Event::ResetSession), Reply::Ok));
    assert_eq!(run(&mut ex, &user_frames(), None), want);
}

#[test]
fn forced_tokens_replay_through_the_frame() {
    let frames = user_frames();
    let mut ex = ready(1);
    let free = run(&mut ex, &frames, None);
    // What each call picked: the frame returned at call c + 1 holds call c's
    // text and first codebook (delay 0) and call c + 1's delayed codebooks.
    let n = frames.len();
    let picked: Vec<Vec<u32>> = (0..n)
        .map(|c| {
            let undelayed = &free[c.min(n - 2)][..2];
            let delayed = &free[c.saturating_sub(1)][2..];
            [undelayed, delayed].concat()
        })
        .collect();
    let mut ex = ready(1);
    assert_eq!(run(&mut ex, &frames, Some(&picked)), free);
    // Forcing other tokens changes the output.
    let other: Vec<Vec<u32>> = picked
        .iter()
        .map(|v| v.iter().map(|&t| (t + 1) % 100).collect())
        .collect();
    let mut ex = ready(1);
    assert_ne!(run(&mut ex, &frames, Some(&other)), free);
}

#[test]
fn lanes_route_is_bit_identical_for_every_budget() {
    let frames: Vec<Vec<u32>> = user_frames().into_iter().take(12).collect();
    let runs: Vec<_> = [1, 2, 3, 4]
        .iter()
        .map(|&threads| {
            let mut ex = MoshiExecutor::traced();
            ex.initialize(init(wide_config(), WeightsSource::Random(3), threads))
                .unwrap();
            ex.bind_session(BindSession {
                sampling: StreamSampling::default(),
                seed: 9,
                capacity_bytes: None,
            })
            .unwrap();
            let out = run(&mut ex, &frames, None);
            let lanes = ex
                .take_trace()
                .iter()
                .any(|f| f.guard == "guard_route_lanes");
            assert_eq!(
                lanes,
                threads > 1,
                "{threads} threads: lanes route taken = {lanes}"
            );
            out
        })
        .collect();
    for r in &runs[1..] {
        assert_eq!(r, &runs[0]);
    }
}

#[test]
fn guard_paths_return_typed_errors() {
    let mut ex = MoshiExecutor::new();
    let err = |r: Reply| match r {
        Reply::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    // Bad config: named field.
    let mut bad = tiny_config();
    bad.delays.pop();
    let e = err(ex.handle(&Event::Initialize(Box::new(init(
        bad,
        WeightsSource::Random(1),
        1,
    )))));
    assert_eq!(e.reason(), "config");
    assert_eq!(ex.state(), "errored");
    ex.handle(&Event::Reset);
    // A config that does not match the checkpoint: the tensors are named.
    let mut other = tiny_config();
    other.num_layers = 3;
    let e = err(ex.handle(&Event::Initialize(Box::new(init(
        other,
        WeightsSource::File(fixture("model.safetensors")),
        1,
    )))));
    assert!(e.to_string().contains("transformer.layers.2"), "{e}");
    ex.handle(&Event::Reset);
    // A missing file.
    let e = err(ex.handle(&Event::Initialize(Box::new(init(
        tiny_config(),
        WeightsSource::File("/nonexistent.safetensors".into()),
        1,
    )))));
    assert_eq!(e.reason(), "weights_file");
    ex.handle(&Event::Reset);
    ex.initialize(init(
        tiny_config(),
        WeightsSource::File(fixture("model.safetensors")),
        1,
    ))
    .unwrap();
    // Sampling values: each a typed error with its reason.
    for (text, audio, reason) in [
        (
            SamplingParams {
                temperature: -1.0,
                top_k: None,
                top_p: None,
            },
            SamplingParams::GREEDY,
            "temperature",
        ),
        (
            SamplingParams::GREEDY,
            SamplingParams {
                temperature: 1.0,
                top_k: Some(0),
                top_p: None,
            },
            "top_k",
        ),
        (
            SamplingParams::GREEDY,
            SamplingParams {
                temperature: 1.0,
                top_k: Some(257),
                top_p: None,
            },
            "top_k",
        ),
        (
            SamplingParams {
                temperature: 1.0,
                top_k: None,
                top_p: Some(1.5),
            },
            SamplingParams::GREEDY,
            "top_p",
        ),
    ] {
        let b = BindSession {
            sampling: StreamSampling { text, audio },
            seed: 0,
            capacity_bytes: None,
        };
        assert_eq!(ex.bind_session(b).unwrap_err().reason(), reason);
    }
    let tight = BindSession {
        capacity_bytes: Some(1000),
        ..greedy_session()
    };
    assert!(matches!(
        ex.bind_session(tight),
        Err(MoshiExecutorError::Capacity { .. })
    ));
    let codes = [1u32; 8];
    let step = Step {
        other_codes: &codes,
        forced_text: None,
        forced_audio: None,
    };
    assert_eq!(ex.frame(step).unwrap_err().reason(), "no_session");
    ex.bind_session(greedy_session()).unwrap();
    for (codes, reason) in [
        (&[1u32; 7][..], "codes_shape"),
        (&[1, 2, 3, 4, 5, 6, 7, 256][..], "code_range"),
    ] {
        let step = Step {
            other_codes: codes,
            forced_text: None,
            forced_audio: None,
        };
        assert_eq!(ex.frame(step).unwrap_err().reason(), reason);
    }
    let forced = Step {
        other_codes: &codes,
        forced_text: Some(100),
        forced_audio: None,
    };
    assert_eq!(ex.frame(forced).unwrap_err().reason(), "forced_tokens");
    let forced = Step {
        other_codes: &codes,
        forced_text: None,
        forced_audio: Some(&[1, 2]),
    };
    assert_eq!(ex.frame(forced).unwrap_err().reason(), "forced_tokens");
    // Still usable after every rejection.
    assert!(ex.frame(step).unwrap().is_none());
    assert!(ex.frame(step).unwrap().is_some());
    let d = ex.diagnostics().unwrap();
    assert!(format!("{d:?}").contains("code_range"), "{d:?}");
    assert!(matches!(ex.handle(&Event::Close), Reply::Ok));
    assert_eq!(ex.frame(step).unwrap_err().reason(), "closed");
}

#[test]
fn sampler_machine_rejects_and_draws() {
    let c = |temperature, top_k, top_p| Configure {
        vocab: 4,
        params: SamplingParams {
            temperature,
            top_k,
            top_p,
        },
        seed: 5,
    };
    assert!(matches!(
        LogitsSampler::configured(c(-0.5, None, None)),
        Err(SamplerMachineError::Sampler(_))
    ));
    assert!(matches!(
        LogitsSampler::configured(Configure {
            vocab: 0,
            ..c(1.0, None, None)
        }),
        Err(SamplerMachineError::EmptyVocab)
    ));
    let mut s = LogitsSampler::configured(c(0.0, None, None)).unwrap();
    assert_eq!(s.sample(&[0.0, 3.0, 1.0, 3.0]).unwrap(), 1);
    assert_eq!(
        s.sample(&[0.0, f32::NAN, 1.0, 0.0]).unwrap_err().reason(),
        "nan_logits"
    );
    assert_eq!(s.sample(&[0.0, 1.0]).unwrap_err().reason(), "vocab");
    let mut a = LogitsSampler::configured(c(1.0, Some(3), Some(0.9))).unwrap();
    let mut b = LogitsSampler::configured(c(1.0, Some(3), Some(0.9))).unwrap();
    let l = [0.5, 0.1, 0.9, 0.3];
    let xs: Vec<u32> = (0..32).map(|_| a.sample(&l).unwrap()).collect();
    let ys: Vec<u32> = (0..32).map(|_| b.sample(&l).unwrap()).collect();
    assert_eq!(xs, ys, "the same seed draws the same tokens");
    assert!(xs.iter().all(|&t| t != 1), "token 1 is outside the top 3");
    a.handle(&logits_sampler::Event::Reseed);
    let zs: Vec<u32> = (0..32).map(|_| a.sample(&l).unwrap()).collect();
    assert_eq!(zs, xs, "reseed restarts the stream");
}

/// Drive the executor into `state` (a leaf of its table) with a traced machine.
fn executor_in(state: &str) -> MoshiExecutor {
    let mut ex = MoshiExecutor::traced();
    let file = || WeightsSource::File(fixture("model.safetensors"));
    let codes = [1u32; 8];
    let step = Step {
        other_codes: &codes,
        forced_text: None,
        forced_audio: None,
    };
    match state {
        "uninitialized" => {}
        "errored" => {
            let mut bad = tiny_config();
            bad.dim = 0;
            ex.handle(&Event::Initialize(Box::new(init(bad, file(), 1))));
        }
        "binding" => {
            ex.step(&Event::Initialize(Box::new(init(tiny_config(), file(), 1))));
        }
        "initialized" | "opening" | "ready" | "temporal" | "depth" | "closed" => {
            ex.initialize(init(tiny_config(), file(), 1)).unwrap();
            match state {
                "opening" => {
                    ex.step(&Event::BindSession(greedy_session()));
                }
                "ready" | "temporal" | "depth" => {
                    ex.bind_session(greedy_session()).unwrap();
                    if state != "ready" {
                        let mut sink = ex.step(&Event::Step(step));
                        if state == "depth" {
                            ex.step_follow_up(&mut sink);
                        }
                    }
                }
                "closed" => {
                    ex.handle(&Event::Close);
                }
                _ => {}
            }
        }
        other => panic!("no driver for state {other}"),
    }
    assert_eq!(ex.state(), state);
    ex.take_trace();
    ex
}

/// Every event kind, valid and forged.
fn every_event() -> Vec<Event<'static>> {
    static CODES: [u32; 8] = [1; 8];
    static AUDIO: [u32; 8] = [2; 8];
    let file = WeightsSource::File(fixture("model.safetensors"));
    let mut bad = tiny_config();
    bad.dim = 0;
    let mut mismatch = tiny_config();
    mismatch.num_layers = 3;
    let sampled = BindSession {
        sampling: StreamSampling::default(),
        seed: 1,
        capacity_bytes: None,
    };
    vec![
        Event::Initialize(Box::new(init(tiny_config(), file.clone(), 1))),
        Event::Initialize(Box::new(init(bad, file.clone(), 1))),
        Event::Initialize(Box::new(init(mismatch, file, 1))),
        Event::Initialize(Box::new(init(wide_config(), WeightsSource::Random(2), 2))),
        Event::InitializeDone,
        Event::InitializeError(Slot::empty()),
        Event::BindSession(greedy_session()),
        Event::BindSession(sampled),
        Event::BindSession(BindSession {
            capacity_bytes: Some(10),
            ..greedy_session()
        }),
        Event::BindSession(BindSession {
            sampling: StreamSampling {
                text: SamplingParams {
                    temperature: -1.0,
                    top_k: None,
                    top_p: None,
                },
                audio: SamplingParams::GREEDY,
            },
            ..greedy_session()
        }),
        Event::BindDone,
        Event::BindError(Slot::empty()),
        Event::Step(Step {
            other_codes: &CODES,
            forced_text: None,
            forced_audio: None,
        }),
        Event::Step(Step {
            other_codes: &CODES,
            forced_text: Some(3),
            forced_audio: Some(&AUDIO),
        }),
        Event::Step(Step {
            other_codes: &CODES[..3],
            forced_text: None,
            forced_audio: None,
        }),
        Event::Prefill(&[]),
        Event::PrefillDone,
        Event::StepEmbedding(&[0.0; 4]),
        Event::RestoreTokens(&[0; 4]),
        Event::CallPending,
        Event::TemporalDone,
        Event::DepformerDone,
        Event::StepDone,
        Event::StepError(Slot::empty()),
        Event::ResetSession,
        Event::Close,
        Event::CaptureDiagnostics,
        Event::Reset,
    ]
}

const STATES: [&str; 9] = [
    "uninitialized",
    "binding",
    "initialized",
    "opening",
    "ready",
    "temporal",
    "depth",
    "errored",
    "closed",
];

#[test]
fn executor_obeys_its_table() {
    let spec = &moshi_executor::SPEC;
    let mut log = Vec::new();
    for state in STATES {
        for i in 0..every_event().len() {
            let mut ex = executor_in(state);
            let ev = &every_event()[i];
            let mut sink = ex.step(ev);
            // Follow the outcome chain one event at a time, recording each edge.
            for _ in 0..64 {
                if sink.follow_up.is_none() {
                    break;
                }
                ex.step_follow_up(&mut sink);
            }
            let fired = ex.take_trace();
            assert_declared(spec, &fired);
            log.extend(fired);
        }
    }
    // The frame's forced/sampled and ready/pending edges, through whole runs.
    let mut ex = executor_in("ready");
    let frames = user_frames();
    run(&mut ex, &frames[..3], None);
    let forced: Vec<Vec<u32>> = vec![vec![3, 1, 2, 3, 4, 5, 6, 7, 8]; 3];
    run(&mut ex, &frames[..3], Some(&forced));
    let fired = ex.take_trace();
    assert_declared(spec, &fired);
    log.extend(fired);
    // PersonaPlex's session and its prompt edges.
    log.extend(persona_edges());
    // The lanes route.
    let mut ex = MoshiExecutor::traced();
    ex.initialize(init(wide_config(), WeightsSource::Random(2), 2))
        .unwrap();
    ex.bind_session(greedy_session()).unwrap();
    run(&mut ex, &frames[..2], None);
    log.extend(ex.take_trace());
    assert_all_reached(spec, &log);
}

/// A PersonaPlex executor (the `personaplex-tiny` fixture) through its
/// session, prefill, saved-embedding and token-ring edges; returns the edges.
fn persona_edges() -> Vec<voxlane_machines::core::Fired> {
    use voxlane_actors::speech::moshi::{PromptFrame, SILENCE_TOKENS, SINE_TOKENS};
    let pp = |n: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/personaplex-tiny")
            .join(n)
    };
    let cfg = MoshiConfig::from_file(&pp("config.json")).unwrap();
    let (dim, streams) = (cfg.dim, cfg.num_codebooks());
    let mut ex = MoshiExecutor::traced();
    ex.initialize(init(cfg, WeightsSource::File(pp("lm.safetensors")), 1))
        .unwrap();
    ex.bind_session(greedy_session()).unwrap();
    // A new session from `ready`, and its two rejections.
    ex.bind_session(greedy_session()).unwrap();
    let bad_temp = BindSession {
        sampling: StreamSampling {
            text: SamplingParams {
                temperature: -1.0,
                top_k: None,
                top_p: None,
            },
            audio: SamplingParams::GREEDY,
        },
        ..greedy_session()
    };
    assert!(matches!(
        ex.bind_session(bad_temp),
        Err(MoshiExecutorError::Sampler { .. })
    ));
    assert!(matches!(
        ex.bind_session(BindSession {
            capacity_bytes: Some(10),
            ..greedy_session()
        }),
        Err(MoshiExecutorError::Capacity { .. })
    ));
    let call = |text| PromptFrame {
        user: SINE_TOKENS.to_vec(),
        agent: SILENCE_TOKENS.to_vec(),
        text,
    };
    // PersonaPlex's first call steps nothing.
    let first = Step {
        other_codes: &SINE_TOKENS,
        forced_text: Some(3),
        forced_audio: Some(&SILENCE_TOKENS),
    };
    assert_eq!(ex.frame(first).unwrap(), None);
    assert_eq!(ex.prefill(&[call(3), call(5), call(3)]).unwrap(), 3);
    let short = PromptFrame {
        user: vec![1; 3],
        ..call(3)
    };
    assert!(matches!(
        ex.prefill(&[short]),
        Err(MoshiExecutorError::CodesShape { got: 3, want: 8 })
    ));
    ex.step_embedding(&vec![0.01; dim]).unwrap();
    assert!(ex.step_embedding(&[0.0; 3]).is_err());
    assert!(ex.step_embedding(&vec![f32::NAN; dim]).is_err());
    ex.restore_tokens(&vec![0; streams * 4]).unwrap();
    assert!(ex.restore_tokens(&[0; 5]).is_err());
    // A conversation call leaves the agent's delayed codebooks sampled, so a
    // prefill after it fails in the model (`prefilling` → `step_error`).
    ex.frame(Step {
        other_codes: &SINE_TOKENS,
        forced_text: None,
        forced_audio: None,
    })
    .unwrap();
    let e = ex.prefill(&[call(3)]).unwrap_err();
    assert!(e.to_string().contains("not provided"), "{e}");
    assert_eq!(ex.state(), "ready");
    // A Moshi session refuses PersonaPlex's requests by name.
    let mut moshi = MoshiExecutor::new();
    moshi
        .initialize(init(
            tiny_config(),
            WeightsSource::File(fixture("model.safetensors")),
            1,
        ))
        .unwrap();
    moshi.bind_session(greedy_session()).unwrap();
    assert!(matches!(
        moshi.prefill(&[call(3)]),
        Err(MoshiExecutorError::NotPersona("prefill"))
    ));
    let fired = ex.take_trace();
    assert_declared(&moshi_executor::SPEC, &fired);
    fired
}

#[test]
fn sampler_obeys_its_table() {
    let spec = &logits_sampler::SPEC;
    let good = Configure {
        vocab: 4,
        params: SamplingParams::GREEDY,
        seed: 1,
    };
    let sampled = Configure {
        params: SamplingParams {
            temperature: 1.0,
            top_k: Some(2),
            top_p: None,
        },
        ..good
    };
    let bad = Configure { vocab: 0, ..good };
    let logits = [0.1f32, 0.5, 0.2, 0.0];
    let events = || {
        vec![
            logits_sampler::Event::Configure(good),
            logits_sampler::Event::Configure(sampled),
            logits_sampler::Event::Configure(bad),
            logits_sampler::Event::Sample(&logits),
            logits_sampler::Event::Sample(&logits[..2]),
            logits_sampler::Event::SampleDone(1),
            logits_sampler::Event::SampleError(SamplerMachineError::NotConfigured),
            logits_sampler::Event::Reseed,
            logits_sampler::Event::CaptureDiagnostics,
            logits_sampler::Event::Reset,
        ]
    };
    let mut log = Vec::new();
    for setup in [None, Some(good), Some(sampled)] {
        for (i, ev) in events().iter().enumerate() {
            for sampling_state in [false, true] {
                let mut s = LogitsSampler::traced();
                if let Some(c) = setup {
                    s.handle(&logits_sampler::Event::Configure(c));
                }
                if sampling_state && setup.is_some() {
                    s.step(&logits_sampler::Event::Sample(&logits));
                }
                let _ = i;
                let mut sink = s.step(ev);
                s.step_follow_up(&mut sink);
                let fired = s.take_trace();
                assert_declared(spec, &fired);
                log.extend(fired);
            }
        }
    }
    assert_all_reached(spec, &log);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random event sequences never panic and only take declared edges.
    #[test]
    fn executor_survives_random_sequences(seq in proptest::collection::vec(0usize..28, 1..24)) {
        let mut ex = MoshiExecutor::traced();
        let events = every_event();
        for i in seq {
            let _ = ex.handle(&events[i % events.len()]);
            let fired = ex.take_trace();
            assert_declared(&moshi_executor::SPEC, &fired);
        }
    }
}
