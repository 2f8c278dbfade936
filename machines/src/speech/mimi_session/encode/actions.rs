//! Effects of `mimi_encode_session`: the frame-size rejection and one
//! encoder step (allocation-free: the state was sized at bind).

use super::guards::frames_of;
use crate::speech::mimi_session::{EncodeSession, MimiSessionError};
use voxlane_runtime::SubPool;

/// Name what is wrong with the push: the PCM length, else the code slots.
pub fn effect_reject_frame_size(
    s: &EncodeSession,
    pcm: &[f32],
    out: Option<&&mut [u32]>,
) -> MimiSessionError {
    match frames_of(s, pcm) {
        Some(frames) => MimiSessionError::OutputSize {
            got: out.map_or(0, |o| o.len()),
            expected: s.model().num_codebooks() * frames,
        },
        None => MimiSessionError::WrongFrameSize {
            got: pcm.len(),
            frame_size: s.model().frame_size(),
            max_frames: s.max_frames(),
        },
    }
}

/// Encode the frames of `pcm` into `codes: [K, frames]`; returns the frames.
pub fn effect_encode_frame(
    s: &mut EncodeSession,
    lanes: &SubPool<'_>,
    pcm: &[f32],
    codes: &mut [u32],
) -> Result<usize, MimiSessionError> {
    s.step(lanes, pcm, codes)
        .map_err(|e| MimiSessionError::Step(e.to_string()))
}
