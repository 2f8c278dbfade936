//! `voxlane speak`, after validation: fetch what is missing (with a
//! progress bar), then speak through the [`crate::tts::Tts`] library (the
//! `kokoro_tts` machine and its stage machines) chunk by chunk on the lane
//! pool, and write the WAV atomically (or stream 16-bit PCM to stdout as
//! chunks finish).

use super::fetch::{converted_model, fetch_models};
use super::speak::SpeakRequest;
use super::CliError;
use crate::tts::utterance::TtsError;
use crate::tts::{SynthOptions, Tts, TtsPaths, WordTime, SAMPLE_RATE};
use std::io::Write;
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_runtime::fetch::Fetcher;
use voxlane_runtime::io::atomic::write_atomic;
use voxlane_runtime::io::wav::{encode_pcm16, write_wav};
use voxlane_runtime::PoolOptions;

impl From<TtsError> for CliError {
    fn from(e: TtsError) -> Self {
        match e {
            TtsError::EmptyText => Self::EmptyText,
            TtsError::Speed(s) => Self::Speed(s),
            TtsError::Voice(v) => Self::Voice(v),
            TtsError::Frontend(f) => Self::Frontend(f),
            TtsError::Model(k) => Self::Model(k),
            TtsError::Threads(p) => Self::Threads(p.to_string()),
            other => Self::Model(KokoroError::Input(other.to_string())),
        }
    }
}

/// A timed word as the JSON list holds it: `{"word", "start", "end"}`
/// (seconds, to the millisecond).
pub fn word_json(w: &WordTime) -> serde_json::Value {
    let ms = |s: f64| (s * 1000.0).round() / 1000.0;
    serde_json::json!({ "word": w.word, "start": ms(w.start), "end": ms(w.end) })
}

/// Speak `req`: progress and notes go to `log`, streamed PCM to `pcm_out`.
pub fn speak(
    req: SpeakRequest,
    log: &mut dyn Write,
    pcm_out: &mut dyn Write,
) -> Result<(), CliError> {
    // The default model, vocab and voices come from the cache, fetched on first use.
    let fetcher = Fetcher::new()?;
    let [model, vocab, voices] = match fetch_models(&fetcher, log)?.as_slice() {
        [m, v, p] => [m.clone(), v.clone(), p.clone()],
        _ => {
            return Err(CliError::Usage(
                "fetch returned an unexpected file list".into(),
            ))
        }
    };
    let model = match req.model.clone() {
        Some(m) => m,
        None => converted_model(&model, log)?,
    };
    let paths = TtsPaths {
        model,
        vocab,
        voices: req.voices.clone().unwrap_or(voices),
    };
    let mut tts = Tts::load_with(
        &paths,
        PoolOptions {
            threads: req.threads,
            pin: req.pin,
        },
    )?;
    let options = SynthOptions {
        voice: req.voice.clone(),
        speed: req.speed,
        // Streaming to a player: its first audio as early as possible.
        early_first_audio: req.stream,
        timestamps: req.timestamps.is_some(),
    };
    let mut synthesis = tts.synthesize(&req.text, &options)?;
    if !synthesis.dropped().is_empty() {
        writeln!(
            log,
            "note: dropped phonemes not in the vocab: {:?}",
            synthesis.dropped()
        )?;
    }
    let mut audio = Vec::new();
    let mut words = Vec::new();
    while let Some(pcm) = synthesis.next_chunk() {
        let pcm = pcm?;
        if req.stream {
            pcm_out.write_all(&encode_pcm16(pcm))?;
            pcm_out.flush()?;
        }
        if req.output.is_some() {
            audio.extend_from_slice(pcm);
        }
        words.extend(synthesis.words().iter().map(word_json));
    }
    if let Some(path) = &req.timestamps {
        let text = serde_json::to_string_pretty(&words).map_err(|e| CliError::Output {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        write_atomic(path, text.as_bytes()).map_err(|e| CliError::Output {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        writeln!(log, "wrote {} ({} words)", path.display(), words.len())?;
    }
    if let Some(output) = &req.output {
        write_wav(output, SAMPLE_RATE, &audio).map_err(|e| CliError::Output {
            path: output.clone(),
            detail: e.to_string(),
        })?;
        writeln!(
            log,
            "wrote {} ({:.2} s of audio)",
            output.display(),
            audio.len() as f64 / f64::from(SAMPLE_RATE)
        )?;
    }
    Ok(())
}
