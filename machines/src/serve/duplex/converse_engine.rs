//! The real engine behind `voxlane serve --duplex`: a [`DuplexEngine`] over
//! [`Converser`] (PersonaPlex or Moshi + Mimi, pipelined by the
//! `speech_wavefront` machine). One conversation at a time: the session
//! takes the loaded converser and gives it back when dropped.

use super::engine::{ConverseRequest, DuplexEngine, DuplexFrame, DuplexSession, EngineError};
use crate::speech::converse::{ConverseError, Converser};
use std::sync::{Arc, Mutex};
use voxlane_actors::speech::moshi::StreamSampling;
use voxlane_actors::speech::sampler::SamplingParams;

/// The loaded models, lent to one session at a time.
pub struct ConverseEngine {
    slot: Arc<Mutex<Option<Converser>>>,
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
            slot: Arc::new(Mutex::new(Some(converser))),
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
        let mut converser = self
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| EngineError::Failed("the model is in another conversation".into()))?;
        let started = converser
            .persona(req.voice_prompt.as_deref(), req.text_prompt.as_deref())
            .and_then(|persona| converser.start(&persona, sampling, seed));
        let session = ConverseSession {
            converser: Some(converser),
            slot: self.slot.clone(),
        };
        started.map_err(engine_error)?; // `session` drops here on error, returning the converser
        Ok(Box::new(session))
    }

    fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    fn frame_size(&self) -> usize {
        self.frame_size
    }
}

/// One conversation holding the converser.
struct ConverseSession {
    converser: Option<Converser>,
    slot: Arc<Mutex<Option<Converser>>>,
}

impl DuplexSession for ConverseSession {
    fn step(&mut self, pcm: &[f32]) -> Result<Option<DuplexFrame>, EngineError> {
        let c = self
            .converser
            .as_mut()
            .ok_or_else(|| EngineError::Failed("session closed".into()))?;
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
        if let Some(c) = self.converser.take() {
            *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
        }
    }
}
