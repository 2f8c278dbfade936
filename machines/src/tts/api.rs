//! The speech library: load Kokoro once, then `synthesize(text, options)`
//! chunk by chunk, each chunk 24 kHz mono `f32` audio.
//!
//! ```no_run
//! use voxlane_machines::tts::{SynthOptions, Tts, TtsPaths};
//! # fn main() -> Result<(), voxlane_machines::tts::TtsError> {
//! let paths = TtsPaths {
//!     model: "kokoro-v1.0.int8.onnx".into(),
//!     vocab: "vocab.json".into(),
//!     voices: "kokoro-voices-ja.npz".into(),
//! };
//! let mut tts = Tts::load(&paths, 2)?;
//! let mut audio = Vec::new();
//! for chunk in tts.synthesize("Hello there.", &SynthOptions::default())? {
//!     audio.extend(chunk?);
//! }
//! # Ok(()) }
//! ```
//!
//! Everything runs through the `kokoro_tts` machine (and the stage machines
//! it holds), so every request is checked by its guards first and every
//! failure is a typed [`TtsError`].

use crate::tts::utterance::{Load, Synthesize, TtsError, TtsMachine, TtsReply, WordTime};
use std::path::PathBuf;
use voxlane_runtime::PoolOptions;

pub use voxlane_actors::tts::kokoro::pipeline::SAMPLE_RATE;

// The outcome payload slot is shared by every family; kept here as a re-export
// so `voxlane_machines::tts::Slot` still works.
pub use crate::core::Slot;

/// Where the model files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtsPaths {
    /// The Kokoro ONNX export (`kokoro-v1.0.int8.onnx`).
    pub model: PathBuf,
    /// Its `vocab.json`.
    pub vocab: PathBuf,
    /// The voice packs `.npz`.
    pub voices: PathBuf,
}

/// How to speak one text.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
    /// A voice name or a weighted blend (`jf_alpha:0.7,jm_kumo:0.3`).
    pub voice: String,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast).
    pub speed: f32,
    /// Emit the first chunk in windows, its first 0.4 s as soon as it is
    /// ready (lower time to first audio; the windows are crossfaded, so the
    /// audio differs slightly from a whole-chunk run).
    pub early_first_audio: bool,
    /// Time every word ([`Synthesis::words`]) from the model's durations.
    pub timestamps: bool,
}

impl Default for SynthOptions {
    fn default() -> Self {
        Self {
            voice: "jf_alpha".into(),
            speed: 1.0,
            early_first_audio: false,
            timestamps: false,
        }
    }
}

/// Kokoro, loaded once; speaks text after text.
pub struct Tts {
    machine: TtsMachine,
    threads: usize,
}

impl std::fmt::Debug for Tts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tts")
            .field("state", &self.machine.state())
            .field("threads", &self.threads)
            .finish()
    }
}

fn error_of(reply: TtsReply) -> TtsError {
    match reply {
        TtsReply::Error(e) => e,
        other => TtsError::StageReply {
            stage: "kokoro_tts",
            reply: format!("{other:?}"),
        },
    }
}

impl Tts {
    /// Load the model, vocab and voices on a pool of `threads` lanes (caller included).
    pub fn load(paths: &TtsPaths, threads: usize) -> Result<Self, TtsError> {
        Self::load_with(paths, PoolOptions::threads(threads))
    }

    /// As [`Tts::load`], with pinning chosen in `options`.
    pub fn load_with(paths: &TtsPaths, options: PoolOptions) -> Result<Self, TtsError> {
        let mut machine = TtsMachine::new();
        match machine.load(Load {
            model: paths.model.clone(),
            vocab: paths.vocab.clone(),
            voices: paths.voices.clone(),
            threads: options.threads,
            pin: options.pin,
        }) {
            TtsReply::Loaded { threads, .. } => Ok(Self { machine, threads }),
            other => Err(error_of(other)),
        }
    }

    /// Threads the pool computes on, caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The voice names in the packs file.
    pub fn voices(&self) -> &[String] {
        self.machine.stages().map_or(&[], |s| s.voices.names())
    }

    /// Start speaking `text`: the chunks come from the returned [`Synthesis`].
    /// Text, speed and voice are checked before anything runs.
    pub fn synthesize(
        &mut self,
        text: &str,
        options: &SynthOptions,
    ) -> Result<Synthesis<'_>, TtsError> {
        if self.machine.state() != "ready" {
            // A synthesis dropped mid-utterance cancels it; anything else in flight is stale.
            let _ = self.machine.cancel();
        }
        match self.machine.synthesize_with(Synthesize {
            text,
            voice: &options.voice,
            speed: options.speed,
            early: options.early_first_audio,
            words: options.timestamps,
        }) {
            TtsReply::Prepared { chunks, dropped } => Ok(Synthesis {
                tts: self,
                chunks,
                dropped,
                done: chunks == 0,
                last_index: None,
                fresh_words: false,
            }),
            other => Err(error_of(other)),
        }
    }

    /// Speak `text` whole: every chunk's audio, concatenated.
    pub fn synthesize_all(
        &mut self,
        text: &str,
        options: &SynthOptions,
    ) -> Result<Vec<f32>, TtsError> {
        let mut audio = Vec::new();
        let mut s = self.synthesize(text, options)?;
        while let Some(chunk) = s.next_chunk() {
            audio.extend_from_slice(chunk?);
        }
        Ok(audio)
    }

    /// Diagnostics of `kokoro_tts` and its stage machines (state, events,
    /// rejections, time in state).
    pub fn machines(&mut self) -> Vec<voxlane_runtime::DiagnosticsSnapshot> {
        self.machine.machines()
    }

    /// The machine underneath (diagnostics, state).
    pub fn machine(&mut self) -> &mut TtsMachine {
        &mut self.machine
    }
}

/// One utterance in flight: an iterator of its chunks' audio. Dropping it
/// before the last chunk cancels the rest.
pub struct Synthesis<'t> {
    tts: &'t mut Tts,
    chunks: usize,
    dropped: Vec<char>,
    done: bool,
    /// Index of the chunk last lent, to tell a new chunk from its later windows.
    last_index: Option<usize>,
    /// The chunk last lent is new: its words are reported.
    fresh_words: bool,
}

impl std::fmt::Debug for Synthesis<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthesis")
            .field("chunks", &self.chunks)
            .field("dropped", &self.dropped)
            .field("done", &self.done)
            .finish()
    }
}

impl Synthesis<'_> {
    /// Chunks (model calls) in this utterance.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// The words of the chunk whose audio (or first window) `next_chunk`
    /// just lent, each with its start and end in seconds from the start of
    /// the utterance; empty unless [`SynthOptions::timestamps`] is set, and
    /// for later windows of a streamed chunk (its words came with the first).
    pub fn words(&self) -> &[WordTime] {
        if self.fresh_words {
            self.tts.machine.chunk_words()
        } else {
            &[]
        }
    }

    /// Phonemes outside the vocab, dropped by the frontend.
    pub fn dropped(&self) -> &[char] {
        &self.dropped
    }

    /// The machines' diagnostics mid-utterance (see [`Tts::machines`]).
    pub fn machines(&mut self) -> Vec<voxlane_runtime::DiagnosticsSnapshot> {
        self.tts.machine.machines()
    }

    /// Run the next chunk (or window of one) and lend its audio (until the
    /// next call); `None` after the last.
    pub fn next_chunk(&mut self) -> Option<Result<&[f32], TtsError>> {
        if self.done {
            return None;
        }
        match self.tts.machine.next_chunk() {
            TtsReply::Chunk {
                index, of, partial, ..
            } => {
                self.done = !partial && index + 1 >= of;
                self.fresh_words = self.last_index != Some(index);
                self.last_index = Some(index);
                Some(Ok(self.tts.machine.audio()))
            }
            other => {
                self.done = true;
                Some(Err(error_of(other)))
            }
        }
    }
}

impl Iterator for Synthesis<'_> {
    type Item = Result<Vec<f32>, TtsError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_chunk().map(|r| r.map(<[f32]>::to_vec))
    }
}

impl Drop for Synthesis<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.tts.machine.cancel();
        }
    }
}
