//! Shared by the serve tests: a test-double engine, a server on a loopback
//! port, and a websocket client speaking Kyutai's framing.

use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use voxlane_machines::serve::codec::{OpusStreamDecoder, OpusStreamEncoder};
use voxlane_machines::serve::debug::{self, LiveMachines};
use voxlane_machines::serve::duplex::{
    self, ConverseRequest, DuplexEngine, DuplexFrame, DuplexOptions, DuplexSession, EngineError,
};
use voxlane_machines::serve::shell::{Shell, ShellConfig, ShellState};

/// Samples per frame and rate, as Mimi's.
pub const FRAME: usize = 1920;
/// The audio rate.
pub const RATE: u32 = 24_000;
/// The test double sends a text piece every this many answer frames.
pub const TEXT_EVERY: u64 = 4;

/// TEST DOUBLE, not a model: answers each input frame with the previous
/// one (one frame of delay, like a model's) and a text piece every
/// [`TEXT_EVERY`] frames; `text_prompt=refuse` is refused as a bad request;
/// `live` counts open sessions so tests see the model freed.
#[derive(Debug, Default)]
pub struct EchoEngineTestDouble {
    /// Sessions not yet dropped.
    pub live: Arc<AtomicUsize>,
    /// Requests opened, in order.
    pub requests: std::sync::Mutex<Vec<ConverseRequest>>,
    /// How long the prompt phase takes.
    pub prompt_delay: Duration,
}

/// One echo session.
struct EchoSession {
    previous: Option<Vec<f32>>,
    frames: u64,
    live: Arc<AtomicUsize>,
}

impl LiveMachines for EchoEngineTestDouble {}

impl DuplexEngine for EchoEngineTestDouble {
    fn open(&self, req: &ConverseRequest) -> Result<Box<dyn DuplexSession>, EngineError> {
        std::thread::sleep(self.prompt_delay);
        if req.text_prompt.as_deref() == Some("refuse") {
            return Err(EngineError::Request(
                "the test double refuses this prompt".into(),
            ));
        }
        self.requests.lock().unwrap().push(req.clone());
        self.live.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(EchoSession {
            previous: None,
            frames: 0,
            live: self.live.clone(),
        }))
    }
    fn sample_rate(&self) -> u32 {
        RATE
    }
    fn frame_size(&self) -> usize {
        FRAME
    }
}

impl DuplexSession for EchoSession {
    fn step(&mut self, pcm: &[f32]) -> Result<Option<DuplexFrame>, EngineError> {
        let Some(prev) = self.previous.replace(pcm.to_vec()) else {
            return Ok(None);
        };
        self.frames += 1;
        let text = self
            .frames
            .is_multiple_of(TEXT_EVERY)
            .then(|| format!(" piece{}", self.frames));
        Ok(Some(DuplexFrame { pcm: prev, text }))
    }
}

impl Drop for EchoSession {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running server: its address, its state and the trigger that stops it.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its shell state (metrics, streams).
    pub state: ShellState,
    /// Fire to shut down.
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The serve task.
    pub task: tokio::task::JoinHandle<Result<(), voxlane_machines::serve::shell::ServeError>>,
}

impl Running {
    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("shutdown hangs")
            .unwrap()
            .unwrap();
    }
}

/// Serves `engine` on a free loopback port, one conversation at a time.
pub async fn start(engine: Arc<dyn DuplexEngine>, voices_dir: Option<PathBuf>) -> Running {
    let mut cfg = ShellConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.shutdown_grace = Duration::from_secs(10);
    let shell = Shell::bind(cfg).await.unwrap();
    let addr = shell.local_addr().unwrap();
    let state = shell.state().clone();
    let live: Arc<dyn LiveMachines> = engine.clone();
    let routes = duplex::routes(engine, DuplexOptions { voices_dir }, shell.state())
        .merge(debug::routes(vec![live]));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(shell.serve(routes, async move {
        let _ = stopped.await;
    }));
    Running {
        addr,
        state,
        stop: Some(stop),
        task,
    }
}

/// A sine at `hz`, `frames` frames long.
pub fn sine(hz: f32, frames: usize) -> Vec<f32> {
    (0..frames * FRAME)
        .map(|i| 0.4 * (2.0 * std::f32::consts::PI * hz * i as f32 / RATE as f32).sin())
        .collect()
}

/// The client's Ogg/Opus messages for `pcm`: the header pages, then one page per frame (as sphn sends).
pub fn audio_messages(pcm: &[f32]) -> Vec<Vec<u8>> {
    let mut enc = OpusStreamEncoder::new(RATE).unwrap();
    let mut out = vec![framed(1, &enc.header_pages().unwrap())];
    for f in pcm.chunks_exact(FRAME) {
        out.push(framed(1, &enc.encode_page(f).unwrap()));
    }
    out
}

/// `kind` then `payload`.
pub fn framed(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(payload);
    m
}

/// What a conversation sent back.
#[derive(Debug, Default)]
pub struct Transcript {
    /// Kinds in arrival order.
    pub kinds: Vec<u8>,
    /// Audio messages (kind 1).
    pub audio_messages: usize,
    /// The decoded audio.
    pub pcm: Vec<f32>,
    /// Text pieces (kind 2).
    pub texts: Vec<String>,
    /// Error messages (kind 5).
    pub errors: Vec<String>,
    /// Whether the server sent a close frame.
    pub closed: bool,
}

/// Type of a client socket.
pub type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `/api/chat?query`.
pub async fn connect(addr: SocketAddr, query: &str) -> Client {
    let url = format!("ws://{addr}/api/chat?{query}");
    tokio_tungstenite::connect_async(url)
        .await
        .expect("websocket connects")
        .0
}

/// Reads messages into `t` until `done(t)` holds, the server closes, or `timeout`.
pub async fn read_until(
    ws: &mut Client,
    t: &mut Transcript,
    timeout: Duration,
    done: impl Fn(&Transcript) -> bool,
) {
    let mut dec = OpusStreamDecoder::new(RATE).unwrap();
    let deadline = tokio::time::Instant::now() + timeout;
    while !done(t) {
        let msg = match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => break,
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok(m))) => m,
        };
        match msg {
            Message::Binary(b) if !b.is_empty() => {
                t.kinds.push(b[0]);
                match b[0] {
                    1 => {
                        t.audio_messages += 1;
                        dec.push(&b[1..], &mut t.pcm)
                            .expect("the server's Ogg/Opus decodes");
                    }
                    2 => t.texts.push(String::from_utf8(b[1..].to_vec()).unwrap()),
                    5 => t.errors.push(String::from_utf8(b[1..].to_vec()).unwrap()),
                    _ => {}
                }
            }
            Message::Close(_) => {
                t.closed = true;
                break;
            }
            _ => {}
        }
    }
}

/// Sends each message.
pub async fn send_all(ws: &mut Client, msgs: &[Vec<u8>]) {
    for m in msgs {
        ws.send(Message::Binary(m.clone().into())).await.unwrap();
    }
}

/// Waits until `cond` holds (polling), at most `timeout`; whether it did.
pub async fn eventually(timeout: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// A bare HTTP/1.1 GET; the status and body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut s, &mut buf)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}
