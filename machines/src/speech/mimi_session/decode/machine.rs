//! `mimi_decode_session` plugged into the shared session machine.

use super::actions::effect_decode_frame;
use super::guards;
use crate::speech::mimi_session::{
    DecodeSession, MimiSessionError, SessionContract, SessionHandle,
};
use voxlane_runtime::SubPool;

/// The decode side's contract.
pub struct DecodeContract;

/// A ready-to-drive `mimi_decode_session` machine.
pub type DecodeSessionMachine = SessionHandle<DecodeContract>;

impl SessionContract for DecodeContract {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PUSH: &'static str = "push_codes";
    const DONE: &'static str = "decode_done";
    const ERROR: &'static str = "decode_error";
    const REJECTS: &'static [(&'static str, &'static str)] = &[
        ("guard_code_count_wrong", "effect_reject_code_count"),
        ("guard_code_out_of_range", "effect_reject_code"),
    ];
    const STEP: (&'static str, &'static str) = ("guard_codes_valid", "effect_decode_frame");

    type Session = DecodeSession;
    type Input<'a> = &'a [u32];
    type Output<'a> = &'a mut [f32];

    fn reject_route(
        s: &DecodeSession,
        codes: &&[u32],
        out: Option<&&mut [f32]>,
    ) -> Option<(usize, MimiSessionError)> {
        guards::reject_route(s, codes, out)
    }

    fn step(
        s: &mut DecodeSession,
        lanes: &SubPool<'_>,
        codes: &&[u32],
        out: &mut &mut [f32],
    ) -> Result<usize, MimiSessionError> {
        effect_decode_frame(s, lanes, codes, out)
    }

    fn reset(s: &mut DecodeSession) {
        s.reset();
    }

    fn describe(s: &DecodeSession) -> (usize, usize) {
        (s.bytes(), s.max_frames())
    }
}
