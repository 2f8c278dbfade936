//! `voxlane mimi encode|decode|roundtrip`: the Mimi codec on files.
//!
//! Audio is 24 kHz: WAV (16-bit PCM or 32-bit float; stereo is downmixed to
//! mono by averaging the channels; any other rate is refused with the rate
//! found) or `.npy` float (`[samples]`, `[1, samples]` or `[1, 1, samples]`).
//! Codes are `.npy` int64 `[1, K, frames]`. The model is set up through the
//! `mimi_init` machine (config and tensors checked by name); batch mode then
//! calls `MimiModel::encode` / `decode` once, `--streaming` pushes frame by
//! frame through `mimi_encode_session` / `mimi_decode_session`. Every
//! argument and input is checked before the model loads, and outputs are
//! written atomically, so a failure leaves no file behind.

use super::CliError;
use crate::speech::mimi_init::{InitReply, MimiInit, MimiInitError};
use crate::speech::mimi_session::decode::DecodeSessionMachine;
use crate::speech::mimi_session::encode::EncodeSessionMachine;
use crate::speech::mimi_session::{MimiSessionError, SessionReply};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use voxlane_actors::speech::mimi::{Codes, MimiConfig, MimiModel, MimiOptions};
use voxlane_runtime::io::{read_npy, read_wav, write_npy, write_wav, NpyArray, NpyData};
use voxlane_runtime::LanePool;

/// The most bytes one streaming session's state may take.
pub const SESSION_CAPACITY_BYTES: usize = 1 << 30;

/// `voxlane mimi`'s subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MimiCommand {
    /// Encode 24 kHz audio (.wav or .npy) into codes (.npy int64 [1, K, frames]).
    Encode(CodecArgs),
    /// Decode codes (.npy [1, K, frames]) into audio (.wav 24 kHz 16-bit, or .npy float32 [1, 1, samples]).
    Decode(CodecArgs),
    /// Encode then decode audio; the output has the input's length.
    Roundtrip(CodecArgs),
}

/// The flags every `voxlane mimi` subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CodecArgs {
    /// Mimi weights (`model.safetensors`); required: there is no downloadable default.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Config JSON (default: the official Mimi shapes).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Compute threads, the caller included.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Code frame by frame through the session machines instead of one batch call.
    #[arg(long)]
    pub streaming: bool,
    /// Quantize the transformer linears to q8_0 (codes may then differ from PyTorch).
    #[arg(long)]
    pub q8: bool,
    /// Quantize the deep SEANet convs and the downsampling conv to q8_0 (codes may then differ).
    #[arg(long)]
    pub q8_convs: bool,
    /// Run the long SEANet convs on bf16 values (AMX-BF16 tiles; codes may then differ).
    #[arg(long)]
    pub bf16_convs: bool,
    /// Output file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Input file.
    pub input: PathBuf,
}

/// Which way a command codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Encode,
    Decode,
    Roundtrip,
}

/// An output file's format, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Wav,
    Npy,
}

fn format_of(path: &Path) -> Option<Format> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("wav") => Some(Format::Wav),
        Some("npy") => Some(Format::Npy),
        _ => None,
    }
}

fn input_error(path: &Path, detail: impl Into<String>) -> CliError {
    CliError::Input {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Run one `voxlane mimi` subcommand, reporting to `out`.
pub fn run(cmd: MimiCommand, out: &mut dyn Write) -> Result<(), CliError> {
    let (mode, args) = match cmd {
        MimiCommand::Encode(a) => (Mode::Encode, a),
        MimiCommand::Decode(a) => (Mode::Decode, a),
        MimiCommand::Roundtrip(a) => (Mode::Roundtrip, a),
    };
    let threads = super::check_threads(args.threads)?;
    let model_path = args.model.clone().ok_or(CliError::MissingFlag {
        flag: "--model",
        detail: "the Mimi weights file (model.safetensors); there is no downloadable default",
    })?;
    if !model_path.is_file() {
        return Err(CliError::MissingFile {
            what: "model",
            path: model_path,
        });
    }
    let output = args.output.clone().ok_or(CliError::MissingFlag {
        flag: "-o/--output",
        detail: "the output file",
    })?;
    let out_format = match (mode, format_of(&output)) {
        (Mode::Encode, Some(Format::Npy)) => Format::Npy,
        (Mode::Encode, _) => {
            return Err(CliError::Output {
                path: output,
                detail: "codes are written as .npy".into(),
            })
        }
        (_, Some(f)) => f,
        (_, None) => {
            return Err(CliError::Output {
                path: output,
                detail: "audio is written as .wav or .npy".into(),
            })
        }
    };
    super::speak::check_writable(&output)?;
    if !args.input.is_file() {
        return Err(CliError::MissingFile {
            what: "input",
            path: args.input,
        });
    }
    let cfg = match &args.config {
        Some(path) => MimiConfig::from_file(path).map_err(MimiInitError::from_mimi)?,
        None => MimiConfig::default(),
    };
    // Inputs are read and checked before the model loads.
    let input = match mode {
        Mode::Encode | Mode::Roundtrip => Input::Audio(read_audio(&args.input, &cfg)?),
        Mode::Decode => Input::Codes(read_codes(
            &args.input,
            cfg.num_codebooks,
            cfg.quantizer.bins,
        )?),
    };
    let pool = LanePool::new(threads).map_err(|e| CliError::Threads(e.to_string()))?;
    let mut init = MimiInit::new();
    let options = MimiOptions {
        q8_transformer: args.q8,
        q8_convs: args.q8_convs,
        bf16_convs: args.bf16_convs,
        nvidia_ring: false,
    };
    match init.initialize_file(cfg, &model_path, options) {
        InitReply::Initialized { .. } => {}
        InitReply::Error(e) => return Err(e.into()),
        other => return Err(CliError::Usage(format!("mimi_init replied {other:?}"))),
    }
    let model = init
        .model()
        .cloned()
        .ok_or_else(|| CliError::Usage("mimi_init bound no model".into()))?;
    let rate = u32::try_from(model.config().sample_rate)
        .map_err(|_| CliError::Usage("sample rate does not fit a WAV header".into()))?;
    let mut codec = Codec {
        init,
        model,
        pool,
        streaming: args.streaming,
    };
    let how = if args.streaming { "streaming" } else { "batch" };
    match input {
        Input::Audio(pcm) if mode == Mode::Encode => {
            let codes = codec.encode(&pcm)?;
            let k = codes.num_codebooks;
            write_codes(&output, &codes)?;
            writeln!(
                out,
                "wrote {} ({} frames of {k} codes, {how})",
                output.display(),
                codes.frames
            )?;
        }
        Input::Audio(pcm) => {
            let codes = codec.encode(&pcm)?;
            let mut audio = codec.decode(&codes)?;
            audio.truncate(pcm.len());
            write_audio(&output, out_format, rate, &audio)?;
            writeln!(
                out,
                "wrote {} ({} samples through {} frames, {how})",
                output.display(),
                audio.len(),
                codes.frames
            )?;
        }
        Input::Codes(codes) => {
            let audio = codec.decode(&codes)?;
            write_audio(&output, out_format, rate, &audio)?;
            writeln!(
                out,
                "wrote {} ({} samples from {} frames, {how})",
                output.display(),
                audio.len(),
                codes.frames
            )?;
        }
    }
    Ok(())
}

enum Input {
    Audio(Vec<f32>),
    Codes(Codes),
}

/// Read mono audio at the config's rate from a WAV or `.npy` file.
pub fn read_audio(path: &Path, cfg: &MimiConfig) -> Result<Vec<f32>, CliError> {
    match format_of(path) {
        Some(Format::Wav) => {
            let wav = read_wav(path).map_err(|e| input_error(path, e.to_string()))?;
            if wav.sample_rate as usize != cfg.sample_rate {
                return Err(CliError::SampleRate {
                    path: path.to_path_buf(),
                    found: wav.sample_rate,
                    needed: cfg.sample_rate,
                });
            }
            let ch = usize::from(wav.channels.max(1));
            Ok(wav
                .samples
                .chunks_exact(ch)
                .map(|frame| frame.iter().sum::<f32>() / ch as f32)
                .collect())
        }
        Some(Format::Npy) => {
            let a = read_npy(path).map_err(|e| input_error(path, e.to_string()))?;
            let mono = a.shape.len() <= 3 && a.shape.iter().rev().skip(1).all(|&d| d == 1);
            if !mono {
                return Err(input_error(
                    path,
                    format!(
                        "expected mono audio shaped [samples], [1, samples] or [1, 1, samples], found {:?}",
                        a.shape
                    ),
                ));
            }
            match a.data {
                NpyData::F32(v) => Ok(v),
                NpyData::F64(v) => Ok(v.iter().map(|&x| x as f32).collect()),
                _ => Err(input_error(
                    path,
                    "audio must be float32 or float64 (integers look like codes: use `mimi decode`)",
                )),
            }
        }
        None => Err(input_error(path, "audio must be a .wav or .npy file")),
    }
}

/// Read `[1, K, frames]` (or `[K, frames]`) integer codes: `k` codebooks of `bins` entries.
pub fn read_codes(path: &Path, k_want: usize, bins: usize) -> Result<Codes, CliError> {
    if format_of(path) != Some(Format::Npy) {
        return Err(input_error(path, "codes must be a .npy file"));
    }
    let a = read_npy(path).map_err(|e| input_error(path, e.to_string()))?;
    let values: Vec<i64> = match &a.data {
        NpyData::I64(v) => v.clone(),
        NpyData::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        _ => {
            return Err(input_error(
                path,
                "codes must be int64 or int32 (floats look like audio: use `mimi encode`)",
            ))
        }
    };
    let (k, frames) = match a.shape.as_slice() {
        [1, k, t] | [k, t] => (*k, *t),
        other => {
            return Err(input_error(
                path,
                format!("codes must be shaped [1, K, frames] or [K, frames], found {other:?}"),
            ))
        }
    };
    if k != k_want {
        return Err(input_error(
            path,
            format!(
                "{k} codebooks, the model uses {k_want} (shape {:?})",
                a.shape
            ),
        ));
    }
    let mut data = Vec::with_capacity(values.len());
    for (i, &c) in values.iter().enumerate() {
        match u32::try_from(c) {
            Ok(c) if (c as usize) < bins => data.push(c),
            _ => {
                return Err(input_error(
                    path,
                    format!(
                        "code {c} (codebook {}, frame {}) is outside 0..{bins}",
                        i / frames.max(1),
                        i % frames.max(1)
                    ),
                ))
            }
        }
    }
    Ok(Codes {
        num_codebooks: k,
        frames,
        data,
    })
}

fn write_codes(path: &Path, codes: &Codes) -> Result<(), CliError> {
    let a = NpyArray {
        shape: vec![1, codes.num_codebooks, codes.frames],
        data: NpyData::I64(codes.data.iter().map(|&c| i64::from(c)).collect()),
    };
    write_npy(path, &a).map_err(|e| CliError::Output {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

fn write_audio(path: &Path, format: Format, rate: u32, audio: &[f32]) -> Result<(), CliError> {
    let bad = |detail: String| CliError::Output {
        path: path.to_path_buf(),
        detail,
    };
    match format {
        Format::Wav => write_wav(path, rate, audio).map_err(|e| bad(e.to_string())),
        Format::Npy => write_npy(
            path,
            &NpyArray {
                shape: vec![1, 1, audio.len()],
                data: NpyData::F32(audio.to_vec()),
            },
        )
        .map_err(|e| bad(e.to_string())),
    }
}

/// A bound model with its setup machine and pool.
struct Codec {
    init: MimiInit,
    model: Arc<MimiModel>,
    pool: LanePool,
    streaming: bool,
}

fn session_error(reply: SessionReply) -> CliError {
    match reply {
        SessionReply::Error(e) => e.into(),
        other => CliError::Usage(format!("mimi session replied {other:?}")),
    }
}

impl Codec {
    /// Encode `pcm` (zero-padded to whole frames).
    fn encode(&mut self, pcm: &[f32]) -> Result<Codes, CliError> {
        if !self.streaming {
            return Ok(self.model.encode(&self.pool, pcm)?);
        }
        let (fs, k) = (self.model.frame_size(), self.model.num_codebooks());
        let frames = pcm.len().div_ceil(fs);
        let mut padded = pcm.to_vec();
        padded.resize(frames * fs, 0.0);
        let session = self.init.bind_encoder(1, SESSION_CAPACITY_BYTES)?;
        let mut enc = EncodeSessionMachine::new();
        match enc.open(session) {
            SessionReply::Opened { .. } => {}
            other => return Err(session_error(other)),
        }
        let mut data = vec![0u32; k * frames];
        let mut col = vec![0u32; k];
        for (t, frame) in padded.chunks_exact(fs).enumerate() {
            match enc.push(&self.pool, frame, &mut col) {
                SessionReply::Done { .. } => {}
                other => return Err(session_error(other)),
            }
            for (kk, c) in col.iter().enumerate() {
                data[kk * frames + t] = *c;
            }
        }
        enc.close();
        Ok(Codes {
            num_codebooks: k,
            frames,
            data,
        })
    }

    /// Decode `codes` into `frames · 1920` samples.
    fn decode(&mut self, codes: &Codes) -> Result<Vec<f32>, CliError> {
        if !self.streaming {
            return Ok(self.model.decode(&self.pool, codes)?);
        }
        let fs = self.model.frame_size();
        let (k, frames) = (codes.num_codebooks, codes.frames);
        if k != self.model.num_codebooks() || codes.data.len() != k * frames {
            return Err(CliError::MimiSession(MimiSessionError::WrongCodeCount {
                got: codes.data.len(),
                codebooks: self.model.num_codebooks(),
                max_frames: frames,
            }));
        }
        let session = self.init.bind_decoder(1, SESSION_CAPACITY_BYTES)?;
        let mut dec = DecodeSessionMachine::new();
        match dec.open(session) {
            SessionReply::Opened { .. } => {}
            other => return Err(session_error(other)),
        }
        let mut audio = vec![0.0f32; frames * fs];
        let mut col = vec![0u32; k];
        for (t, out) in audio.chunks_exact_mut(fs).enumerate() {
            for (kk, c) in col.iter_mut().enumerate() {
                *c = codes.data[kk * frames + t];
            }
            match dec.push(&self.pool, &col, out) {
                SessionReply::Done { .. } => {}
                other => return Err(session_error(other)),
            }
        }
        dec.close();
        Ok(audio)
    }
}
