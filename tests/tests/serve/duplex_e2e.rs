//! `voxlane serve --duplex` for real: the tiny PersonaPlex fixture
//! (`shared/fixtures/personaplex-tiny`) behind `ConverseEngine`, a voice
//! prompt from `--voices-dir`, the fixture's user WAV sent as Ogg/Opus pages
//! over loopback; the handshake, an audio message per 80 ms that decodes,
//! and text pieces come back.

use super::support::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use voxlane_actors::speech::moshi::LmWeights;
use voxlane_machines::serve::duplex::ConverseEngine;
use voxlane_machines::speech::converse::{ConverseOptions, ConversePaths, Converser};
use voxlane_machines::speech::moshi_executor::WeightsSource;
use voxlane_runtime::io::read_wav;

/// The fixture folder.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/personaplex-tiny")
}

/// The tiny PersonaPlex behind the real engine adapter.
pub fn engine() -> Arc<ConverseEngine> {
    let fx = fixture_dir();
    let paths = ConversePaths {
        lm: WeightsSource::File(fx.join("lm.safetensors")),
        mimi: fx.join("mimi.safetensors"),
        tokenizer: fx.join("tokenizer.model"),
        config: Some(fx.join("config.json")),
        mimi_config: None,
    };
    let opts = ConverseOptions {
        threads: 2,
        route: LmWeights::AsStored,
        ..ConverseOptions::default()
    };
    Arc::new(ConverseEngine::new(
        Converser::load(&paths, &opts).expect("the fixture loads"),
    ))
}

/// The fixture's user audio, padded to whole frames plus `tail` frames of silence.
pub fn user_pcm(tail: usize) -> (Vec<f32>, usize) {
    let user = read_wav(fixture_dir().join("user.wav")).unwrap().mono();
    let frames = user.len().div_ceil(FRAME);
    let mut pcm = user;
    pcm.resize((frames + tail) * FRAME, 0.0);
    (pcm, frames)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personaplex_tiny_converses_over_the_websocket() {
    let server = start(engine(), Some(fixture_dir())).await;
    let query = "text_prompt=You%20enjoy%20talking.&voice_prompt=voice_prompt.wav&seed=3\
                 &text_temperature=0&audio_temperature=0&text_topk=25&audio_topk=250&pad_mult=0&repetition_penalty=1";
    let mut ws = connect(server.addr, query).await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        !t.kinds.is_empty()
    })
    .await;
    assert_eq!(
        t.kinds,
        [0],
        "handshake after the prompt phase: {:?}",
        t.errors
    );
    // Two frames of silence push the pipeline's last answers out (the wavefront lags two).
    let (pcm, frames) = user_pcm(2);
    send_all(&mut ws, &audio_messages(&pcm)).await;
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        t.audio_messages > frames
    })
    .await;
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(
        t.audio_messages > frames,
        "{} audio messages for {frames} input frames",
        t.audio_messages
    );
    assert!(
        t.pcm.len() >= frames * FRAME,
        "the pages decode: {} samples",
        t.pcm.len()
    );
    assert!(t.pcm.iter().all(|x| x.is_finite()));
    assert!(!t.texts.is_empty(), "text pieces stream back");
    drop(ws);
    assert!(
        eventually(Duration::from_secs(30), || server.state.streams.in_flight()
            == 0)
        .await
    );
    // The model went back: a second conversation opens.
    let mut ws = connect(server.addr, "text_temperature=0&audio_temperature=0").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        !t.kinds.is_empty()
    })
    .await;
    assert_eq!(t.kinds, [0], "{:?}", t.errors);
    drop(ws);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_refuses_what_it_cannot_do() {
    let server = start(engine(), Some(fixture_dir())).await;
    for (query, needle) in [
        ("pad_mult=2", "pad_mult"),
        ("repetition_penalty=1.3", "repetition_penalty"),
        ("text_topk=999999", "text sampling"),
        ("voice_prompt=config.json", "bad request"),
    ] {
        // The previous refusal's stream slot is freed after its close frame.
        assert!(
            eventually(Duration::from_secs(30), || server.state.streams.in_flight()
                == 0)
            .await
        );
        let mut ws = connect(server.addr, query).await;
        let mut t = Transcript::default();
        read_until(&mut ws, &mut t, Duration::from_secs(60), |_| false).await;
        assert_eq!(t.kinds, [5], "{query}: {:?}", t.errors);
        assert!(t.errors[0].contains(needle), "{query}: {:?}", t.errors);
        assert!(t.closed);
    }
    server.shutdown().await;
}
