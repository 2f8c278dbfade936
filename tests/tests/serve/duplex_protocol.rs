//! `/api/chat` over loopback with a Rust websocket client, against the
//! echo TEST DOUBLE engine (`support::EchoEngineTestDouble`): handshake,
//! audio and text both ways, the one-conversation limit, refusals, a
//! disconnect freeing the model, graceful shutdown.

use super::support::*;
use futures_util::SinkExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_streams_audio_and_text_back() {
    let engine = Arc::new(EchoEngineTestDouble::default());
    let server = start(engine.clone(), None).await;
    let mut ws = connect(server.addr, "text_prompt=hello&seed=7&text_topk=10").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, WAIT, |t| !t.kinds.is_empty()).await;
    assert_eq!(
        t.kinds,
        [0],
        "the handshake comes first, once the prompts are in"
    );
    let frames = 25; // 2 s
    let input = sine(300.0, frames);
    send_all(&mut ws, &audio_messages(&input)).await;
    let expected: Vec<String> = (1..frames as u64)
        .filter(|f| f.is_multiple_of(TEXT_EVERY))
        .map(|f| format!(" piece{f}"))
        .collect();
    // The header message, then one page per answered frame (the double lags one frame).
    read_until(&mut ws, &mut t, WAIT, |t| {
        t.audio_messages > frames - 1 && t.texts.len() >= expected.len()
    })
    .await;
    assert_eq!(
        t.audio_messages, frames,
        "≥ 1 audio message per 80 ms of input, after the header"
    );
    assert_eq!(
        t.pcm.len(),
        (frames - 1) * FRAME,
        "every audio page decodes to a frame"
    );
    let energy: f32 = t.pcm.iter().map(|x| x * x).sum::<f32>() / t.pcm.len() as f32;
    assert!(
        energy > 0.01,
        "the echoed sine is there (mean power {energy})"
    );
    assert_eq!(t.texts, expected, "text pieces arrive in order");
    assert!(t.errors.is_empty());
    let req = engine.requests.lock().unwrap()[0].clone();
    assert_eq!(
        (req.text_prompt.as_deref(), req.seed, req.text_topk),
        (Some("hello"), Some(7), Some(10))
    );
    ws.close(None).await.unwrap();
    assert!(
        eventually(WAIT, || engine.live.load(Ordering::SeqCst) == 0).await,
        "disconnect frees the model"
    );
    let metrics = server.state.metrics.render();
    assert!(
        metrics.contains(&format!("voxlane_duplex_frames_in_total {frames}")),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_conversation_gets_busy_then_the_slot_frees() {
    let engine = Arc::new(EchoEngineTestDouble::default());
    let server = start(engine.clone(), None).await;
    let mut first = connect(server.addr, "").await;
    let mut t1 = Transcript::default();
    read_until(&mut first, &mut t1, WAIT, |t| !t.kinds.is_empty()).await;
    assert_eq!(t1.kinds, [0]);

    let mut second = connect(server.addr, "").await;
    let mut t2 = Transcript::default();
    read_until(&mut second, &mut t2, WAIT, |_| false).await;
    assert_eq!(t2.kinds, [5], "an error message, not a hang");
    assert!(t2.errors[0].contains("busy"), "{:?}", t2.errors);
    assert!(t2.closed, "then a close");

    drop(first); // a disconnect, without a close frame
    assert!(
        eventually(WAIT, || server.state.streams.in_flight() == 0).await,
        "the slot frees"
    );
    let mut third = connect(server.addr, "").await;
    let mut t3 = Transcript::default();
    read_until(&mut third, &mut t3, WAIT, |t| !t.kinds.is_empty()).await;
    assert_eq!(t3.kinds, [0], "the next conversation is served");
    drop(third);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_kind_5_error_and_a_close() {
    let dir = std::env::temp_dir().join(format!("voxlane-serve-voices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = Arc::new(EchoEngineTestDouble::default());
    let server = start(engine.clone(), Some(dir.clone())).await;
    for (query, needle) in [
        (
            "text_temperature=warm",
            "text_temperature: `warm` is not a number",
        ),
        ("audio_topk=-3", "audio_topk"),
        ("voice_prompt=missing.wav", "not found"),
        ("voice_prompt=..%2Fx.wav", "not a path"),
        ("text_prompt=refuse", "bad request: the test double refuses"),
    ] {
        let mut ws = connect(server.addr, query).await;
        let mut t = Transcript::default();
        read_until(&mut ws, &mut t, WAIT, |_| false).await;
        assert_eq!(t.kinds, [5], "{query}");
        assert!(t.errors[0].contains(needle), "{query}: {:?}", t.errors);
        assert!(t.closed, "{query}: closed after the error");
    }
    assert!(eventually(WAIT, || server.state.streams.in_flight() == 0).await);
    assert_eq!(engine.live.load(Ordering::SeqCst), 0);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_audio_and_unknown_kinds() {
    let engine = Arc::new(EchoEngineTestDouble::default());
    let server = start(engine.clone(), None).await;
    let mut ws = connect(server.addr, "").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, WAIT, |t| !t.kinds.is_empty()).await;
    // Unknown kinds, an empty message, a ping and a text frame are ignored.
    for m in [vec![42u8, 1, 2], vec![], vec![6], vec![3, 0]] {
        ws.send(Message::Binary(m.into())).await.unwrap();
    }
    ws.send(Message::Text("hi".into())).await.unwrap();
    send_all(&mut ws, &audio_messages(&sine(200.0, 3))).await;
    read_until(&mut ws, &mut t, WAIT, |t| t.audio_messages >= 3).await;
    assert!(t.errors.is_empty() && t.audio_messages >= 3, "{t:?}");
    // Audio that is not Ogg: a typed error, then a close.
    ws.send(Message::Binary(framed(1, b"RIFF not ogg").into()))
        .await
        .unwrap();
    read_until(&mut ws, &mut t, WAIT, |_| false).await;
    assert!(
        t.errors.first().is_some_and(|e| e.contains("audio stream")),
        "{t:?}"
    );
    assert!(t.closed);
    assert!(eventually(WAIT, || engine.live.load(Ordering::SeqCst) == 0).await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_the_frames_in_flight_then_closes() {
    let engine = Arc::new(EchoEngineTestDouble::default());
    let server = start(engine.clone(), None).await;
    let mut ws = connect(server.addr, "").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, WAIT, |t| !t.kinds.is_empty()).await;
    send_all(&mut ws, &audio_messages(&sine(300.0, 10))).await;
    read_until(&mut ws, &mut t, WAIT, |t| t.audio_messages >= 10).await;
    let addr = server.addr;
    let stopping = tokio::spawn(server.shutdown());
    read_until(&mut ws, &mut t, WAIT, |_| false).await;
    assert!(t.closed, "the server closes the conversation when it stops");
    tokio::time::timeout(WAIT, stopping)
        .await
        .expect("shutdown finishes")
        .unwrap();
    assert_eq!(engine.live.load(Ordering::SeqCst), 0, "the model is freed");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is gone"
    );
}
