//! Pure predicates choosing `logits_sampler`'s edges.

use super::events::Configure;
use super::machine::SamplerMachine;

/// The parameters are invalid for the vocabulary (or the vocabulary is empty).
pub fn guard_params_invalid(c: &Configure) -> bool {
    c.vocab == 0 || c.params.validate(c.vocab).is_err()
}

/// The parameters are valid for a non-empty vocabulary.
pub fn guard_params_valid(c: &Configure) -> bool {
    !guard_params_invalid(c)
}

/// The logits do not fit the configured vocabulary or contain NaN.
pub fn guard_logits_invalid(m: &SamplerMachine, logits: &[f32]) -> bool {
    logits.len() != m.sampler.vocab() || logits.iter().any(|v| v.is_nan())
}

/// Temperature 0: argmax.
pub fn guard_route_greedy(m: &SamplerMachine) -> bool {
    !m.params.is_sampling()
}

/// Temperature > 0: a seeded draw with top-k / top-p.
pub fn guard_route_sampled(m: &SamplerMachine) -> bool {
    m.params.is_sampling()
}
