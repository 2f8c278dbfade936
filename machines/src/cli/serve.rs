//! `voxlane serve`: the HTTP/websocket server. `--duplex` serves Kyutai's
//! full-duplex protocol at `/api/chat` over a PersonaPlex (or Moshi) model
//! loaded once; without it the OpenAI-compatible speech routes will serve
//! (not built yet: a clear error). Flags and files are checked before a
//! model loads; the server stops on SIGINT/SIGTERM after the conversation
//! in flight has been answered.

use super::moshi::require_file;
use super::CliError;
use crate::serve::debug::{self, LiveMachines};
use crate::serve::duplex::{self, ConverseEngine, DuplexOptions};
use crate::serve::shell::{shutdown_signal, Shell, ShellConfig};
use crate::speech::converse::{ConverseOptions, ConversePaths, Converser};
use crate::speech::moshi_executor::WeightsSource;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::moshi::LmWeights;

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
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8998)]
    pub port: u16,
    /// Compute thread budget of the model, caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
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

/// Checks the flags and files, loading nothing.
pub fn validate(a: &ServeArgs) -> Result<DuplexPlan, CliError> {
    if !a.duplex {
        return Err(CliError::Usage(
            "`voxlane serve` without --duplex will serve the OpenAI-compatible speech routes, \
             which are not built yet; use `voxlane serve --duplex --lm F --mimi M --tokenizer SPM`"
                .into(),
        ));
    }
    let threads = super::check_threads(a.threads)?;
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
    let addr = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--host {}: not an address this machine can listen on",
                a.host
            ))
        })?;
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
    let plan = validate(&a)?;
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(IO_THREADS)
        .thread_name("voxlane-io")
        .enable_all()
        .build()
        .map_err(crate::serve::shell::ServeError::Runtime)?;
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
