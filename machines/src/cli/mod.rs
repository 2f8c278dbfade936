//! `voxlane` subcommands. Each parses its flags, validates them into typed
//! errors (never a panic), and drives machines through the public API.

use clap::{Parser, Subcommand};
use std::io::Write;
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
    /// A feature that lands with a later issue.
    #[error("{0} is not available yet: it lands with the Kokoro TTS issue")]
    NotYet(&'static str),
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
    Speak {
        /// Output WAV file.
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
        /// Compute threads, the caller included.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Text to speak (`-` reads stdin).
        text: Vec<String>,
    },
    /// Show the CPU features and SIMD route kernels will use.
    Info {
        /// Compute threads to check the budget for.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// List the state machines.
    Machines,
    /// Print a machine's mermaid diagram (generated from its transition table).
    Diagram {
        /// Machine name, as listed by `voxlane machines`.
        machine: String,
    },
}

fn check_threads(threads: usize) -> Result<usize, CliError> {
    match threads {
        0 => Err(CliError::Threads("the budget must be at least 1".into())),
        t if t > crate::lane_dispatch::guards::MAX_THREADS => Err(CliError::Threads(format!(
            "{t} exceeds the maximum {}",
            crate::lane_dispatch::guards::MAX_THREADS
        ))),
        t => Ok(t),
    }
}

/// Run a parsed command line, writing its report to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Speak { threads, .. } => {
            check_threads(threads)?;
            Err(CliError::NotYet("`voxlane speak`"))
        }
        Command::Info { threads } => {
            let threads = check_threads(threads)?;
            let f = voxlane_actors::kernels::cpu::features();
            writeln!(
                out,
                "simd level: {:?}",
                voxlane_actors::kernels::cpu::simd_level()
            )?;
            writeln!(out, "features:   {f:?}")?;
            writeln!(
                out,
                "cores:      {}",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            )?;
            writeln!(
                out,
                "threads:    {threads} (the caller plus {} lane workers)",
                threads - 1
            )?;
            Ok(())
        }
        Command::Machines => {
            for spec in crate::registry::all_specs() {
                writeln!(out, "{:<24} {}", spec.name, spec.doc)?;
            }
            Ok(())
        }
        Command::Diagram { machine } => {
            let spec = crate::registry::all_specs()
                .into_iter()
                .find(|s| s.name == machine)
                .ok_or(CliError::UnknownMachine(machine))?;
            write!(out, "{}", crate::core::diagram::render_mermaid(spec))?;
            Ok(())
        }
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
