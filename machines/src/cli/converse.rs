//! `voxlane converse`: a full-duplex conversation on files. The user's WAV
//! goes in frame by frame through the `speech_wavefront` machine (Mimi
//! encode, the LM, Mimi decode pipelined); the agent's audio comes out as a
//! WAV as long as the input (NVIDIA's `offline.py` trims or pads it), with
//! `--text` the text piece of each output frame (JSON; `PAD` / `EPAD` for
//! ids 3 / 0) and with `--tokens` every output step's tokens (`.npy` int64
//! `[steps, 1 + dep_q]`: the text token, the agent's codes, then for
//! PersonaPlex the user's codes as provided). PersonaPlex takes a voice
//! prompt (`.wav`, `.pt`, `.safetensors`) and a text prompt. Every flag and
//! input is checked before a model loads; outputs are written atomically
//! after the run, so a failure leaves no file.

use super::moshi::{
    cache_dir, check_sampling, default_route, lm_route, output_path, require_file, sampling,
    SamplingArgs,
};
use super::CliError;
use crate::speech::converse::{configs, ConverseOptions, ConversePaths, Converser};
use crate::speech::moshi_executor::WeightsSource;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use voxlane_actors::speech::voice::resample::resample;
use voxlane_runtime::io::{read_wav, write_atomic, write_npy, write_wav, NpyArray, NpyData};

/// Flags of `voxlane converse`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConverseArgs {
    /// The LM's weights (safetensors, official naming: Moshi or PersonaPlex).
    #[arg(long)]
    pub lm: Option<PathBuf>,
    /// Mimi's weights (safetensors).
    #[arg(long)]
    pub mimi: Option<PathBuf>,
    /// The text stream's SentencePiece model (`tokenizer_spm_32k_3.model`).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// A config JSON (`lm_config` / `mimi_config`); default: the official shapes.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Mimi's config JSON, when `--config` has none.
    #[arg(long)]
    pub mimi_config: Option<PathBuf>,
    /// Treat the LM as PersonaPlex when the checkpoint alone cannot tell.
    #[arg(long)]
    pub personaplex: bool,
    /// PersonaPlex's voice prompt: a WAV (any rate), or NVIDIA's `.pt` / a `.safetensors` of its tensors.
    #[arg(long, value_name = "VOICE")]
    pub voice_prompt: Option<PathBuf>,
    /// PersonaPlex's text prompt (its role), wrapped in `<system>` tags.
    #[arg(long, value_name = "TEXT", conflicts_with = "text_prompt_file")]
    pub text_prompt: Option<String>,
    /// The text prompt read from a file.
    #[arg(long, value_name = "FILE")]
    pub text_prompt_file: Option<PathBuf>,
    /// Sampling of the text and audio streams.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Seed of the samplers (a seed reproduces a run exactly).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Storage of the LM's linears: stored, f32, bf16, q8_0, q4_0 (default: q8_0 from 1B parameters).
    #[arg(long)]
    pub weights: Option<String>,
    /// Thread budget, caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Keep converted LM weights in DIR (default `$VOXLANE_HOME/weights`).
    #[arg(long, value_name = "DIR", conflicts_with = "no_weights_cache")]
    pub weights_cache: Option<PathBuf>,
    /// Convert the LM's weights at every load.
    #[arg(long)]
    pub no_weights_cache: bool,
    /// Keep PersonaPlex sessions after their prompt in DIR (default `$VOXLANE_HOME/personas`).
    #[arg(long, value_name = "DIR", conflicts_with = "no_persona_cache")]
    pub persona_cache: Option<PathBuf>,
    /// Run the persona's prompt at every start.
    #[arg(long)]
    pub no_persona_cache: bool,
    /// The agent's audio (WAV, 24 kHz).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The text piece of each output frame (JSON).
    #[arg(long, value_name = "OUT.json")]
    pub text: Option<PathBuf>,
    /// Every output step's tokens (`.npy` int64).
    #[arg(long, value_name = "OUT.npy")]
    pub tokens: Option<PathBuf>,
    /// The user's audio (WAV, any rate; stereo is averaged).
    pub input: PathBuf,
}

fn text_prompt(a: &ConverseArgs) -> Result<Option<String>, CliError> {
    match (&a.text_prompt, &a.text_prompt_file) {
        (Some(t), _) => Ok(Some(t.clone())),
        (None, Some(p)) => {
            let t = std::fs::read_to_string(p).map_err(|e| CliError::Input {
                path: p.clone(),
                detail: e.to_string(),
            })?;
            Ok(Some(t))
        }
        (None, None) => Ok(None),
    }
}

/// Run `voxlane converse`.
pub fn run(a: ConverseArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let threads = super::check_threads(a.threads)?;
    let output = output_path(&a.output, "wav")?;
    for (what, p) in [("config", &a.config), ("mimi config", &a.mimi_config)] {
        if let Some(p) = p.as_ref().filter(|p| !p.is_file()) {
            return Err(CliError::MissingFile {
                what,
                path: p.clone(),
            });
        }
    }
    for (o, ext) in [(&a.text, "json"), (&a.tokens, "npy")] {
        if o.is_some() {
            output_path(o, ext)?;
        }
    }
    let lm = require_file(&a.lm, "--lm", "LM", "the LM weights (model.safetensors)")?;
    let mimi = require_file(&a.mimi, "--mimi", "mimi", "the Mimi codec weights")?;
    let tokenizer = require_file(
        &a.tokenizer,
        "--tokenizer",
        "tokenizer",
        "the SentencePiece model of the text stream",
    )?;
    if let Some(v) = &a.voice_prompt {
        if !v.is_file() {
            return Err(CliError::MissingFile {
                what: "voice prompt",
                path: v.clone(),
            });
        }
    }
    let text = text_prompt(&a)?;
    if text.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(crate::speech::converse::ConverseError::EmptyTextPrompt.into());
    }
    if !a.input.is_file() {
        return Err(CliError::MissingFile {
            what: "input",
            path: a.input,
        });
    }
    let wav = read_wav(&a.input).map_err(|e| CliError::Input {
        path: a.input.clone(),
        detail: e.to_string(),
    })?;
    let ch = usize::from(wav.channels.max(1));
    let mono: Vec<f32> = wav
        .samples
        .chunks_exact(ch)
        .map(|f| f.iter().sum::<f32>() / ch as f32)
        .collect();
    if mono.is_empty() {
        return Err(CliError::Input {
            path: a.input.clone(),
            detail: "no samples".into(),
        });
    }
    let paths = ConversePaths {
        lm: WeightsSource::File(lm),
        mimi,
        tokenizer,
        config: a.config.clone(),
        mimi_config: a.mimi_config.clone(),
    };
    let (cfg, mcfg) = configs(&paths, a.personaplex)?;
    let rate = u32::try_from(mcfg.sample_rate)
        .map_err(|_| CliError::Usage("Mimi's sample rate does not fit a WAV header".into()))?;
    let pcm = resample(&mono, wav.sample_rate, rate).map_err(|e| CliError::Input {
        path: a.input.clone(),
        detail: e.to_string(),
    })?;
    let route = lm_route(a.weights.as_deref(), default_route(&cfg))?;
    let sampling = sampling(&a.sampling);
    check_sampling(&sampling, &cfg)?;
    let weights_cache = cache_dir(&a.weights_cache, a.no_weights_cache, "weights");
    let persona_cache = cache_dir(&a.persona_cache, a.no_persona_cache, "personas");
    let opts = ConverseOptions {
        threads,
        route,
        weights_cache,
        personaplex: a.personaplex,
        persona_cache,
    };
    let loaded = Instant::now();
    let mut c = Converser::load(&paths, &opts)?;
    let persona = c.persona(a.voice_prompt.as_deref(), text.as_deref())?;
    let load_s = loaded.elapsed().as_secs_f64();
    let started = Instant::now();
    let report = c.start(&persona, sampling, a.seed)?;
    let prompt_s = started.elapsed().as_secs_f64();
    let fs = c.frame_size();
    let frames = pcm.len().div_ceil(fs);
    let mut padded = pcm.clone();
    padded.resize(frames * fs, 0.0);
    let mut audio = Vec::with_capacity(frames * fs);
    let mut pieces = Vec::with_capacity(frames);
    let mut rows: Vec<i64> = Vec::new();
    let mut width = 0;
    let names = ["EPAD", "BOS", "EOS", "PAD"];
    let mut keep = |c: &Converser, pcm: &[f32], tokens: &[u32]| {
        audio.extend_from_slice(pcm);
        width = tokens.len();
        rows.extend(tokens.iter().map(|&t| i64::from(t)));
        pieces.push(c.text_piece(tokens[0]).unwrap_or_else(|| {
            names
                .get(tokens[0] as usize)
                .map_or_else(|| format!("<{}>", tokens[0]), |s| (*s).to_string())
        }));
    };
    let run_started = Instant::now();
    let (mut pcm_buf, mut tok_buf) = (vec![0.0f32; fs], Vec::new());
    for chunk in padded.chunks_exact(fs) {
        let got = match c.push(chunk)? {
            Some(f) => {
                pcm_buf.copy_from_slice(f.pcm);
                tok_buf.clear();
                tok_buf.extend_from_slice(f.tokens);
                true
            }
            None => false,
        };
        if got {
            keep(&c, &pcm_buf, &tok_buf);
        }
    }
    while let Some(f) = c.flush()? {
        pcm_buf.copy_from_slice(f.pcm);
        tok_buf.clear();
        tok_buf.extend_from_slice(f.tokens);
        keep(&c, &pcm_buf, &tok_buf);
    }
    let run_s = run_started.elapsed().as_secs_f64();
    // As NVIDIA's offline.py: the reply has the input's length.
    audio.resize(pcm.len(), 0.0);
    let steps = pieces.len();
    if let Some(t) = &a.tokens {
        write_npy(
            t,
            &NpyArray {
                shape: vec![steps, width],
                data: NpyData::I64(rows),
            },
        )
        .map_err(|e| CliError::Output {
            path: t.clone(),
            detail: e.to_string(),
        })?;
    }
    if let Some(t) = &a.text {
        let json = serde_json::to_string(&pieces).map_err(|e| CliError::Usage(e.to_string()))?;
        write_atomic(t, json.as_bytes()).map_err(|e| CliError::Output {
            path: t.clone(),
            detail: e.to_string(),
        })?;
    }
    write_wav(&output, rate, &audio).map_err(|e| CliError::Output {
        path: output.clone(),
        detail: e.to_string(),
    })?;
    let secs = pcm.len() as f64 / f64::from(rate);
    writeln!(
        out,
        "wrote {} ({} samples, {frames} frames, {steps} steps; {} ({}): load {load_s:.2} s, prompt {} steps{} in {prompt_s:.2} s, conversation {run_s:.2} s = {:.1} ms/frame, RTF {:.3} at {threads} threads)",
        output.display(),
        audio.len(),
        if c.is_persona() { "PersonaPlex" } else { "Moshi" },
        c.weights_note(),
        report.steps,
        if report.cached { " from the persona cache" } else { "" },
        1e3 * run_s / frames.max(1) as f64,
        run_s / secs.max(1e-9),
    )?;
    Ok(())
}
