//! Effects shared by the Mimi session machines. The step action raises an
//! outcome event (`*_done` / `*_error`) instead of choosing a state.

use super::contract::SessionContract;
use super::errors::MimiSessionError;
use super::events::{FollowUp, Push, SessionReply, SessionSink};
use super::machine::SessionMachine;
use std::cell::RefCell;

fn reply_error<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
    e: MimiSessionError,
) {
    m.book.reject(e.reason());
    s.reply = Some(SessionReply::Error(e));
}

/// Take the session out of the event's slot and reply `Opened`.
pub fn effect_open_session<S: SessionContract>(
    m: &mut SessionMachine<S>,
    slot: &RefCell<Option<S::Session>>,
    s: &mut SessionSink<'_, S>,
) {
    match slot.try_borrow_mut().ok().and_then(|mut x| x.take()) {
        Some(session) => {
            let (bytes, max_frames) = S::describe(&session);
            m.session = Some(session);
            s.reply = Some(SessionReply::Opened { max_frames, bytes });
        }
        None => reply_error(m, s, MimiSessionError::NoSession),
    }
}

/// Reject an `open_session` without a session.
pub fn effect_reject_missing_session<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
) {
    reply_error(m, s, MimiSessionError::NoSession);
}

/// Reject a second `open_session`.
pub fn effect_reject_already_open<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
) {
    reply_error(m, s, MimiSessionError::AlreadyOpen);
}

/// Reject a push that does not fit (the side's reject route named the reason).
pub fn effect_reject_input<S: SessionContract>(
    m: &mut SessionMachine<S>,
    e: MimiSessionError,
    s: &mut SessionSink<'_, S>,
) {
    reply_error(m, s, e);
}

/// Run one step of the stream; raise `*_done` or `*_error`.
pub fn effect_step<S: SessionContract>(
    m: &mut SessionMachine<S>,
    p: &Push<'_, S>,
    s: &mut SessionSink<'_, S>,
) {
    let result = match (m.session.as_mut(), s.output.as_mut()) {
        (Some(session), Some(out)) => S::step(session, &p.lanes, &p.input, out),
        (None, _) => Err(MimiSessionError::NoSession),
        (Some(_), None) => Err(MimiSessionError::OutputSize {
            got: 0,
            expected: 1,
        }),
    };
    s.follow_up = Some(match result {
        Ok(frames) => FollowUp::Done(frames),
        Err(e) => FollowUp::Error(e),
    });
}

/// Reply `*_done` with the frames written.
pub fn effect_reply_done<S: SessionContract>(
    _m: &mut SessionMachine<S>,
    frames: usize,
    s: &mut SessionSink<'_, S>,
) {
    s.reply = Some(SessionReply::Done { frames });
}

/// Reply `*_error` for a failed step (the session stays usable).
pub fn effect_reply_step_error<S: SessionContract>(
    m: &mut SessionMachine<S>,
    e: &MimiSessionError,
    s: &mut SessionSink<'_, S>,
) {
    reply_error(m, s, e.clone());
}

/// Restart the stream (history, caches) without reallocating.
pub fn effect_reset_stream<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
) {
    if let Some(session) = m.session.as_mut() {
        S::reset(session);
    }
    s.reply = Some(SessionReply::ResetDone);
}

/// Drop the session and reply `CloseDone`.
pub fn effect_close<S: SessionContract>(m: &mut SessionMachine<S>, s: &mut SessionSink<'_, S>) {
    m.session = None;
    s.reply = Some(SessionReply::CloseDone);
}

/// Reject any request after `close`.
pub fn effect_reject_closed<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
) {
    reply_error(m, s, MimiSessionError::Closed);
}

/// Reply with the counters.
pub fn effect_capture_diagnostics<S: SessionContract>(
    m: &mut SessionMachine<S>,
    s: &mut SessionSink<'_, S>,
) {
    s.reply = Some(SessionReply::Diagnostics(m.book.snapshot()));
}

/// Reject an event the current state does not take.
pub fn effect_reject_unexpected<S: SessionContract>(
    m: &mut SessionMachine<S>,
    event: &'static str,
    s: &mut SessionSink<'_, S>,
) {
    let state = m.book.state();
    reply_error(m, s, MimiSessionError::Unexpected { event, state });
}
