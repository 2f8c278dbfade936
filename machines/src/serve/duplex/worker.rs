//! One conversation's OS thread: the prompt phase, then Ogg/Opus in →
//! 24 kHz frames → the engine session → Ogg/Opus pages and text out. All
//! model and codec work runs here, never on the async executor; the
//! websocket side only moves bytes through the two channels.

use super::engine::{ConverseRequest, DuplexEngine};
use super::errors::DuplexError;
use crate::serve::codec::{OpusStreamDecoder, OpusStreamEncoder};
use crate::serve::shell::{Counter, StreamPermit};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the thread tells the websocket side.
#[derive(Debug)]
pub enum WorkerEvent {
    /// The prompts are in: send the handshake.
    Ready,
    /// Ogg/Opus pages to send as a kind-1 message.
    Audio(Vec<u8>),
    /// A text piece to send as a kind-2 message.
    Text(String),
    /// The conversation failed: send the error (kind 5) and close.
    Failed(DuplexError),
}

/// The counters the thread updates.
#[derive(Debug, Clone)]
pub struct WorkerMetrics {
    /// Input frames stepped.
    pub frames_in: Counter,
    /// Output frames sent.
    pub frames_out: Counter,
    /// Text pieces sent.
    pub text_pieces: Counter,
}

/// Everything a conversation thread owns.
pub struct Worker {
    /// The model.
    pub engine: Arc<dyn DuplexEngine>,
    /// Its prompts and sampling.
    pub request: ConverseRequest,
    /// Ogg/Opus bytes from the client; closed when the client leaves or the server stops.
    pub input: mpsc::Receiver<Vec<u8>>,
    /// Events for the websocket side; unbounded so the thread never waits on the socket: it makes an
    /// event only per input message, and input is bounded.
    pub output: mpsc::UnboundedSender<WorkerEvent>,
    /// The stream permit, released (with the model) when the thread ends.
    pub permit: StreamPermit,
    /// Counters.
    pub metrics: WorkerMetrics,
}

/// The client has gone: stop quietly.
struct Gone;

impl Worker {
    /// Runs the conversation to its end (the input closes or something fails).
    pub fn run(mut self) {
        match self.converse() {
            Ok(()) | Err(Ok(Gone)) => {}
            Err(Err(e)) => {
                tracing::warn!(reason = e.reason(), error = %e, "duplex conversation failed");
                let _ = self.output.send(WorkerEvent::Failed(e));
            }
        }
        // The session (the model's state) dropped inside `converse`; the
        // permit goes with `self`, letting the next conversation in.
    }

    fn send(&self, event: WorkerEvent) -> Result<(), Result<Gone, DuplexError>> {
        self.output.send(event).map_err(|_| Ok(Gone))
    }

    fn converse(&mut self) -> Result<(), Result<Gone, DuplexError>> {
        let fail = |e: DuplexError| Err(e);
        let rate = self.engine.sample_rate();
        let frame = self.engine.frame_size();
        let mut session = self
            .engine
            .open(&self.request)
            .map_err(|e| fail(e.into()))?;
        let mut decoder = OpusStreamDecoder::new(rate).map_err(|e| fail(e.into()))?;
        let mut encoder = OpusStreamEncoder::new(rate).map_err(|e| fail(e.into()))?;
        self.send(WorkerEvent::Ready)?;
        // sphn's writer sends its header pages before any audio: so do we.
        let header = encoder.header_pages().map_err(|e| fail(e.into()))?;
        self.send(WorkerEvent::Audio(header))?;
        let mut pcm: Vec<f32> = Vec::with_capacity(frame * 4);
        while let Some(bytes) = self.input.blocking_recv() {
            decoder.push(&bytes, &mut pcm).map_err(|e| fail(e.into()))?;
            let mut start = 0;
            while pcm.len() - start >= frame {
                let answer = session
                    .step(&pcm[start..start + frame])
                    .map_err(|e| fail(e.into()))?;
                start += frame;
                self.metrics.frames_in.inc();
                let Some(answer) = answer else { continue };
                let page = encoder
                    .encode_page(&answer.pcm)
                    .map_err(|e| fail(e.into()))?;
                self.send(WorkerEvent::Audio(page))?;
                self.metrics.frames_out.inc();
                if let Some(text) = answer.text.filter(|t| !t.is_empty()) {
                    self.send(WorkerEvent::Text(text))?;
                    self.metrics.text_pieces.inc();
                }
            }
            pcm.drain(..start);
        }
        Ok(())
    }
}
