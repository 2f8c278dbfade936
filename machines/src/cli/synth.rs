//! `voxlane speak`, after validation: fetch what is missing (with a
//! progress bar), phonemize, synthesize chunk by chunk on the lane pool, and
//! write the WAV atomically (or stream 16-bit PCM to stdout as chunks finish).

use super::fetch::fetch_models;
use super::speak::SpeakRequest;
use super::CliError;
use std::io::Write;
use voxlane_actors::tts::frontend::vocab::Vocab;
use voxlane_actors::tts::frontend::Frontend;
use voxlane_actors::tts::kokoro::pipeline::{KokoroTts, SAMPLE_RATE};
use voxlane_actors::tts::voices::Voices;
use voxlane_runtime::fetch::Fetcher;
use voxlane_runtime::io::wav::{encode_pcm16, write_wav};
use voxlane_runtime::{LanePool, PoolOptions};

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
    let model = req.model.clone().unwrap_or(model);
    let voices = Voices::open(req.voices.clone().unwrap_or(voices))?;
    let pack = voices.select(&req.voice)?;
    let frontend = Frontend::new(Vocab::load(vocab)?);
    let tokenized = frontend.tokenize(&req.text)?;
    if !tokenized.dropped.is_empty() {
        writeln!(
            log,
            "note: dropped phonemes not in the vocab: {:?}",
            tokenized.dropped
        )?;
    }
    let pool = LanePool::with_options(PoolOptions {
        threads: req.threads,
        pin: req.pin,
    })
    .map_err(|e| CliError::Threads(e.to_string()))?;
    let mut tts = KokoroTts::open(&model)?;
    let mut audio = Vec::new();
    for chunk in &tokenized.chunks {
        let style = pack.style(chunk.len_unpadded())?;
        let pcm = tts.synthesize(&chunk.tokens, &style.0, req.speed, &pool)?;
        if req.stream {
            pcm_out.write_all(&encode_pcm16(pcm))?;
            pcm_out.flush()?;
        }
        if req.output.is_some() {
            audio.extend_from_slice(pcm);
        }
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
