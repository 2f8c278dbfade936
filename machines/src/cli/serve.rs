//! `voxlane serve`: the HTTP/websocket server. Without `--duplex` it serves
//! OpenAI's speech routes over Kokoro (fetched on first use, as `speak`
//! does); `--duplex` serves Kyutai's full-duplex protocol at `/api/chat`
//! over a PersonaPlex (or Moshi) model loaded once. Flags and files are
//! checked before a model loads; the server stops on SIGINT/SIGTERM after
//! the streams in flight have been answered.

use super::fetch::{converted_model, fetch_models};
use super::moshi::require_file;
use super::CliError;
use crate::serve::debug::{self, LiveMachines};
use crate::serve::duplex::{self, ConverseEngine, DuplexOptions};
use crate::serve::shell::{shutdown_signal, Shell, ShellConfig};
use crate::serve::speech::{self, SpeechEngine, SpeechEngineConfig};
use crate::speech::converse::{ConverseOptions, ConversePaths, Converser};
use crate::speech::moshi_executor::WeightsSource;
use crate::tts::TtsPaths;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::moshi::LmWeights;
use voxlane_runtime::fetch::Fetcher;

/// Async runtime threads: they only move bytes (models run on their own threads).
const IO_THREADS: usize = 2;

/// Flags of `voxlane serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Serve the full-duplex conversation websocket (`/api/chat`, Kyutai's protocol).
    #[arg(long)]
    pub duplex: bool,
    /// The LM's weights (safetensors, official naming: PersonaPlex or Moshi).
    #[arg(long)]
    pub lm: Option<PathBuf>,
    /// Mimi's weights (safetensors).
    #[arg(long)]
    pub mimi: Option<PathBuf>,
    /// The text stream's SentencePiece model.
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
    /// Where the `voice_prompt` query parameter's file names are looked up.
    #[arg(long, value_name = "DIR")]
    pub voices_dir: Option<PathBuf>,
    /// Storage of the LM's linears: stored, f32, bf16, q8_0, q4_0 (default: as stored).
    #[arg(long)]
    pub weights: Option<String>,
    /// Host to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (default 8880, 8998 with --duplex; 0: any free port, printed at start).
    #[arg(long)]
    pub port: Option<u16>,
    /// Compute thread budget of the model(s), caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Speech: syntheses at once, each on its share of --threads (default: one per two threads).
    #[arg(long, value_name = "K")]
    pub max_concurrency: Option<usize>,
    /// Speech: requests that may wait for a synthesis slot; beyond, 503 at once.
    #[arg(long, value_name = "Q", default_value_t = 4)]
    pub queue: usize,
    /// Speech: the longest `input` in characters (1 to 100000); longer gets a 413.
    #[arg(long, value_name = "N", default_value_t = crate::serve::speech::request::MAX_INPUT_CHARS)]
    pub max_input_chars: usize,
    /// Speech: the Kokoro model file (default: the cached one, fetched on first use).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Speech: the voice packs `.npz` (default: the cached ones).
    #[arg(long)]
    pub voices: Option<PathBuf>,
    /// Pin each compute lane to its own core.
    #[arg(long)]
    pub pin: bool,
    /// Keep PersonaPlex sessions after their prompt in DIR (default
    /// `$VOXLANE_HOME/personas`): a repeated persona's handshake comes without its prompt.
    #[arg(long, value_name = "DIR", conflicts_with = "no_persona_cache")]
    pub persona_cache: Option<PathBuf>,
    /// Run each conversation's prompt phase in full.
    #[arg(long)]
    pub no_persona_cache: bool,
}

/// What a checked `voxlane serve --duplex` command line runs.
#[derive(Debug, Clone)]
pub struct DuplexPlan {
    /// The models.
    pub paths: ConversePaths,
    /// How to run them.
    pub options: ConverseOptions,
    /// The route's options.
    pub duplex: DuplexOptions,
    /// Where to listen.
    pub addr: SocketAddr,
}

/// What a checked `voxlane serve` (speech routes) command line runs.
#[derive(Debug, Clone)]
pub struct SpeechPlan {
    /// Explicit model file, else the cached default.
    pub model: Option<PathBuf>,
    /// Explicit voice packs, else the cached default.
    pub voices: Option<PathBuf>,
    /// The thread split.
    pub engine: SpeechEngineConfig,
    /// Requests that may wait beyond the running ones.
    pub queue: usize,
    /// Where to listen.
    pub addr: SocketAddr,
}

/// A checked `voxlane serve` command line.
#[derive(Debug, Clone)]
pub enum ServePlan {
    /// The OpenAI-compatible speech routes.
    Speech(SpeechPlan),
    /// `--duplex`: the full-duplex websocket.
    Duplex(DuplexPlan),
}

fn listen_addr(host: &str, port: u16) -> Result<SocketAddr, CliError> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--host {host}: not an address this machine can listen on"
            ))
        })
}

/// Checks the flags and files, loading nothing.
pub fn validate(a: &ServeArgs) -> Result<ServePlan, CliError> {
    if a.duplex {
        return validate_duplex(a).map(ServePlan::Duplex);
    }
    let threads = super::check_threads(a.threads)?;
    let duplex_only = [
        ("--lm", a.lm.is_some()),
        ("--mimi", a.mimi.is_some()),
        ("--tokenizer", a.tokenizer.is_some()),
        ("--voices-dir", a.voices_dir.is_some()),
        ("--personaplex", a.personaplex),
    ];
    if let Some((flag, _)) = duplex_only.iter().find(|(_, given)| *given) {
        return Err(CliError::Usage(format!(
            "{flag} belongs to `voxlane serve --duplex`; the speech routes serve Kokoro"
        )));
    }
    let workers = match a.max_concurrency {
        Some(0) => {
            return Err(CliError::Usage(
                "--max-concurrency 0 would serve nothing; give at least 1".into(),
            ))
        }
        Some(k) if k > threads => {
            return Err(CliError::Usage(format!(
                "--max-concurrency {k} needs at least {k} threads (--threads {threads}): \
                 each synthesis computes on its own"
            )))
        }
        Some(k) => k,
        None => SpeechEngineConfig::for_threads(threads).workers,
    };
    let max_chars = crate::serve::speech::request::MAX_INPUT_CHARS;
    if !(1..=max_chars).contains(&a.max_input_chars) {
        return Err(CliError::Usage(format!(
            "--max-input-chars {} is outside 1 to {max_chars}",
            a.max_input_chars
        )));
    }
    for (what, p) in [("model", &a.model), ("voices", &a.voices)] {
        if let Some(p) = p.as_ref().filter(|p| !p.is_file()) {
            return Err(CliError::MissingFile {
                what,
                path: p.clone(),
            });
        }
    }
    Ok(ServePlan::Speech(SpeechPlan {
        model: a.model.clone(),
        voices: a.voices.clone(),
        engine: SpeechEngineConfig {
            workers,
            threads,
            pin: a.pin,
            max_input_chars: a.max_input_chars,
        },
        queue: a.queue,
        addr: listen_addr(&a.host, a.port.unwrap_or(8880))?,
    }))
}

fn validate_duplex(a: &ServeArgs) -> Result<DuplexPlan, CliError> {
    let threads = super::check_threads(a.threads)?;
    let speech_only = [
        ("--model", a.model.is_some()),
        ("--voices", a.voices.is_some()),
        ("--max-concurrency", a.max_concurrency.is_some()),
    ];
    if let Some((flag, _)) = speech_only.iter().find(|(_, given)| *given) {
        return Err(CliError::Usage(format!(
            "{flag} belongs to the speech routes (`voxlane serve` without --duplex)"
        )));
    }
    let lm = require_file(&a.lm, "--lm", "LM", "the LM weights (model.safetensors)")?;
    let mimi = require_file(&a.mimi, "--mimi", "mimi", "the Mimi codec weights")?;
    let tokenizer = require_file(
        &a.tokenizer,
        "--tokenizer",
        "tokenizer",
        "the SentencePiece model of the text stream",
    )?;
    for (what, p) in [("config", &a.config), ("mimi config", &a.mimi_config)] {
        if let Some(p) = p.as_ref().filter(|p| !p.is_file()) {
            return Err(CliError::MissingFile {
                what,
                path: p.clone(),
            });
        }
    }
    if let Some(d) = a.voices_dir.as_ref().filter(|d| !d.is_dir()) {
        return Err(CliError::Input {
            path: d.clone(),
            detail: "--voices-dir is not a directory".into(),
        });
    }
    let route = super::moshi::lm_route(a.weights.as_deref(), LmWeights::AsStored)?;
    let addr = listen_addr(&a.host, a.port.unwrap_or(8998))?;
    Ok(DuplexPlan {
        paths: ConversePaths {
            lm: WeightsSource::File(lm),
            mimi,
            tokenizer,
            config: a.config.clone(),
            mimi_config: a.mimi_config.clone(),
        },
        options: ConverseOptions {
            threads,
            route,
            weights_cache: super::moshi::cache_dir(&None, false, "weights"),
            personaplex: a.personaplex,
            persona_cache: super::moshi::cache_dir(
                &a.persona_cache,
                a.no_persona_cache,
                "personas",
            ),
        },
        duplex: DuplexOptions {
            voices_dir: a.voices_dir.clone(),
        },
        addr,
    })
}

/// Runs `voxlane serve` until SIGINT/SIGTERM.
pub fn run(a: ServeArgs, out: &mut dyn Write) -> Result<(), CliError> {
    match validate(&a)? {
        ServePlan::Speech(plan) => run_speech(plan, out),
        ServePlan::Duplex(plan) => run_duplex(plan, out),
    }
}

fn io_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(IO_THREADS)
        .thread_name("voxlane-io")
        .enable_all()
        .build()
        .map_err(crate::serve::shell::ServeError::Runtime)?)
}

/// The speech routes: fetch what is missing, load the workers, serve.
fn run_speech(plan: SpeechPlan, out: &mut dyn Write) -> Result<(), CliError> {
    let fetcher = Fetcher::new()?;
    let [model, vocab, voices] = match fetch_models(&fetcher, out)?.as_slice() {
        [m, v, p] => [m.clone(), v.clone(), p.clone()],
        _ => {
            return Err(CliError::Usage(
                "fetch returned an unexpected file list".into(),
            ))
        }
    };
    let model = match plan.model {
        Some(m) => m,
        None => converted_model(&model, out)?,
    };
    let paths = TtsPaths {
        model,
        vocab,
        voices: plan.voices.unwrap_or(voices),
    };
    let engine = Arc::new(SpeechEngine::load(&paths, plan.engine)?);
    writeln!(
        out,
        "loaded Kokoro: {} synthes{} at once on {} threads ({:?} each), {} may wait; {} voices",
        plan.engine.workers,
        if plan.engine.workers == 1 { "is" } else { "es" },
        plan.engine.threads,
        plan.engine.lanes(),
        plan.queue,
        engine.voices().len()
    )?;
    let runtime = io_runtime()?;
    runtime.block_on(async {
        let mut config = ShellConfig::new(plan.addr);
        config.max_streams = plan.engine.workers + plan.queue;
        let shell = Shell::bind(config).await?;
        let addr = shell.local_addr()?;
        let live: Arc<dyn LiveMachines> = engine.clone();
        let routes = speech::routes(engine, shell.state()).merge(debug::routes(vec![live]));
        writeln!(
            out,
            "serving http://{addr}/v1/audio/speech (also /v1/audio/voices, /v1/models, /openapi.json, /health, /metrics, /debug); Ctrl-C stops"
        )?;
        out.flush()?;
        shell.serve(routes, shutdown_signal()).await?;
        Ok::<(), CliError>(())
    })?;
    writeln!(out, "stopped")?;
    Ok(())
}

/// The duplex websocket over one PersonaPlex/Moshi model.
fn run_duplex(plan: DuplexPlan, out: &mut dyn Write) -> Result<(), CliError> {
    let converser = Converser::load(&plan.paths, &plan.options)?;
    writeln!(
        out,
        "loaded {} ({}); {} Hz, {} samples per frame",
        if converser.is_persona() {
            "PersonaPlex"
        } else {
            "Moshi"
        },
        converser.weights_note(),
        converser.sample_rate(),
        converser.frame_size()
    )?;
    let engine = Arc::new(ConverseEngine::new(converser));
    let runtime = io_runtime()?;
    runtime.block_on(async {
        // One model: one conversation at a time; a second gets a busy error.
        let shell = Shell::bind(ShellConfig::new(plan.addr)).await?;
        let addr = shell.local_addr()?;
        let live: Arc<dyn LiveMachines> = engine.clone();
        let routes =
            duplex::routes(engine, plan.duplex, shell.state()).merge(debug::routes(vec![live]));
        writeln!(
            out,
            "serving ws://{addr}/api/chat (also /health, /metrics, /debug); Ctrl-C stops"
        )?;
        out.flush()?;
        shell.serve(routes, shutdown_signal()).await?;
        Ok::<(), CliError>(())
    })?;
    writeln!(out, "stopped")?;
    Ok(())
}
