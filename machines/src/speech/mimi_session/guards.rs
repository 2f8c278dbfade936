//! Pure predicates shared by the Mimi session machines.

use super::contract::SessionContract;
use super::errors::MimiSessionError;
use super::events::{Push, SessionSink};
use super::machine::SessionMachine;
use std::cell::RefCell;

/// The `open_session` slot holds a session.
pub fn guard_session_present<T>(slot: &RefCell<Option<T>>) -> bool {
    slot.try_borrow().is_ok_and(|s| s.is_some())
}

/// The `open_session` slot is empty.
pub fn guard_session_missing<T>(slot: &RefCell<Option<T>>) -> bool {
    !guard_session_present(slot)
}

/// Why the push cannot run, with the side's reject route, if it cannot.
pub fn input_problem<S: SessionContract>(
    m: &SessionMachine<S>,
    p: &Push<'_, S>,
    s: &SessionSink<'_, S>,
) -> Option<(usize, MimiSessionError)> {
    match &m.session {
        Some(session) => S::reject_route(session, &p.input, s.output.as_ref()),
        None => Some((0, MimiSessionError::NoSession)),
    }
}

/// The push does not fit the session (size, range or output buffer).
pub fn guard_input_invalid<S: SessionContract>(
    m: &SessionMachine<S>,
    p: &Push<'_, S>,
    s: &SessionSink<'_, S>,
) -> bool {
    input_problem(m, p, s).is_some()
}

/// The push fits: it runs one step of the stream.
pub fn guard_input_valid<S: SessionContract>(
    m: &SessionMachine<S>,
    p: &Push<'_, S>,
    s: &SessionSink<'_, S>,
) -> bool {
    !guard_input_invalid(m, p, s)
}
