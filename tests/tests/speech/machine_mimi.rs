//! The Mimi machines on the `mimi-tiny` fixture: `mimi_init` binds the model
//! and opens sessions within a capacity; streaming encode through
//! `mimi_encode_session` reproduces `codes_streaming.npy` exactly and
//! `mimi_decode_session` reproduces `MimiDecoder::step` bit for bit; every
//! guard path is asserted with its typed error; and each machine obeys its
//! table (every state × every event: no undeclared edge, every edge reached).

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::mimi::weights::expected_tensors;
use voxlane_actors::speech::mimi::{MimiConfig, MimiDecoder, MimiModel, MimiOptions, MimiWeights};
use voxlane_machines::speech::mimi_init::{
    BindSession, InitReply, Initialize, MimiInit, MimiInitError, MimiInitEvent, RouteCounts,
    WeightsSource,
};
use voxlane_machines::speech::mimi_session::decode::{DecodeContract, DecodeSessionMachine};
use voxlane_machines::speech::mimi_session::encode::{EncodeContract, EncodeSessionMachine};
use voxlane_machines::speech::mimi_session::{
    DecodeSession, EncodeSession, MimiSessionError, Push, SessionContract, SessionEvent,
    SessionHandle, SessionReply, Side,
};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::weights::{write_safetensors, DType, TensorData, WeightFile};
use voxlane_runtime::LanePool;
use voxlane_tests::{assert_all_reached, assert_declared, bits};

const FS: usize = 1920;
const K: usize = 8;
const BINS: usize = 256;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/mimi-tiny")
        .join(name)
}

fn config() -> MimiConfig {
    MimiConfig::from_file(fixture("config.json")).unwrap()
}

fn pcm() -> Vec<f32> {
    read_npy(fixture("input_pcm.npy")).unwrap().to_f32()
}

/// `[K, frames]` codes of a reference file, and the frame count.
fn reference_codes(name: &str) -> (Vec<u32>, usize) {
    let a = read_npy(fixture(name)).unwrap();
    assert_eq!(a.shape, vec![1, K, a.shape[2]]);
    (a.to_i64().iter().map(|&c| c as u32).collect(), a.shape[2])
}

/// Column `t` (K codes) of `[K, frames]` codes.
fn column(codes: &[u32], frames: usize, t: usize) -> Vec<u32> {
    (0..K).map(|k| codes[k * frames + t]).collect()
}

/// A machine initialized from the fixture file.
fn initialized() -> MimiInit {
    let mut init = MimiInit::new();
    let reply = init.initialize_file(
        config(),
        fixture("model.safetensors"),
        MimiOptions::default(),
    );
    assert!(matches!(reply, InitReply::Initialized { .. }), "{reply:?}");
    init
}

fn model() -> Arc<MimiModel> {
    initialized().model().unwrap().clone()
}

/// The fixture's tensors by name (shape, f32 values).
fn fixture_tensors() -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let file = WeightFile::open(fixture("model.safetensors")).unwrap();
    file.names()
        .map(|n| {
            let t = file.get(n).unwrap();
            (n.to_string(), t.shape.to_vec(), t.to_f32())
        })
        .collect()
}

/// Write `tensors` to a fresh temp safetensors file.
fn write_temp(tag: &str, tensors: &[(String, TensorData, Vec<usize>)]) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "voxlane-machine-mimi-{tag}-{}.safetensors",
        std::process::id()
    ));
    let refs: Vec<(&str, TensorData, Vec<usize>)> = tensors
        .iter()
        .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
        .collect();
    write_safetensors(&path, &refs, &[]).unwrap();
    path
}

fn f32_tensors() -> Vec<(String, TensorData, Vec<usize>)> {
    fixture_tensors()
        .into_iter()
        .map(|(n, s, v)| (n, TensorData::F32(v), s))
        .collect()
}

/// Initialize a fresh machine from `path`; return the reply and the state.
fn init_from(path: &std::path::Path) -> (InitReply, &'static str) {
    let mut init = MimiInit::new();
    let reply = init.initialize_file(config(), path, MimiOptions::default());
    (reply, init.state())
}

#[test]
fn initialize_reports_shapes_and_routes() {
    let init = initialized();
    assert_eq!(init.state(), "initialized");
    let mut again = MimiInit::new();
    // 2 transformers × 2 layers × 4 linears, all f32 in the fixture:
    // per layer 192·64 + 64·64 + 128·64 + 64·128 = 32768 floats, 4 bytes each.
    let per_layer = 4 * 32768;
    assert_eq!(
        again.initialize_file(
            config(),
            fixture("model.safetensors"),
            MimiOptions::default()
        ),
        InitReply::Initialized {
            num_codebooks: K,
            frame_size: FS,
            codebook_size: BINS,
            routes: RouteCounts {
                f32: (16, 4 * per_layer),
                half: (0, 0),
                q8_0: (0, 0),
            },
        }
    );
    // q8_0: 34 bytes per block of 32 weights.
    let mut q8 = MimiInit::new();
    match q8.initialize_file(
        config(),
        fixture("model.safetensors"),
        MimiOptions {
            q8_transformer: true,
            q8_convs: false,
            bf16_convs: false,
            nvidia_ring: false,
        },
    ) {
        InitReply::Initialized { routes, .. } => {
            assert_eq!(routes.f32, (0, 0));
            assert_eq!(routes.q8_0, (16, 4 * 32768 / 32 * 34));
        }
        other => panic!("expected Initialized, got {other:?}"),
    }
    // A second initialize is refused; the model stays.
    assert_eq!(
        again.initialize_file(
            config(),
            fixture("model.safetensors"),
            MimiOptions::default()
        ),
        InitReply::Error(MimiInitError::AlreadyInitialized)
    );
    assert_eq!(again.state(), "initialized");
    assert!(again.model().is_some());
}

#[test]
fn streaming_encode_through_the_session_machine_matches_codes_streaming() {
    let mut init = initialized();
    let pool = LanePool::new(2).unwrap();
    let rule = init.model().unwrap().contract().encoder_workspace();
    let session = init.bind_encoder(1, usize::MAX).unwrap();
    assert_eq!(session.bytes(), rule.bytes(1));
    let mut enc = EncodeSessionMachine::traced();
    assert_eq!(
        enc.open(session),
        SessionReply::Opened {
            max_frames: 1,
            bytes: rule.bytes(1)
        }
    );
    let (want, frames) = reference_codes("codes_streaming.npy");
    let pcm = pcm();
    assert_eq!(pcm.len(), frames * FS);
    let mut got = vec![0u32; K * frames];
    let mut col = [0u32; K];
    for t in 0..frames {
        let frame = &pcm[t * FS..(t + 1) * FS];
        assert_eq!(
            enc.push(&pool, frame, &mut col),
            SessionReply::Done { frames: 1 }
        );
        for (k, c) in col.iter().enumerate() {
            got[k * frames + t] = *c;
        }
    }
    assert_eq!(got, want, "streaming codes through the session machine");
    let log = enc.take_trace();
    assert_declared(&voxlane_machines::speech::mimi_session::encode::SPEC, &log);
    // reset restarts the stream: frame 0 codes again.
    assert_eq!(enc.reset(), SessionReply::ResetDone);
    assert_eq!(
        enc.push(&pool, &pcm[..FS], &mut col),
        SessionReply::Done { frames: 1 }
    );
    assert_eq!(col.to_vec(), column(&want, frames, 0));
}

#[test]
fn multi_frame_pushes_match_codes_streaming_too() {
    let mut init = initialized();
    let pool = LanePool::new(2).unwrap();
    let mut enc = EncodeSessionMachine::new();
    let session = init.bind_encoder(5, usize::MAX).unwrap();
    assert!(matches!(
        enc.open(session),
        SessionReply::Opened { max_frames: 5, .. }
    ));
    let (want, frames) = reference_codes("codes_streaming.npy");
    let pcm = pcm();
    let mut got = vec![0u32; K * frames];
    for (b, chunk) in pcm.chunks(5 * FS).enumerate() {
        let n = chunk.len() / FS;
        let mut block = vec![0u32; K * n];
        assert_eq!(
            enc.push(&pool, chunk, &mut block),
            SessionReply::Done { frames: n }
        );
        for k in 0..K {
            for t in 0..n {
                got[k * frames + b * 5 + t] = block[k * n + t];
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn decode_session_equals_mimi_decoder_step_bit_for_bit() {
    let mut init = initialized();
    let model = init.model().unwrap().clone();
    let pool = LanePool::new(2).unwrap();
    let (codes, frames) = reference_codes("codes.npy");
    let mut reference = MimiDecoder::new(model).unwrap();
    let rule = init.model().unwrap().contract().decoder_workspace();
    let mut dec = DecodeSessionMachine::traced();
    let session = init.bind_decoder(1, rule.bytes(1)).unwrap();
    assert_eq!(
        dec.open(session),
        SessionReply::Opened {
            max_frames: 1,
            bytes: rule.bytes(1)
        }
    );
    let (mut want, mut got) = (vec![0.0f32; FS], vec![0.0f32; FS]);
    for t in 0..frames {
        let col = column(&codes, frames, t);
        reference.step(&pool, &col, &mut want).unwrap();
        assert_eq!(
            dec.push(&pool, &col, &mut got),
            SessionReply::Done { frames: 1 }
        );
        assert_eq!(bits(&got), bits(&want), "frame {t}");
    }
    assert!(got.iter().any(|x| *x != 0.0));
    assert_declared(
        &voxlane_machines::speech::mimi_session::decode::SPEC,
        &dec.take_trace(),
    );
}

#[test]
fn invalid_config_is_named() {
    let mut cfg = config();
    cfg.quantizer.bins = 0;
    let mut init = MimiInit::new();
    match init.initialize_file(cfg, fixture("model.safetensors"), MimiOptions::default()) {
        InitReply::Error(MimiInitError::Config(m)) => {
            assert!(m.contains("quantizer.bins"), "{m}")
        }
        other => panic!("expected a Config error, got {other:?}"),
    }
    assert_eq!(init.state(), "errored");
    assert_eq!(
        init.handle(&MimiInitEvent::BindSession(BindSession {
            side: Side::Encode,
            max_frames: 1,
            capacity_bytes: usize::MAX
        })),
        InitReply::Error(MimiInitError::Unexpected {
            event: "bind_session",
            state: "errored"
        })
    );
    assert_eq!(init.handle(&MimiInitEvent::Reset), InitReply::ResetDone);
    assert_eq!(init.state(), "uninitialized");
}

#[test]
fn missing_unexpected_misshapen_and_integer_tensors_are_named_in_files() {
    let gone = "encoder_transformer.transformer.layers.1.linear2.weight";
    let all = f32_tensors();

    let fewer: Vec<_> = all.iter().filter(|t| t.0 != gone).cloned().collect();
    let path = write_temp("fewer", &fewer);
    assert_eq!(
        init_from(&path),
        (
            InitReply::Error(MimiInitError::MissingTensors(vec![gone.to_string()])),
            "errored"
        )
    );

    let stray = "decoder.model.99.conv.conv.weight";
    let mut more = all.clone();
    more.push((stray.to_string(), TensorData::F32(vec![0.0]), vec![1]));
    let path = write_temp("more", &more);
    assert_eq!(
        init_from(&path).0,
        InitReply::Error(MimiInitError::UnexpectedTensors(vec![stray.to_string()]))
    );

    let mut bent = all.clone();
    for t in bent.iter_mut().filter(|t| t.0 == gone) {
        *t = (
            gone.to_string(),
            TensorData::F32(vec![0.0; 64 * 64]),
            vec![64, 64],
        );
    }
    let path = write_temp("bent", &bent);
    assert_eq!(
        init_from(&path).0,
        InitReply::Error(MimiInitError::TensorShape {
            tensor: gone.to_string(),
            expected: vec![64, 128],
            found: vec![64, 64],
        })
    );

    let victim = "decoder.model.0.conv.conv.bias";
    let mut ints = all.clone();
    for t in ints.iter_mut().filter(|t| t.0 == victim) {
        let n = t.2.iter().product();
        t.1 = TensorData::I32(vec![0; n]);
    }
    let path = write_temp("ints", &ints);
    assert_eq!(
        init_from(&path).0,
        InitReply::Error(MimiInitError::TensorDtype {
            tensor: victim.to_string(),
            dtype: DType::I32.name().to_string(),
        })
    );
    std::fs::remove_file(&path).unwrap();
    for tag in ["fewer", "more", "bent"] {
        let _ = std::fs::remove_file(std::env::temp_dir().join(format!(
            "voxlane-machine-mimi-{tag}-{}.safetensors",
            std::process::id()
        )));
    }

    let (reply, state) = init_from(std::path::Path::new("/no/such/mimi.safetensors"));
    assert!(
        matches!(&reply, InitReply::Error(MimiInitError::WeightFile(m)) if m.contains("/no/such/mimi.safetensors")),
        "{reply:?}"
    );
    assert_eq!(state, "errored");
}

#[test]
fn in_memory_weights_of_another_config_name_every_missing_or_unknown_tensor() {
    let cfg = config();
    let names = |c: &MimiConfig| -> Vec<String> {
        expected_tensors(c)
            .into_iter()
            .filter(|e| e.used)
            .map(|e| e.name)
            .collect()
    };
    let mut one_layer = cfg.clone();
    one_layer.transformer.num_layers = 1;
    let mut want: Vec<String> = names(&cfg)
        .into_iter()
        .filter(|n| !names(&one_layer).contains(n))
        .collect();
    assert!(want.iter().all(|n| n.contains(".layers.1.")));
    // Per transformer: 4 linears, 2 norms × (weight, bias), 2 layer scales.
    assert_eq!(want.len(), 2 * (4 + 4 + 2));
    let mut init = MimiInit::new();
    match init.initialize_memory(
        cfg.clone(),
        MimiWeights::synthetic(&one_layer, 1),
        MimiOptions::default(),
    ) {
        InitReply::Error(MimiInitError::MissingTensors(mut got)) => {
            got.sort();
            want.sort();
            assert_eq!(got, want);
        }
        other => panic!("expected MissingTensors, got {other:?}"),
    }

    let mut three = cfg.clone();
    three.transformer.num_layers = 3;
    let mut want: Vec<String> = names(&three)
        .into_iter()
        .filter(|n| !names(&cfg).contains(n))
        .collect();
    want.sort();
    let mut init = MimiInit::new();
    match init.initialize_memory(
        cfg.clone(),
        MimiWeights::synthetic(&three, 1),
        MimiOptions::default(),
    ) {
        InitReply::Error(MimiInitError::UnexpectedTensors(got)) => assert_eq!(got, want),
        other => panic!("expected UnexpectedTensors, got {other:?}"),
    }

    // The right shapes in memory bind, and the codes equal the file's model.
    let mut tensors = BTreeMap::new();
    for (n, s, v) in fixture_tensors() {
        tensors.insert(n, (s, v));
    }
    let mut init = MimiInit::new();
    let reply = init.initialize_memory(
        cfg,
        MimiWeights::from_tensors(&config(), tensors).unwrap(),
        MimiOptions::default(),
    );
    assert!(matches!(reply, InitReply::Initialized { .. }), "{reply:?}");
    let pool = LanePool::new(1).unwrap();
    let batch = init.model().unwrap().encode(&pool, &pcm()).unwrap();
    let (want, _) = reference_codes("codes.npy");
    assert_eq!(batch.data, want);
}

#[test]
fn capacity_is_checked_before_allocating() {
    let mut init = initialized();
    let model = init.model().unwrap().clone();
    for (side, rule) in [
        (Side::Encode, model.contract().encoder_workspace()),
        (Side::Decode, model.contract().decoder_workspace()),
    ] {
        assert!(rule.fixed > 0 && rule.per_frame > 0, "{rule:?}");
        let needed = rule.bytes(3);
        assert_eq!(needed, 4 * (rule.fixed + 3 * rule.per_frame));
        assert_eq!(
            init.bind_session(side, 3, needed - 1).unwrap_err(),
            MimiInitError::CapacityTooSmall {
                side,
                max_frames: 3,
                needed,
                capacity: needed - 1,
            }
        );
        let s = init.bind_session(side, 3, needed).unwrap();
        assert_eq!((s.side(), s.bytes()), (side, needed));
        assert_eq!(
            init.bind_session(side, 0, usize::MAX).unwrap_err(),
            MimiInitError::ZeroFrames
        );
        // An absurd frame count overflows into "needs usize::MAX", never a panic.
        assert!(matches!(
            init.bind_session(side, usize::MAX / 2, usize::MAX - 1),
            Err(MimiInitError::CapacityTooSmall {
                needed: usize::MAX,
                ..
            })
        ));
        let reply = init.handle(&MimiInitEvent::BindSession(BindSession {
            side,
            max_frames: 2,
            capacity_bytes: rule.bytes(2),
        }));
        assert_eq!(
            reply,
            InitReply::SessionBound {
                side,
                max_frames: 2,
                bytes: rule.bytes(2)
            }
        );
    }
    assert_eq!(init.state(), "initialized");
    match init.handle(&MimiInitEvent::CaptureDiagnostics) {
        InitReply::Diagnostics(d) => {
            assert_eq!(d.machine, "mimi_init");
            assert_eq!(d.rejections_for("capacity_too_small"), 4);
            assert_eq!(d.rejections_for("zero_frames"), 2);
            assert_eq!(d.events_for("bind_session"), 10);
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
}

#[test]
fn encode_session_rejects_wrong_sizes_and_stays_usable() {
    let mut init = initialized();
    let pool = LanePool::new(2).unwrap();
    let pcm = pcm();
    let (want, frames) = reference_codes("codes_streaming.npy");
    let mut enc = EncodeSessionMachine::new();
    assert_eq!(
        enc.push(&pool, &pcm[..FS], &mut [0u32; K]),
        SessionReply::Error(MimiSessionError::Unexpected {
            event: "push_pcm",
            state: "idle"
        })
    );
    assert!(matches!(
        enc.open(init.bind_encoder(1, usize::MAX).unwrap()),
        SessionReply::Opened { .. }
    ));
    let mut col = [0u32; K];
    assert_eq!(
        enc.push(&pool, &pcm[..FS - 1], &mut col),
        SessionReply::Error(MimiSessionError::WrongFrameSize {
            got: FS - 1,
            frame_size: FS,
            max_frames: 1
        })
    );
    assert_eq!(
        enc.push(&pool, &pcm[..2 * FS], &mut [0u32; 2 * K]),
        SessionReply::Error(MimiSessionError::WrongFrameSize {
            got: 2 * FS,
            frame_size: FS,
            max_frames: 1
        })
    );
    assert_eq!(
        enc.push(&pool, &[], &mut col),
        SessionReply::Error(MimiSessionError::WrongFrameSize {
            got: 0,
            frame_size: FS,
            max_frames: 1
        })
    );
    assert_eq!(
        enc.push(&pool, &pcm[..FS], &mut [0u32; K - 1]),
        SessionReply::Error(MimiSessionError::OutputSize {
            got: K - 1,
            expected: K
        })
    );
    assert_eq!(
        enc.open(init.bind_encoder(1, usize::MAX).unwrap()),
        SessionReply::Error(MimiSessionError::AlreadyOpen)
    );
    // None of the rejections touched the stream: frame 0 gives frame 0's codes.
    assert_eq!(enc.state(), "open");
    assert_eq!(
        enc.push(&pool, &pcm[..FS], &mut col),
        SessionReply::Done { frames: 1 }
    );
    assert_eq!(col.to_vec(), column(&want, frames, 0));
    assert_eq!(enc.close(), SessionReply::CloseDone);
    assert_eq!(enc.state(), "closed");
    assert!(enc.session().is_none());
    for reply in [
        enc.push(&pool, &pcm[FS..2 * FS], &mut col),
        enc.reset(),
        enc.close(),
        enc.open(init.bind_encoder(1, usize::MAX).unwrap()),
    ] {
        assert_eq!(reply, SessionReply::Error(MimiSessionError::Closed));
    }
    match enc.diagnostics() {
        SessionReply::Diagnostics(d) => {
            assert_eq!(d.machine, "mimi_encode_session");
            assert_eq!(d.rejections_for("wrong_frame_size"), 3);
            assert_eq!(d.rejections_for("output_size"), 1);
            assert_eq!(d.rejections_for("closed"), 4);
            assert_eq!(d.rejections_for("already_open"), 1);
            assert_eq!(d.rejections_for("unexpected_event"), 1);
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
}

#[test]
fn decode_session_rejects_bad_codes_and_stays_usable() {
    let mut init = initialized();
    let model = init.model().unwrap().clone();
    let pool = LanePool::new(2).unwrap();
    let (codes, frames) = reference_codes("codes.npy");
    let mut dec = DecodeSessionMachine::new();
    assert!(matches!(
        dec.open(init.bind_decoder(1, usize::MAX).unwrap()),
        SessionReply::Opened { max_frames: 1, .. }
    ));
    let col = column(&codes, frames, 0);
    let mut out = vec![0.0f32; FS];
    let mut bad = col.clone();
    bad[3] = BINS as u32;
    assert_eq!(
        dec.push(&pool, &bad, &mut out),
        SessionReply::Error(MimiSessionError::CodeOutOfRange {
            code: 256,
            codebook: 3,
            frame: 0,
            codebook_size: BINS
        })
    );
    bad[3] = u32::MAX;
    assert!(matches!(
        dec.push(&pool, &bad, &mut out),
        SessionReply::Error(MimiSessionError::CodeOutOfRange {
            code: u32::MAX,
            codebook: 3,
            ..
        })
    ));
    assert_eq!(
        dec.push(&pool, &col[..K - 1], &mut out),
        SessionReply::Error(MimiSessionError::WrongCodeCount {
            got: K - 1,
            codebooks: K,
            max_frames: 1
        })
    );
    assert_eq!(
        dec.push(&pool, &col, &mut out[..FS - 1]),
        SessionReply::Error(MimiSessionError::OutputSize {
            got: FS - 1,
            expected: FS
        })
    );
    assert!(out.iter().all(|x| *x == 0.0), "rejections write nothing");
    // Still at the stream's start: frame 0 decodes as a fresh decoder's frame 0.
    let mut reference = MimiDecoder::new(model).unwrap();
    let mut want = vec![0.0f32; FS];
    reference.step(&pool, &col, &mut want).unwrap();
    assert_eq!(
        dec.push(&pool, &col, &mut out),
        SessionReply::Done { frames: 1 }
    );
    assert_eq!(bits(&out), bits(&want));
    // reset, then frame 0 again: the same bits.
    assert_eq!(dec.reset(), SessionReply::ResetDone);
    let mut again = vec![0.0f32; FS];
    assert_eq!(
        dec.push(&pool, &col, &mut again),
        SessionReply::Done { frames: 1 }
    );
    assert_eq!(bits(&again), bits(&want));
    assert_eq!(dec.close(), SessionReply::CloseDone);
    assert_eq!(
        dec.push(&pool, &col, &mut out),
        SessionReply::Error(MimiSessionError::Closed)
    );
    match dec.diagnostics() {
        SessionReply::Diagnostics(d) => {
            assert_eq!(d.machine, "mimi_decode_session");
            assert_eq!(d.rejections_for("code_out_of_range"), 2);
            assert_eq!(d.rejections_for("wrong_code_count"), 1);
            assert_eq!(d.rejections_for("output_size"), 1);
            assert_eq!(d.rejections_for("closed"), 1);
            assert_eq!(d.events_for("push_codes"), 7);
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
}

#[test]
fn open_session_without_a_session_is_rejected() {
    let mut enc = EncodeSessionMachine::new();
    let empty: SessionEvent<'_, EncodeContract> = SessionEvent::OpenSession(Default::default());
    assert_eq!(
        enc.handle(&empty, None),
        SessionReply::Error(MimiSessionError::NoSession)
    );
    assert_eq!(enc.state(), "idle");
    assert_eq!(
        enc.close(),
        SessionReply::Error(MimiSessionError::Unexpected {
            event: "close",
            state: "idle"
        })
    );
}

// ---- conformance: every state × every event, for each machine ----

/// One `mimi_init` event recipe.
#[derive(Debug, Clone, Copy)]
enum InitRecipe {
    Initialize,
    InitializeBadConfig,
    InitializeMissingTensors,
    InitializeDone,
    InitializeError,
    BindFits,
    BindTooSmall,
    BindDone,
    BindError,
    Diagnostics,
    Reset,
}

const INIT_RECIPES: [InitRecipe; 11] = [
    InitRecipe::Initialize,
    InitRecipe::InitializeBadConfig,
    InitRecipe::InitializeMissingTensors,
    InitRecipe::InitializeDone,
    InitRecipe::InitializeError,
    InitRecipe::BindFits,
    InitRecipe::BindTooSmall,
    InitRecipe::BindDone,
    InitRecipe::BindError,
    InitRecipe::Diagnostics,
    InitRecipe::Reset,
];

fn init_event(r: InitRecipe) -> MimiInitEvent {
    let injected = || MimiInitError::Bind("injected".into());
    let initialize = |config: MimiConfig, weights| {
        MimiInitEvent::Initialize(Box::new(Initialize {
            config,
            weights,
            options: MimiOptions::default(),
        }))
    };
    match r {
        InitRecipe::Initialize => {
            initialize(config(), WeightsSource::File(fixture("model.safetensors")))
        }
        InitRecipe::InitializeBadConfig => {
            let mut c = config();
            c.transformer.num_heads = 0;
            initialize(c, WeightsSource::File(fixture("model.safetensors")))
        }
        InitRecipe::InitializeMissingTensors => {
            let mut small = config();
            small.transformer.num_layers = 1;
            initialize(
                config(),
                WeightsSource::memory(MimiWeights::synthetic(&small, 3)),
            )
        }
        InitRecipe::InitializeDone => MimiInitEvent::InitializeDone,
        InitRecipe::InitializeError => MimiInitEvent::InitializeError(injected()),
        InitRecipe::BindFits => MimiInitEvent::BindSession(BindSession {
            side: Side::Decode,
            max_frames: 1,
            capacity_bytes: usize::MAX,
        }),
        InitRecipe::BindTooSmall => MimiInitEvent::BindSession(BindSession {
            side: Side::Encode,
            max_frames: 1,
            capacity_bytes: 16,
        }),
        InitRecipe::BindDone => MimiInitEvent::BindDone,
        InitRecipe::BindError => MimiInitEvent::BindError(injected()),
        InitRecipe::Diagnostics => MimiInitEvent::CaptureDiagnostics,
        InitRecipe::Reset => MimiInitEvent::Reset,
    }
}

fn run_init(m: &mut MimiInit, r: InitRecipe, step_only: bool) -> Option<InitReply> {
    let ev = init_event(r);
    if step_only {
        m.step(&ev).reply
    } else {
        Some(m.handle(&ev))
    }
}

#[test]
fn mimi_init_every_state_times_every_event_matches_the_table() {
    use voxlane_machines::speech::mimi_init::SPEC;
    SPEC.validate().unwrap();
    use InitRecipe as R;
    let prefixes: Vec<(&str, Vec<R>)> = vec![
        ("uninitialized", vec![]),
        ("binding", vec![R::Initialize]),
        ("initialized", vec![R::Initialize, R::InitializeDone]),
        (
            "opening",
            vec![R::Initialize, R::InitializeDone, R::BindFits],
        ),
        ("errored", vec![R::InitializeBadConfig]),
    ];
    let mut log = Vec::new();
    for (state, prefix) in prefixes {
        for recipe in INIT_RECIPES {
            for step_only in [true, false] {
                let mut m = MimiInit::traced();
                for p in &prefix {
                    run_init(&mut m, *p, true);
                }
                assert_eq!(m.state(), state, "prefix did not reach {state}");
                let reply = run_init(&mut m, recipe, step_only);
                assert!(!m.dangling(), "{recipe:?} in {state} took no edge");
                if let Some(InitReply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                    assert!(!e.to_string().is_empty());
                }
                let fired = m.take_trace();
                assert_declared(&SPEC, &fired);
                log.extend(fired);
            }
        }
    }
    assert_all_reached(&SPEC, &log);
}

/// What a push recipe sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PushKind {
    Valid,
    WrongSize,
    OutOfRange,
}

/// One session event recipe.
#[derive(Debug, Clone, Copy)]
enum SessionRecipe {
    Open,
    OpenEmpty,
    Push(PushKind),
    Done,
    Error,
    Reset,
    Close,
    Diagnostics,
}

const SESSION_RECIPES: [SessionRecipe; 10] = [
    SessionRecipe::Open,
    SessionRecipe::OpenEmpty,
    SessionRecipe::Push(PushKind::Valid),
    SessionRecipe::Push(PushKind::WrongSize),
    SessionRecipe::Push(PushKind::OutOfRange),
    SessionRecipe::Done,
    SessionRecipe::Error,
    SessionRecipe::Reset,
    SessionRecipe::Close,
    SessionRecipe::Diagnostics,
];

/// How a test drives one side's session machine.
trait SideDriver: SessionContract + Sized {
    fn session(model: &Arc<MimiModel>) -> Self::Session;
    fn push(
        m: &mut SessionHandle<Self>,
        pool: &LanePool,
        kind: PushKind,
        step_only: bool,
    ) -> Option<SessionReply>;
}

fn send<'a, S: SessionContract>(
    m: &mut SessionHandle<S>,
    ev: SessionEvent<'a, S>,
    out: Option<S::Output<'a>>,
    step_only: bool,
) -> Option<SessionReply> {
    if step_only {
        m.step(&ev, out).reply
    } else {
        Some(m.handle(&ev, out))
    }
}

impl SideDriver for EncodeContract {
    fn session(model: &Arc<MimiModel>) -> EncodeSession {
        EncodeSession::open(model, 1).unwrap()
    }

    fn push(
        m: &mut SessionHandle<Self>,
        pool: &LanePool,
        kind: PushKind,
        step_only: bool,
    ) -> Option<SessionReply> {
        let pcm: Vec<f32> = (0..2 * FS).map(|i| 0.2 * (i as f32 * 0.01).sin()).collect();
        let (input, slots) = match kind {
            PushKind::Valid => (&pcm[..FS], K),
            PushKind::WrongSize => (&pcm[..FS + 7], K),
            // Encode has no code range: the nearest fault is a short output.
            PushKind::OutOfRange => (&pcm[..FS], K - 2),
        };
        let mut out = vec![0u32; slots];
        let lanes = pool.sub(2).unwrap();
        send(
            m,
            SessionEvent::Push(Push { input, lanes }),
            Some(&mut out[..]),
            step_only,
        )
    }
}

impl SideDriver for DecodeContract {
    fn session(model: &Arc<MimiModel>) -> DecodeSession {
        DecodeSession::open(model, 1).unwrap()
    }

    fn push(
        m: &mut SessionHandle<Self>,
        pool: &LanePool,
        kind: PushKind,
        step_only: bool,
    ) -> Option<SessionReply> {
        let mut codes: Vec<u32> = (0..K as u32).map(|k| 17 * k + 3).collect();
        let input_len = match kind {
            PushKind::Valid => K,
            PushKind::WrongSize => K + 1,
            PushKind::OutOfRange => {
                codes[5] = 300;
                K
            }
        };
        codes.resize(K + 1, 0);
        let mut out = vec![0.0f32; FS];
        let lanes = pool.sub(2).unwrap();
        send(
            m,
            SessionEvent::Push(Push {
                input: &codes[..input_len],
                lanes,
            }),
            Some(&mut out[..]),
            step_only,
        )
    }
}

fn run_session<S: SideDriver>(
    m: &mut SessionHandle<S>,
    model: &Arc<MimiModel>,
    pool: &LanePool,
    r: SessionRecipe,
    step_only: bool,
) -> Option<SessionReply> {
    match r {
        SessionRecipe::Open => send(m, SessionEvent::open(S::session(model)), None, step_only),
        SessionRecipe::OpenEmpty => send(
            m,
            SessionEvent::OpenSession(Default::default()),
            None,
            step_only,
        ),
        SessionRecipe::Push(kind) => S::push(m, pool, kind, step_only),
        SessionRecipe::Done => send(m, SessionEvent::Done(1), None, step_only),
        SessionRecipe::Error => send(
            m,
            SessionEvent::Error(MimiSessionError::Step("injected".into())),
            None,
            step_only,
        ),
        SessionRecipe::Reset => send(m, SessionEvent::Reset, None, step_only),
        SessionRecipe::Close => send(m, SessionEvent::Close, None, step_only),
        SessionRecipe::Diagnostics => send(m, SessionEvent::CaptureDiagnostics, None, step_only),
    }
}

fn check_session_table<S: SideDriver>() {
    let spec = S::SPEC;
    spec.validate().unwrap();
    let model = model();
    let pool = LanePool::new(2).unwrap();
    use SessionRecipe as R;
    let prefixes: Vec<(&str, Vec<R>)> = vec![
        ("idle", vec![]),
        ("open", vec![R::Open]),
        ("stepping", vec![R::Open, R::Push(PushKind::Valid)]),
        ("closed", vec![R::Open, R::Close]),
    ];
    let mut log = Vec::new();
    for (state, prefix) in prefixes {
        for recipe in SESSION_RECIPES {
            for step_only in [true, false] {
                let mut m = SessionHandle::<S>::traced();
                for p in &prefix {
                    run_session(&mut m, &model, &pool, *p, true);
                }
                assert_eq!(
                    m.state(),
                    state,
                    "{}: prefix did not reach {state}",
                    spec.name
                );
                let reply = run_session(&mut m, &model, &pool, recipe, step_only);
                assert!(
                    !m.dangling(),
                    "{}: {recipe:?} in {state} took no edge",
                    spec.name
                );
                if let Some(SessionReply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                    assert!(!e.to_string().is_empty());
                }
                let fired = m.take_trace();
                assert_declared(&spec, &fired);
                log.extend(fired);
            }
        }
    }
    assert_all_reached(&spec, &log);
}

#[test]
fn mimi_encode_session_every_state_times_every_event_matches_the_table() {
    check_session_table::<EncodeContract>();
}

#[test]
fn mimi_decode_session_every_state_times_every_event_matches_the_table() {
    check_session_table::<DecodeContract>();
}

fn session_recipe() -> impl Strategy<Value = SessionRecipe> {
    prop_oneof![
        Just(SessionRecipe::Open),
        Just(SessionRecipe::OpenEmpty),
        Just(SessionRecipe::Push(PushKind::Valid)),
        Just(SessionRecipe::Push(PushKind::WrongSize)),
        Just(SessionRecipe::Push(PushKind::OutOfRange)),
        Just(SessionRecipe::Done),
        Just(SessionRecipe::Error),
        Just(SessionRecipe::Reset),
        Just(SessionRecipe::Close),
        Just(SessionRecipe::Diagnostics),
    ]
}

fn fuzz_session<S: SideDriver>(cases: u32) {
    let spec = S::SPEC;
    let model = model();
    let pool = LanePool::new(2).unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(
            &proptest::collection::vec((session_recipe(), any::<bool>()), 1..16),
            |seq| {
                let mut m = SessionHandle::<S>::traced();
                for (r, step_only) in seq {
                    let reply = run_session(&mut m, &model, &pool, r, step_only);
                    prop_assert!(!m.dangling(), "{r:?} took no edge");
                    prop_assert!(spec.leaf_states().any(|s| s == m.state()));
                    if let Some(SessionReply::Error(e)) = reply {
                        prop_assert!(!e.reason().is_empty());
                    }
                    assert_declared(&spec, &m.take_trace());
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn random_session_sequences_stay_declared() {
    fuzz_session::<EncodeContract>(48);
    fuzz_session::<DecodeContract>(48);
}

#[test]
fn unexpected_events_are_named_with_their_state_in_every_state() {
    use InitRecipe as I;
    let cases: Vec<(Vec<I>, I, &str, &str)> = vec![
        (vec![], I::BindDone, "bind_done", "uninitialized"),
        (vec![I::Initialize], I::BindFits, "bind_session", "binding"),
        (
            vec![I::Initialize, I::InitializeDone],
            I::InitializeDone,
            "initialize_done",
            "initialized",
        ),
        (
            vec![I::Initialize, I::InitializeDone, I::BindFits],
            I::Initialize,
            "initialize",
            "opening",
        ),
        (
            vec![I::InitializeBadConfig],
            I::Initialize,
            "initialize",
            "errored",
        ),
    ];
    for (prefix, recipe, event, state) in cases {
        let mut m = MimiInit::new();
        for p in &prefix {
            run_init(&mut m, *p, true);
        }
        assert_eq!(
            run_init(&mut m, recipe, false),
            Some(InitReply::Error(MimiInitError::Unexpected { event, state }))
        );
        assert_eq!(m.state(), state, "an unexpected event does not move");
    }

    fn sessions<S: SideDriver>(push: &'static str, done: &'static str) {
        use SessionRecipe as R;
        let model = model();
        let pool = LanePool::new(2).unwrap();
        let cases: Vec<(Vec<R>, R, &str, &str)> = vec![
            (vec![], R::Push(PushKind::Valid), push, "idle"),
            (vec![], R::Reset, "reset", "idle"),
            (vec![R::Open], R::Done, done, "open"),
            (
                vec![R::Open, R::Push(PushKind::Valid)],
                R::Push(PushKind::Valid),
                push,
                "stepping",
            ),
            (
                vec![R::Open, R::Push(PushKind::Valid)],
                R::Close,
                "close",
                "stepping",
            ),
            (vec![R::Open, R::Close], R::Done, done, "closed"),
        ];
        for (prefix, recipe, event, state) in cases {
            let mut m = SessionHandle::<S>::new();
            for p in &prefix {
                run_session(&mut m, &model, &pool, *p, true);
            }
            assert_eq!(
                run_session(&mut m, &model, &pool, recipe, false),
                Some(SessionReply::Error(MimiSessionError::Unexpected {
                    event,
                    state
                }))
            );
            assert_eq!(m.state(), state);
        }
    }
    sessions::<EncodeContract>("push_pcm", "encode_done");
    sessions::<DecodeContract>("push_codes", "decode_done");
}
