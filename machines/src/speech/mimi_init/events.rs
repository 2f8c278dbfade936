//! Events `mimi_init` accepts, the outcomes it replies with, and its sink.

use super::errors::MimiInitError;
use crate::speech::mimi_session::{MimiSession, Side};
use std::cell::RefCell;
use std::path::PathBuf;
use voxlane_actors::speech::mimi::{MimiConfig, MimiOptions, MimiWeights};
use voxlane_runtime::DiagnosticsSnapshot;

/// Where the weights of an `initialize` come from.
#[derive(Debug)]
pub enum WeightsSource {
    /// A safetensors file (checked by header first, converted by the action).
    File(PathBuf),
    /// Weights already in memory (taken out of the slot by the action).
    Memory(RefCell<Option<MimiWeights>>),
}

impl WeightsSource {
    /// In-memory weights.
    pub fn memory(weights: MimiWeights) -> Self {
        Self::Memory(RefCell::new(Some(weights)))
    }
}

/// Check the config and tensors, plan the bind contract and bind the model.
#[derive(Debug)]
pub struct Initialize {
    /// The codec's shapes.
    pub config: MimiConfig,
    /// The weights.
    pub weights: WeightsSource,
    /// Route options (q8_0 transformer linears, q8_0 matmul-route convs).
    pub options: MimiOptions,
}

/// Open a streaming session of one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindSession {
    /// Encode or decode.
    pub side: Side,
    /// The most code frames one push may carry.
    pub max_frames: usize,
    /// Bytes the session's workspace may take.
    pub capacity_bytes: usize,
}

/// Everything the machine reacts to. `initialize_*` and `bind_done` /
/// `bind_error` are outcome events the machine's own actions raise.
#[derive(Debug)]
pub enum MimiInitEvent {
    /// Check, plan and bind a model (boxed: the config is large).
    Initialize(Box<Initialize>),
    /// Outcome: the model is bound.
    InitializeDone,
    /// Outcome: binding the model failed.
    InitializeError(MimiInitError),
    /// Open a session within a capacity.
    BindSession(BindSession),
    /// Outcome: the session is allocated (it waits in the sink).
    BindDone,
    /// Outcome: allocating the session failed.
    BindError(MimiInitError),
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
    /// Drop the model and start over.
    Reset,
}

impl MimiInitEvent {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Initialize(_) => "initialize",
            Self::InitializeDone => "initialize_done",
            Self::InitializeError(_) => "initialize_error",
            Self::BindSession(_) => "bind_session",
            Self::BindDone => "bind_done",
            Self::BindError(_) => "bind_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
            Self::Reset => "reset",
        }
    }
}

/// How many transformer linears took each route, and their packed bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteCounts {
    /// Linears kept in f32: `(count, bytes)`.
    pub f32: (usize, usize),
    /// Linears on the native half route (f16 or bf16 as stored), and with
    /// `bf16_convs` the kernel-route convs on bf16.
    pub half: (usize, usize),
    /// Linears (and, with `q8_convs`, matmul-route convs) quantized to q8_0.
    pub q8_0: (usize, usize),
}

/// What the machine replies to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum InitReply {
    /// `initialize_done`: the model is bound.
    Initialized {
        /// Codebooks per frame (K).
        num_codebooks: usize,
        /// Samples per code frame (1920).
        frame_size: usize,
        /// Entries per codebook.
        codebook_size: usize,
        /// Transformer linear routes.
        routes: RouteCounts,
    },
    /// `bind_done`: the session is in the sink.
    SessionBound {
        /// Its side.
        side: Side,
        /// Its frame bound.
        max_frames: usize,
        /// Bytes its workspace holds.
        bytes: usize,
    },
    /// `reset` done: no model.
    ResetDone,
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: the request was rejected or failed.
    Error(MimiInitError),
}

/// Per-dispatch scratch handed to statig as external context: the reply,
/// the outcome event an action raised, and the session `bind_session` opened.
#[derive(Debug, Default)]
pub struct InitSink {
    /// The reply to the caller, once known.
    pub reply: Option<InitReply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
    /// The session a `bind_session` produced.
    pub session: Option<MimiSession>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowUp {
    /// See [`MimiInitEvent::InitializeDone`].
    InitializeDone,
    /// See [`MimiInitEvent::InitializeError`].
    InitializeError(MimiInitError),
    /// See [`MimiInitEvent::BindDone`].
    BindDone,
    /// See [`MimiInitEvent::BindError`].
    BindError(MimiInitError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> MimiInitEvent {
        match self {
            Self::InitializeDone => MimiInitEvent::InitializeDone,
            Self::InitializeError(e) => MimiInitEvent::InitializeError(e),
            Self::BindDone => MimiInitEvent::BindDone,
            Self::BindError(e) => MimiInitEvent::BindError(e),
        }
    }
}
