//! Pure predicates choosing `moshi_executor`'s edges.

use super::events::{BindSession, Initialize, Step, WeightsSource};
use super::machine::ExecutorMachine;
use voxlane_actors::speech::moshi::model::state_floats;
use voxlane_actors::speech::moshi::weights::check_file;
use voxlane_actors::speech::moshi::{PromptFrame, PREFILL_CHUNK};
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

/// The bound model is PersonaPlex: its depformer predicts both speakers
/// (`dep_q == n_q`), so its session keeps PersonaPlex's ring.
pub fn guard_persona_model(m: &ExecutorMachine) -> bool {
    m.model.as_ref().is_some_and(|lm| {
        let c = lm.config();
        c.dep_q == c.n_q
    })
}

/// Bytes a session's KV rings and buffers take (a PersonaPlex session
/// holds [`PREFILL_CHUNK`] rows for its batched prompt).
pub fn session_bytes(m: &ExecutorMachine) -> usize {
    let rows = if guard_persona_model(m) {
        PREFILL_CHUNK
    } else {
        1
    };
    m.model
        .as_ref()
        .map_or(0, |lm| 4 * state_floats(lm.config(), rows))
}

/// The session would exceed its capacity.
pub fn guard_capacity_exceeded(m: &ExecutorMachine, b: &BindSession) -> bool {
    b.capacity_bytes.is_some_and(|cap| session_bytes(m) > cap)
}

/// Valid sampling and within capacity.
pub fn guard_capacity_fits(m: &ExecutorMachine, b: &BindSession) -> bool {
    !guard_sampling_invalid(m, b) && !guard_capacity_exceeded(m, b)
}

/// Fits, on a PersonaPlex model: the session keeps PersonaPlex's ring.
pub fn guard_persona_fits(m: &ExecutorMachine, b: &BindSession) -> bool {
    guard_capacity_fits(m, b) && guard_persona_model(m)
}

/// Fits, on a Moshi model: the session keeps Kyutai's ring.
pub fn guard_moshi_fits(m: &ExecutorMachine, b: &BindSession) -> bool {
    guard_capacity_fits(m, b) && !guard_persona_model(m)
}

/// Prompt calls the session cannot take: not PersonaPlex, or codes or
/// tokens of the wrong count or outside their vocabulary.
pub fn guard_prefill_invalid(m: &ExecutorMachine, p: &[PromptFrame]) -> bool {
    super::actions::check_prefill(m, p).is_err()
}

/// Prompt calls a PersonaPlex session takes.
pub fn guard_prefill_valid(m: &ExecutorMachine, p: &[PromptFrame]) -> bool {
    !guard_prefill_invalid(m, p)
}

/// A saved embedding the session cannot take: not PersonaPlex, or not `dim` finite values.
pub fn guard_embedding_invalid(m: &ExecutorMachine, e: &[f32]) -> bool {
    super::actions::check_embedding(m, e).is_err()
}

/// A saved embedding a PersonaPlex session takes.
pub fn guard_embedding_valid(m: &ExecutorMachine, e: &[f32]) -> bool {
    !guard_embedding_invalid(m, e)
}

/// A saved token ring the session cannot take: not PersonaPlex, or the wrong size or values.
pub fn guard_tokens_invalid(m: &ExecutorMachine, t: &[i64]) -> bool {
    super::actions::check_tokens(m, t).is_err()
}

/// A saved token ring a PersonaPlex session takes.
pub fn guard_tokens_valid(m: &ExecutorMachine, t: &[i64]) -> bool {
    !guard_tokens_invalid(m, t)
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

/// The step carries a text token to force (or PersonaPlex's ring provides one).
pub fn guard_text_forced(m: &ExecutorMachine) -> bool {
    m.session.as_ref().is_some_and(|s| s.forced_text.is_some())
}

/// The text token is drawn by the text sampler.
pub fn guard_text_sampled(m: &ExecutorMachine) -> bool {
    !guard_text_forced(m)
}

/// The codebook just stepped is forced (given with the step, or provided
/// in PersonaPlex's ring).
pub fn guard_audio_forced(m: &ExecutorMachine) -> bool {
    m.session
        .as_ref()
        .is_some_and(|s| s.forced_mask.get(s.k).copied().unwrap_or(false))
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
