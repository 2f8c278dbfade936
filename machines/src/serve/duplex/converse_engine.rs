//! The real engine behind `voxlane serve --duplex`: a [`DuplexEngine`] over
//! [`Converser`] (PersonaPlex or Moshi + Mimi, pipelined by the
//! `speech_wavefront` machine). One conversation at a time: a session marks
//! the converser busy and locks it for each frame, so `/debug` can read its
//! machines between frames.

use super::engine::{ConverseRequest, DuplexEngine, DuplexFrame, DuplexSession, EngineError};
use crate::serve::debug::LiveMachines;
use crate::speech::converse::{ConverseError, Converser};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};
use voxlane_actors::speech::moshi::StreamSampling;
use voxlane_actors::speech::sampler::SamplingParams;
use voxlane_runtime::DiagnosticsSnapshot;

/// The loaded models, lent to one session at a time.
pub struct ConverseEngine {
    converser: Arc<Mutex<Converser>>,
    /// Set while a session holds the converser.
    busy: Arc<AtomicBool>,
    sample_rate: u32,
    frame_size: usize,
    text_vocab: usize,
    audio_vocab: usize,
}

impl ConverseEngine {
    /// Wraps a loaded converser.
    pub fn new(converser: Converser) -> Self {
        Self {
            sample_rate: converser.sample_rate(),
            frame_size: converser.frame_size(),
            text_vocab: converser.config().text_card,
            audio_vocab: converser.config().card,
            converser: Arc::new(Mutex::new(converser)),
            busy: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The request's sampling over Moshi's defaults, checked against the vocabularies.
    fn sampling(&self, req: &ConverseRequest) -> Result<StreamSampling, EngineError> {
        let d = StreamSampling::default();
        let pick = |t: Option<f32>, k: Option<usize>, d: SamplingParams| SamplingParams {
            temperature: t.unwrap_or(d.temperature),
            top_k: k.or(d.top_k),
            top_p: d.top_p,
        };
        let s = StreamSampling {
            text: pick(req.text_temperature, req.text_topk, d.text),
            audio: pick(req.audio_temperature, req.audio_topk, d.audio),
        };
        for (stream, p, vocab) in [
            ("text", s.text, self.text_vocab),
            ("audio", s.audio, self.audio_vocab),
        ] {
            p.validate(vocab)
                .map_err(|e| EngineError::Request(format!("{stream} sampling: {e}")))?;
        }
        Ok(s)
    }
}

/// Prompt and persona errors are the client's; the rest are the engine's.
fn engine_error(e: ConverseError) -> EngineError {
    match e {
        ConverseError::VoicePrompt(_)
        | ConverseError::NotPersona(_)
        | ConverseError::EmptyTextPrompt => EngineError::Request(e.to_string()),
        e => EngineError::Failed(e.to_string()),
    }
}

impl DuplexEngine for ConverseEngine {
    fn open(&self, req: &ConverseRequest) -> Result<Box<dyn DuplexSession>, EngineError> {
        // Knobs of PersonaPlex's web client this engine does not have: only their neutral values.
        if req.pad_mult.is_some_and(|p| p != 0.0) {
            return Err(EngineError::Request(
                "pad_mult is not supported (only 0)".into(),
            ));
        }
        if req.repetition_penalty.is_some_and(|p| p != 1.0) {
            return Err(EngineError::Request(
                "repetition_penalty is not supported (only 1.0)".into(),
            ));
        }
        let sampling = self.sampling(req)?;
        let seed = req.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(EngineError::Failed(
                "the model is in another conversation".into(),
            ));
        }
        // From here the session owns `busy`: dropping it (on error too) clears it.
        let session = ConverseSession {
            converser: self.converser.clone(),
            busy: self.busy.clone(),
        };
        {
            let mut c = session.lock();
            c.persona(req.voice_prompt.as_deref(), req.text_prompt.as_deref())
                .and_then(|persona| c.start(&persona, sampling, seed))
                .map_err(engine_error)?;
        }
        Ok(Box::new(session))
    }

    fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    fn frame_size(&self) -> usize {
        self.frame_size
    }
}

impl LiveMachines for ConverseEngine {
    fn machines(&self, wait: Duration) -> Option<Vec<DiagnosticsSnapshot>> {
        // A session locks the converser for one frame at a time (a prompt
        // phase for seconds): poll for a gap rather than queue behind it.
        let deadline = Instant::now() + wait;
        loop {
            match self.converser.try_lock() {
                Ok(mut c) => return Some(c.machines()),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner().machines()),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(TryLockError::WouldBlock) => return None,
            }
        }
    }
}

/// One conversation: the converser is its own while `busy` is set.
struct ConverseSession {
    converser: Arc<Mutex<Converser>>,
    busy: Arc<AtomicBool>,
}

impl ConverseSession {
    fn lock(&self) -> MutexGuard<'_, Converser> {
        self.converser.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DuplexSession for ConverseSession {
    fn step(&mut self, pcm: &[f32]) -> Result<Option<DuplexFrame>, EngineError> {
        let mut c = self.lock();
        let (pcm, token) = match c.push(pcm).map_err(engine_error)? {
            Some(f) => (f.pcm.to_vec(), f.tokens.first().copied()),
            None => return Ok(None),
        };
        let text = token.and_then(|t| c.text_piece(t));
        Ok(Some(DuplexFrame { pcm, text }))
    }
}

impl Drop for ConverseSession {
    fn drop(&mut self) {
        self.busy.store(false, Ordering::SeqCst);
    }
}
