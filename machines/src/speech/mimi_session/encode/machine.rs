//! `mimi_encode_session` plugged into the shared session machine.

use super::actions::effect_encode_frame;
use super::guards;
use crate::speech::mimi_session::{
    EncodeSession, MimiSessionError, SessionContract, SessionHandle,
};
use voxlane_runtime::SubPool;

/// The encode side's contract.
pub struct EncodeContract;

/// A ready-to-drive `mimi_encode_session` machine.
pub type EncodeSessionMachine = SessionHandle<EncodeContract>;

impl SessionContract for EncodeContract {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PUSH: &'static str = "push_pcm";
    const DONE: &'static str = "encode_done";
    const ERROR: &'static str = "encode_error";
    const REJECTS: &'static [(&'static str, &'static str)] =
        &[("guard_frame_size_wrong", "effect_reject_frame_size")];
    const STEP: (&'static str, &'static str) = ("guard_frame_valid", "effect_encode_frame");

    type Session = EncodeSession;
    type Input<'a> = &'a [f32];
    type Output<'a> = &'a mut [u32];

    fn reject_route(
        s: &EncodeSession,
        pcm: &&[f32],
        out: Option<&&mut [u32]>,
    ) -> Option<(usize, MimiSessionError)> {
        guards::reject_route(s, pcm, out)
    }

    fn step(
        s: &mut EncodeSession,
        lanes: &SubPool<'_>,
        pcm: &&[f32],
        out: &mut &mut [u32],
    ) -> Result<usize, MimiSessionError> {
        effect_encode_frame(s, lanes, pcm, out)
    }

    fn reset(s: &mut EncodeSession) {
        s.reset();
    }

    fn describe(s: &EncodeSession) -> (usize, usize) {
        (s.bytes(), s.max_frames())
    }
}
