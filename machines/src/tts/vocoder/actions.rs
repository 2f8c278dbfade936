//! Effects of `kokoro_vocoder`'s edges. Actions that can fail raise an outcome
//! event (`load_*`, `back_*`) in the sink instead of choosing a state.

use super::errors::KokoroVocoderError;
use super::events::{FollowUp, Load, NextWindow, Reply, Run, Sink};
use super::guards::{asr_channels, frames, DECODER_STYLE};
use super::machine::KokoroBackMachine;
use crate::tts::Slot;
use voxlane_actors::tts::kokoro::back::KokoroBack;

fn reject(m: &mut KokoroBackMachine, sink: &mut Sink, err: KokoroVocoderError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Bind the decoder and generator; raise `load_done` or `load_error`.
pub fn effect_load_back(m: &mut KokoroBackMachine, l: &Load<'_>, sink: &mut Sink) {
    sink.follow_up = Some(match KokoroBack::load_cached(l.model, l.cache) {
        Ok(back) => {
            m.back = Some(back);
            FollowUp::LoadDone
        }
        Err(e) => FollowUp::LoadError(e.into()),
    });
}

/// Reply `load_done`.
pub fn effect_reply_loaded(m: &mut KokoroBackMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Loaded {
        asr_channels: asr_channels(m),
    });
}

/// Reply `load_error` (nothing stays bound).
pub fn effect_reply_load_error(
    m: &mut KokoroBackMachine,
    e: &Slot<KokoroVocoderError>,
    sink: &mut Sink,
) {
    m.back = None;
    let err = e
        .take()
        .unwrap_or(KokoroVocoderError::MissingPayload("load_error"));
    reject(m, sink, err);
}

/// Reject `run` before `load`.
pub fn effect_reject_not_loaded(m: &mut KokoroBackMachine, sink: &mut Sink) {
    reject(m, sink, KokoroVocoderError::NotLoaded);
}

/// Reject a second `load`.
pub fn effect_reject_already_loaded(m: &mut KokoroBackMachine, sink: &mut Sink) {
    reject(m, sink, KokoroVocoderError::AlreadyLoaded);
}

/// Reject an `asr` that is not whole frames.
pub fn effect_reject_asr(m: &mut KokoroBackMachine, r: &Run<'_>, sink: &mut Sink) {
    let err = KokoroVocoderError::AsrShape {
        values: r.asr.len(),
        channels: asr_channels(m),
    };
    reject(m, sink, err);
}

/// Reject F0 or N that is not 2 values per frame (names the curve).
pub fn effect_reject_curves(m: &mut KokoroBackMachine, r: &Run<'_>, sink: &mut Sink) {
    let want = 2 * frames(m, r);
    let (curve, got) = if r.f0.len() != want {
        ("f0", r.f0.len())
    } else {
        ("n", r.n.len())
    };
    reject(
        m,
        sink,
        KokoroVocoderError::CurveLength { curve, got, want },
    );
}

/// Reject a decoder style that is not 128 finite values.
pub fn effect_reject_style(m: &mut KokoroBackMachine, r: &Run<'_>, sink: &mut Sink) {
    let err = KokoroVocoderError::Style {
        got: r.style.len(),
        want: DECODER_STYLE,
    };
    reject(m, sink, err);
}

/// Decoder → generator into the output buffer; raise `back_done` or `back_error`.
pub fn effect_run_back(m: &mut KokoroBackMachine, r: &Run<'_>, sink: &mut Sink) {
    m.plan = None;
    let result = match &mut m.back {
        Some(back) => back
            .run_into(r.asr, r.f0, r.n, r.style, r.lanes, &mut m.output)
            .map_err(KokoroVocoderError::from),
        None => Err(KokoroVocoderError::NotLoaded),
    };
    sink.follow_up = Some(match result {
        Ok(()) => FollowUp::BackDone(m.output.audio.len()),
        Err(e) => {
            m.output.audio.clear();
            FollowUp::BackError(e)
        }
    });
}

fn window_outcome(m: &mut KokoroBackMachine, result: Result<bool, KokoroVocoderError>) -> FollowUp {
    let samples = m.output.audio.len();
    match result {
        Ok(true) => FollowUp::WindowDone(samples),
        Ok(false) => {
            m.plan = None;
            FollowUp::BackDone(samples)
        }
        Err(e) => {
            m.plan = None;
            m.output.audio.clear();
            if let Some(back) = &mut m.back {
                back.end_stream();
            }
            FollowUp::BackError(e)
        }
    }
}

/// Decode the whole chunk, then generate its first window only; raise
/// `window_done` (more follow), `back_done` or `back_error`.
pub fn effect_run_first_window(m: &mut KokoroBackMachine, r: &Run<'_>, sink: &mut Sink) {
    let plan = r.stream.and_then(|s| s.plan(frames(m, r)));
    m.plan = plan;
    let result = match (&mut m.back, plan) {
        (Some(back), Some(plan)) => back
            .run_first(r.asr, r.f0, r.n, r.style, &plan, r.lanes, &mut m.output)
            .map(|()| back.streaming())
            .map_err(KokoroVocoderError::from),
        (None, _) => Err(KokoroVocoderError::NotLoaded),
        (_, None) => Err(KokoroVocoderError::MissingPayload("stream")),
    };
    sink.follow_up = Some(window_outcome(m, result));
}

/// Generate the next window of the streamed chunk; raise `window_done`,
/// `back_done` (the last window) or `back_error`.
pub fn effect_run_next_window(m: &mut KokoroBackMachine, w: &NextWindow<'_>, sink: &mut Sink) {
    let result = match (&mut m.back, m.plan) {
        (Some(back), Some(plan)) => back
            .run_next(w.f0, w.style, &plan, w.lanes, &mut m.output)
            .map_err(KokoroVocoderError::from),
        (None, _) => Err(KokoroVocoderError::NotLoaded),
        (_, None) => Err(KokoroVocoderError::MissingPayload("stream")),
    };
    sink.follow_up = Some(window_outcome(m, result));
}

/// Reject a `next_window` that does not fit the streamed chunk (the stream stays open).
pub fn effect_reject_window(m: &mut KokoroBackMachine, w: &NextWindow<'_>, sink: &mut Sink) {
    let err = KokoroVocoderError::WindowMismatch {
        f0: w.f0.len(),
        style: w.style.len(),
        want_f0: m.plan.map_or(0, |p| 2 * p.frames),
        want_style: DECODER_STYLE,
    };
    reject(m, sink, err);
}

/// Reply `window_done`: a window waits in the output buffer.
pub fn effect_reply_window(_m: &mut KokoroBackMachine, samples: usize, sink: &mut Sink) {
    sink.reply = Some(Reply::Window { samples });
}

/// Drop the rest of the streamed chunk.
pub fn effect_cancel_stream(m: &mut KokoroBackMachine, sink: &mut Sink) {
    m.plan = None;
    if let Some(back) = &mut m.back {
        back.end_stream();
    }
    sink.reply = Some(Reply::Cancelled);
}

/// Reply `back_done`: the audio waits in the output buffer.
pub fn effect_reply_audio(_m: &mut KokoroBackMachine, samples: usize, sink: &mut Sink) {
    sink.reply = Some(Reply::Audio { samples });
}

/// Reply `back_error` (a streamed chunk's rest is dropped).
pub fn effect_reply_back_error(
    m: &mut KokoroBackMachine,
    e: &Slot<KokoroVocoderError>,
    sink: &mut Sink,
) {
    m.plan = None;
    if let Some(back) = &mut m.back {
        back.end_stream();
    }
    let err = e
        .take()
        .unwrap_or(KokoroVocoderError::MissingPayload("back_error"));
    reject(m, sink, err);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut KokoroBackMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut KokoroBackMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, KokoroVocoderError::Unexpected { event, state });
}
