//! The `/api/chat` query string (PersonaPlex's web client's parameters) into
//! a [`ConverseRequest`], every bad value a typed [`QueryError`]. Unknown
//! parameters (`worker_auth_id`, `email`, `text_seed`, ...) are ignored, as
//! server.py ignores them.

use super::engine::ConverseRequest;
use std::path::{Path, PathBuf};

/// The longest text prompt accepted, in bytes.
pub const MAX_TEXT_PROMPT: usize = 8192;
/// The largest temperature accepted.
pub const MAX_TEMPERATURE: f32 = 10.0;

/// A query value the server cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// A number that does not parse.
    #[error("{param}: `{value}` is not {expected}")]
    NotANumber {
        /// The parameter.
        param: &'static str,
        /// The value given.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A number outside its range.
    #[error("{param}: {value} is out of range ({expected})")]
    OutOfRange {
        /// The parameter.
        param: &'static str,
        /// The value given.
        value: String,
        /// The range.
        expected: &'static str,
    },
    /// A parameter given more than once.
    #[error("{0} is given more than once")]
    Repeated(&'static str),
    /// A text prompt over [`MAX_TEXT_PROMPT`] bytes.
    #[error("text_prompt is {0} bytes, more than the {MAX_TEXT_PROMPT} accepted")]
    TextTooLong(usize),
    /// A voice name that is not a plain file name (a path, `..`).
    #[error("voice_prompt `{0}` must be a file name inside the voices directory, not a path")]
    VoiceName(String),
    /// A voice the voices directory does not hold.
    #[error("voice_prompt `{name}` not found in {dir}")]
    VoiceNotFound {
        /// The name given.
        name: String,
        /// The server's `--voices-dir`.
        dir: PathBuf,
    },
    /// A voice asked of a server started without `--voices-dir`.
    #[error("voice_prompt `{0}` given but the server has no --voices-dir")]
    NoVoicesDir(String),
}

/// The parameters we read, each once at most.
const KNOWN: [&str; 10] = [
    "text_prompt",
    "voice_prompt",
    "seed",
    "text_temperature",
    "text_topk",
    "audio_temperature",
    "audio_topk",
    "pad_mult",
    "repetition_penalty",
    "repetition_penalty_context",
];

/// Parses `query` (the raw string after `?`, percent-encoded), resolving
/// `voice_prompt` inside `voices_dir`.
pub fn parse_query(
    query: Option<&str>,
    voices_dir: Option<&Path>,
) -> Result<ConverseRequest, QueryError> {
    let mut seen = [false; KNOWN.len()];
    let mut req = ConverseRequest::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let Some(slot) = KNOWN.iter().position(|k| *k == key) else {
            continue;
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(QueryError::Repeated(KNOWN[slot]));
        }
        let value = value.as_ref();
        match KNOWN[slot] {
            "text_prompt" => req.text_prompt = text_prompt(value)?,
            "voice_prompt" => req.voice_prompt = voice_prompt(value, voices_dir)?,
            "seed" => req.seed = seed(value)?,
            "text_temperature" => {
                req.text_temperature = Some(temperature("text_temperature", value)?)
            }
            "text_topk" => req.text_topk = Some(topk("text_topk", value)?),
            "audio_temperature" => {
                req.audio_temperature = Some(temperature("audio_temperature", value)?)
            }
            "audio_topk" => req.audio_topk = Some(topk("audio_topk", value)?),
            "pad_mult" => {
                req.pad_mult = Some(bounded("pad_mult", value, -100.0, 100.0, "-100 to 100")?)
            }
            "repetition_penalty" => {
                req.repetition_penalty = Some(bounded(
                    "repetition_penalty",
                    value,
                    0.01,
                    100.0,
                    "0.01 to 100",
                )?)
            }
            "repetition_penalty_context" => {
                req.repetition_penalty_context = Some(count(
                    "repetition_penalty_context",
                    value,
                    0,
                    1 << 16,
                    "0 to 65536",
                )?)
            }
            _ => {}
        }
    }
    Ok(req)
}

/// An empty prompt is no prompt (server.py's `len(...) > 0`).
fn text_prompt(value: &str) -> Result<Option<String>, QueryError> {
    if value.len() > MAX_TEXT_PROMPT {
        return Err(QueryError::TextTooLong(value.len()));
    }
    Ok((!value.trim().is_empty()).then(|| value.to_string()))
}

/// A plain file name that exists inside `voices_dir`.
fn voice_prompt(value: &str, voices_dir: Option<&Path>) -> Result<Option<PathBuf>, QueryError> {
    if value.is_empty() {
        return Ok(None);
    }
    let plain = Path::new(value).file_name().is_some_and(|f| f == value)
        && !value.contains(['/', '\\'])
        && value != ".."
        && value != ".";
    if !plain {
        return Err(QueryError::VoiceName(value.to_string()));
    }
    let dir = voices_dir.ok_or_else(|| QueryError::NoVoicesDir(value.to_string()))?;
    let path = dir.join(value);
    if !path.is_file() {
        return Err(QueryError::VoiceNotFound {
            name: value.to_string(),
            dir: dir.to_path_buf(),
        });
    }
    Ok(Some(path))
}

/// `-1` (the web client's "random") is no seed.
fn seed(value: &str) -> Result<Option<u64>, QueryError> {
    let n: i128 = value.trim().parse().map_err(|_| QueryError::NotANumber {
        param: "seed",
        value: value.to_string(),
        expected: "an integer",
    })?;
    match n {
        -1 => Ok(None),
        n if (0..=u64::MAX as i128).contains(&n) => Ok(Some(n as u64)),
        _ => Err(QueryError::OutOfRange {
            param: "seed",
            value: value.to_string(),
            expected: "-1 or 0 to 2^64-1",
        }),
    }
}

/// A finite temperature in 0..=[`MAX_TEMPERATURE`].
fn temperature(param: &'static str, value: &str) -> Result<f32, QueryError> {
    bounded(param, value, 0.0, MAX_TEMPERATURE, "0 to 10")
}

/// A top-k of at least 1.
fn topk(param: &'static str, value: &str) -> Result<usize, QueryError> {
    count(param, value, 1, 1 << 20, "1 to 1048576")
}

/// A finite float in `lo..=hi`.
fn bounded(
    param: &'static str,
    value: &str,
    lo: f32,
    hi: f32,
    expected: &'static str,
) -> Result<f32, QueryError> {
    let x: f32 = value.trim().parse().map_err(|_| QueryError::NotANumber {
        param,
        value: value.to_string(),
        expected: "a number",
    })?;
    if !x.is_finite() || x < lo || x > hi {
        return Err(QueryError::OutOfRange {
            param,
            value: value.to_string(),
            expected,
        });
    }
    Ok(x)
}

/// An integer in `lo..=hi`.
fn count(
    param: &'static str,
    value: &str,
    lo: usize,
    hi: usize,
    expected: &'static str,
) -> Result<usize, QueryError> {
    let n: i128 = value.trim().parse().map_err(|_| QueryError::NotANumber {
        param,
        value: value.to_string(),
        expected: "an integer",
    })?;
    if n < lo as i128 || n > hi as i128 {
        return Err(QueryError::OutOfRange {
            param,
            value: value.to_string(),
            expected,
        });
    }
    Ok(n as usize)
}
