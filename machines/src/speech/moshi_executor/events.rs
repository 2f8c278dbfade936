//! Events `moshi_executor` accepts, its replies and its sink.

use super::errors::MoshiExecutorError;
use crate::core::Slot;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::moshi::config::MAX_DEP_Q;
use voxlane_actors::speech::moshi::{
    CacheUse, LmWeights, MoshiConfig, PromptFrame, StreamSampling,
};
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// Where the weights come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightsSource {
    /// A safetensors checkpoint in the official naming.
    File(PathBuf),
    /// Seeded random weights generated in the route's format (benchmarks).
    Random(u64),
}

/// Validate the config against the tensors and bind the model.
#[derive(Debug, Clone)]
pub struct Initialize {
    /// The LM configuration.
    pub config: MoshiConfig,
    /// The weights.
    pub weights: WeightsSource,
    /// Storage of the linears (f32 / bf16 / q8_0 / q4_0 / as stored).
    pub route: LmWeights,
    /// The lane pool every frame forks on (its budget is the thread budget).
    pub pool: Arc<LanePool>,
    /// Keep converted linears here (`$VOXLANE_HOME/weights`): the next
    /// load of the same checkpoint and route maps them instead of converting.
    pub cache_dir: Option<PathBuf>,
}

/// Open the session: samplers, seed, and a capacity for its buffers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BindSession {
    /// Sampling of the text and audio streams.
    pub sampling: StreamSampling,
    /// Seed of both samplers (a seed fixes the run).
    pub seed: u64,
    /// The most bytes the session's KV rings and buffers may take (`None`: no cap).
    pub capacity_bytes: Option<usize>,
}

/// One frame: the other speaker's codes, and tokens to force, if any.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The other speaker's codes: `n_q − dep_q` (Moshi) or `n_q / 2` (PersonaPlex).
    pub other_codes: &'a [u32],
    /// Teacher-forced text token.
    pub forced_text: Option<u32>,
    /// Teacher-forced audio tokens: `dep_q` (Moshi), or the agent's
    /// `n_q / 2` codes at their delays (PersonaPlex's provided tokens).
    pub forced_audio: Option<&'a [u32]>,
}

/// Tokens of one output frame: the text token then `dep_q` audio tokens,
/// in a fixed array (no allocation per frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTokens {
    len: usize,
    tokens: [u32; 1 + MAX_DEP_Q],
}

impl FrameTokens {
    /// The frame's tokens from a slice of at most `1 + MAX_DEP_Q`.
    pub fn new(t: &[u32]) -> Self {
        let mut tokens = [0; 1 + MAX_DEP_Q];
        let len = t.len().min(tokens.len());
        tokens[..len].copy_from_slice(&t[..len]);
        Self { len, tokens }
    }

    /// Text token, then the audio tokens.
    pub fn as_slice(&self) -> &[u32] {
        &self.tokens[..self.len]
    }
}

/// Everything the machine reacts to (outcomes are raised by its own actions).
#[derive(Debug)]
pub enum Event<'a> {
    /// Bind the model.
    Initialize(Box<Initialize>),
    /// Outcome: the model is bound.
    InitializeDone,
    /// Outcome: binding failed.
    InitializeError(Slot<MoshiExecutorError>),
    /// Open the session.
    BindSession(BindSession),
    /// Outcome: the session is open.
    BindDone,
    /// Outcome: opening failed.
    BindError(Slot<MoshiExecutorError>),
    /// Run one frame.
    Step(Step<'a>),
    /// PersonaPlex: prompt calls whose every stream is provided, batched
    /// through the temporal transformer (the depformer skipped).
    Prefill(&'a [PromptFrame]),
    /// Outcome: the prompt calls are in the KV rings and the token ring.
    PrefillDone,
    /// PersonaPlex: one call from a saved voice-prompt embedding (`[dim]`).
    StepEmbedding(&'a [f32]),
    /// PersonaPlex: replace the token ring with a saved one (`[streams][max_delay + 3]`).
    RestoreTokens(&'a [i64]),
    /// Outcome: PersonaPlex's first call (its ring has nothing to step yet).
    CallPending,
    /// Outcome: the temporal transformer stepped (text logits ready).
    TemporalDone,
    /// Outcome: a depformer step ran (codebook logits ready).
    DepformerDone,
    /// Outcome: every token of the frame is chosen and stored.
    StepDone,
    /// Outcome: the frame failed.
    StepError(Slot<MoshiExecutorError>),
    /// Back to the session's first frame (samplers reseeded).
    ResetSession,
    /// Drop the session and the model; only `reset` leaves `closed`.
    Close,
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
    /// Back to `uninitialized`.
    Reset,
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Initialize(_) => "initialize",
            Self::InitializeDone => "initialize_done",
            Self::InitializeError(_) => "initialize_error",
            Self::BindSession(_) => "bind_session",
            Self::BindDone => "bind_done",
            Self::BindError(_) => "bind_error",
            Self::Step(_) => "step",
            Self::Prefill(_) => "prefill",
            Self::PrefillDone => "prefill_done",
            Self::StepEmbedding(_) => "step_embedding",
            Self::RestoreTokens(_) => "restore_tokens",
            Self::CallPending => "call_pending",
            Self::TemporalDone => "temporal_done",
            Self::DepformerDone => "depformer_done",
            Self::StepDone => "step_done",
            Self::StepError(_) => "step_error",
            Self::ResetSession => "reset_session",
            Self::Close => "close",
            Self::CaptureDiagnostics => "capture_diagnostics",
            Self::Reset => "reset",
        }
    }
}

/// What the machine replies.
#[derive(Debug)]
pub enum Reply {
    /// `initialize_done`.
    Initialized {
        /// Weight bytes one frame streams.
        frame_bytes: usize,
        /// How the converted-weights cache was used.
        cache: CacheUse,
    },
    /// `bind_done`: the session's KV rings and buffers.
    SessionOpened {
        /// Bytes allocated.
        bytes: usize,
    },
    /// `step_done` with an output frame.
    Frame(FrameTokens),
    /// `step_done` during the first `max_delay` calls: no frame yet.
    Pending,
    /// `prefill_done`: the calls taken.
    Prefilled {
        /// Prompt calls stepped.
        calls: usize,
    },
    /// `reset`, `reset_session`, `close`.
    Ok,
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// The request was rejected or failed.
    Error(MoshiExecutorError),
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
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::InitializeDone`].
    InitializeDone,
    /// See [`Event::InitializeError`].
    InitializeError(MoshiExecutorError),
    /// See [`Event::BindDone`].
    BindDone,
    /// See [`Event::BindError`].
    BindError(MoshiExecutorError),
    /// See [`Event::TemporalDone`].
    TemporalDone,
    /// See [`Event::DepformerDone`].
    DepformerDone,
    /// See [`Event::StepDone`].
    StepDone,
    /// See [`Event::StepError`].
    StepError(MoshiExecutorError),
    /// See [`Event::PrefillDone`].
    PrefillDone,
    /// See [`Event::CallPending`].
    CallPending,
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::InitializeDone => Event::InitializeDone,
            Self::InitializeError(e) => Event::InitializeError(Slot::new(e)),
            Self::BindDone => Event::BindDone,
            Self::BindError(e) => Event::BindError(Slot::new(e)),
            Self::TemporalDone => Event::TemporalDone,
            Self::DepformerDone => Event::DepformerDone,
            Self::StepDone => Event::StepDone,
            Self::StepError(e) => Event::StepError(Slot::new(e)),
            Self::PrefillDone => Event::PrefillDone,
            Self::CallPending => Event::CallPending,
        }
    }
}
