//! Effects of `kokoro_tts`'s edges. Actions that can fail raise an outcome
//! event (`load_*`, `prepare_*`, `front_*`, `chunk_*`) in the sink instead
//! of choosing a state; the stage machines do the work.

use super::errors::TtsError;
use super::events::{FollowUp, Load, Synthesize, TtsReply, Utterance, WordTime};
use super::machine::{KokoroTtsMachine, Stages};
use super::Sink;
use crate::tts::acoustic::{self, AcousticStage};
use crate::tts::text::{self, TextStage};
use crate::tts::vocoder::{self, VocoderStage};
use crate::tts::Slot;
use voxlane_actors::tts::frontend::Punctuation;
use voxlane_actors::tts::kokoro::bind_cache::BindCache;
use voxlane_actors::tts::kokoro::front::FrontOutput;
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_actors::tts::kokoro::pipeline::SAMPLE_RATE;
use voxlane_actors::tts::kokoro::window::{StreamShape, SAMPLES_PER_FRAME};
use voxlane_actors::tts::voices::Voices;
use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::{Fork, LanePool, PoolOptions};

fn reject(m: &mut KokoroTtsMachine, sink: &mut Sink, err: TtsError) {
    m.book.reject(err.reason());
    sink.reply = Some(TtsReply::Error(err));
}

fn taken(e: &Slot<TtsError>, kind: &'static str) -> TtsError {
    e.take().unwrap_or(TtsError::MissingPayload(kind))
}

fn stray(stage: &'static str, reply: impl std::fmt::Debug) -> TtsError {
    TtsError::StageReply {
        stage,
        reply: format!("{reply:?}"),
    }
}

fn load_stages(l: &Load) -> Result<Stages, TtsError> {
    let pool = LanePool::with_options(PoolOptions {
        threads: l.threads,
        pin: l.pin,
    })?;
    let voices = Voices::open(&l.voices)?;
    let mut text = TextStage::new();
    match text.load(&l.vocab, Punctuation::Keep) {
        text::Reply::Loaded { .. } => {}
        text::Reply::Error(e) => return Err(e.into()),
        other => return Err(stray("frontend", other)),
    }
    let model = OnnxModel::open(&l.model).map_err(KokoroError::from)?;
    let cache = BindCache::open(&l.model);
    let mut acoustic = AcousticStage::new();
    match acoustic.load_cached(&model, cache.as_ref()) {
        acoustic::Reply::Loaded { .. } => {}
        acoustic::Reply::Error(e) => return Err(e.into()),
        other => return Err(stray("front", other)),
    }
    let mut vocoder = VocoderStage::new();
    match vocoder.load_cached(&model, cache.as_ref()) {
        vocoder::Reply::Loaded { .. } => {}
        vocoder::Reply::Error(e) => return Err(e.into()),
        other => return Err(stray("back", other)),
    }
    if let Some(c) = cache {
        c.finish();
    }
    Ok(Stages {
        pool,
        voices,
        text,
        acoustic,
        vocoder,
    })
}

/// Start the lanes, open the voices, load the three stages; raise `load_done` or `load_error`.
pub fn effect_load_stages(m: &mut KokoroTtsMachine, l: &Load, sink: &mut Sink) {
    sink.follow_up = Some(match load_stages(l) {
        Ok(stages) => {
            m.stages = Some(stages);
            FollowUp::LoadDone
        }
        Err(e) => FollowUp::LoadError(e),
    });
}

/// Reply `load_done`.
pub fn effect_reply_loaded(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    sink.reply = Some(match &m.stages {
        Some(st) => TtsReply::Loaded {
            threads: st.pool.threads(),
            voices: st.voices.names().len(),
            vocab: st.text.frontend().map_or(0, |f| f.vocab().len()),
        },
        None => TtsReply::Error(TtsError::NotLoaded),
    });
}

/// Reply `load_error` (nothing stays loaded).
pub fn effect_reply_load_error(m: &mut KokoroTtsMachine, e: &Slot<TtsError>, sink: &mut Sink) {
    m.stages = None;
    reject(m, sink, taken(e, "load_error"));
}

/// Reject a request before `load`.
pub fn effect_reject_not_loaded(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    reject(m, sink, TtsError::NotLoaded);
}

/// Reject a second `load`.
pub fn effect_reject_already_loaded(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    reject(m, sink, TtsError::AlreadyLoaded);
}

/// Reject `synthesize` while an utterance is in flight.
pub fn effect_reject_busy(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    reject(m, sink, TtsError::Busy);
}

/// Reject `next_chunk` / `cancel` with no utterance in flight.
pub fn effect_reject_not_synthesizing(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    reject(m, sink, TtsError::NotSynthesizing);
}

/// Reject a text with nothing to say.
pub fn effect_reject_empty_text(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    reject(m, sink, TtsError::EmptyText);
}

/// Reject a speed outside 0.5..=2.0.
pub fn effect_reject_speed(m: &mut KokoroTtsMachine, s: &Synthesize<'_>, sink: &mut Sink) {
    reject(m, sink, TtsError::Speed(s.speed));
}

/// Reject a voice spec the packs cannot serve (names the voice and lists the others).
pub fn effect_reject_voice(m: &mut KokoroTtsMachine, s: &Synthesize<'_>, sink: &mut Sink) {
    let err = match &m.stages {
        Some(st) => match st.voices.check(s.voice) {
            Err(e) => TtsError::Voice(e),
            Ok(_) => TtsError::Voice(voxlane_actors::tts::voices::VoiceError::BadSpec {
                spec: s.voice.to_string(),
                detail: "rejected".into(),
            }),
        },
        None => TtsError::NotLoaded,
    };
    reject(m, sink, err);
}

fn prepare(m: &mut KokoroTtsMachine, s: &Synthesize<'_>) -> Result<Utterance, TtsError> {
    m.word_times.clear();
    let st = m.stages.as_mut().ok_or(TtsError::NotLoaded)?;
    let reply = if s.words {
        st.text.tokenize_words(s.text)
    } else {
        st.text.tokenize(s.text)
    };
    let tokens = match reply {
        text::Reply::Tokens(t) => t,
        text::Reply::Error(e) => return Err(e.into()),
        other => return Err(stray("frontend", other)),
    };
    let pack = st.voices.select(s.voice)?;
    Ok(Utterance {
        chunks: tokens.chunks,
        pack: Some(pack),
        speed: s.speed,
        next: 0,
        style: None,
        dropped: tokens.dropped,
        early: s.early,
        front: None,
        words: tokens.words,
        frames_before: 0,
    })
}

/// Tokenize the text (the `kokoro_text` stage) and select the voice; raise `prepare_done` or `prepare_error`.
pub fn effect_prepare_utterance(m: &mut KokoroTtsMachine, s: &Synthesize<'_>, sink: &mut Sink) {
    sink.follow_up = Some(match prepare(m, s) {
        Ok(u) => FollowUp::PrepareDone(Box::new(u)),
        Err(e) => FollowUp::PrepareError(e),
    });
}

/// Reply `prepare_done` (chunk count, dropped phonemes); the utterance moves into `synthesizing`.
pub fn effect_reply_prepared(_m: &mut KokoroTtsMachine, u: &Slot<Utterance>, sink: &mut Sink) {
    sink.reply = Some(u.peek(|u| match u {
        Some(u) => TtsReply::Prepared {
            chunks: u.chunks.len(),
            dropped: u.dropped.clone(),
        },
        None => TtsReply::Error(TtsError::MissingPayload("prepare_done")),
    }));
}

/// Reply `prepare_error`.
pub fn effect_reply_prepare_error(m: &mut KokoroTtsMachine, e: &Slot<TtsError>, sink: &mut Sink) {
    reject(m, sink, taken(e, "prepare_error"));
}

fn run_front(m: &mut KokoroTtsMachine, u: &mut Utterance) -> Result<FrontOutput, TtsError> {
    let st = m.stages.as_mut().ok_or(TtsError::NotLoaded)?;
    let chunk = u
        .chunks
        .get(u.next)
        .ok_or(TtsError::MissingPayload("next_chunk"))?;
    let pack = u.pack.as_ref().ok_or(TtsError::MissingPayload("voice"))?;
    let style = pack.style(chunk.len_unpadded())?;
    let reply = st.acoustic.run(acoustic::Run {
        tokens: &chunk.tokens,
        style: &style.0,
        speed: u.speed,
        durations: None,
        lanes: &st.pool,
    });
    match reply {
        acoustic::Reply::Front(out, _) => {
            u.style = Some(style);
            u.next += 1;
            time_words(&mut m.word_times, u, &out.durations.frames);
            Ok(*out)
        }
        acoustic::Reply::Error(e) => Err(e.into()),
        other => Err(stray("front", other)),
    }
}

/// Time the words of the chunk just run from its tokens' frame counts, and
/// count its frames into `frames_before` for the next chunk.
fn time_words(word_times: &mut Vec<WordTime>, u: &mut Utterance, frames: &[usize]) {
    word_times.clear();
    let Some(chunk) = u.next.checked_sub(1).and_then(|i| u.chunks.get(i)) else {
        return;
    };
    // Frames before token t.
    let mut at = Vec::with_capacity(frames.len() + 1);
    at.push(0usize);
    for f in frames {
        at.push(at.last().copied().unwrap_or(0) + f);
    }
    let seconds = |frame: usize| {
        ((u.frames_before + frame) * SAMPLES_PER_FRAME) as f64 / f64::from(SAMPLE_RATE)
    };
    for w in &chunk.words {
        let (Some(&start), Some(&end), Some(word)) = (
            at.get(w.tokens.start),
            at.get(w.tokens.end),
            u.words.get(w.word),
        ) else {
            continue;
        };
        word_times.push(WordTime {
            word: word.clone(),
            start: seconds(start),
            end: seconds(end),
        });
    }
    u.frames_before += at.last().copied().unwrap_or(0);
}

/// Run the next chunk through the front stage; raise `front_done` or `front_error`.
pub fn effect_run_front(m: &mut KokoroTtsMachine, u: &mut Utterance, sink: &mut Sink) {
    sink.follow_up = Some(match run_front(m, u) {
        Ok(out) => FollowUp::FrontDone(Box::new(out)),
        Err(e) => FollowUp::FrontError(e),
    });
}

fn run_back(
    m: &mut KokoroTtsMachine,
    u: &Utterance,
    o: &Slot<FrontOutput>,
) -> Result<usize, TtsError> {
    let st = m.stages.as_mut().ok_or(TtsError::NotLoaded)?;
    let style = u.style.as_ref().ok_or(TtsError::MissingPayload("style"))?;
    let reply = o.peek(|out| {
        out.map(|out| {
            st.vocoder
                .run(vocoder::Run::from_front(out, &style.0, &st.pool))
        })
    });
    match reply {
        Some(vocoder::Reply::Audio { samples }) => Ok(samples),
        Some(vocoder::Reply::Error(e)) => Err(e.into()),
        Some(other) => Err(stray("back", other)),
        None => Err(TtsError::MissingPayload("front_done")),
    }
}

/// Decode the chunk's front output through the back stage; raise `chunk_done` or `chunk_error`.
pub fn effect_run_back(
    m: &mut KokoroTtsMachine,
    u: &Utterance,
    o: &Slot<FrontOutput>,
    sink: &mut Sink,
) {
    sink.follow_up = Some(match run_back(m, u, o) {
        Ok(samples) => FollowUp::ChunkDone(samples),
        Err(e) => FollowUp::ChunkError(e),
    });
}

fn window_follow_up(u: &mut Utterance, reply: Option<vocoder::Reply>) -> FollowUp {
    match reply {
        Some(vocoder::Reply::Window { samples }) => FollowUp::WindowDone(samples),
        Some(vocoder::Reply::Audio { samples }) => {
            u.front = None;
            FollowUp::ChunkDone(samples)
        }
        Some(vocoder::Reply::Error(e)) => {
            u.front = None;
            FollowUp::ChunkError(e.into())
        }
        Some(other) => {
            u.front = None;
            FollowUp::ChunkError(stray("back", other))
        }
        None => FollowUp::ChunkError(TtsError::MissingPayload("front_done")),
    }
}

/// Decode the chunk's front output but generate only its first window
/// (kept for the rest); raise `window_done`, `chunk_done` or `chunk_error`.
pub fn effect_stream_back(
    m: &mut KokoroTtsMachine,
    u: &mut Utterance,
    o: &Slot<FrontOutput>,
    sink: &mut Sink,
) {
    u.front = o.take().map(Box::new);
    let reply =
        match (m.stages.as_mut(), u.style.as_ref(), u.front.as_deref()) {
            (Some(st), Some(style), Some(front)) => Some(st.vocoder.run(
                vocoder::Run::from_front(front, &style.0, &st.pool).streamed(StreamShape::EARLY),
            )),
            _ => None,
        };
    sink.follow_up = Some(window_follow_up(u, reply));
}

/// Generate the next window of the chunk being streamed; raise
/// `window_done`, `chunk_done` (its last window) or `chunk_error`.
pub fn effect_run_next_window(m: &mut KokoroTtsMachine, u: &mut Utterance, sink: &mut Sink) {
    let reply = match (m.stages.as_mut(), u.style.as_ref(), u.front.as_deref()) {
        (Some(st), Some(style), Some(front)) => Some(
            st.vocoder
                .next_window(vocoder::NextWindow::from_front(front, &style.0, &st.pool)),
        ),
        _ => None,
    };
    sink.follow_up = Some(window_follow_up(u, reply));
}

/// Emit a window of the chunk; more of it follows.
pub fn effect_emit_window(
    _m: &mut KokoroTtsMachine,
    u: &Utterance,
    samples: usize,
    sink: &mut Sink,
) {
    reply_chunk(u, samples, true, sink);
}

/// Drop the rest of the utterance, and of the chunk the back stage streams.
pub fn effect_cancel_stream(m: &mut KokoroTtsMachine, u: &mut Utterance, sink: &mut Sink) {
    u.front = None;
    if let Some(st) = m.stages.as_mut() {
        // The back stage leaves `streaming` whatever it replies.
        let _ = st.vocoder.cancel();
    }
    effect_cancel(m, u, sink);
}

fn reply_chunk(u: &Utterance, samples: usize, partial: bool, sink: &mut Sink) {
    sink.reply = Some(TtsReply::Chunk {
        index: u.next.saturating_sub(1),
        of: u.chunks.len(),
        samples,
        partial,
    });
}

/// Emit a chunk's audio; more chunks follow.
pub fn effect_emit_chunk(
    _m: &mut KokoroTtsMachine,
    u: &mut Utterance,
    samples: usize,
    sink: &mut Sink,
) {
    u.style = None;
    reply_chunk(u, samples, false, sink);
}

/// Emit the utterance's last chunk.
pub fn effect_emit_last_chunk(
    _m: &mut KokoroTtsMachine,
    u: &Utterance,
    samples: usize,
    sink: &mut Sink,
) {
    reply_chunk(u, samples, false, sink);
}

/// Reply `front_error` / `chunk_error`; the utterance is dropped.
pub fn effect_reply_chunk_error(m: &mut KokoroTtsMachine, e: &Slot<TtsError>, sink: &mut Sink) {
    reject(m, sink, taken(e, "chunk_error"));
}

/// Drop the rest of the utterance.
pub fn effect_cancel(_m: &mut KokoroTtsMachine, u: &Utterance, sink: &mut Sink) {
    sink.reply = Some(TtsReply::Cancelled {
        skipped: u.chunks.len().saturating_sub(u.next),
    });
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut KokoroTtsMachine, sink: &mut Sink) {
    sink.reply = Some(TtsReply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut KokoroTtsMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, TtsError::Unexpected { event, state });
}
