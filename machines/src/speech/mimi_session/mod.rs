//! The shared Mimi session machine: `mimi_encode_session` ([`encode`]) and
//! `mimi_decode_session` ([`decode`]) are this one statig machine,
//! specialised by a [`SessionContract`] that names the side's push event,
//! its input guards and its step action.
//!
//! Lifecycle: `idle --open_session--> open`; a push in `open` is rejected by
//! the side's guards (wrong frame size, codes out of range, output of the
//! wrong length: typed errors, the session stays usable) or stepped into
//! `stepping`, whose `*_done` / `*_error` outcome event returns to `open`.
//! `reset` restarts the stream; `close` drops the session and every later
//! request is rejected with `Closed`. `capture_diagnostics` works in every
//! state; anything else is rejected with a reason.

pub mod actions;
pub mod contract;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod session;
pub mod table;

// The two sides, each a contract over this machine.
pub mod decode;
pub mod encode;

pub use contract::SessionContract;
pub use errors::MimiSessionError;
pub use events::{Push, SessionEvent, SessionReply, SessionSink};
pub use machine::{SessionHandle, SessionMachine};
pub use session::{DecodeSession, EncodeSession, MimiSession, Side};
