//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `sampler` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::SamplerMachineError;
use super::events::{Configure, Event, Reply, Sink};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_actors::speech::sampler::{Rng, Sampler, SamplingParams};

/// Context that persists: the scratch, parameters and generator of one stream.
pub struct SamplerMachine {
    /// Candidate scratch sized for the vocabulary.
    pub sampler: Sampler,
    /// Temperature, top-k, top-p.
    pub params: SamplingParams,
    /// The seeded generator.
    pub rng: Rng,
    /// Its seed (`reseed` restarts from it).
    pub seed: u64,
    /// Tokens replied since configuration.
    pub draws: u64,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for SamplerMachine {
    fn default() -> Self {
        Self {
            sampler: Sampler::new(0),
            params: SamplingParams::GREEDY,
            rng: Rng::new(0),
            seed: 0,
            draws: 0,
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::unconfigured()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl SamplerMachine {
    /// Nothing configured: `configure` is checked first.
    #[state(superstate = "sampler")]
    fn unconfigured(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Configure(c) if guard_params_invalid(c) => {
                internal!(
                    self,
                    guard_params_invalid,
                    effect_reject_params(self, c, context)
                )
            }
            Event::Configure(c) => transition!(
                self,
                guard_params_valid,
                effect_configure(self, c, context),
                State::ready()
            ),
            Event::Sample(_) => {
                internal!(self, always, effect_reject_not_configured(self, context))
            }
            _ => Super,
        }
    }

    /// Configured: logits are checked, then routed greedy or sampled.
    #[state(superstate = "sampler")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Configure(c) if guard_params_invalid(c) => {
                internal!(
                    self,
                    guard_params_invalid,
                    effect_reject_params(self, c, context)
                )
            }
            Event::Configure(c) => {
                internal!(self, guard_params_valid, effect_configure(self, c, context))
            }
            Event::Sample(l) if guard_logits_invalid(self, l) => {
                internal!(
                    self,
                    guard_logits_invalid,
                    effect_reject_logits(self, l, context)
                )
            }
            Event::Sample(l) if guard_route_greedy(self) => transition!(
                self,
                guard_route_greedy,
                effect_argmax(self, l, context),
                State::sampling()
            ),
            Event::Sample(l) => transition!(
                self,
                guard_route_sampled,
                effect_draw(self, l, context),
                State::sampling()
            ),
            Event::Reseed => internal!(self, always, effect_reseed(self, context)),
            _ => Super,
        }
    }

    /// A token picked; waits for `sample_done` / `sample_error`.
    #[state(superstate = "sampler")]
    fn sampling(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::SampleDone(t) => transition!(
                self,
                always,
                effect_reply_token(self, *t, context),
                State::ready()
            ),
            Event::SampleError(e) => transition!(
                self,
                always,
                effect_reply_sample_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Reset and diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn sampler(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Reset => transition!(
                self,
                always,
                effect_reset(self, context),
                State::unconfigured()
            ),
            Event::CaptureDiagnostics => {
                internal!(self, always, effect_capture_diagnostics(self, context))
            }
            other => internal!(
                self,
                always,
                effect_reject_unexpected(self, other.kind(), context)
            ),
        }
    }
}

/// The table name of a leaf state.
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Unconfigured {} => "unconfigured",
        State::Ready {} => "ready",
        State::Sampling {} => "sampling",
    }
}

crate::machine_hooks!(SamplerMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct LogitsSampler {
    sm: StateMachine<SamplerMachine>,
}

crate::machine_handle! {
    /// A sampler in `unconfigured`.
    LogitsSampler for SamplerMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(SamplerMachineError::Unexpected { event, state }),
    }
}

impl LogitsSampler {
    /// A configured sampler (typed error for invalid parameters).
    pub fn configured(c: Configure) -> Result<Self, SamplerMachineError> {
        let mut s = Self::new();
        match s.handle(&Event::Configure(c)) {
            Reply::Ok => Ok(s),
            Reply::Error(e) => Err(e),
            _ => Err(SamplerMachineError::Unexpected {
                event: "configure",
                state: s.state(),
            }),
        }
    }

    /// Pick a token from `logits`.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplerMachineError> {
        match self.handle(&Event::Sample(logits)) {
            Reply::Token(t) => Ok(t),
            Reply::Error(e) => Err(e),
            _ => Err(SamplerMachineError::Unexpected {
                event: "sample",
                state: self.state(),
            }),
        }
    }
}
