//! What one side (encode or decode) supplies to the shared session machine.

use super::errors::MimiSessionError;
use crate::core::MachineSpec;
use voxlane_runtime::SubPool;

/// A side's event names, its pure input guards and its step action.
pub trait SessionContract: Sized + 'static {
    /// The side's machine spec (name, table).
    const SPEC: MachineSpec;
    /// The push event's kind (`push_pcm` / `push_codes`).
    const PUSH: &'static str;
    /// The success outcome's kind (`encode_done` / `decode_done`).
    const DONE: &'static str;
    /// The failure outcome's kind (`encode_error` / `decode_error`).
    const ERROR: &'static str;
    /// Input rejections as `(guard, action)` names, in table order.
    const REJECTS: &'static [(&'static str, &'static str)];
    /// The step edge's `(guard, action)` names.
    const STEP: (&'static str, &'static str);

    /// The session resource (model + streaming state).
    type Session;
    /// The push payload (PCM or codes).
    type Input<'a>: Copy;
    /// Where a push writes (carried in the sink).
    type Output<'a>;

    /// Pure guard: the reject route `input` takes, with its typed error, or
    /// `None` when the push can run.
    fn reject_route(
        session: &Self::Session,
        input: &Self::Input<'_>,
        output: Option<&Self::Output<'_>>,
    ) -> Option<(usize, MimiSessionError)>;

    /// Action: one step of the stream; returns the code frames it covered.
    fn step(
        session: &mut Self::Session,
        lanes: &SubPool<'_>,
        input: &Self::Input<'_>,
        output: &mut Self::Output<'_>,
    ) -> Result<usize, MimiSessionError>;

    /// Action: back to the start of the stream.
    fn reset(session: &mut Self::Session);

    /// Bytes of streaming state a session holds, and its frame bound.
    fn describe(session: &Self::Session) -> (usize, usize);
}
