//! `voxlane moshi tokens|chat`: the Moshi LM on files, through the
//! `moshi_executor` machine.
//!
//! `tokens` reads the other speaker's codes (`.npy` int64 `[1, K, frames]`)
//! and writes the model's tokens per output step (`.npy` int64
//! `[steps, 1 + dep_q]`: the text token, then its audio codes). `chat` reads
//! the other speaker's 24 kHz WAV, encodes it frame by frame with Mimi's
//! streaming session, steps Moshi per frame and decodes its audio codes
//! with Mimi's streaming decoder: a WAV as long as the input and, with
//! `--text`, the text piece of each output frame (JSON; `PAD` / `EPAD` for
//! ids 3 / 0). Every flag and input is checked before a model loads, and
//! outputs are written atomically after the run: a failure leaves no file.

use super::mimi::{read_audio, read_codes, SESSION_CAPACITY_BYTES};
use super::CliError;
use crate::speech::mimi_init::{InitReply, MimiInit, MimiInitError};
use crate::speech::mimi_session::decode::DecodeSessionMachine;
use crate::speech::mimi_session::encode::EncodeSessionMachine;
use crate::speech::mimi_session::SessionReply;
use crate::speech::moshi_executor::{
    BindSession, Initialize, MoshiExecutor, MoshiExecutorError, Step, WeightsSource,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use voxlane_actors::speech::mimi::{MimiConfig, MimiOptions};
use voxlane_actors::speech::moshi::{CacheUse, LmWeights, MoshiConfig, StreamSampling};
use voxlane_actors::speech::sampler::SamplingParams;
use voxlane_actors::text::sentencepiece::SentencePiece;
use voxlane_runtime::io::{write_atomic, write_npy, write_wav, NpyArray, NpyData};
use voxlane_runtime::LanePool;

/// `voxlane moshi`'s subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MoshiCommand {
    /// The model's tokens from the other speaker's codes (.npy int64 [1, K, frames] → [steps, 1 + dep_q]).
    Tokens(TokensArgs),
    /// Converse with a WAV: the other speaker's 24 kHz audio in, Moshi's audio (and text) out.
    Chat(ChatArgs),
}

/// The LM and sampling flags both subcommands take.
/// Sampling flags of the text and audio streams (shared by `moshi` and `converse`).
#[derive(Debug, Clone, clap::Args)]
pub struct SamplingArgs {
    /// Argmax on every stream (same as temperatures 0).
    #[arg(long)]
    pub greedy: bool,
    /// Audio temperature (default 0.8).
    #[arg(long, allow_negative_numbers = true)]
    pub temp: Option<f32>,
    /// Audio top-k (default 250).
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Audio top-p (default off).
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f32>,
    /// Text temperature (default 0.7).
    #[arg(long, allow_negative_numbers = true)]
    pub text_temp: Option<f32>,
    /// Text top-k (default 25).
    #[arg(long)]
    pub text_top_k: Option<usize>,
    /// Text top-p (default off).
    #[arg(long, allow_negative_numbers = true)]
    pub text_top_p: Option<f32>,
}

/// The LM flags `moshi`, `converse` and `serve` share (model files and sampling).
#[derive(Debug, Clone, clap::Args)]
pub struct LmArgs {
    /// LM weights (`model.safetensors`, official naming; bf16, f16 or f32).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// No checkpoint: seeded random weights in the config's shape (smoke runs, benchmarks).
    #[arg(long, value_name = "SEED", conflicts_with = "model")]
    pub random_weights: Option<u64>,
    /// Config JSON with an `lm_config` object (default: the official Moshi 7B).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Storage of the linears: stored (as in the file), f32, bf16, q8_0, q4_0
    /// (default: q8_0 for models of 1B parameters or more, else as stored).
    #[arg(long)]
    pub weights: Option<String>,
    /// Sampling of the text and audio streams.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Seed of the samplers (a seed reproduces a run exactly).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Compute threads, the caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Keep converted weights here (default: `$VOXLANE_HOME/weights`); the next
    /// run with the same checkpoint and `--weights` maps them instead of converting.
    #[arg(long, value_name = "DIR", conflicts_with = "no_weights_cache")]
    pub weights_cache: Option<PathBuf>,
    /// Convert the weights at every load, keep nothing.
    #[arg(long)]
    pub no_weights_cache: bool,
}

/// `voxlane moshi tokens`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokensArgs {
    /// Model and sampling.
    #[command(flatten)]
    pub lm: LmArgs,
    /// Output `.npy` (int64 [steps, 1 + dep_q]).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The other speaker's codes (`.npy` int64 [1, K, frames]).
    pub input: PathBuf,
}

/// `voxlane moshi chat`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChatArgs {
    /// Model and sampling.
    #[command(flatten)]
    pub lm: LmArgs,
    /// Mimi weights (`model.safetensors` of the codec).
    #[arg(long)]
    pub mimi: Option<PathBuf>,
    /// Mimi config JSON (default: the `mimi_config` of `--config` if it has one, else the official shapes).
    #[arg(long)]
    pub mimi_config: Option<PathBuf>,
    /// SentencePiece model of the text stream (`tokenizer_spm_32k_3.model`).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Write the text piece of each output frame here (JSON list).
    #[arg(long)]
    pub text: Option<PathBuf>,
    /// Output WAV (24 kHz, the input's length).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// The other speaker's 24 kHz WAV.
    pub input: PathBuf,
}

fn moshi_err(e: MoshiExecutorError) -> CliError {
    CliError::Moshi(e)
}

/// `path`, required by `flag` and existing.
pub fn require_file(
    path: &Option<PathBuf>,
    flag: &'static str,
    what: &'static str,
    detail: &'static str,
) -> Result<PathBuf, CliError> {
    let p = path.clone().ok_or(CliError::MissingFlag { flag, detail })?;
    if !p.is_file() {
        return Err(CliError::MissingFile { what, path: p });
    }
    Ok(p)
}

/// The output path, required, with extension `ext`, writable.
pub fn output_path(o: &Option<PathBuf>, ext: &str) -> Result<PathBuf, CliError> {
    let out = o.clone().ok_or(CliError::MissingFlag {
        flag: "-o/--output",
        detail: "the output file",
    })?;
    if out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
        != Some(ext)
    {
        return Err(CliError::Output {
            path: out,
            detail: format!("the output is written as .{ext}"),
        });
    }
    super::speak::check_writable(&out)?;
    Ok(out)
}

/// The sampling the flags ask for (checked later against the vocabularies).
/// The streams' sampling from the flags (defaults: Moshi's).
pub fn sampling(a: &SamplingArgs) -> StreamSampling {
    if a.greedy {
        return StreamSampling::GREEDY;
    }
    let d = StreamSampling::default();
    StreamSampling {
        text: SamplingParams {
            temperature: a.text_temp.unwrap_or(d.text.temperature),
            top_k: a.text_top_k.or(d.text.top_k),
            top_p: a.text_top_p.or(d.text.top_p),
        },
        audio: SamplingParams {
            temperature: a.temp.unwrap_or(d.audio.temperature),
            top_k: a.top_k.or(d.audio.top_k),
            top_p: a.top_p.or(d.audio.top_p),
        },
    }
}

/// A bound executor with an open session.
/// The LM's linear storage from `--weights`, else `default`.
pub fn lm_route(weights: Option<&str>, default: LmWeights) -> Result<LmWeights, CliError> {
    match weights {
        Some(w) => LmWeights::parse(w).ok_or_else(|| {
            CliError::Usage(format!(
                "--weights {w}: expected stored, f32, bf16, q8_0 or q4_0"
            ))
        }),
        None => Ok(default),
    }
}

/// The default storage for `cfg`: q8_0 from 1B parameters, else as stored.
pub fn default_route(cfg: &MoshiConfig) -> LmWeights {
    if cfg.dim * cfg.dim * 12 * cfg.num_layers >= 1_000_000_000 {
        LmWeights::Q8_0
    } else {
        LmWeights::AsStored
    }
}

/// Sampling values checked against `cfg`'s vocabularies (before a slow model load).
pub fn check_sampling(sampling: &StreamSampling, cfg: &MoshiConfig) -> Result<(), CliError> {
    for (stream, p, vocab) in [
        ("text", sampling.text, cfg.text_card),
        ("audio", sampling.audio, cfg.card),
    ] {
        p.validate(vocab)
            .map_err(|e| CliError::Usage(format!("{stream} sampling: {e}")))?;
    }
    Ok(())
}

/// A cache folder: `flag` if given, none with `off`, else `$VOXLANE_HOME/<sub>`.
pub fn cache_dir(flag: &Option<PathBuf>, off: bool, sub: &str) -> Option<PathBuf> {
    match (flag, off) {
        (_, true) => None,
        (Some(d), _) => Some(d.clone()),
        (None, false) => voxlane_runtime::fetch::voxlane_home()
            .ok()
            .map(|h| h.join(sub)),
    }
}

struct Lm {
    exec: MoshiExecutor,
    cfg: MoshiConfig,
    pool: Arc<LanePool>,
    /// How the weights were loaded (for the report).
    weights_note: String,
}

/// Check the LM flags, load the model, open the session.
fn load_lm(a: &LmArgs) -> Result<Lm, CliError> {
    let threads = super::check_threads(a.threads)?;
    let weights = match (&a.random_weights, &a.model) {
        (Some(seed), _) => WeightsSource::Random(*seed),
        (None, _) => WeightsSource::File(require_file(
            &a.model,
            "--model",
            "model",
            "the LM weights (model.safetensors), or --random-weights SEED",
        )?),
    };
    let cfg = match &a.config {
        Some(p) if !p.is_file() => {
            return Err(CliError::MissingFile {
                what: "config",
                path: p.clone(),
            })
        }
        Some(p) => MoshiConfig::from_file(p).map_err(|e| moshi_err(e.into()))?,
        None => MoshiConfig::default(),
    };
    let route = lm_route(a.weights.as_deref(), default_route(&cfg))?;
    let sampling = sampling(&a.sampling);
    check_sampling(&sampling, &cfg)?;
    let pool = Arc::new(LanePool::new(threads).map_err(|e| CliError::Threads(e.to_string()))?);
    let mut exec = MoshiExecutor::new();
    // Converted linears are kept in $VOXLANE_HOME/weights (none for random weights).
    let cache_dir = cache_dir(&a.weights_cache, a.no_weights_cache, "weights");
    let (_, cache) = exec
        .initialize(Initialize {
            config: cfg.clone(),
            weights,
            route,
            pool: pool.clone(),
            cache_dir,
        })
        .map_err(moshi_err)?;
    exec.bind_session(BindSession {
        sampling,
        seed: a.seed,
        capacity_bytes: None,
    })
    .map_err(moshi_err)?;
    let weights_note = match cache {
        CacheUse::Hit(p) => format!("weights mapped from {}", p.display()),
        CacheUse::Written(p) => format!("weights converted, kept in {}", p.display()),
        CacheUse::Off => "weights converted".to_string(),
    };
    Ok(Lm {
        exec,
        cfg,
        pool,
        weights_note,
    })
}

/// Run one `voxlane moshi` subcommand, reporting to `out`.
pub fn run(cmd: MoshiCommand, out: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        MoshiCommand::Tokens(a) => tokens(a, out),
        MoshiCommand::Chat(a) => chat(a, out),
    }
}

fn tokens(a: TokensArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let output = output_path(&a.output, "npy")?;
    if !a.input.is_file() {
        return Err(CliError::MissingFile {
            what: "input",
            path: a.input,
        });
    }
    let cfg = match &a.lm.config {
        Some(p) if p.is_file() => MoshiConfig::from_file(p).map_err(|e| moshi_err(e.into()))?,
        _ => MoshiConfig::default(),
    };
    // The codes are read and checked (shape, range) before the model loads.
    let codes = read_codes(&a.input, cfg.user_codebooks(), cfg.card)?;
    let mut lm = load_lm(&a.lm)?;
    let (k, frames) = (codes.num_codebooks, codes.frames);
    let width = 1 + lm.cfg.dep_q;
    let mut rows: Vec<i64> = Vec::with_capacity(frames * width);
    let mut user = vec![0u32; k];
    for t in 0..frames {
        for (c, u) in user.iter_mut().enumerate() {
            *u = codes.data[c * frames + t];
        }
        let step = Step {
            other_codes: &user,
            forced_text: None,
            forced_audio: None,
        };
        if let Some(f) = lm.exec.frame(step).map_err(moshi_err)? {
            rows.extend(f.as_slice().iter().map(|&v| i64::from(v)));
        }
    }
    let steps = rows.len() / width;
    write_npy(
        &output,
        &NpyArray {
            shape: vec![steps, width],
            data: NpyData::I64(rows),
        },
    )
    .map_err(|e| CliError::Output {
        path: output.clone(),
        detail: e.to_string(),
    })?;
    writeln!(
        out,
        "wrote {} ({steps} steps × {width} tokens from {frames} frames; {})",
        output.display(),
        lm.weights_note
    )?;
    Ok(())
}

/// The text piece of a text token: `PAD` (3), `EPAD` (0), else the piece with `▁` as a space.
pub fn text_piece(spm: &SentencePiece, id: u32) -> String {
    match id {
        0 => "EPAD".into(),
        3 => "PAD".into(),
        _ => spm
            .id_to_piece(id)
            .map_or_else(|| format!("<{id}>"), |p| p.replace('\u{2581}', " ")),
    }
}

/// The Mimi config `chat` uses: `--mimi-config`, else `--config`'s `mimi_config`, else official.
fn mimi_config(a: &ChatArgs) -> Result<MimiConfig, CliError> {
    let from = |p: &Path| {
        MimiConfig::from_file(p).map_err(|e| CliError::MimiInit(MimiInitError::from_mimi(e)))
    };
    match (&a.mimi_config, &a.lm.config) {
        (Some(p), _) if !p.is_file() => Err(CliError::MissingFile {
            what: "mimi config",
            path: p.clone(),
        }),
        (Some(p), _) => from(p),
        (None, Some(p))
            if std::fs::read_to_string(p).is_ok_and(|t| t.contains("\"mimi_config\"")) =>
        {
            from(p)
        }
        _ => Ok(MimiConfig::default()),
    }
}

fn session_error(reply: SessionReply) -> CliError {
    match reply {
        SessionReply::Error(e) => e.into(),
        other => CliError::Usage(format!("mimi session replied {other:?}")),
    }
}

fn chat(a: ChatArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let output = output_path(&a.output, "wav")?;
    if let Some(t) = &a.text {
        super::speak::check_writable(t)?;
    }
    let mimi_path = require_file(
        &a.mimi,
        "--mimi",
        "mimi",
        "the Mimi codec weights (model.safetensors)",
    )?;
    let spm_path = require_file(
        &a.tokenizer,
        "--tokenizer",
        "tokenizer",
        "the SentencePiece model of the text stream",
    )?;
    if !a.input.is_file() {
        return Err(CliError::MissingFile {
            what: "input",
            path: a.input,
        });
    }
    let spm = SentencePiece::open(&spm_path).map_err(|e| CliError::Input {
        path: spm_path.clone(),
        detail: e.to_string(),
    })?;
    let mcfg = mimi_config(&a)?;
    let pcm = read_audio(&a.input, &mcfg)?;
    let mut lm = load_lm(&a.lm)?;
    let (user_k, dep_q) = (lm.cfg.user_codebooks(), lm.cfg.dep_q);
    if mcfg.num_codebooks < user_k
        || mcfg.num_codebooks != dep_q
        || mcfg.quantizer.bins != lm.cfg.card
    {
        return Err(CliError::Usage(format!(
            "Mimi codes {} codebooks of {} entries; the LM reads {user_k} and writes {dep_q} of {}",
            mcfg.num_codebooks, mcfg.quantizer.bins, lm.cfg.card
        )));
    }
    let mut init = MimiInit::new();
    match init.initialize_file(mcfg, &mimi_path, MimiOptions::default()) {
        InitReply::Initialized { .. } => {}
        InitReply::Error(e) => return Err(e.into()),
        other => return Err(CliError::Usage(format!("mimi_init replied {other:?}"))),
    }
    let model = init
        .model()
        .cloned()
        .ok_or_else(|| CliError::Usage("mimi_init bound no model".into()))?;
    let (fs, k) = (model.frame_size(), model.num_codebooks());
    let rate = u32::try_from(model.config().sample_rate)
        .map_err(|_| CliError::Usage("sample rate does not fit a WAV header".into()))?;
    let mut enc = EncodeSessionMachine::new();
    match enc.open(init.bind_encoder(1, SESSION_CAPACITY_BYTES)?) {
        SessionReply::Opened { .. } => {}
        other => return Err(session_error(other)),
    }
    let mut dec = DecodeSessionMachine::new();
    match dec.open(init.bind_decoder(1, SESSION_CAPACITY_BYTES)?) {
        SessionReply::Opened { .. } => {}
        other => return Err(session_error(other)),
    }
    let frames = pcm.len().div_ceil(fs);
    let mut padded = pcm.clone();
    padded.resize(frames * fs, 0.0);
    let pool = lm.pool.clone();
    let (mut codes, mut agent) = (vec![0u32; k], vec![0u32; k]);
    let mut audio = Vec::with_capacity(frames * fs);
    let mut pieces = Vec::new();
    let mut frame_pcm = vec![0.0f32; fs];
    for chunk in padded.chunks_exact(fs) {
        match enc.push(&pool, chunk, &mut codes) {
            SessionReply::Done { .. } => {}
            other => return Err(session_error(other)),
        }
        let step = Step {
            other_codes: &codes[..user_k],
            forced_text: None,
            forced_audio: None,
        };
        if let Some(f) = lm.exec.frame(step).map_err(moshi_err)? {
            let t = f.as_slice();
            agent.copy_from_slice(&t[1..]);
            match dec.push(&pool, &agent, &mut frame_pcm) {
                SessionReply::Done { .. } => {}
                other => return Err(session_error(other)),
            }
            audio.extend_from_slice(&frame_pcm);
            pieces.push(text_piece(&spm, t[0]));
        }
    }
    // As NVIDIA's offline.py: the reply has the input's length.
    audio.resize(pcm.len(), 0.0);
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
    writeln!(
        out,
        "wrote {} ({} samples, {} frames, {} text pieces; {})",
        output.display(),
        audio.len(),
        frames,
        pieces.len(),
        lm.weights_note
    )?;
    Ok(())
}
