//! Events `kokoro_acoustic` accepts, the outcomes it replies with, and its sink.

use super::errors::KokoroAcousticError;
use crate::tts::Slot;
use voxlane_actors::tts::kokoro::bind_cache::BindCache;
use voxlane_actors::tts::kokoro::front::FrontOutput;
use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// Bind the front half's weights from an open ONNX export.
#[derive(Clone, Copy)]
pub struct Load<'a> {
    /// The Kokoro export (memory-mapped; read during the load only).
    pub model: &'a OnnxModel,
    /// The int8 convs' packed weights for this route, where a bind cache has them.
    pub cache: Option<&'a BindCache>,
}

impl std::fmt::Debug for Load<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Load").finish_non_exhaustive()
    }
}

/// Run one chunk.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// Token ids padded with 0 at both ends.
    pub tokens: &'a [i64],
    /// The voice's style row for this chunk (256 values).
    pub style: &'a [f32],
    /// Speaking rate (used when durations are predicted).
    pub speed: f32,
    /// Per-token frame counts to impose instead of predicting them.
    pub durations: Option<&'a [usize]>,
    /// The lanes to compute on.
    pub lanes: &'a LanePool,
}

impl std::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("tokens", &self.tokens.len())
            .field("style", &self.style.len())
            .field("speed", &self.speed)
            .field("durations", &self.durations.map(<[usize]>::len))
            .finish_non_exhaustive()
    }
}

/// Everything the machine reacts to. `load_*` and `front_*` outcomes are
/// raised by the machine's own actions; callers send the others.
#[derive(Debug)]
pub enum Event<'a> {
    /// Bind the weights.
    Load(Load<'a>),
    /// Outcome: the weights are bound.
    LoadDone,
    /// Outcome: binding failed.
    LoadError(Slot<KokoroAcousticError>),
    /// Run one chunk.
    Run(Run<'a>),
    /// Outcome: the chunk's front output.
    FrontDone(Slot<FrontOutput>),
    /// Outcome: the network failed on the chunk.
    FrontError(Slot<KokoroAcousticError>),
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Load(_) => "load",
            Self::LoadDone => "load_done",
            Self::LoadError(_) => "load_error",
            Self::Run(_) => "run",
            Self::FrontDone(_) => "front_done",
            Self::FrontError(_) => "front_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }
}

/// Which duration route a run took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationRoute {
    /// Predicted by the prosody predictor at the given speed.
    Predicted,
    /// Imposed by the caller.
    Reference,
}

/// What the machine replies to one request.
#[derive(Debug)]
pub enum Reply {
    /// `load_done`: bound, with this vocab size.
    Loaded {
        /// Token ids the model knows (0..vocab).
        vocab: usize,
    },
    /// `front_done`: the chunk's output and the route it took.
    Front(Box<FrontOutput>, DurationRoute),
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: the request was rejected or failed.
    Error(KokoroAcousticError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply to the caller, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
    /// The route of the run in flight.
    pub route: Option<DurationRoute>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::LoadDone`].
    LoadDone,
    /// See [`Event::LoadError`].
    LoadError(KokoroAcousticError),
    /// See [`Event::FrontDone`].
    FrontDone(Box<FrontOutput>),
    /// See [`Event::FrontError`].
    FrontError(KokoroAcousticError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::LoadDone => Event::LoadDone,
            Self::LoadError(e) => Event::LoadError(Slot::new(e)),
            Self::FrontDone(o) => Event::FrontDone(Slot::new(*o)),
            Self::FrontError(e) => Event::FrontError(Slot::new(e)),
        }
    }
}
