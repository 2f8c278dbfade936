//! Events `logits_sampler` accepts, its replies and its sink.

use super::errors::SamplerMachineError;
use voxlane_actors::speech::sampler::SamplingParams;
use voxlane_runtime::DiagnosticsSnapshot;

/// Size the sampler and set its parameters and seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Configure {
    /// Logits per draw.
    pub vocab: usize,
    /// Temperature, top-k, top-p.
    pub params: SamplingParams,
    /// Seed of the generator (a seed fixes every draw).
    pub seed: u64,
}

/// Everything the machine reacts to (`sample_*` outcomes are its own).
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// Set up (or reconfigure) the sampler.
    Configure(Configure),
    /// Pick a token from these logits.
    Sample(&'a [f32]),
    /// Outcome: the token picked.
    SampleDone(u32),
    /// Outcome: the draw failed.
    SampleError(SamplerMachineError),
    /// Restart the generator from its seed.
    Reseed,
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
    /// Back to `unconfigured`.
    Reset,
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Configure(_) => "configure",
            Self::Sample(_) => "sample",
            Self::SampleDone(_) => "sample_done",
            Self::SampleError(_) => "sample_error",
            Self::Reseed => "reseed",
            Self::CaptureDiagnostics => "capture_diagnostics",
            Self::Reset => "reset",
        }
    }
}

/// What the machine replies.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `configure` accepted (also `reseed`, `reset`).
    Ok,
    /// `sample_done`: the token.
    Token(u32),
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// The request was rejected or failed.
    Error(SamplerMachineError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
}

/// Outcome events an action can raise.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowUp {
    /// See [`Event::SampleDone`].
    SampleDone(u32),
    /// See [`Event::SampleError`].
    SampleError(SamplerMachineError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::SampleDone(t) => Event::SampleDone(t),
            Self::SampleError(e) => Event::SampleError(e),
        }
    }
}
