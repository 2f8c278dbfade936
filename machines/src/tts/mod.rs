//! The tts family: Kokoro text to speech as machines, and the [`Tts`]
//! library on top of them.
//!
//! One utterance runs through three stage machines, each usable alone, held
//! by the utterance machine:
//!
//! - [`text`] (`kokoro_text`): text → phonemes → token chunks (normalise,
//!   clauses, espeak-ng IPA, vocab ids);
//! - [`acoustic`] (`kokoro_acoustic`): the network's front half, per chunk
//!   (ALBERT encoder, prosody: durations, alignment, F0/N; text encoder → asr);
//! - [`vocoder`] (`kokoro_vocoder`): the network's back half, per chunk
//!   (decoder → iSTFTNet generator → 24 kHz audio);
//! - [`utterance`] (`kokoro_tts`): loads the three, then runs a text through
//!   them chunk by chunk.
//!
//! [`Tts`], [`TtsPaths`], [`SynthOptions`] and [`Synthesis`] are the public
//! API over `kokoro_tts`; every failure is a typed [`TtsError`]. The
//! README's example, verbatim (a test keeps the two the same):
//!
//! ```no_run
//! # fn main() -> Result<(), voxlane_machines::tts::TtsError> {
//! use voxlane_machines::tts::{SynthOptions, Tts, TtsPaths};
//!
//! let paths = TtsPaths { model: "kokoro-v1.0.int8.onnx".into(), vocab: "kokoro-vocab.json".into(),
//!                        voices: "kokoro-voices-ja.npz".into() };
//! let mut tts = Tts::load(&paths, 2)?;                 // 2 threads, caller included
//! let opts = SynthOptions {
//!     voice: "jf_alpha:0.7,jm_kumo:0.3".into(),
//!     speed: 1.0,
//!     early_first_audio: true,                          // first 0.4 s as soon as it is ready
//!     timestamps: true,                                 // synthesis.words() after each chunk
//! };
//! let mut synthesis = tts.synthesize("Hello there. How are you?", &opts)?;
//! while let Some(chunk) = synthesis.next_chunk() {
//!     let pcm: &[f32] = chunk?;                         // play or write it
//!     println!("{} samples", pcm.len());
//!     for w in synthesis.words() {                      // its words, seconds from the start
//!         println!("{} {:.2}-{:.2}", w.word, w.start, w.end);
//!     }
//! }
//! # Ok(())
//! # }
//! ```

pub mod acoustic;
pub mod text;
pub mod utterance;
pub mod vocoder;

mod api;

pub use api::{Slot, SynthOptions, Synthesis, Tts, TtsPaths, SAMPLE_RATE};
pub use utterance::{TtsError, WordTime};

#[cfg(test)]
mod tests {
    /// The lines of the first fenced block that opens with `fence` in `lines`.
    fn fenced<'a>(mut lines: impl Iterator<Item = &'a str>, fence: &str) -> Vec<&'a str> {
        lines.by_ref().find(|l| *l == fence);
        lines.take_while(|l| *l != "```").collect()
    }

    #[test]
    fn the_readme_example_is_this_modules_doc_test() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
            .expect("README.md at the repository root");
        let readme = fenced(readme.lines(), "```rust");
        let here = include_str!("mod.rs")
            .lines()
            .map_while(|l| l.strip_prefix("//!"));
        let doc: Vec<&str> = fenced(here.map(|l| l.strip_prefix(' ').unwrap_or(l)), "```no_run")
            .into_iter()
            .filter(|l| !l.starts_with("# "))
            .collect();
        assert!(!readme.is_empty(), "README.md has no ```rust block");
        assert_eq!(
            readme, doc,
            "README.md's Rust example and the doc test in machines/src/tts/mod.rs differ: keep them the same"
        );
    }
}
