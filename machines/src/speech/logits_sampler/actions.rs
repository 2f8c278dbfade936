//! Effects of `logits_sampler`'s edges. The draw raises `sample_done` /
//! `sample_error` instead of choosing a state.

use super::errors::SamplerMachineError;
use super::events::{Configure, FollowUp, Reply, Sink};
use super::machine::SamplerMachine;
use voxlane_actors::speech::sampler::{argmax, Rng, Sampler, SamplerError};

fn reject(m: &mut SamplerMachine, sink: &mut Sink, err: SamplerMachineError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Reject parameters the vocabulary does not allow.
pub fn effect_reject_params(m: &mut SamplerMachine, c: &Configure, sink: &mut Sink) {
    // The guard held: an empty vocabulary or a parameter error.
    let err = match c.params.validate(c.vocab) {
        Err(e) if c.vocab > 0 => e.into(),
        _ => SamplerMachineError::EmptyVocab,
    };
    reject(m, sink, err);
}

/// Size the scratch (only when the vocabulary changes), set parameters and seed.
pub fn effect_configure(m: &mut SamplerMachine, c: &Configure, sink: &mut Sink) {
    if m.sampler.vocab() != c.vocab {
        m.sampler = Sampler::new(c.vocab);
    }
    m.params = c.params;
    m.seed = c.seed;
    m.rng = Rng::new(c.seed);
    sink.reply = Some(Reply::Ok);
}

/// Reject `sample` before `configure`.
pub fn effect_reject_not_configured(m: &mut SamplerMachine, sink: &mut Sink) {
    reject(m, sink, SamplerMachineError::NotConfigured);
}

/// Reject logits of the wrong length or with NaN.
pub fn effect_reject_logits(m: &mut SamplerMachine, logits: &[f32], sink: &mut Sink) {
    let err = match logits.iter().position(|v| v.is_nan()) {
        Some(i) if logits.len() == m.sampler.vocab() => SamplerError::NanLogits(i),
        _ => SamplerError::Vocab {
            got: logits.len(),
            vocab: m.sampler.vocab(),
        },
    };
    reject(m, sink, err.into());
}

/// Argmax (first index on ties); raise `sample_done`.
pub fn effect_argmax(_m: &mut SamplerMachine, logits: &[f32], sink: &mut Sink) {
    sink.follow_up = Some(FollowUp::SampleDone(argmax(logits) as u32));
}

/// Draw with temperature, top-k and top-p; raise `sample_done` or `sample_error`.
pub fn effect_draw(m: &mut SamplerMachine, logits: &[f32], sink: &mut Sink) {
    let SamplerMachine {
        sampler,
        params,
        rng,
        ..
    } = m;
    sink.follow_up = Some(match sampler.sample(logits, params, rng) {
        Ok(t) => FollowUp::SampleDone(t),
        Err(e) => FollowUp::SampleError(e.into()),
    });
}

/// Reply `sample_done` with the token.
pub fn effect_reply_token(m: &mut SamplerMachine, token: u32, sink: &mut Sink) {
    m.draws += 1;
    sink.reply = Some(Reply::Token(token));
}

/// Reply `sample_error`.
pub fn effect_reply_sample_error(m: &mut SamplerMachine, e: &SamplerMachineError, sink: &mut Sink) {
    reject(m, sink, e.clone());
}

/// Restart the generator from the seed.
pub fn effect_reseed(m: &mut SamplerMachine, sink: &mut Sink) {
    m.rng = Rng::new(m.seed);
    sink.reply = Some(Reply::Ok);
}

/// Forget the configuration.
pub fn effect_reset(m: &mut SamplerMachine, sink: &mut Sink) {
    m.sampler = Sampler::new(0);
    m.params = voxlane_actors::speech::sampler::SamplingParams::GREEDY;
    m.draws = 0;
    sink.reply = Some(Reply::Ok);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut SamplerMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut SamplerMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, SamplerMachineError::Unexpected { event, state });
}
