//! PersonaPlex's prompt phase (NVIDIA's `LMGen.step_system_prompts`), every
//! stream teacher-forced and every output discarded: the voice prompt (its
//! audio Mimi-encoded frame by frame with the user on the sine tokens, or
//! its saved embeddings replayed and the token ring restored), 0.5 s of
//! silence, the text prompt one SentencePiece id per frame, 0.5 s of
//! silence. The calls whose every token is known go through the executor's
//! batched `prefill` edge; the encoder is reset afterwards, as the reference
//! resets Mimi before the conversation.

use super::errors::ConverseError;
use crate::speech::mimi_session::SessionReply;
use crate::speech::wavefront::Stages;
use voxlane_actors::speech::moshi::{PromptFrame, SILENCE_FRAMES, SILENCE_TOKENS, SINE_TOKENS};
use voxlane_actors::speech::voice::prompt::{frames, VoicePrompt};

/// A persona: how the agent sounds and who it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersonaPrompt {
    /// The voice prompt, loaded.
    pub voice: Option<VoicePrompt>,
    /// The text prompt's SentencePiece ids (already wrapped in `<system>`).
    pub text_ids: Vec<u32>,
}

/// What the prompt phase did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptReport {
    /// LM calls the prompt took (NVIDIA's `prompt_steps`: the ring's offset).
    pub steps: usize,
    /// Of them, batched through `prefill`.
    pub prefilled: usize,
}

fn encode_ok(r: SessionReply) -> Result<(), ConverseError> {
    match r {
        SessionReply::Done { .. } | SessionReply::ResetDone => Ok(()),
        SessionReply::Error(e) => Err(e.into()),
        other => Err(ConverseError::Mismatch(format!(
            "the Mimi encoder replied {other:?}"
        ))),
    }
}

/// Run `prompt` on a freshly bound PersonaPlex session of `stages.lm`;
/// `text_pad` is the text stream's padding id.
pub fn run_prompt(
    stages: &mut Stages,
    prompt: &PersonaPrompt,
    text_pad: u32,
) -> Result<PromptReport, ConverseError> {
    let per = SINE_TOKENS.len();
    let frame = |agent: &[u32], text| PromptFrame {
        user: SINE_TOKENS.to_vec(),
        agent: agent.to_vec(),
        text,
    };
    let mut calls = Vec::new();
    match &prompt.voice {
        Some(VoicePrompt::Audio(audio)) => {
            let enc_model = stages
                .encoder
                .session()
                .map(|s| s.model().clone())
                .ok_or_else(|| ConverseError::Mismatch("the Mimi encoder has no session".into()))?;
            let (fs, k) = (enc_model.frame_size(), enc_model.num_codebooks());
            if k < per {
                return Err(ConverseError::Mismatch(format!(
                    "Mimi codes {k} codebooks, the voice prompt needs {per}"
                )));
            }
            let mut codes = vec![0u32; k];
            for f in frames(audio, fs) {
                encode_ok(stages.encoder.push(&stages.pool, &f, &mut codes))?;
                calls.push(frame(&codes[..per], text_pad));
            }
        }
        Some(VoicePrompt::Embeddings {
            embeddings,
            dim,
            cache,
            ..
        }) => {
            for e in embeddings.chunks_exact((*dim).max(1)) {
                stages.lm.step_embedding(e)?;
            }
            stages.lm.restore_tokens(cache)?;
        }
        None => {}
    }
    calls.extend(std::iter::repeat_n(
        frame(&SILENCE_TOKENS, text_pad),
        SILENCE_FRAMES,
    ));
    calls.extend(prompt.text_ids.iter().map(|&t| frame(&SILENCE_TOKENS, t)));
    calls.extend(std::iter::repeat_n(
        frame(&SILENCE_TOKENS, text_pad),
        SILENCE_FRAMES,
    ));
    let prefilled = stages.lm.prefill(&calls)?;
    encode_ok(stages.encoder.reset())?;
    Ok(PromptReport {
        steps: stages.lm.calls().unwrap_or(0),
        prefilled,
    })
}
