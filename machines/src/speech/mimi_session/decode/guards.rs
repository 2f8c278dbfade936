//! Pure predicates of `mimi_decode_session`: the push must be whole frames
//! of K codes (at most the bound count) with a `frames · 1920` output, and
//! every code must be below the codebook size.

use super::actions::{effect_reject_code, effect_reject_code_count};
use crate::speech::mimi_session::{DecodeSession, MimiSessionError};

/// Reject route indices, in table order.
pub mod route {
    /// Wrong code count or output length.
    pub const CODE_COUNT: usize = 0;
    /// A code at or above the codebook size.
    pub const CODE_RANGE: usize = 1;
}

/// Code frames `codes` holds, if it is 1 to `max_frames` whole frames of K codes.
pub fn frames_of(s: &DecodeSession, codes: &[u32]) -> Option<usize> {
    let k = s.model().num_codebooks();
    let frames = codes.len() / k.max(1);
    (k > 0 && codes.len().is_multiple_of(k) && (1..=s.max_frames()).contains(&frames))
        .then_some(frames)
}

/// Entries per codebook (`quantizer.bins`).
pub fn codebook_size(s: &DecodeSession) -> usize {
    s.model().config().quantizer.bins
}

/// The first code at or above the codebook size, as `(index, code)`.
pub fn first_out_of_range(s: &DecodeSession, codes: &[u32]) -> Option<(usize, u32)> {
    let bins = codebook_size(s);
    codes
        .iter()
        .enumerate()
        .find(|(_, &c)| c as usize >= bins)
        .map(|(i, &c)| (i, c))
}

/// Not whole frames of K codes within the bound, or the output does not fit.
pub fn guard_code_count_wrong(s: &DecodeSession, codes: &[u32], out: Option<&&mut [f32]>) -> bool {
    match (frames_of(s, codes), out) {
        (Some(frames), Some(out)) => out.len() != frames * s.model().frame_size(),
        _ => true,
    }
}

/// Well-sized, but a code is at or above the codebook size.
pub fn guard_code_out_of_range(s: &DecodeSession, codes: &[u32], out: Option<&&mut [f32]>) -> bool {
    !guard_code_count_wrong(s, codes, out) && first_out_of_range(s, codes).is_some()
}

/// Well-sized, every code in range: one decoder step.
pub fn guard_codes_valid(s: &DecodeSession, codes: &[u32], out: Option<&&mut [f32]>) -> bool {
    !guard_code_count_wrong(s, codes, out) && !guard_code_out_of_range(s, codes, out)
}

/// The reject route `codes` takes, with its typed error, or `None` if it runs.
pub fn reject_route(
    s: &DecodeSession,
    codes: &[u32],
    out: Option<&&mut [f32]>,
) -> Option<(usize, MimiSessionError)> {
    if guard_code_count_wrong(s, codes, out) {
        Some((route::CODE_COUNT, effect_reject_code_count(s, codes, out)))
    } else if guard_code_out_of_range(s, codes, out) {
        Some((route::CODE_RANGE, effect_reject_code(s, codes)))
    } else {
        None
    }
}
