//! `voxlane speak`: argument validation. Synthesis lands with the Kokoro
//! network; every argument is checked now so bad input fails fast with a
//! typed error before any model is loaded.

use super::CliError;
use std::io::Read;
use std::path::{Path, PathBuf};
use voxlane_actors::tts::frontend::{normalize, split};
use voxlane_actors::tts::voices::{VoiceSpec, Voices};
use voxlane_runtime::fetch::{catalog, Fetcher};

/// The voice used when `--voice` is not given.
pub const DEFAULT_VOICE: &str = "jf_alpha";

/// Slowest and fastest `--speed`.
pub const SPEED_RANGE: std::ops::RangeInclusive<f32> = 0.5..=2.0;

/// `voxlane speak`'s flags, as parsed.
#[derive(Debug, Clone, clap::Args)]
pub struct SpeakArgs {
    /// Output WAV file (24 kHz mono).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Voice name, or a blend such as `jf_alpha:0.7,jm_kumo:0.3`.
    #[arg(long, default_value = DEFAULT_VOICE)]
    pub voice: String,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f32,
    /// Compute threads, the caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Pin each compute lane to its own core.
    #[arg(long)]
    pub pin: bool,
    /// Model file (default: the cached `kokoro-v1.0.int8.onnx`, fetched on first use).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Voice packs `.npz` (default: the cached `kokoro-voices-ja.npz`).
    #[arg(long)]
    pub voices: Option<PathBuf>,
    /// Write audio chunk by chunk as it is generated.
    #[arg(long)]
    pub stream: bool,
    /// Also write each word's start and end (seconds) to this JSON file.
    #[arg(long, value_name = "OUT.json")]
    pub timestamps: Option<PathBuf>,
    /// Text to speak (`-` reads stdin).
    pub text: Vec<String>,
}

/// A validated `speak` request.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeakRequest {
    /// The text.
    pub text: String,
    /// The voice spec (checked against the voice packs when they are at hand).
    pub voice: String,
    /// Speaking rate.
    pub speed: f32,
    /// Compute threads.
    pub threads: usize,
    /// Pin lanes to cores.
    pub pin: bool,
    /// Explicit model file, if given.
    pub model: Option<PathBuf>,
    /// The voice packs file, if given or cached.
    pub voices: Option<PathBuf>,
    /// Write audio as it is generated.
    pub stream: bool,
    /// The output WAV (optional with `--stream`).
    pub output: Option<PathBuf>,
    /// Where the word timestamps go, if asked for.
    pub timestamps: Option<PathBuf>,
}

/// Check every argument; `stdin` is read when the text is `-`.
pub fn validate(args: SpeakArgs, stdin: &mut dyn Read) -> Result<SpeakRequest, CliError> {
    let threads = super::check_threads(args.threads)?;
    if !SPEED_RANGE.contains(&args.speed) {
        return Err(CliError::Speed(args.speed));
    }
    // `--stream` writes PCM to stdout; otherwise a WAV file is the output.
    let output = match (args.output, args.stream) {
        (None, false) => return Err(CliError::MissingOutput),
        (output, _) => output,
    };
    let text = if args.text.len() == 1 && args.text[0] == "-" {
        let mut text = String::new();
        stdin.read_to_string(&mut text).map_err(CliError::Stdin)?;
        text
    } else {
        args.text.join(" ")
    };
    // "Nothing to say" is decided by the frontend's own normaliser and splitter.
    if split(&normalize(&text)).is_empty() {
        return Err(CliError::EmptyText);
    }
    if let Some(output) = &output {
        check_writable(output)?;
    }
    if let Some(timestamps) = &args.timestamps {
        check_writable(timestamps)?;
    }
    if let Some(model) = &args.model {
        if !model.is_file() {
            return Err(CliError::MissingFile {
                what: "model",
                path: model.clone(),
            });
        }
    }
    let voices = match args.voices {
        Some(path) => Some(path),
        // The cached packs, when fetched; otherwise they come on first use.
        None => Fetcher::new()
            .ok()
            .and_then(|f| f.cached(&catalog::KOKORO_VOICES_JA)),
    };
    match &voices {
        Some(path) => {
            Voices::open(path)?.check(&args.voice)?;
        }
        None => {
            VoiceSpec::parse(&args.voice)?;
        }
    }
    Ok(SpeakRequest {
        text,
        voice: args.voice,
        speed: args.speed,
        threads,
        pin: args.pin,
        model: args.model,
        voices,
        stream: args.stream,
        output,
        timestamps: args.timestamps,
    })
}

/// Fail unless a file can be created next to `output` (the WAV is written to
/// a temp file there and renamed, so a failure never leaves a partial WAV).
pub(crate) fn check_writable(output: &Path) -> Result<(), CliError> {
    let bad = |detail: String| CliError::Output {
        path: output.to_path_buf(),
        detail,
    };
    if output.is_dir() {
        return Err(bad("is a directory".into()));
    }
    let name = output
        .file_name()
        .ok_or_else(|| bad("has no file name".into()))?;
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(bad(format!("folder {} does not exist", dir.display())));
    }
    let probe = dir.join(format!(
        ".{}.{}.probe",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| bad(e.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
