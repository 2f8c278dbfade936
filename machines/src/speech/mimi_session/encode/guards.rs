//! Pure predicates of `mimi_encode_session`: the push must be whole frames
//! (at most the bound count) and the code slots must hold `K · frames`.

use super::actions::effect_reject_frame_size;
use crate::speech::mimi_session::{EncodeSession, MimiSessionError};

/// Reject route indices, in table order.
pub mod route {
    /// Wrong PCM length or code-slot count.
    pub const FRAME_SIZE: usize = 0;
}

/// Code frames `pcm` holds, if it is 1 to `max_frames` whole frames.
pub fn frames_of(s: &EncodeSession, pcm: &[f32]) -> Option<usize> {
    let fs = s.model().frame_size();
    let frames = pcm.len() / fs.max(1);
    (fs > 0 && pcm.len().is_multiple_of(fs) && (1..=s.max_frames()).contains(&frames))
        .then_some(frames)
}

/// The PCM is not whole frames within the bound, or the code slots do not fit.
pub fn guard_frame_size_wrong(s: &EncodeSession, pcm: &[f32], out: Option<&&mut [u32]>) -> bool {
    match (frames_of(s, pcm), out) {
        (Some(frames), Some(out)) => out.len() != s.model().num_codebooks() * frames,
        _ => true,
    }
}

/// Whole frames within the bound, with `K · frames` code slots.
pub fn guard_frame_valid(s: &EncodeSession, pcm: &[f32], out: Option<&&mut [u32]>) -> bool {
    !guard_frame_size_wrong(s, pcm, out)
}

/// The reject route `pcm` takes, with its typed error, or `None` if it runs.
pub fn reject_route(
    s: &EncodeSession,
    pcm: &[f32],
    out: Option<&&mut [u32]>,
) -> Option<(usize, MimiSessionError)> {
    guard_frame_size_wrong(s, pcm, out)
        .then(|| (route::FRAME_SIZE, effect_reject_frame_size(s, pcm, out)))
}
