//! `voxlane` subcommands, one file each (`speak` validates in `speak.rs`
//! and speaks in `synth.rs`). Each parses its flags, validates them into
//! typed errors (never a panic), and drives machines through the public API.

pub mod converse;
pub mod diagram;
pub mod fetch;
pub mod info;
pub mod machines;
pub mod mimi;
pub mod moshi;
pub mod progress;
#[cfg(feature = "serve")]
pub mod serve;
pub mod speak;
pub mod synth;

use clap::{Parser, Subcommand};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Errors the CLI reports before or instead of doing work.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `--threads 0` or an oversized budget.
    #[error("invalid --threads: {0}")]
    Threads(String),
    /// A machine name no machine has.
    #[error("unknown machine `{0}` (see `voxlane machines`)")]
    UnknownMachine(String),
    /// Writing the output failed.
    #[error("could not write output: {0}")]
    Io(#[from] std::io::Error),
    /// The command line did not parse.
    #[error("{0}")]
    Usage(String),
    /// `--speed` outside 0.5–2.0.
    #[error("invalid --speed {0}: it must be between 0.5 and 2.0")]
    Speed(f32),
    /// `speak` without `-o OUT.wav`.
    #[error("speak needs an output file: -o OUT.wav")]
    MissingOutput,
    /// The text is empty or has nothing to say.
    #[error("the text is empty: nothing to speak")]
    EmptyText,
    /// Reading the text from stdin (`-`) failed.
    #[error("could not read the text from stdin: {0}")]
    Stdin(std::io::Error),
    /// The output file cannot be written.
    #[error("cannot write {path}: {detail}")]
    Output {
        /// The output path.
        path: PathBuf,
        /// Why not.
        detail: String,
    },
    /// A file named on the command line does not exist.
    #[error("{what} file {path} does not exist")]
    MissingFile {
        /// Which file (`model`, ...).
        what: &'static str,
        /// The path given.
        path: PathBuf,
    },
    /// An unknown voice, a bad blend spec or an unreadable voices file.
    #[error(transparent)]
    Voice(#[from] voxlane_actors::tts::voices::VoiceError),
    /// Fetching models failed.
    #[error(transparent)]
    Fetch(#[from] voxlane_runtime::fetch::FetchError),
    /// The text frontend failed (espeak-ng missing, nothing to phonemize, ...).
    #[error(transparent)]
    Frontend(#[from] voxlane_actors::tts::frontend::FrontendError),
    /// The model could not be loaded or run.
    #[error(transparent)]
    Model(#[from] voxlane_actors::tts::kokoro::graph::KokoroError),
    /// A required flag is absent.
    #[error("missing {flag}: {detail}")]
    MissingFlag {
        /// The flag, as typed.
        flag: &'static str,
        /// What it names.
        detail: &'static str,
    },
    /// A WAV at a rate the model does not run at.
    #[error("{path}: sample rate {found} Hz, Mimi needs {needed} Hz (resample first, e.g. `ffmpeg -i IN -ar {needed} OUT.wav`)")]
    SampleRate {
        /// The WAV.
        path: PathBuf,
        /// Its rate.
        found: u32,
        /// The model's rate.
        needed: usize,
    },
    /// An input file that cannot be used (format, shape, values).
    #[error("cannot use {path}: {detail}")]
    Input {
        /// The input path.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Setting up the Mimi codec failed (config, tensors, session capacity).
    #[error(transparent)]
    MimiInit(#[from] crate::speech::mimi_init::MimiInitError),
    /// A Mimi session refused or failed a frame.
    #[error(transparent)]
    MimiSession(#[from] crate::speech::mimi_session::MimiSessionError),
    /// The Moshi executor refused or failed (config, weights, sampling, codes).
    #[error(transparent)]
    Moshi(crate::speech::moshi_executor::MoshiExecutorError),
    /// A conversation could not be set up or failed (models, persona, frames).
    #[error(transparent)]
    Converse(#[from] crate::speech::converse::ConverseError),
    /// The Mimi codec failed on a batch call.
    #[error(transparent)]
    Mimi(#[from] voxlane_actors::speech::mimi::MimiError),
    /// The server could not start or failed while serving.
    #[cfg(feature = "serve")]
    #[error(transparent)]
    Serve(#[from] crate::serve::shell::ServeError),
}

/// voxlane: real-time speech generation on the CPU, from state machines.
#[derive(Debug, Parser)]
#[command(
    name = "voxlane",
    version,
    about = "voxlane: real-time speech generation on the CPU, from state machines"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Speak English text into a 24 kHz WAV (Kokoro-82M).
    Speak(speak::SpeakArgs),
    /// Download the default model, vocab and voices into $VOXLANE_HOME (~/.cache/voxlane).
    Fetch,
    /// The Mimi codec: 24 kHz audio to codes and back (`encode`, `decode`, `roundtrip`).
    Mimi {
        /// What to do.
        #[command(subcommand)]
        command: mimi::MimiCommand,
    },
    /// The Moshi speech-text LM: tokens from the other speaker's codes, or a chat from a WAV.
    Moshi {
        /// What to do.
        #[command(subcommand)]
        command: Box<moshi::MoshiCommand>,
    },
    /// A full-duplex conversation: the user's WAV in, the agent's WAV out (Moshi or PersonaPlex).
    Converse(Box<converse::ConverseArgs>),
    /// Serve over HTTP/websocket: `--duplex` is Kyutai's full-duplex protocol at /api/chat.
    #[cfg(feature = "serve")]
    Serve(Box<serve::ServeArgs>),
    /// Show the CPU features and SIMD route kernels will use.
    Info {
        /// Compute threads to check the budget for.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Start the lane pool with each lane pinned to a core.
        #[arg(long)]
        pin: bool,
    },
    /// List the state machines (`--json`: every machine's states, events and edges).
    Machines {
        /// Print JSON: each machine's family, states, events and edges.
        #[arg(long)]
        json: bool,
    },
    /// Print a machine's mermaid diagram (generated from its transition table).
    Diagram {
        /// Machine name, as listed by `voxlane machines`.
        machine: String,
    },
}

fn check_threads(threads: usize) -> Result<usize, CliError> {
    match threads {
        0 => Err(CliError::Threads("the budget must be at least 1".into())),
        t if t > crate::pool::lane_dispatch::guards::MAX_THREADS => {
            Err(CliError::Threads(format!(
                "{t} exceeds the maximum {}",
                crate::pool::lane_dispatch::guards::MAX_THREADS
            )))
        }
        t => Ok(t),
    }
}

/// Run a parsed command line, writing its report to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    run_with_stdin(cli, &mut std::io::stdin().lock(), out)
}

/// Run a parsed command line reading text from `stdin` (`speak -`), writing to `out`.
pub fn run_with_stdin(cli: Cli, stdin: &mut dyn Read, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Speak(args) => {
            let req = speak::validate(args, stdin)?;
            synth::speak(req, &mut std::io::stderr().lock(), out)
        }
        Command::Mimi { command } => mimi::run(command, out),
        Command::Moshi { command } => moshi::run(*command, out),
        Command::Converse(a) => converse::run(*a, out),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(*a, out),
        Command::Fetch => fetch::run(out),
        Command::Info { threads, pin } => info::run(threads, pin, out),
        Command::Machines { json } => machines::run(json, out),
        Command::Diagram { machine } => diagram::run(machine, out),
    }
}

/// Parse `args` (program name first) and run, writing to `out`.
pub fn run_args<I, T>(args: I, out: &mut dyn Write) -> Result<(), CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(|e| CliError::Usage(e.to_string()))?;
    run(cli, out)
}

/// Parse `args` (program name first) and run with `stdin` as standard input.
pub fn run_args_with_stdin<I, T>(
    args: I,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<(), CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(|e| CliError::Usage(e.to_string()))?;
    run_with_stdin(cli, stdin, out)
}

/// Parse the process's command line, run, and map errors to exit code 2 with a message.
pub fn main() -> ExitCode {
    match run(Cli::parse(), &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("voxlane: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parse and validate a `voxlane speak ...` command line without
/// synthesizing: every typed error `speak` can raise before work starts.
pub fn check_speak<I, T>(args: I, stdin: &mut dyn Read) -> Result<speak::SpeakRequest, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(|e| CliError::Usage(e.to_string()))?;
    match cli.command {
        Command::Speak(args) => speak::validate(args, stdin),
        _ => Err(CliError::Usage("expected `voxlane speak ...`".into())),
    }
}
