//! Events `kokoro_vocoder` accepts, the outcomes it replies with, and its sink.

use super::errors::KokoroVocoderError;
use crate::tts::Slot;
use voxlane_actors::tts::kokoro::bind_cache::BindCache;
use voxlane_actors::tts::kokoro::front::{FrontOutput, STYLE_DIM};
use voxlane_actors::tts::kokoro::window::StreamShape;
use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// Bind the back half's weights from an open ONNX export.
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

/// Decode one chunk's front output to audio.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// `asr [512, F]`, row-major.
    pub asr: &'a [f32],
    /// F0 curve `[2F]`.
    pub f0: &'a [f32],
    /// Energy curve `[2F]`.
    pub n: &'a [f32],
    /// The decoder half of the style row (its first 128 values).
    pub style: &'a [f32],
    /// The lanes to compute on.
    pub lanes: &'a LanePool,
    /// Cut the audio into windows and emit the first early (when the chunk
    /// is long enough for the shape); `None` runs it whole.
    pub stream: Option<StreamShape>,
}

impl<'a> Run<'a> {
    /// The run for a front output and its full 256-value style row (whose first half the decoder takes).
    pub fn from_front(front: &'a FrontOutput, style: &'a [f32], lanes: &'a LanePool) -> Self {
        Self {
            asr: &front.asr,
            f0: &front.f0,
            n: &front.n,
            style: style.get(..STYLE_DIM / 2).unwrap_or(style),
            lanes,
            stream: None,
        }
    }

    /// This run, streamed in windows of `shape`.
    pub fn streamed(self, shape: StreamShape) -> Self {
        Self {
            stream: Some(shape),
            ..self
        }
    }
}

/// Generate the next window of the chunk a streamed `run` began: the same
/// chunk's F0 curve and decoder style (the decoder features stay bound).
#[derive(Clone, Copy)]
pub struct NextWindow<'a> {
    /// The chunk's F0 curve `[2F]`.
    pub f0: &'a [f32],
    /// The decoder half of the style row.
    pub style: &'a [f32],
    /// The lanes to compute on.
    pub lanes: &'a LanePool,
}

impl<'a> NextWindow<'a> {
    /// The next window of the chunk `front` holds, with its full 256-value style row.
    pub fn from_front(front: &'a FrontOutput, style: &'a [f32], lanes: &'a LanePool) -> Self {
        Self {
            f0: &front.f0,
            style: style.get(..STYLE_DIM / 2).unwrap_or(style),
            lanes,
        }
    }
}

impl std::fmt::Debug for NextWindow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NextWindow")
            .field("f0", &self.f0.len())
            .field("style", &self.style.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("asr", &self.asr.len())
            .field("f0", &self.f0.len())
            .field("n", &self.n.len())
            .field("style", &self.style.len())
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// Everything the machine reacts to. `load_*` and `back_*` outcomes are
/// raised by the machine's own actions; callers send the others.
#[derive(Debug)]
pub enum Event<'a> {
    /// Bind the weights.
    Load(Load<'a>),
    /// Outcome: the weights are bound.
    LoadDone,
    /// Outcome: binding failed.
    LoadError(Slot<KokoroVocoderError>),
    /// Decode one chunk.
    Run(Run<'a>),
    /// Outcome: this many samples of audio are in the output buffer.
    BackDone(usize),
    /// Outcome: a window's samples are in the output buffer; more windows follow.
    WindowDone(usize),
    /// Generate the next window of a streamed chunk.
    NextWindow(NextWindow<'a>),
    /// Drop the rest of a streamed chunk.
    Cancel,
    /// Outcome: the network failed on the chunk.
    BackError(Slot<KokoroVocoderError>),
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
            Self::BackDone(_) => "back_done",
            Self::WindowDone(_) => "window_done",
            Self::NextWindow(_) => "next_window",
            Self::Cancel => "cancel",
            Self::BackError(_) => "back_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }
}

/// What the machine replies to one request.
#[derive(Debug)]
pub enum Reply {
    /// `load_done`: bound, taking `asr` of this many channels.
    Loaded {
        /// Channels of `asr` (512).
        asr_channels: usize,
    },
    /// `back_done`: the audio (24 kHz) is in the stage's output buffer (for
    /// a streamed chunk: its last window).
    Audio {
        /// Samples written.
        samples: usize,
    },
    /// `window_done`: a window of a streamed chunk is in the output buffer;
    /// `next_window` gives the next.
    Window {
        /// Samples written.
        samples: usize,
    },
    /// `cancel`: the rest of the streamed chunk was dropped.
    Cancelled,
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: the request was rejected or failed.
    Error(KokoroVocoderError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply to the caller, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::LoadDone`].
    LoadDone,
    /// See [`Event::LoadError`].
    LoadError(KokoroVocoderError),
    /// See [`Event::BackDone`].
    BackDone(usize),
    /// See [`Event::WindowDone`].
    WindowDone(usize),
    /// See [`Event::BackError`].
    BackError(KokoroVocoderError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::LoadDone => Event::LoadDone,
            Self::LoadError(e) => Event::LoadError(Slot::new(e)),
            Self::BackDone(n) => Event::BackDone(n),
            Self::WindowDone(n) => Event::WindowDone(n),
            Self::BackError(e) => Event::BackError(Slot::new(e)),
        }
    }
}
