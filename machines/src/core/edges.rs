//! Handler helpers that take a named edge and record it in the trace.
//!
//! `internal!(m, guard, action(args..))` runs `action` and stays in the
//! current state; `transition!(m, guard, action(args..), State::x())` runs it
//! and moves. Both record the guard and action names (via `stringify!`) so
//! the conformance tests can match the run against `TRANSITIONS`.

/// Take an internal edge: run the action, stay in the current state.
#[macro_export]
macro_rules! internal {
    ($m:expr, $guard:ident, $action:ident ( $($arg:expr),* $(,)? )) => {{
        $m.book.internal(stringify!($guard), stringify!($action));
        $action($($arg),*);
        ::statig::prelude::Handled
    }};
}

/// Take a transition edge: run the action, then move to `$to`.
#[macro_export]
macro_rules! transition {
    ($m:expr, $guard:ident, $action:ident ( $($arg:expr),* $(,)? ), $to:expr) => {{
        $m.book.take(stringify!($guard), stringify!($action));
        $action($($arg),*);
        ::statig::prelude::Transition($to)
    }};
}
