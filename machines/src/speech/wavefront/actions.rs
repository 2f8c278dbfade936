//! Effects of `speech_wavefront`'s edges. A tick's action raises
//! `tick_done` / `tick_error`; the guards on `tick_done` then decide
//! whether a frame leaves.

use super::errors::WavefrontError;
use super::events::{FollowUp, Reply, Sink};
use super::machine::WavefrontMachine;
use super::stages::{run_tick, Slots, Stages};
use crate::core::Slot;
use crate::speech::mimi_session::SessionReply;

fn reject(m: &mut WavefrontMachine, sink: &mut Sink, err: WavefrontError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Reject stages that do not fit (named).
pub fn effect_reject_stages(m: &mut WavefrontMachine, s: &Slot<Box<Stages>>, sink: &mut Sink) {
    let err = s.peek(|s| match s {
        Some(s) => WavefrontError::Stages(s.shape().err().unwrap_or_default()),
        None => WavefrontError::MissingPayload("bind"),
    });
    // The stages are dropped with the event: nothing stays bound.
    reject(m, sink, err);
}

/// Take the stages and size the slots once.
pub fn effect_bind_stages(m: &mut WavefrontMachine, s: &Slot<Box<Stages>>, sink: &mut Sink) {
    match s.take().map(|st| st.shape().map(|shape| (st, shape))) {
        Some(Ok((st, shape))) => {
            m.slots = Slots::new(&shape);
            m.shape = shape;
            m.stages = Some(st);
            m.ticks = 0;
            sink.reply = Some(Reply::Bound {
                frame_size: shape.frame_size,
            });
        }
        Some(Err(e)) => reject(m, sink, WavefrontError::Stages(e)),
        None => reject(m, sink, WavefrontError::MissingPayload("bind")),
    }
}

/// Reject an input frame of the wrong length or with a non-finite sample.
pub fn effect_reject_frame(m: &mut WavefrontMachine, pcm: &[f32], sink: &mut Sink) {
    let want = m.shape.frame_size;
    reject(
        m,
        sink,
        WavefrontError::FrameSize {
            got: pcm.len(),
            want,
        },
    );
}

fn tick(m: &mut WavefrontMachine, input: Option<&[f32]>, parallel: bool, sink: &mut Sink) {
    let seq = m.ticks;
    m.ticks += 1;
    let shape = m.shape;
    let r = match m.stages.as_deref_mut() {
        Some(st) => run_tick(st, &mut m.slots, &shape, input.map(|p| (seq, p)), parallel),
        None => Err(WavefrontError::NotBound),
    };
    sink.follow_up = Some(match r {
        Ok(()) => FollowUp::TickDone,
        Err(e) => FollowUp::TickError(e),
    });
}

/// Encode, LM and decode one after another on the caller; raise `tick_*`.
pub fn effect_tick_serial(m: &mut WavefrontMachine, pcm: &[f32], sink: &mut Sink) {
    tick(m, Some(pcm), false, sink);
}

/// Encode, LM and decode as three jobs on the lane pool; raise `tick_*`.
pub fn effect_tick_parallel(m: &mut WavefrontMachine, pcm: &[f32], sink: &mut Sink) {
    tick(m, Some(pcm), true, sink);
}

/// A drain tick (no input) on the caller; raise `tick_*`.
pub fn effect_drain_serial(m: &mut WavefrontMachine, sink: &mut Sink) {
    tick(m, None, false, sink);
}

/// A drain tick (no input) on the lane pool; raise `tick_*`.
pub fn effect_drain_parallel(m: &mut WavefrontMachine, sink: &mut Sink) {
    tick(m, None, true, sink);
}

/// Reply that the tick brought no frame out.
pub fn effect_reply_filling(_m: &mut WavefrontMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Filling);
}

/// Reply with the frame out (lent from the slots by the handle).
pub fn effect_emit_frame(_m: &mut WavefrontMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Frame);
}

/// Reject a frame that does not answer the input two ticks back.
pub fn effect_reject_attribution(m: &mut WavefrontMachine, sink: &mut Sink) {
    let got = m.slots.out.map_or(0, |(s, _)| s);
    let want = m.expected_seq().unwrap_or(0);
    m.slots.out = None;
    reject(m, sink, WavefrontError::Attribution { got, want });
}

/// Reply a stage's failure (the frames in flight are lost; `reset` restarts).
pub fn effect_reply_stage_error(
    m: &mut WavefrontMachine,
    e: &Slot<WavefrontError>,
    sink: &mut Sink,
) {
    m.slots.out = None;
    let err = e
        .take()
        .unwrap_or(WavefrontError::MissingPayload("tick_error"));
    reject(m, sink, err);
}

/// Reply that nothing is in flight.
pub fn effect_reply_complete(m: &mut WavefrontMachine, sink: &mut Sink) {
    m.slots.out = None;
    sink.reply = Some(Reply::Complete);
}

/// Reject input while draining.
pub fn effect_reject_draining(m: &mut WavefrontMachine, sink: &mut Sink) {
    reject(m, sink, WavefrontError::Complete);
}

/// Reject input after the flush completed.
pub fn effect_reject_complete(m: &mut WavefrontMachine, sink: &mut Sink) {
    reject(m, sink, WavefrontError::Complete);
}

fn session_ok(r: SessionReply) -> Result<(), String> {
    match r {
        SessionReply::ResetDone => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

/// Drop the frames in flight and restart every stage's stream (the LM's
/// session back to its first call).
pub fn effect_reset_pipeline(m: &mut WavefrontMachine, sink: &mut Sink) {
    m.slots.clear();
    m.ticks = 0;
    let r = match m.stages.as_deref_mut() {
        Some(st) => session_ok(st.encoder.reset())
            .map_err(|reply| WavefrontError::StageReply {
                stage: "encode",
                reply,
            })
            .and_then(|()| {
                session_ok(st.decoder.reset()).map_err(|reply| WavefrontError::StageReply {
                    stage: "decode",
                    reply,
                })
            })
            .and_then(|()| st.lm.reset_session().map_err(WavefrontError::Lm)),
        None => Err(WavefrontError::NotBound),
    };
    match r {
        Ok(()) => sink.reply = Some(Reply::Ok),
        Err(e) => reject(m, sink, e),
    }
}

/// Reject `reset` with nothing bound.
pub fn effect_reject_not_bound(m: &mut WavefrontMachine, sink: &mut Sink) {
    reject(m, sink, WavefrontError::NotBound);
}

/// Hand the stages back; nothing stays bound.
pub fn effect_release_stages(m: &mut WavefrontMachine, sink: &mut Sink) {
    m.slots.clear();
    m.ticks = 0;
    sink.reply = Some(Reply::Released(m.stages.take()));
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut WavefrontMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut WavefrontMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, WavefrontError::Unexpected { event, state });
}
