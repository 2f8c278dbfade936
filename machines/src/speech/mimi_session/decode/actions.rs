//! Effects of `mimi_decode_session`: the code-count and code-range
//! rejections and one decoder step (allocation-free: the state was sized at bind).

use super::guards::{codebook_size, first_out_of_range, frames_of};
use crate::speech::mimi_session::{DecodeSession, MimiSessionError};
use voxlane_runtime::SubPool;

/// Name what is wrong with the push's size: the code count, else the output.
pub fn effect_reject_code_count(
    s: &DecodeSession,
    codes: &[u32],
    out: Option<&&mut [f32]>,
) -> MimiSessionError {
    match frames_of(s, codes) {
        Some(frames) => MimiSessionError::OutputSize {
            got: out.map_or(0, |o| o.len()),
            expected: frames * s.model().frame_size(),
        },
        None => MimiSessionError::WrongCodeCount {
            got: codes.len(),
            codebooks: s.model().num_codebooks(),
            max_frames: s.max_frames(),
        },
    }
}

/// Name the first code at or above the codebook size, with its codebook and frame.
pub fn effect_reject_code(s: &DecodeSession, codes: &[u32]) -> MimiSessionError {
    let frames = frames_of(s, codes).unwrap_or(1).max(1);
    let (i, code) = first_out_of_range(s, codes).unwrap_or((0, 0));
    MimiSessionError::CodeOutOfRange {
        code,
        codebook: i / frames,
        frame: i % frames,
        codebook_size: codebook_size(s),
    }
}

/// Decode `codes: [K, frames]` into `pcm`; returns the frames.
pub fn effect_decode_frame(
    s: &mut DecodeSession,
    lanes: &SubPool<'_>,
    codes: &[u32],
    pcm: &mut [f32],
) -> Result<usize, MimiSessionError> {
    let frames = frames_of(s, codes).unwrap_or(0);
    s.step(lanes, codes, frames, pcm)
        .map(|()| frames)
        .map_err(|e| MimiSessionError::Step(e.to_string()))
}
