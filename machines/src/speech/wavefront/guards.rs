//! Pure predicates choosing `speech_wavefront`'s edges.

use super::machine::WavefrontMachine;
use super::stages::Stages;
use crate::core::Slot;
use voxlane_runtime::Fork;

/// The stages do not fit together (or a session is not open).
pub fn guard_stages_invalid(s: &Slot<Box<Stages>>) -> bool {
    s.peek(|s| s.is_none_or(|s| s.shape().is_err()))
}

/// The stages fit: one frame size, the LM's codebooks within Mimi's.
pub fn guard_stages_valid(s: &Slot<Box<Stages>>) -> bool {
    !guard_stages_invalid(s)
}

/// Stages are bound.
pub fn guard_stages_bound(m: &WavefrontMachine) -> bool {
    m.stages.is_some()
}

/// No stages.
pub fn guard_stages_unbound(m: &WavefrontMachine) -> bool {
    !guard_stages_bound(m)
}

/// The input frame has the wrong length or a non-finite sample.
pub fn guard_frame_invalid(m: &WavefrontMachine, pcm: &[f32]) -> bool {
    pcm.len() != m.shape.frame_size || pcm.iter().any(|x| !x.is_finite())
}

/// The stages run one after another on the caller: a budget of one thread.
pub fn guard_split_serial(m: &WavefrontMachine) -> bool {
    m.stages.as_ref().is_none_or(|s| s.pool.threads() == 1)
}

/// The stages run as three jobs on the pool: the LM on the caller, encode
/// and decode on a lane, each stage's own forks on whatever lanes are idle.
pub fn guard_split_parallel(m: &WavefrontMachine) -> bool {
    !guard_split_serial(m)
}

/// Nothing is in flight: a flush has nothing left to bring out.
pub fn guard_pipeline_empty(m: &WavefrontMachine) -> bool {
    m.slots.in_flight() == 0
}

/// The tick brought no frame out (the first two ticks, or the LM's own delay).
pub fn guard_output_pending(m: &WavefrontMachine) -> bool {
    m.slots.out.is_none()
}

/// The frame out answers the input frame two ticks back.
pub fn guard_output_attributed(m: &WavefrontMachine) -> bool {
    m.slots
        .out
        .is_some_and(|(seq, _)| Some(seq) == m.expected_seq())
}

/// A frame came out that does not answer the input two ticks back.
pub fn guard_output_misattributed(m: &WavefrontMachine) -> bool {
    !guard_output_pending(m) && !guard_output_attributed(m)
}
