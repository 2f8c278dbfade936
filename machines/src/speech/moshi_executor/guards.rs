//! Pure predicates choosing `moshi_executor`'s edges.

use super::events::{BindSession, Initialize, Step, WeightsSource};
use super::machine::ExecutorMachine;
use voxlane_actors::speech::moshi::model::state_floats;
use voxlane_actors::speech::moshi::weights::check_file;
use voxlane_runtime::weights::WeightFile;
use voxlane_runtime::Fork;

/// Below this width a frame's matmuls are too small to pay for a fork.
pub const LANES_MIN_DIM: usize = 256;

/// The configuration is inconsistent.
pub fn guard_config_invalid(i: &Initialize) -> bool {
    i.config.validate().is_err()
}

/// The config is valid but the checkpoint's tensors do not match it
/// (header only: nothing is converted).
pub fn guard_tensors_invalid(i: &Initialize) -> bool {
    !guard_config_invalid(i)
        && match &i.weights {
            WeightsSource::File(path) => {
                WeightFile::open(path).map_or(true, |f| check_file(&i.config, &f).is_err())
            }
            WeightsSource::Random(_) => false,
        }
}

/// Config and tensors agree.
pub fn guard_init_valid(i: &Initialize) -> bool {
    !guard_config_invalid(i) && !guard_tensors_invalid(i)
}

/// A sampling parameter is invalid for the model's vocabularies.
pub fn guard_sampling_invalid(m: &ExecutorMachine, b: &BindSession) -> bool {
    m.model.as_ref().is_some_and(|lm| {
        let c = lm.config();
        b.sampling.text.validate(c.text_card).is_err() || b.sampling.audio.validate(c.card).is_err()
    })
}

/// Bytes a session's KV rings and buffers take.
pub fn session_bytes(m: &ExecutorMachine) -> usize {
    m.model
        .as_ref()
        .map_or(0, |lm| 4 * state_floats(lm.config(), 1))
}

/// The session would exceed its capacity.
pub fn guard_capacity_exceeded(m: &ExecutorMachine, b: &BindSession) -> bool {
    b.capacity_bytes.is_some_and(|cap| session_bytes(m) > cap)
}

/// Valid sampling and within capacity.
pub fn guard_capacity_fits(m: &ExecutorMachine, b: &BindSession) -> bool {
    !guard_sampling_invalid(m, b) && !guard_capacity_exceeded(m, b)
}

/// Wrong number of codes, a code outside its codebook, or forced tokens
/// of the wrong count or outside their vocabulary.
pub fn guard_codes_invalid(m: &ExecutorMachine, s: &Step<'_>) -> bool {
    super::actions::check_step(m, s).is_err()
}

/// The frame runs on the caller alone: a budget of one thread, or a model
/// too narrow for forks to pay.
pub fn guard_route_serial(m: &ExecutorMachine) -> bool {
    let narrow = m
        .model
        .as_ref()
        .is_some_and(|lm| lm.config().dim < LANES_MIN_DIM);
    narrow || m.pool.as_ref().is_none_or(|p| p.threads() == 1)
}

/// The frame forks its projections and attention heads over the lanes.
pub fn guard_route_lanes(m: &ExecutorMachine) -> bool {
    !guard_route_serial(m)
}

/// The step carries a text token to force.
pub fn guard_text_forced(m: &ExecutorMachine) -> bool {
    m.session.as_ref().is_some_and(|s| s.forced_text.is_some())
}

/// The text token is drawn by the text sampler.
pub fn guard_text_sampled(m: &ExecutorMachine) -> bool {
    !guard_text_forced(m)
}

/// The step carries audio tokens to force.
pub fn guard_audio_forced(m: &ExecutorMachine) -> bool {
    m.session.as_ref().is_some_and(|s| s.audio_forced)
}

/// Audio tokens are drawn by the audio sampler.
pub fn guard_audio_sampled(m: &ExecutorMachine) -> bool {
    !guard_audio_forced(m)
}

/// The call produced an output frame.
pub fn guard_frame_ready(m: &ExecutorMachine) -> bool {
    m.session.as_ref().is_some_and(|s| s.frame.is_some())
}

/// One of the first `max_delay` calls: no frame yet.
pub fn guard_frame_pending(m: &ExecutorMachine) -> bool {
    !guard_frame_ready(m)
}
