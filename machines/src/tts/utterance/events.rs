//! Events `kokoro_tts` accepts, the outcomes it replies with, its sink, and
//! the utterance it carries from chunk to chunk as state-local data.

use super::errors::TtsError;
use crate::tts::Slot;
use std::path::PathBuf;
use voxlane_actors::tts::frontend::Chunk;
use voxlane_actors::tts::kokoro::front::FrontOutput;
use voxlane_actors::tts::voices::{Style, VoicePack};
use voxlane_runtime::DiagnosticsSnapshot;

/// Start the lanes and load the three stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// The Kokoro ONNX export (`kokoro-v1.0.int8.onnx`).
    pub model: PathBuf,
    /// Its `vocab.json`.
    pub vocab: PathBuf,
    /// The voice packs `.npz`.
    pub voices: PathBuf,
    /// The compute budget, caller included.
    pub threads: usize,
    /// Pin each lane to its own core.
    pub pin: bool,
}

/// Speak one text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Synthesize<'a> {
    /// The text.
    pub text: &'a str,
    /// A voice name or a blend (`jf_alpha:0.7,jm_kumo:0.3`).
    pub voice: &'a str,
    /// Speaking rate, 0.5..=2.0.
    pub speed: f32,
    /// Emit the first chunk's audio in windows, the first early.
    pub early: bool,
    /// Time each word (from the model's durations) as its chunk runs.
    pub words: bool,
}

/// A spoken word and when it is heard, in seconds from the utterance's start.
#[derive(Debug, Clone, PartialEq)]
pub struct WordTime {
    /// The word, as in the normalised text (`1999` is `nineteen ninety-nine`).
    pub word: String,
    /// Its first phoneme starts.
    pub start: f64,
    /// Its last phoneme ends.
    pub end: f64,
}

/// One utterance in flight: its chunks, voice and progress (state-local
/// data of `synthesizing`, `running_front` and `running_back`).
#[derive(Default)]
pub struct Utterance {
    /// The model calls, in order.
    pub chunks: Vec<Chunk>,
    /// The selected voice (or blend).
    pub pack: Option<VoicePack>,
    /// Speaking rate.
    pub speed: f32,
    /// Index of the next chunk to run.
    pub next: usize,
    /// The style row of the chunk in flight.
    pub style: Option<Style>,
    /// Phonemes the vocab lacks, dropped by the frontend.
    pub dropped: Vec<char>,
    /// Stream the first chunk in windows (early first audio).
    pub early: bool,
    /// The front output of a chunk being streamed window by window.
    pub front: Option<Box<FrontOutput>>,
    /// Every spoken word of the text (empty unless words are timed).
    pub words: Vec<String>,
    /// Frames of audio of the chunks before the one in flight.
    pub frames_before: usize,
}

impl std::fmt::Debug for Utterance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Utterance")
            .field("chunks", &self.chunks.len())
            .field("next", &self.next)
            .field("speed", &self.speed)
            .field("dropped", &self.dropped)
            .field("early", &self.early)
            .field("streaming", &self.front.is_some())
            .finish_non_exhaustive()
    }
}

/// Everything the machine reacts to. `*_done` / `*_error` are outcome
/// events raised by the machine's own actions; callers send the others.
#[derive(Debug)]
pub enum Event<'a> {
    /// Start the lanes and load the stages.
    Load(Load),
    /// Outcome: everything is loaded.
    LoadDone,
    /// Outcome: loading failed.
    LoadError(Slot<TtsError>),
    /// Speak a text.
    Synthesize(Synthesize<'a>),
    /// Outcome: the text is tokenized and the voice selected.
    PrepareDone(Slot<Utterance>),
    /// Outcome: tokenizing or selecting the voice failed.
    PrepareError(Slot<TtsError>),
    /// Run the next chunk.
    NextChunk,
    /// Outcome: the chunk's front output.
    FrontDone(Slot<FrontOutput>),
    /// Outcome: the front stage failed the chunk.
    FrontError(Slot<TtsError>),
    /// Outcome: the chunk's audio (this many samples) is ready.
    ChunkDone(usize),
    /// Outcome: a window of the chunk's audio (this many samples) is ready; more follow.
    WindowDone(usize),
    /// Outcome: the back stage failed the chunk.
    ChunkError(Slot<TtsError>),
    /// Drop the rest of the utterance.
    Cancel,
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
            Self::Synthesize(_) => "synthesize",
            Self::PrepareDone(_) => "prepare_done",
            Self::PrepareError(_) => "prepare_error",
            Self::NextChunk => "next_chunk",
            Self::FrontDone(_) => "front_done",
            Self::FrontError(_) => "front_error",
            Self::ChunkDone(_) => "chunk_done",
            Self::WindowDone(_) => "window_done",
            Self::ChunkError(_) => "chunk_error",
            Self::Cancel => "cancel",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }
}

/// What the machine replies to one request.
#[derive(Debug)]
pub enum TtsReply {
    /// `load_done`: ready to speak.
    Loaded {
        /// Threads in the pool, caller included.
        threads: usize,
        /// Voices in the packs file.
        voices: usize,
        /// Symbols in the vocab.
        vocab: usize,
    },
    /// `prepare_done`: the utterance has this many chunks.
    Prepared {
        /// Model calls to come.
        chunks: usize,
        /// Phonemes the vocab lacks, dropped.
        dropped: Vec<char>,
    },
    /// `chunk_done` / `window_done`: audio of chunk `index` of `of` is in the
    /// back stage's output buffer.
    Chunk {
        /// Its index.
        index: usize,
        /// Chunks in the utterance.
        of: usize,
        /// Samples of 24 kHz audio.
        samples: usize,
        /// More windows of this chunk follow (`next_chunk` gives them).
        partial: bool,
    },
    /// `cancel` done: this many chunks were not run.
    Cancelled {
        /// Chunks dropped.
        skipped: usize,
    },
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: the request was rejected or failed.
    Error(TtsError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply to the caller, once known.
    pub reply: Option<TtsReply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::LoadDone`].
    LoadDone,
    /// See [`Event::LoadError`].
    LoadError(TtsError),
    /// See [`Event::PrepareDone`].
    PrepareDone(Box<Utterance>),
    /// See [`Event::PrepareError`].
    PrepareError(TtsError),
    /// See [`Event::FrontDone`].
    FrontDone(Box<FrontOutput>),
    /// See [`Event::FrontError`].
    FrontError(TtsError),
    /// See [`Event::ChunkDone`].
    ChunkDone(usize),
    /// See [`Event::WindowDone`].
    WindowDone(usize),
    /// See [`Event::ChunkError`].
    ChunkError(TtsError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::LoadDone => Event::LoadDone,
            Self::LoadError(e) => Event::LoadError(Slot::new(e)),
            Self::PrepareDone(u) => Event::PrepareDone(Slot::new(*u)),
            Self::PrepareError(e) => Event::PrepareError(Slot::new(e)),
            Self::FrontDone(o) => Event::FrontDone(Slot::new(*o)),
            Self::FrontError(e) => Event::FrontError(Slot::new(e)),
            Self::ChunkDone(n) => Event::ChunkDone(n),
            Self::WindowDone(n) => Event::WindowDone(n),
            Self::ChunkError(e) => Event::ChunkError(Slot::new(e)),
        }
    }
}
