//! Kokoro's machines (`kokoro_text`, `kokoro_acoustic`, `kokoro_vocoder`,
//! `kokoro_tts`) and the `tts::Tts` library on the real model:
//!
//! - audio through the machines is bit-identical to `KokoroTts::synthesize`
//!   on the same tokens and style, for 1 and 2 threads;
//! - the stage machines fed the fixture `case1` give exactly the direct
//!   actor calls' outputs (both duration routes);
//! - every guard path ends in its typed error, with the real values;
//! - each machine obeys its table: every state × every event kind, the
//!   edges recorded through the trace are all declared, and every declared
//!   edge is reached.
//!
//! The model comes from the voxlane cache (`cargo xtask fetch-models`); it is
//! loaded once per role and shared through `OnceLock`s.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use voxlane_actors::tts::frontend::{Chunk, Punctuation, Tokenized, Vocab};
use voxlane_actors::tts::kokoro::back::KokoroBack;
use voxlane_actors::tts::kokoro::front::{FrontOutput, FrontWorkspace, KokoroFront};
use voxlane_actors::tts::kokoro::graph::{KokoroError, KokoroGraph};
use voxlane_actors::tts::kokoro::pipeline::{KokoroTts, MAX_TOKENS};
use voxlane_actors::tts::kokoro::window::{StreamShape, CROSSFADE, SAMPLES_PER_FRAME};
use voxlane_actors::tts::voices::{VoiceError, Voices};
use voxlane_machines::cli::fetch::fetch_models;
use voxlane_machines::core::Fired;
use voxlane_machines::tts::acoustic::events::DurationRoute;
use voxlane_machines::tts::acoustic::{self as acoustic, AcousticStage, KokoroAcousticError};
use voxlane_machines::tts::text::{self as text, KokoroTextError, TextStage};
use voxlane_machines::tts::utterance::{self as tts, TtsError, TtsMachine, TtsReply, Utterance};
use voxlane_machines::tts::vocoder::{self as vocoder, KokoroVocoderError, VocoderStage};
use voxlane_machines::tts::{Slot, SynthOptions, Tts, TtsPaths};
use voxlane_runtime::fetch::Fetcher;
use voxlane_runtime::io::read_npy;
use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::LanePool;
use voxlane_tests::{assert_all_reached, assert_declared, bits, pearson};

const TEXT: &str = "Hello, this is voxlane.";
/// Long enough for two chunks.
const TWO_CHUNKS: &str = "The quick brown fox jumps over the lazy dog near the river bank today. \
     Then it runs back home again, across the wide and windy meadow, before the sun goes down.";

fn paths() -> &'static TtsPaths {
    static PATHS: OnceLock<TtsPaths> = OnceLock::new();
    PATHS.get_or_init(|| {
        let fetcher = Fetcher::new().expect("voxlane home");
        let files = fetch_models(&fetcher, &mut Vec::new())
            .unwrap_or_else(|e| panic!("Kokoro files: {e} (run `cargo xtask fetch-models`)"));
        TtsPaths {
            model: files[0].clone(),
            vocab: files[1].clone(),
            voices: files[2].clone(),
        }
    })
}

fn model() -> &'static OnnxModel {
    static MODEL: OnceLock<OnnxModel> = OnceLock::new();
    MODEL.get_or_init(|| OnnxModel::open(&paths().model).expect("open the Kokoro model"))
}

/// An ONNX file with an empty graph: a well-formed model Kokoro cannot load from.
fn empty_model() -> OnnxModel {
    OnnxModel::from_bytes(
        vec![0x08, 0x07, 0x3a, 0x00, 0x42, 0x02, 0x10, 0x11],
        "empty.onnx",
    )
    .expect("empty model")
}

fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Loaded (traced) stage machines, shared by the tests of this binary.
struct Stages {
    front: AcousticStage,
    back: VocoderStage,
}

fn stages() -> MutexGuard<'static, Stages> {
    static STAGES: OnceLock<Mutex<Stages>> = OnceLock::new();
    lock(STAGES.get_or_init(|| {
        let mut front = AcousticStage::traced();
        assert!(matches!(front.load(model()), acoustic::Reply::Loaded { vocab } if vocab > 100));
        let mut back = VocoderStage::traced();
        assert!(matches!(
            back.load(model()),
            vocoder::Reply::Loaded { asr_channels: 512 }
        ));
        Mutex::new(Stages { front, back })
    }))
}

/// The actors called directly, loaded from the same model.
struct Direct {
    front: KokoroFront,
    back: KokoroBack,
    ws: FrontWorkspace,
}

fn direct() -> MutexGuard<'static, Direct> {
    static DIRECT: OnceLock<Mutex<Direct>> = OnceLock::new();
    lock(DIRECT.get_or_init(|| {
        let front = KokoroFront::load(&KokoroGraph::new(model())).expect("front");
        let ws = front.workspace(MAX_TOKENS).expect("workspace");
        let back = KokoroBack::load(model()).expect("back");
        Mutex::new(Direct { front, back, ws })
    }))
}

/// A loaded, traced `kokoro_tts` machine on 2 threads (its load edges are in its trace).
fn tts_machine() -> MutexGuard<'static, TtsMachine> {
    static TTS: OnceLock<Mutex<TtsMachine>> = OnceLock::new();
    lock(TTS.get_or_init(|| {
        let mut m = TtsMachine::traced();
        let reply = m.load(load_event(&paths().model));
        assert!(
            matches!(reply, TtsReply::Loaded { threads: 2, voices, vocab } if voices > 1 && vocab > 100),
            "{reply:?}"
        );
        Mutex::new(m)
    }))
}

fn load_event(model: &std::path::Path) -> tts::Load {
    let p = paths();
    tts::Load {
        model: model.to_path_buf(),
        vocab: p.vocab.clone(),
        voices: p.voices.clone(),
        threads: 2,
        pin: false,
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/kokoro/case1")
        .join(name)
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("voxlane-kokoro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn foreign_model() -> PathBuf {
    temp_file("foreign.onnx", b"RIFF....WAVEfmt definitely not onnx")
}

// ---------------------------------------------------------------- parity

#[test]
fn tts_audio_is_bit_identical_to_kokoro_tts_for_1_and_2_threads() {
    let p = paths();
    let tokens = Frontend::tokens(TEXT);
    let pack = Voices::open(&p.voices).unwrap().select("jf_alpha").unwrap();
    let mut reference = KokoroTts::open(&p.model).unwrap();
    let pool = LanePool::new(1).unwrap();
    let want: Vec<Vec<u32>> = tokens
        .chunks
        .iter()
        .map(|c| {
            let style = pack.style(c.len_unpadded()).unwrap();
            bits(
                reference
                    .synthesize(&c.tokens, &style.0, 1.0, &pool)
                    .unwrap(),
            )
        })
        .collect();
    let samples: usize = want.iter().map(Vec::len).sum();
    assert!(samples > 24_000, "{samples} samples for {TEXT:?}");
    for threads in [1, 2] {
        let mut tts = Tts::load(p, threads).unwrap();
        assert_eq!(tts.threads(), threads);
        let s = tts.synthesize(TEXT, &SynthOptions::default()).unwrap();
        assert_eq!(s.chunks(), tokens.chunks.len());
        let got: Vec<Vec<u32>> = s.map(|c| bits(&c.unwrap())).collect();
        assert_eq!(got, want, "{threads} thread(s)");
        assert_eq!(tts.machine().state(), "ready");
    }
}

#[test]
fn early_first_audio_streams_the_first_chunk_in_windows_as_the_actor_does() {
    let p = paths();
    let tokens = Frontend::tokens(TWO_CHUNKS);
    assert!(tokens.chunks.len() >= 2);
    let pack = Voices::open(&p.voices).unwrap().select("jf_alpha").unwrap();
    let mut reference = KokoroTts::open(&p.model).unwrap();
    let pool = LanePool::new(1).unwrap();
    // The actor: the first chunk in EARLY windows, the others whole.
    let mut want: Vec<Vec<u32>> = Vec::new();
    let mut first_whole = Vec::new();
    for (i, c) in tokens.chunks.iter().enumerate() {
        let style = pack.style(c.len_unpadded()).unwrap();
        if i == 0 {
            let mut sink = |a: &[f32]| want.push(bits(a));
            let shape = StreamShape::EARLY;
            reference
                .synthesize_streamed(&c.tokens, &style.0, 1.0, shape, &pool, &mut sink)
                .unwrap();
            first_whole = (reference.synthesize(&c.tokens, &style.0, 1.0, &pool))
                .unwrap()
                .to_vec();
        } else {
            let audio = reference.synthesize(&c.tokens, &style.0, 1.0, &pool);
            want.push(bits(audio.unwrap()));
        }
    }
    let pieces = want.len() - (tokens.chunks.len() - 1);
    assert!(pieces >= 2, "the first chunk came in one piece");
    // The first window ends half a crossfade before its seam.
    let seam = StreamShape::EARLY.first * SAMPLES_PER_FRAME;
    assert!(
        (seam - CROSSFADE..=seam).contains(&want[0].len()),
        "{}",
        want[0].len()
    );
    let streamed: Vec<f32> = want[..pieces]
        .iter()
        .flatten()
        .map(|&b| f32::from_bits(b))
        .collect();
    assert_eq!(streamed.len(), first_whole.len());
    let r = pearson(&streamed, &first_whole);
    assert!(r >= 0.9, "windows vs whole chunk: correlation {r}");
    let opts = SynthOptions {
        early_first_audio: true,
        ..SynthOptions::default()
    };
    for threads in [1, 2] {
        let mut tts = Tts::load(p, threads).unwrap();
        let got: Vec<Vec<u32>> = (tts.synthesize(TWO_CHUNKS, &opts).unwrap())
            .map(|c| bits(&c.unwrap()))
            .collect();
        assert_eq!(got, want, "{threads} thread(s)");
        assert_eq!(tts.machine().state(), "ready");
        // Dropped after the first window: the back stage's stream is cancelled too.
        drop(tts.synthesize(TWO_CHUNKS, &opts).unwrap().next_chunk());
        assert_eq!(tts.machine().state(), "ready");
        let again: Vec<Vec<u32>> = (tts.synthesize(TWO_CHUNKS, &opts).unwrap())
            .map(|c| bits(&c.unwrap()))
            .collect();
        assert_eq!(again, want, "{threads} thread(s), after a cancel");
    }
}

/// The reference tokenization: the actors' frontend, punctuation kept (as `Tts` does).
struct Frontend;

impl Frontend {
    fn tokens(text: &str) -> Tokenized {
        voxlane_actors::tts::frontend::Frontend::new(Vocab::load(&paths().vocab).unwrap())
            .tokenize(text)
            .unwrap()
    }
}

#[test]
fn a_two_chunk_text_streams_chunk_by_chunk_and_a_dropped_synthesis_cancels() {
    let mut m = tts_machine();
    let _ = m.take_trace();
    let expected = Frontend::tokens(TWO_CHUNKS).chunks.len();
    assert!(expected >= 2, "the text gives {expected} chunk(s)");
    match m.synthesize(TWO_CHUNKS, "jf_alpha:0.7,jm_kumo:0.3", 1.2, false) {
        TtsReply::Prepared { chunks, dropped } => {
            assert_eq!(chunks, expected);
            assert!(dropped.is_empty(), "{dropped:?}");
        }
        other => panic!("expected prepare_done, got {other:?}"),
    }
    for i in 0..expected {
        assert_eq!(m.state(), "synthesizing");
        match m.next_chunk() {
            TtsReply::Chunk {
                index,
                of,
                samples,
                partial,
            } => {
                assert_eq!((index, of, partial), (i, expected, false));
                assert_eq!(samples, m.audio().len());
                assert!(samples > 12_000, "chunk {i}: {samples} samples");
            }
            other => panic!("chunk {i}: {other:?}"),
        }
    }
    assert_eq!(m.state(), "ready");
    assert!(matches!(
        m.next_chunk(),
        TtsReply::Error(TtsError::NotSynthesizing)
    ));
    // Cancel after the first chunk skips the rest.
    assert!(matches!(
        m.synthesize(TWO_CHUNKS, "jf_alpha", 1.0, false),
        TtsReply::Prepared { .. }
    ));
    assert!(matches!(m.next_chunk(), TtsReply::Chunk { index: 0, .. }));
    assert!(matches!(
        m.synthesize(TEXT, "jf_alpha", 1.0, false),
        TtsReply::Error(TtsError::Busy)
    ));
    match m.cancel() {
        TtsReply::Cancelled { skipped } => assert_eq!(skipped, expected - 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(m.state(), "ready");
    let fired = m.take_trace();
    assert_declared(&tts::SPEC, &fired);
    let edge = |g: &str| fired.iter().any(|f| f.guard == g);
    assert!(edge("guard_more_chunks") && edge("guard_last_chunk"));
    drop(m);

    // The library: a Synthesis dropped mid-utterance cancels the rest.
    let mut tts = Tts::load(paths(), 1).unwrap();
    let opts = SynthOptions::default();
    {
        let mut s = tts.synthesize(TWO_CHUNKS, &opts).unwrap();
        assert_eq!(s.chunks(), expected);
        assert!(s.next_chunk().unwrap().unwrap().len() > 12_000);
    }
    assert_eq!(tts.machine().state(), "ready");
    let whole = tts.synthesize_all(TEXT, &opts).unwrap();
    assert!(whole.len() > 24_000);
    assert!(tts.voices().iter().any(|v| v == "jf_alpha"));
}

#[test]
fn stage_machines_on_the_fixture_equal_the_direct_actor_calls() {
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("case.json")).unwrap()).unwrap();
    let tokens = read_npy(fixture("tokens.npy")).unwrap().to_i64();
    let style = read_npy(fixture("style.npy")).unwrap().to_f32();
    let durations: Vec<usize> = read_npy(fixture("durations_clipped.npy"))
        .unwrap()
        .to_f32()
        .iter()
        .map(|&d| d as usize)
        .collect();

    // The frontend stage, with the fixtures' punctuation convention.
    let mut fe = TextStage::new();
    assert!(matches!(
        fe.load(&paths().vocab, Punctuation::Drop),
        text::Reply::Loaded { vocab } if vocab > 100
    ));
    match fe.tokenize(case["text"].as_str().unwrap()) {
        text::Reply::Tokens(t) => {
            assert_eq!(t.chunks.len(), 1);
            assert_eq!(t.chunks[0].phonemes, case["phonemes"].as_str().unwrap());
            assert_eq!(t.chunks[0].tokens, tokens);
            assert!(t.dropped.is_empty());
        }
        other => panic!("{other:?}"),
    }

    let pool = LanePool::new(2).unwrap();
    let mut st = stages();
    let mut d = direct();
    let d = &mut *d;
    for given in [None, Some(&durations[..])] {
        let reply = st.front.run(acoustic::Run {
            tokens: &tokens,
            style: &style,
            speed: 1.0,
            durations: given,
            lanes: &pool,
        });
        let (out, route) = match reply {
            acoustic::Reply::Front(out, route) => (out, route),
            other => panic!("{other:?}"),
        };
        let want: FrontOutput = match given {
            None => d.front.run(&pool, &tokens, &style, 1.0, &mut d.ws),
            Some(f) => d
                .front
                .run_with_durations(&pool, &tokens, &style, f, &mut d.ws),
        }
        .unwrap();
        let expected_route = match given {
            None => DurationRoute::Predicted,
            Some(_) => DurationRoute::Reference,
        };
        assert_eq!(route, expected_route);
        assert_eq!(out.tokens, tokens.len());
        assert_eq!(out.durations.frames, want.durations.frames, "{route:?}");
        assert_eq!(bits(&out.d_en), bits(&want.d_en), "d_en {route:?}");
        assert_eq!(bits(&out.asr), bits(&want.asr), "asr {route:?}");
        assert_eq!(bits(&out.f0), bits(&want.f0), "f0 {route:?}");
        assert_eq!(bits(&out.n), bits(&want.n), "n {route:?}");
        if given.is_some() {
            assert_eq!(out.frames(), 144, "the fixture's reference frames");
        }

        let samples = match st.back.run(vocoder::Run::from_front(&out, &style, &pool)) {
            vocoder::Reply::Audio { samples } => samples,
            other => panic!("{other:?}"),
        };
        let want_audio = d
            .back
            .run(&want.asr, &want.f0, &want.n, &style[..128], &pool)
            .unwrap();
        assert_eq!(samples, 600 * out.frames());
        assert_eq!(bits(st.back.audio()), bits(&want_audio.audio), "{route:?}");
        assert_eq!(
            bits(&st.back.output().conv_post),
            bits(&want_audio.conv_post)
        );
        if given.is_some() {
            assert_eq!(samples, case["audio_samples"].as_u64().unwrap() as usize);
        }
    }
}

// ---------------------------------------------------------------- guards

fn frun<'a>(
    tokens: &'a [i64],
    style: &'a [f32],
    speed: f32,
    durations: Option<&'a [usize]>,
    lanes: &'a LanePool,
) -> acoustic::Run<'a> {
    acoustic::Run {
        tokens,
        style,
        speed,
        durations,
        lanes,
    }
}

fn brun<'a>(
    asr: &'a [f32],
    f0: &'a [f32],
    n: &'a [f32],
    style: &'a [f32],
    lanes: &'a LanePool,
) -> vocoder::Run<'a> {
    vocoder::Run {
        asr,
        f0,
        n,
        style,
        lanes,
        stream: None,
    }
}

#[test]
fn text_guards_reject_with_typed_errors() {
    let mut fe = TextStage::new();
    assert!(matches!(
        fe.tokenize("Hello."),
        text::Reply::Error(KokoroTextError::NotLoaded)
    ));
    let missing = paths().vocab.with_file_name("no-such-vocab.json");
    match fe.load(&missing, Punctuation::Keep) {
        text::Reply::Error(e @ KokoroTextError::Frontend(_)) => {
            assert_eq!(e.reason(), "vocab_io")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fe.state(), "unloaded");
    assert!(matches!(
        fe.load(&paths().vocab, Punctuation::Keep),
        text::Reply::Loaded { .. }
    ));
    for empty in ["", "   ", "\n\t", "..."] {
        assert!(
            matches!(
                fe.tokenize(empty),
                text::Reply::Error(KokoroTextError::EmptyText)
            ),
            "{empty:?}"
        );
    }
    let long = "word ".repeat(20_001);
    match fe.tokenize(&long) {
        text::Reply::Error(KokoroTextError::TextTooLong { chars, max }) => {
            assert_eq!((chars, max), (100_005, 100_000))
        }
        other => panic!("{other:?}"),
    }
    // espeak-ng marks the syllabic n of "button" with U+0329, which the vocab lacks.
    match fe.tokenize("button") {
        text::Reply::Tokens(t) => {
            assert_eq!(t.dropped, vec!['\u{329}']);
            assert_eq!(t.chunks.len(), 1);
            assert!(t.chunks[0].len_unpadded() >= 4);
        }
        other => panic!("{other:?}"),
    }
    match fe.handle(&text::Event::CaptureDiagnostics) {
        text::Reply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("empty_text"), 4);
            assert_eq!(d.rejections_for("text_too_long"), 1);
            assert_eq!(d.rejections_for("phonemes_dropped"), 1);
            assert_eq!(d.rejections_for("not_loaded"), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn acoustic_guards_reject_with_typed_errors() {
    let tokens = read_npy(fixture("tokens.npy")).unwrap().to_i64();
    let style = read_npy(fixture("style.npy")).unwrap().to_f32();
    let pool = LanePool::new(1).unwrap();
    let mut st = stages();
    let vocab = st.front.front().unwrap().albert().vocab();
    let run = |tokens, style, speed, durations| frun(tokens, style, speed, durations, &pool);
    let mut reject = |r: acoustic::Run<'_>| match st.front.run(r) {
        acoustic::Reply::Error(e) => e,
        other => panic!("expected a rejection, got {other:?}"),
    };
    let long = vec![0i64; 600];
    assert!(matches!(
        reject(run(&long, &style, 1.0, None)),
        KokoroAcousticError::TokenCount { got: 600, max: 512 }
    ));
    assert!(matches!(
        reject(run(&[], &style, 1.0, None)),
        KokoroAcousticError::TokenCount { got: 0, max: 512 }
    ));
    assert!(matches!(
        reject(run(&tokens, &style[..10], 1.0, None)),
        KokoroAcousticError::Style { got: 10, want: 256 }
    ));
    let mut nan = style.clone();
    nan[7] = f32::NAN;
    assert!(matches!(
        reject(run(&tokens, &nan, 1.0, None)),
        KokoroAcousticError::Style { got: 256, .. }
    ));
    assert!(matches!(
        reject(run(&tokens, &style, 3.0, None)),
        KokoroAcousticError::Speed(s) if s == 3.0
    ));
    assert!(matches!(
        reject(run(&tokens, &style, 0.4, None)),
        KokoroAcousticError::Speed(_)
    ));
    let mut bad = tokens.clone();
    bad[3] = vocab as i64;
    match reject(run(&bad, &style, 1.0, None)) {
        KokoroAcousticError::TokenId { id, at, vocab: v } => {
            assert_eq!((id, at, v), (vocab as i64, 3, vocab))
        }
        other => panic!("{other:?}"),
    }
    let mut negative = tokens.clone();
    negative[3] = -1;
    assert!(matches!(
        reject(run(&negative, &style, 1.0, None)),
        KokoroAcousticError::TokenId { id: -1, at: 3, .. }
    ));
    let short = vec![2usize; 5];
    match reject(run(&tokens, &style, 1.0, Some(&short))) {
        KokoroAcousticError::DurationsLength { got, tokens: t } => {
            assert_eq!((got, t), (5, tokens.len()))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(st.front.state(), "ready");

    // A well-formed model without Kokoro's nodes: the load error names the node.
    let mut fresh = AcousticStage::new();
    match fresh.load(&empty_model()) {
        acoustic::Reply::Error(KokoroAcousticError::Model(KokoroError::MissingNode(n))) => {
            assert!(!n.is_empty())
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fresh.state(), "unloaded");
}

#[test]
fn vocoder_guards_reject_with_typed_errors() {
    let pool = LanePool::new(1).unwrap();
    let mut st = stages();
    let f = 4;
    let asr = vec![0.0f32; 512 * f];
    let curve = vec![0.0f32; 2 * f];
    let style = vec![0.1f32; 128];
    let run = |asr, f0, n, style| brun(asr, f0, n, style, &pool);
    let mut reject = |r: vocoder::Run<'_>| match st.back.run(r) {
        vocoder::Reply::Error(e) => e,
        other => panic!("expected a rejection, got {other:?}"),
    };
    assert!(matches!(
        reject(run(&asr[..100], &curve, &curve, &style)),
        KokoroVocoderError::AsrShape {
            values: 100,
            channels: 512
        }
    ));
    assert!(matches!(
        reject(run(&[], &[], &[], &style)),
        KokoroVocoderError::AsrShape { values: 0, .. }
    ));
    assert!(matches!(
        reject(run(&asr, &curve[..5], &curve, &style)),
        KokoroVocoderError::CurveLength {
            curve: "f0",
            got: 5,
            want: 8
        }
    ));
    assert!(matches!(
        reject(run(&asr, &curve, &curve[..7], &style)),
        KokoroVocoderError::CurveLength {
            curve: "n",
            got: 7,
            want: 8
        }
    ));
    assert!(matches!(
        reject(run(&asr, &curve, &curve, &style[..10])),
        KokoroVocoderError::Style { got: 10, want: 128 }
    ));
    // Four frames of silence decode to 600 samples per frame.
    match st.back.run(run(&asr, &curve, &curve, &style)) {
        vocoder::Reply::Audio { samples } => assert_eq!(samples, 600 * f),
        other => panic!("{other:?}"),
    }
    let mut fresh = VocoderStage::new();
    assert!(matches!(
        fresh.run(run(&asr, &curve, &curve, &style)),
        vocoder::Reply::Error(KokoroVocoderError::NotLoaded)
    ));
    assert!(matches!(
        fresh.load(&empty_model()),
        vocoder::Reply::Error(KokoroVocoderError::Model(_))
    ));
}

#[test]
fn tts_guards_reject_with_typed_errors() {
    let mut m = tts_machine();
    assert!(matches!(
        m.synthesize("   ", "jf_alpha", 1.0, false),
        TtsReply::Error(TtsError::EmptyText)
    ));
    assert!(matches!(
        m.synthesize(TEXT, "jf_alpha", 3.0, false),
        TtsReply::Error(TtsError::Speed(s)) if s == 3.0
    ));
    match m.synthesize(TEXT, "xx_nobody", 1.0, false) {
        TtsReply::Error(e @ TtsError::Voice(VoiceError::UnknownVoice { .. })) => {
            assert_eq!(e.reason(), "unknown_voice");
            match e {
                TtsError::Voice(VoiceError::UnknownVoice { name, available }) => {
                    assert_eq!(name, "xx_nobody");
                    assert!(available.iter().any(|v| v == "jf_alpha"));
                }
                _ => unreachable!(),
            }
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        m.synthesize(TEXT, "jf_alpha:0.5,xx_nobody:0.5", 1.0, false),
        TtsReply::Error(TtsError::Voice(VoiceError::UnknownVoice { .. }))
    ));
    assert!(matches!(
        m.synthesize(TEXT, "jf_alpha:zero", 1.0, false),
        TtsReply::Error(TtsError::Voice(VoiceError::BadSpec { .. }))
    ));
    assert!(matches!(
        m.load(load_event(&paths().model)),
        TtsReply::Error(TtsError::AlreadyLoaded)
    ));
    assert_eq!(m.state(), "ready");
    match m.handle(&tts::Event::CaptureDiagnostics) {
        TtsReply::Diagnostics(d) => {
            assert_eq!(d.machine, "kokoro_tts");
            assert!(d.rejections_for("unknown_voice") >= 2);
            assert!(d.rejections_for("speed_out_of_range") >= 1);
            assert!(d.rejections_for("empty_text") >= 1);
        }
        other => panic!("{other:?}"),
    }
    drop(m);

    // Foreign and truncated model files: KokoroError passes through, named.
    let foreign = foreign_model();
    match Tts::load(
        &TtsPaths {
            model: foreign.clone(),
            ..paths().clone()
        },
        1,
    ) {
        Err(TtsError::Model(KokoroError::Onnx(e))) => {
            assert!(e.to_string().contains("foreign.onnx"), "{e}")
        }
        other => panic!("expected a model error, got {other:?}"),
    }
    let head = std::fs::read(&paths().model).unwrap();
    let truncated = temp_file("truncated.onnx", &head[..head.len() / 3]);
    match Tts::load(
        &TtsPaths {
            model: truncated,
            ..paths().clone()
        },
        1,
    ) {
        Err(TtsError::Model(e)) => assert!(!e.to_string().is_empty()),
        other => panic!("expected a model error, got {other:?}"),
    }
    assert!(matches!(Tts::load(paths(), 0), Err(TtsError::Threads(_))));
    let no_voices = paths().voices.with_file_name("no-such-voices.npz");
    assert!(matches!(
        Tts::load(
            &TtsPaths {
                voices: no_voices,
                ..paths().clone()
            },
            1
        ),
        Err(TtsError::Voice(VoiceError::Io { .. }))
    ));
}

// ---------------------------------------------------------------- conformance

/// Feed one recorded dispatch's edges to the checks; return them for the log.
fn record(spec: &voxlane_machines::core::MachineSpec, fired: Vec<Fired>, log: &mut Vec<Fired>) {
    assert_declared(spec, &fired);
    log.extend(fired);
}

fn text_event(i: usize, long: &str, vocab: &std::path::Path) -> text::Event<'static> {
    let tokens = |dropped: Vec<char>| Tokenized {
        normalized: "hi".into(),
        chunks: vec![Chunk {
            phonemes: "hˈaɪ".into(),
            tokens: vec![0, 50, 0],
            words: Vec::new(),
        }],
        dropped,
        words: Vec::new(),
    };
    let long: &'static str = Box::leak(long.to_string().into_boxed_str());
    match i {
        0 => text::Event::Load(text::Load {
            vocab: vocab.to_path_buf(),
            punctuation: Punctuation::Keep,
        }),
        1 => text::Event::Load(text::Load {
            vocab: vocab.with_file_name("missing.json"),
            punctuation: Punctuation::Drop,
        }),
        2 => text::Event::LoadDone,
        3 => text::Event::LoadError(Slot::new(KokoroTextError::NotLoaded)),
        4 => text::Event::LoadError(Slot::empty()),
        5 => text::Event::Tokenize(text::Tokenize {
            text: "Hi.",
            words: false,
        }),
        6 => text::Event::Tokenize(text::Tokenize {
            text: "  ",
            words: true,
        }),
        7 => text::Event::Tokenize(text::Tokenize {
            text: long,
            words: false,
        }),
        8 => text::Event::TokenizeDone(Slot::new(tokens(vec![]))),
        9 => text::Event::TokenizeDone(Slot::new(tokens(vec!['x']))),
        10 => text::Event::TokenizeDone(Slot::empty()),
        11 => text::Event::TokenizeError(Slot::new(KokoroTextError::EmptyText)),
        12 => text::Event::Tokenize(text::Tokenize {
            text: "The end of the road.",
            words: true,
        }),
        _ => text::Event::CaptureDiagnostics,
    }
}

#[test]
fn kokoro_text_matches_its_table() {
    text::SPEC.validate().unwrap();
    let vocab = paths().vocab.clone();
    let long = "a ".repeat(60_000);
    let mut log = Vec::new();
    let prefixes: [(&str, &[usize]); 4] = [
        ("unloaded", &[]),
        ("loading", &[0]),
        ("ready", &[0, 2]),
        ("tokenizing", &[0, 2, 5]),
    ];
    for (state, prefix) in prefixes {
        for i in 0..14 {
            for step_only in [true, false] {
                let mut m = TextStage::traced();
                for &p in prefix {
                    m.step(&text_event(p, &long, &vocab));
                }
                assert_eq!(m.state(), state);
                let e = text_event(i, &long, &vocab);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(text::Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty() && !e.to_string().is_empty());
                }
                record(&text::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    assert_all_reached(&text::SPEC, &log);
}

struct FrontData {
    tokens: Vec<i64>,
    style: Vec<f32>,
    durations: Vec<usize>,
    long: Vec<i64>,
    bad: Vec<i64>,
    pool: LanePool,
}

fn front_data() -> FrontData {
    let all = read_npy(fixture("tokens.npy")).unwrap().to_i64();
    let mut tokens = all[..10].to_vec();
    tokens.push(0);
    let mut bad = tokens.clone();
    bad[2] = 100_000;
    FrontData {
        durations: vec![2; tokens.len()],
        tokens,
        style: read_npy(fixture("style.npy")).unwrap().to_f32(),
        long: vec![0; 600],
        bad,
        pool: LanePool::new(2).unwrap(),
    }
}

const FRONT_EVENTS: usize = 16;

fn acoustic_event<'a>(i: usize, d: &'a FrontData, empty: &'a OnnxModel) -> acoustic::Event<'a> {
    let run = |tokens: &'a [i64], style: &'a [f32], speed: f32, durations: Option<&'a [usize]>| {
        acoustic::Event::Run(acoustic::Run {
            tokens,
            style,
            speed,
            durations,
            lanes: &d.pool,
        })
    };
    match i {
        0 => acoustic::Event::Load(acoustic::Load {
            model: empty,
            cache: None,
        }),
        1 => acoustic::Event::LoadDone,
        2 => acoustic::Event::LoadError(Slot::new(KokoroAcousticError::NotLoaded)),
        3 => run(&d.tokens, &d.style, 1.0, None),
        4 => run(&d.tokens, &d.style, 1.0, Some(&d.durations)),
        5 => run(&d.long, &d.style, 1.0, None),
        6 => run(&d.tokens, &d.style[..10], 1.0, None),
        7 => run(&d.tokens, &d.style, 3.0, None),
        8 => run(&d.bad, &d.style, 1.0, None),
        9 => run(&d.tokens, &d.style, 1.0, Some(&d.durations[..3])),
        10 => acoustic::Event::FrontDone(Slot::empty()),
        11 => acoustic::Event::FrontError(Slot::new(KokoroAcousticError::NotLoaded)),
        12 => acoustic::Event::FrontError(Slot::empty()),
        13 => acoustic::Event::LoadError(Slot::empty()),
        14 => acoustic::Event::Load(acoustic::Load {
            model: model(),
            cache: None,
        }),
        _ => acoustic::Event::CaptureDiagnostics,
    }
}

/// Return a loaded front stage to `ready` from wherever an event left it.
fn acoustic_to_ready(m: &mut AcousticStage) {
    if m.state() == "running" {
        m.step(&acoustic::Event::FrontError(Slot::empty()));
    }
    assert_eq!(m.state(), "ready");
}

#[test]
fn kokoro_acoustic_matches_its_table() {
    acoustic::SPEC.validate().unwrap();
    let d = front_data();
    let empty = empty_model();
    let mut log = Vec::new();
    // Fresh machines for the states before a load (the empty model fails fast).
    for (state, prefix) in [("unloaded", &[][..]), ("loading", &[0][..])] {
        for i in (0..FRONT_EVENTS).filter(|&i| i != 14) {
            for step_only in [true, false] {
                let mut m = AcousticStage::traced();
                for &p in prefix {
                    m.step(&acoustic_event(p, &d, &empty));
                }
                assert_eq!(m.state(), state);
                let e = acoustic_event(i, &d, &empty);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(acoustic::Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                }
                record(&acoustic::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    // The shared loaded machine for `ready` and `running` (its load edges are in its trace).
    let mut st = stages();
    let m = &mut st.front;
    for (state, prefix) in [("ready", &[][..]), ("running", &[3][..])] {
        for i in 0..FRONT_EVENTS {
            for step_only in [true, false] {
                acoustic_to_ready(m);
                for &p in prefix {
                    m.step(&acoustic_event(p, &d, &empty));
                }
                assert_eq!(m.state(), state);
                let e = acoustic_event(i, &d, &empty);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(acoustic::Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                }
                record(&acoustic::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    acoustic_to_ready(m);
    assert_all_reached(&acoustic::SPEC, &log);
}

struct BackData {
    asr: Vec<f32>,
    curve: Vec<f32>,
    style: Vec<f32>,
    /// `asr` of a chunk long enough to stream in windows.
    long_asr: Vec<f32>,
    /// Its F0 and N.
    long_curve: Vec<f32>,
    pool: LanePool,
}

const BACK_EVENTS: usize = 18;

fn vocoder_event<'a>(i: usize, d: &'a BackData, empty: &'a OnnxModel) -> vocoder::Event<'a> {
    let run = |asr: &'a [f32], f0: &'a [f32], n: &'a [f32], style: &'a [f32]| {
        vocoder::Event::Run(vocoder::Run {
            asr,
            f0,
            n,
            style,
            lanes: &d.pool,
            stream: None,
        })
    };
    let next = |f0: &'a [f32]| {
        vocoder::Event::NextWindow(vocoder::NextWindow {
            f0,
            style: &d.style,
            lanes: &d.pool,
        })
    };
    match i {
        0 => vocoder::Event::Load(vocoder::Load {
            model: empty,
            cache: None,
        }),
        1 => vocoder::Event::LoadDone,
        2 => vocoder::Event::LoadError(Slot::new(KokoroVocoderError::NotLoaded)),
        3 => run(&d.asr, &d.curve, &d.curve, &d.style),
        4 => run(&d.asr[..7], &d.curve, &d.curve, &d.style),
        5 => run(&d.asr, &d.curve[..1], &d.curve, &d.style),
        6 => run(&d.asr, &d.curve, &d.curve, &d.style[..10]),
        7 => vocoder::Event::BackDone(0),
        8 => vocoder::Event::BackError(Slot::new(KokoroVocoderError::NotLoaded)),
        9 => vocoder::Event::BackError(Slot::empty()),
        10 => vocoder::Event::LoadError(Slot::empty()),
        11 => vocoder::Event::Load(vocoder::Load {
            model: model(),
            cache: None,
        }),
        12 => vocoder::Event::Run(vocoder::Run {
            stream: Some(StreamShape::EARLY),
            asr: &d.long_asr,
            f0: &d.long_curve,
            n: &d.long_curve,
            style: &d.style,
            lanes: &d.pool,
        }),
        13 => next(&d.long_curve),
        14 => next(&d.curve),
        15 => vocoder::Event::WindowDone(0),
        16 => vocoder::Event::Cancel,
        _ => vocoder::Event::CaptureDiagnostics,
    }
}

fn vocoder_to_ready(m: &mut VocoderStage) {
    match m.state() {
        "running" => drop(m.step(&vocoder::Event::BackError(Slot::empty()))),
        "streaming" => drop(m.cancel()),
        _ => {}
    }
    assert_eq!(m.state(), "ready");
}

#[test]
fn kokoro_vocoder_matches_its_table() {
    vocoder::SPEC.validate().unwrap();
    let f = 3;
    let long_frames = 40;
    let d = BackData {
        asr: vec![0.0; 512 * f],
        curve: vec![0.0; 2 * f],
        style: vec![0.1; 128],
        long_asr: vec![0.1; 512 * long_frames],
        long_curve: vec![120.0; 2 * long_frames],
        pool: LanePool::new(2).unwrap(),
    };
    let empty = empty_model();
    let mut log = Vec::new();
    for (state, prefix) in [("unloaded", &[][..]), ("loading", &[0][..])] {
        for i in (0..BACK_EVENTS).filter(|&i| i != 11) {
            for step_only in [true, false] {
                let mut m = VocoderStage::traced();
                for &p in prefix {
                    m.step(&vocoder_event(p, &d, &empty));
                }
                assert_eq!(m.state(), state);
                let e = vocoder_event(i, &d, &empty);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(vocoder::Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                }
                record(&vocoder::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    let mut st = stages();
    let m = &mut st.back;
    // Prefixes from `ready`: (event, run to completion).
    type Prefix = &'static [(usize, bool)];
    let prefixes: [(&str, Prefix); 3] = [
        ("ready", &[]),
        ("running", &[(3, false)]),
        ("streaming", &[(12, true)]),
    ];
    for (state, prefix) in prefixes {
        for i in 0..BACK_EVENTS {
            for step_only in [true, false] {
                vocoder_to_ready(m);
                for &(p, handle) in prefix {
                    let e = vocoder_event(p, &d, &empty);
                    if handle {
                        m.handle(&e);
                    } else {
                        m.step(&e);
                    }
                }
                assert_eq!(m.state(), state);
                let e = vocoder_event(i, &d, &empty);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(vocoder::Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                }
                record(&vocoder::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    vocoder_to_ready(m);
    assert_all_reached(&vocoder::SPEC, &log);
}

const TTS_EVENTS: usize = 19;

fn tts_event(i: usize, foreign: &std::path::Path) -> tts::Event<'static> {
    let synth = |text: &'static str, voice: &'static str, speed: f32| {
        tts::Event::Synthesize(tts::Synthesize {
            text,
            voice,
            speed,
            early: false,
            words: false,
        })
    };
    match i {
        0 => tts::Event::Load(load_event(foreign)),
        1 => tts::Event::LoadDone,
        2 => tts::Event::LoadError(Slot::new(TtsError::NotLoaded)),
        3 => synth("Hi.", "jf_alpha", 1.0),
        4 => synth(" ", "jf_alpha", 1.0),
        5 => synth("Hi.", "jf_alpha", 3.0),
        6 => synth("Hi.", "xx_nobody", 1.0),
        7 => tts::Event::PrepareDone(Slot::new(Utterance::default())),
        8 => tts::Event::PrepareError(Slot::new(TtsError::EmptyText)),
        9 => tts::Event::NextChunk,
        10 => tts::Event::FrontDone(Slot::empty()),
        11 => tts::Event::FrontError(Slot::new(TtsError::Busy)),
        12 => tts::Event::ChunkDone(0),
        13 => tts::Event::ChunkError(Slot::empty()),
        14 => tts::Event::Cancel,
        15 => tts::Event::LoadError(Slot::empty()),
        16 => tts::Event::Synthesize(tts::Synthesize {
            text: TEXT,
            voice: "jf_alpha",
            speed: 1.0,
            early: true,
            words: true,
        }),
        17 => tts::Event::WindowDone(0),
        _ => tts::Event::CaptureDiagnostics,
    }
}

/// Return the loaded machine to `ready` from wherever an event left it.
fn tts_to_ready(m: &mut TtsMachine) {
    match m.state() {
        "preparing" => drop(m.step(&tts::Event::PrepareError(Slot::empty()))),
        "synthesizing" => drop(m.cancel()),
        "running_front" => drop(m.step(&tts::Event::FrontError(Slot::empty()))),
        "running_back" => drop(m.step(&tts::Event::ChunkError(Slot::empty()))),
        "streaming_chunk" => drop(m.cancel()),
        _ => {}
    }
    assert_eq!(m.state(), "ready");
}

#[test]
fn kokoro_tts_matches_its_table() {
    tts::SPEC.validate().unwrap();
    let foreign = foreign_model();
    let mut log = Vec::new();
    for (state, prefix) in [("unloaded", &[][..]), ("loading", &[0][..])] {
        for i in 0..TTS_EVENTS {
            for step_only in [true, false] {
                let mut m = TtsMachine::traced();
                for &p in prefix {
                    m.step(&tts_event(p, &foreign));
                }
                assert_eq!(m.state(), state);
                let e = tts_event(i, &foreign);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(TtsReply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty() && !e.to_string().is_empty());
                }
                record(&tts::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    let mut m = tts_machine();
    // Prefixes from `ready`: 3 = synthesize "Hi." (step: preparing; handle: synthesizing).
    type Prefix = &'static [(usize, bool)];
    let prefixes: [(&str, Prefix); 6] = [
        ("ready", &[]),
        ("preparing", &[(3, true)]),
        ("synthesizing", &[(3, false)]),
        ("running_front", &[(3, false), (9, true)]),
        ("running_back", &[(3, false), (9, true), (99, true)]),
        ("streaming_chunk", &[(16, false), (9, false)]),
    ];
    for (state, prefix) in prefixes {
        for i in 0..TTS_EVENTS {
            for step_only in [true, false] {
                tts_to_ready(&mut m);
                let mut pending = None;
                for &(p, step) in prefix {
                    if p == 99 {
                        // Feed the outcome the previous step left pending.
                        let mut sink: tts::Sink = pending.take().unwrap();
                        m.step_follow_up(&mut sink);
                    } else if step {
                        pending = Some(m.step(&tts_event(p, &foreign)));
                    } else {
                        m.handle(&tts_event(p, &foreign));
                    }
                }
                assert_eq!(m.state(), state);
                let e = tts_event(i, &foreign);
                let reply = if step_only {
                    m.step(&e).reply
                } else {
                    Some(m.handle(&e))
                };
                assert!(!m.dangling(), "event {i} in {state} took no edge");
                if let Some(TtsReply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty() && !e.to_string().is_empty());
                }
                record(&tts::SPEC, m.take_trace(), &mut log);
            }
        }
    }
    tts_to_ready(&mut m);
    // A two-chunk utterance takes both chunk_done routes.
    assert!(matches!(
        m.synthesize(TWO_CHUNKS, "jf_alpha", 1.5, false),
        TtsReply::Prepared { chunks: 2.., .. }
    ));
    while m.state() == "synthesizing" {
        assert!(matches!(m.next_chunk(), TtsReply::Chunk { .. }));
    }
    // Early first audio: the first chunk in windows, the rest whole.
    assert!(matches!(
        m.synthesize(TWO_CHUNKS, "jf_alpha", 1.0, true),
        TtsReply::Prepared { chunks: 2.., .. }
    ));
    while m.state() != "ready" {
        assert!(matches!(m.next_chunk(), TtsReply::Chunk { .. }));
    }
    record(&tts::SPEC, m.take_trace(), &mut log);
    assert_all_reached(&tts::SPEC, &log);
}

// ---------------------------------------------------------------- random sequences

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn kokoro_text_random_sequences_stay_declared(
        seq in proptest::collection::vec((0usize..14, any::<bool>()), 1..16)
    ) {
        let vocab = paths().vocab.clone();
        let long = "a ".repeat(60_000);
        let mut m = TextStage::traced();
        for (i, step_only) in seq {
            let e = text_event(i, &long, &vocab);
            let reply = if step_only { m.step(&e).reply } else { Some(m.handle(&e)) };
            prop_assert!(!m.dangling());
            prop_assert!(text::SPEC.leaf_states().any(|s| s == m.state()));
            if let Some(text::Reply::Error(e)) = reply {
                prop_assert!(!e.reason().is_empty());
            }
            assert_declared(&text::SPEC, &m.take_trace());
        }
    }

    #[test]
    fn kokoro_tts_random_sequences_stay_declared(
        seq in proptest::collection::vec((0usize..TTS_EVENTS, any::<bool>()), 1..12)
    ) {
        let foreign = foreign_model();
        let mut m = tts_machine();
        tts_to_ready(&mut m);
        let _ = m.take_trace();
        for (i, step_only) in seq {
            let e = tts_event(i, &foreign);
            let reply = if step_only { m.step(&e).reply } else { Some(m.handle(&e)) };
            prop_assert!(!m.dangling());
            prop_assert!(tts::SPEC.leaf_states().any(|s| s == m.state()));
            if let Some(TtsReply::Error(e)) = reply {
                prop_assert!(!e.reason().is_empty());
            }
            assert_declared(&tts::SPEC, &m.take_trace());
        }
        tts_to_ready(&mut m);
    }
}
