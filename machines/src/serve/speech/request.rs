//! OpenAI's speech request, parsed and checked before any model work:
//! `model`, `input`, `voice`, `response_format`, `speed`, `stream`. Unknown
//! fields are ignored (clients send Kokoro-FastAPI's extras); a field of the
//! wrong type or value is a typed [`RequestError`] (an HTTP 400).

use super::formats::AudioFormat;
use serde_json::Value;

/// Model ids served (OpenAI's `tts-1` and `tts-1-hd` are aliases of Kokoro).
pub const MODELS: [&str; 3] = ["kokoro", "tts-1", "tts-1-hd"];
/// Slowest and fastest `speed`.
pub const SPEED_RANGE: std::ops::RangeInclusive<f64> = 0.5..=2.0;
/// The longest `input`, in characters, by default and at most (long text is
/// chunked, not cut; the Kokoro text stage takes up to this many at once).
pub const MAX_INPUT_CHARS: usize = 100_000;

/// A checked speech request.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechRequest {
    /// The model id as sent.
    pub model: String,
    /// The text to speak.
    pub input: String,
    /// The voice as sent (resolved against the pack by the engine).
    pub voice: String,
    /// The audio format of the answer.
    pub format: AudioFormat,
    /// Speaking rate.
    pub speed: f32,
    /// Chunked answer, audio leaving as each sentence is done.
    pub stream: bool,
}

/// What is wrong with a speech request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The body is not JSON, or not a JSON object.
    #[error("the body is not a JSON object: {0}")]
    Json(String),
    /// A required field is absent.
    #[error("`{0}` is required")]
    Missing(&'static str),
    /// A field has the wrong JSON type.
    #[error("`{field}` must be {want}")]
    Type {
        /// The field.
        field: &'static str,
        /// The type it must have.
        want: &'static str,
    },
    /// `model` is not one served.
    #[error("model `{0}` is not served (kokoro, tts-1, tts-1-hd)")]
    Model(String),
    /// `response_format` is not one of the five.
    #[error("response_format `{0}` is not one of mp3, opus, flac, wav, pcm")]
    Format(String),
    /// `speed` is outside 0.5–2.0.
    #[error("speed {0} is outside 0.5 to 2.0")]
    Speed(f64),
    /// `input` is empty or blank.
    #[error("`input` is empty")]
    EmptyInput,
    /// `input` is longer than the server's limit (an HTTP 413).
    #[error("`input` has {chars} characters; at most {max} are accepted")]
    InputTooLong {
        /// Characters sent.
        chars: usize,
        /// The limit (`--max-input-chars`).
        max: usize,
    },
}

impl RequestError {
    /// A stable code for the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Json(_) => "invalid_json",
            Self::Missing(_) => "missing_field",
            Self::Type { .. } => "invalid_type",
            Self::Model(_) => "model_not_found",
            Self::Format(_) => "invalid_response_format",
            Self::Speed(_) => "invalid_speed",
            Self::EmptyInput => "empty_input",
            Self::InputTooLong { .. } => "input_too_long",
        }
    }

    /// The request field at fault (OpenAI's `param`), if one is.
    pub fn param(&self) -> Option<&'static str> {
        match self {
            Self::Json(_) => None,
            Self::Missing(f) | Self::Type { field: f, .. } => Some(f),
            Self::Model(_) => Some("model"),
            Self::Format(_) => Some("response_format"),
            Self::Speed(_) => Some("speed"),
            Self::EmptyInput | Self::InputTooLong { .. } => Some("input"),
        }
    }
}

fn string<'a>(body: &'a Value, field: &'static str) -> Result<Option<&'a str>, RequestError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RequestError::Type {
            field,
            want: "a string",
        }),
    }
}

/// Parses and checks a request body ([`MAX_INPUT_CHARS`] at most).
pub fn parse_request(bytes: &[u8], default_voice: &str) -> Result<SpeechRequest, RequestError> {
    parse_request_limited(bytes, default_voice, MAX_INPUT_CHARS)
}

/// Parses and checks a request body whose `input` may have `max_chars` characters.
pub fn parse_request_limited(
    bytes: &[u8],
    default_voice: &str,
    max_chars: usize,
) -> Result<SpeechRequest, RequestError> {
    let body: Value =
        serde_json::from_slice(bytes).map_err(|e| RequestError::Json(e.to_string()))?;
    if !body.is_object() {
        return Err(RequestError::Json("a JSON object is expected".into()));
    }
    let model = string(&body, "model")?.ok_or(RequestError::Missing("model"))?;
    if !MODELS.contains(&model) {
        return Err(RequestError::Model(model.to_string()));
    }
    let input = string(&body, "input")?.ok_or(RequestError::Missing("input"))?;
    if input.trim().is_empty() {
        return Err(RequestError::EmptyInput);
    }
    let chars = input.chars().count();
    if chars > max_chars {
        return Err(RequestError::InputTooLong {
            chars,
            max: max_chars,
        });
    }
    let voice = string(&body, "voice")?.unwrap_or(default_voice);
    let format = match string(&body, "response_format")? {
        None => AudioFormat::Mp3,
        Some(f) => AudioFormat::parse(f).ok_or_else(|| RequestError::Format(f.to_string()))?,
    };
    let speed = match body.get("speed") {
        None | Some(Value::Null) => 1.0,
        Some(v) => v.as_f64().ok_or(RequestError::Type {
            field: "speed",
            want: "a number",
        })?,
    };
    if !SPEED_RANGE.contains(&speed) {
        return Err(RequestError::Speed(speed));
    }
    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(RequestError::Type {
                field: "stream",
                want: "true or false",
            })
        }
    };
    Ok(SpeechRequest {
        model: model.to_string(),
        input: input.to_string(),
        voice: voice.to_string(),
        format,
        speed: speed as f32,
        stream,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<SpeechRequest, RequestError> {
        parse_request(s.as_bytes(), "jf_alpha")
    }

    #[test]
    fn defaults_and_extras() {
        let r = parse(
            r#"{"model":"tts-1","input":"Hello.","lang_code":"a","normalization_options":{}}"#,
        )
        .unwrap();
        assert_eq!(r.voice, "jf_alpha");
        assert_eq!(r.format, AudioFormat::Mp3);
        assert_eq!(r.speed, 1.0);
        assert!(!r.stream);
        let r = parse(r#"{"model":"kokoro","input":"Hi","voice":"nova","response_format":"pcm","speed":1.5,"stream":true}"#)
            .unwrap();
        assert_eq!(
            (r.voice.as_str(), r.format, r.speed, r.stream),
            ("nova", AudioFormat::Pcm, 1.5, true)
        );
    }

    #[test]
    fn bad_requests_are_typed() {
        use RequestError::*;
        assert!(matches!(parse("{"), Err(Json(_))));
        assert!(matches!(parse("[1]"), Err(Json(_))));
        assert_eq!(parse(r#"{"input":"x"}"#), Err(Missing("model")));
        assert_eq!(
            parse(r#"{"model":"gpt-4o-mini-tts","input":"x"}"#),
            Err(Model("gpt-4o-mini-tts".into()))
        );
        assert_eq!(parse(r#"{"model":"kokoro"}"#), Err(Missing("input")));
        assert_eq!(parse(r#"{"model":"kokoro","input":"  "}"#), Err(EmptyInput));
        assert_eq!(
            parse(r#"{"model":"kokoro","input":7}"#),
            Err(Type {
                field: "input",
                want: "a string"
            })
        );
        assert_eq!(
            parse(r#"{"model":"kokoro","input":"x","response_format":"aac"}"#),
            Err(Format("aac".into()))
        );
        assert_eq!(
            parse(r#"{"model":"kokoro","input":"x","speed":3}"#),
            Err(Speed(3.0))
        );
        assert_eq!(
            parse(r#"{"model":"kokoro","input":"x","speed":"fast"}"#),
            Err(Type {
                field: "speed",
                want: "a number"
            })
        );
        assert_eq!(
            parse(r#"{"model":"kokoro","input":"x","stream":"yes"}"#),
            Err(Type {
                field: "stream",
                want: "true or false"
            })
        );
        let long = format!(
            r#"{{"model":"kokoro","input":"{}"}}"#,
            "a".repeat(MAX_INPUT_CHARS + 1)
        );
        let too_long = InputTooLong {
            chars: MAX_INPUT_CHARS + 1,
            max: MAX_INPUT_CHARS,
        };
        assert_eq!(too_long.param(), Some("input"));
        assert_eq!(parse(&long), Err(too_long));
        assert_eq!(
            parse_request_limited(br#"{"model":"kokoro","input":"abcd"}"#, "jf_alpha", 3),
            Err(InputTooLong { chars: 4, max: 3 })
        );
    }
}
