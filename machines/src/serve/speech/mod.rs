//! OpenAI-compatible speech routes over Kokoro (`voxlane serve` without
//! `--duplex`): `POST /v1/audio/speech` (five formats, streamed or whole),
//! `GET /v1/audio/voices`, `GET /v1/models`, `GET /openapi.json`, and a web page at `/`. Requests are checked before
//! any model work ([`request`]); at most the shell's stream permits
//! (workers + queue) are admitted, the rest get a 503 with `Retry-After` at
//! once; synthesis runs on the [`engine`]'s own threads and a client that
//! leaves cancels its synthesis.

pub mod engine;
pub mod formats;
pub mod request;
pub mod voices;

pub use engine::{Audio, Chunk, EngineStopped, SpeechEngine, SpeechEngineConfig};
pub use formats::{AudioEncoder, AudioFormat};
pub use request::{parse_request, parse_request_limited, RequestError, SpeechRequest};

use crate::cli::synth::word_json;
use crate::serve::shell::{
    ApiError, Counter, Gauge, Histogram, LabelledCounter, ShellState, StreamPermit,
};
use crate::tts::{SynthOptions, TtsError, WordTime};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use std::sync::Arc;
use std::time::Instant;

/// The voice a request without `voice` gets.
pub const DEFAULT_VOICE: &str = crate::cli::speak::DEFAULT_VOICE;

/// What the speech routes share.
struct SpeechState {
    engine: Arc<SpeechEngine>,
    shell: ShellState,
    requests: Counter,
    responses: LabelledCounter,
    refused: Counter,
    failed: Counter,
    audio_ms: Counter,
    first_chunk: Histogram,
    synthesis: Histogram,
    waiting: Gauge,
}

/// Bucket bounds of the first-chunk wait, seconds.
const FIRST_CHUNK_BOUNDS: &[f64] = &[0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0];
/// Bucket bounds of a whole synthesis, seconds.
const SYNTHESIS_BOUNDS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The speech routes over `engine`, counters registered in the shell's metrics.
pub fn routes(engine: Arc<SpeechEngine>, shell: &ShellState) -> Router {
    let m = &shell.metrics;
    let state = Arc::new(SpeechState {
        engine,
        shell: shell.clone(),
        requests: m.counter("voxlane_speech_requests_total", "Speech requests admitted."),
        responses: m.labelled_counter(
            "voxlane_speech_responses_total",
            "Speech responses by HTTP status (a stream counts when its status is sent).",
            "status",
        ),
        refused: m.counter(
            "voxlane_speech_refused_total",
            "Speech requests refused before synthesis (bad request, busy).",
        ),
        failed: m.counter(
            "voxlane_speech_failed_total",
            "Speech requests whose synthesis failed.",
        ),
        audio_ms: m.counter(
            "voxlane_speech_audio_ms_total",
            "Milliseconds of audio synthesized.",
        ),
        first_chunk: m.histogram(
            "voxlane_speech_first_chunk_seconds",
            "From admission to the first audio chunk (queue wait included).",
            FIRST_CHUNK_BOUNDS,
        ),
        synthesis: m.histogram(
            "voxlane_speech_synthesis_seconds",
            "From admission to the last audio chunk of a finished request.",
            SYNTHESIS_BOUNDS,
        ),
        waiting: m.gauge(
            "voxlane_speech_queue_depth",
            "Admitted requests waiting for their first audio chunk.",
        ),
    });
    Router::new()
        .route("/v1/audio/speech", post(speech))
        .route("/v1/audio/speech/timestamps", post(speech_timestamps))
        // Kokoro-FastAPI's name for the same answer.
        .route("/dev/captioned_speech", post(speech_timestamps))
        .route("/v1/audio/voices", get(voices))
        .route("/v1/models", get(models))
        .route("/openapi.json", get(openapi))
        .route("/", get(page))
        .with_state(state)
}

fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

/// A synthesis error as the client sees it: its own mistakes are 4xx.
fn tts_error(e: &TtsError) -> ApiError {
    match e {
        TtsError::EmptyText => bad_request("empty_input", e.to_string()),
        TtsError::Speed(_) => bad_request("invalid_speed", e.to_string()),
        TtsError::Voice(_) => bad_request("invalid_voice", e.to_string()).with_param(Some("voice")),
        TtsError::Text(_) | TtsError::Frontend(_) => bad_request("invalid_input", e.to_string()),
        _ => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "synthesis_failed",
            e.to_string(),
        ),
    }
}

/// `POST /v1/audio/speech`: the audio file (or stream).
async fn speech(State(state): State<Arc<SpeechState>>, body: Bytes) -> Response {
    answer(&state, &body, false).await
}

/// `POST /v1/audio/speech/timestamps`: JSON `{"audio": base64, "timestamps":
/// [{"word", "start", "end"}]}`, or with `stream` one such line per chunk.
async fn speech_timestamps(State(state): State<Arc<SpeechState>>, body: Bytes) -> Response {
    answer(&state, &body, true).await
}

/// One JSON object: `audio` (base64 of `bytes`) and the words timed in it.
fn timed_json(bytes: &[u8], words: &[WordTime]) -> serde_json::Value {
    serde_json::json!({
        "audio": base64::engine::general_purpose::STANDARD.encode(bytes),
        "timestamps": words.iter().map(word_json).collect::<Vec<_>>(),
    })
}

/// A line of the streamed timestamps answer (JSON lines).
fn timed_line(bytes: &[u8], words: &[WordTime]) -> Vec<u8> {
    let mut line = timed_json(bytes, words).to_string().into_bytes();
    line.push(b'\n');
    line
}

async fn answer(state: &Arc<SpeechState>, body: &[u8], timed: bool) -> Response {
    let response = respond(state, body, timed).await;
    state.responses.inc(response.status().as_str());
    response
}

async fn respond(state: &Arc<SpeechState>, body: &[u8], timed: bool) -> Response {
    match start(state, body, timed).await {
        Ok(response) => response,
        Err(e) => {
            state.refused.inc();
            let busy = e.status == StatusCode::SERVICE_UNAVAILABLE;
            let mut response = e.into_response();
            if busy {
                // Every slot and queue place is taken: try again shortly.
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            response
        }
    }
}

async fn start(state: &Arc<SpeechState>, body: &[u8], timed: bool) -> Result<Response, ApiError> {
    let req = parse_request_limited(body, DEFAULT_VOICE, state.engine.config().max_input_chars)
        .map_err(|e| {
            let status = match e {
                RequestError::InputTooLong { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                _ => StatusCode::BAD_REQUEST,
            };
            ApiError::new(status, e.code(), e.to_string()).with_param(e.param())
        })?;
    let voice = state
        .engine
        .resolve_voice(&req.voice)
        .map_err(|e| bad_request("invalid_voice", e).with_param(Some("voice")))?;
    if state.shell.shutdown.is_triggered() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        ));
    }
    let permit =
        state.shell.streams.try_acquire().map_err(|busy| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", busy.to_string())
        })?;
    let options = SynthOptions {
        voice,
        speed: req.speed,
        // A streamed answer starts playing as early as possible.
        early_first_audio: req.stream,
        timestamps: timed,
    };
    let asked = Instant::now();
    let mut chunks = state
        .engine
        .submit(req.input, options)
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "stopped", e.to_string()))?;
    // The first chunk decides the status: a request the model refuses is a
    // JSON 4xx, not a truncated audio stream.
    state.waiting.inc();
    let first = chunks.recv().await;
    state.waiting.dec();
    let first = match first {
        Some(Ok(audio)) => audio,
        Some(Err(e)) => return Err(tts_error(&e)),
        None => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "synthesis_failed",
                "the synthesis ended without audio",
            ))
        }
    };
    state.requests.inc();
    state.first_chunk.observe(asked.elapsed().as_secs_f64());
    let rate = state.engine.sample_rate();
    let encoder = AudioEncoder::new(req.format, rate, req.stream)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "encoder", e.to_string()))?;
    let mut answer = Answer {
        state: state.clone(),
        encoder,
        rate,
        asked,
        _permit: permit,
    };
    let content_type = HeaderValue::from_static(match (timed, req.stream) {
        (false, _) => req.format.content_type(),
        (true, false) => "application/json",
        (true, true) => "application/x-ndjson",
    });
    // The timestamps route wraps each piece of the file in JSON.
    let wrap = move |bytes: Vec<u8>, words: &[WordTime]| {
        if timed {
            timed_line(&bytes, words)
        } else {
            bytes
        }
    };
    if req.stream {
        let head = wrap(
            answer.start(&first.pcm).map_err(encode_error)?,
            &first.words,
        );
        let body = futures_util::stream::unfold(
            (Some(head), chunks, answer, false),
            move |(head, mut chunks, mut answer, done)| async move {
                if let Some(head) = head {
                    return Some((Ok(Bytes::from(head)), (None, chunks, answer, false)));
                }
                if done {
                    return None;
                }
                let item = match chunks.recv().await {
                    Some(Ok(audio)) => answer.push(&audio.pcm).map(|b| wrap(b, &audio.words)),
                    // The end: the encoder's tail, then stop.
                    None => {
                        let tail = answer.finish().map(|b| wrap(b, &[]));
                        return Some((tail.map(Bytes::from), (None, chunks, answer, true)));
                    }
                    Some(Err(e)) => {
                        answer.state.failed.inc();
                        Err(std::io::Error::other(e.to_string()))
                    }
                };
                let stop = item.is_err();
                Some((item.map(Bytes::from), (None, chunks, answer, stop)))
            },
        );
        Ok((
            [(header::CONTENT_TYPE, content_type)],
            Body::from_stream(body),
        )
            .into_response())
    } else {
        let mut bytes = answer.start(&first.pcm).map_err(encode_error)?;
        let mut words = first.words;
        while let Some(chunk) = chunks.recv().await {
            match chunk {
                Ok(audio) => {
                    bytes.extend(answer.push(&audio.pcm).map_err(encode_error)?);
                    words.extend(audio.words);
                }
                Err(e) => {
                    state.failed.inc();
                    return Err(tts_error(&e));
                }
            }
        }
        bytes.extend(answer.finish().map_err(encode_error)?);
        if timed {
            bytes = timed_json(&bytes, &words).to_string().into_bytes();
        }
        Ok(([(header::CONTENT_TYPE, content_type)], bytes).into_response())
    }
}

fn encode_error(e: std::io::Error) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "encoder", e.to_string())
}

/// One response's encoder, holding its stream permit until the body ends.
struct Answer {
    state: Arc<SpeechState>,
    encoder: AudioEncoder,
    rate: u32,
    asked: Instant,
    _permit: StreamPermit,
}

impl Answer {
    fn start(&mut self, first: &[f32]) -> std::io::Result<Vec<u8>> {
        let mut bytes = self.encoder.header().map_err(std::io::Error::other)?;
        bytes.extend(self.push(first)?);
        Ok(bytes)
    }

    fn push(&mut self, pcm: &[f32]) -> std::io::Result<Vec<u8>> {
        self.state
            .audio_ms
            .add(pcm.len() as u64 * 1000 / u64::from(self.rate));
        self.encoder.push(pcm).map_err(std::io::Error::other)
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        self.state
            .synthesis
            .observe(self.asked.elapsed().as_secs_f64());
        self.encoder.finish().map_err(std::io::Error::other)
    }
}

/// `GET /v1/audio/voices`: the pack's voices, then OpenAI's names mapped onto them.
async fn voices(State(state): State<Arc<SpeechState>>) -> Response {
    let mut list: Vec<serde_json::Value> = state
        .engine
        .voices()
        .iter()
        .map(|v| serde_json::json!({ "id": v, "name": v }))
        .collect();
    list.extend(
        state
            .engine
            .aliases()
            .iter()
            .map(|(alias, v)| serde_json::json!({ "id": alias, "name": alias, "alias_of": v })),
    );
    axum::Json(serde_json::json!({ "voices": list })).into_response()
}

/// The web page at `/`: a text box, voice and speed, streamed playback.
pub const PAGE: &str = include_str!("page.html");

/// `GET /`.
async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

/// The routes' OpenAPI 3.1 document (kept beside this module).
pub const OPENAPI: &str = include_str!("openapi.json");

/// `GET /openapi.json`.
async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// `GET /v1/models`, OpenAI's list shape.
async fn models() -> Response {
    let data: Vec<serde_json::Value> = request::MODELS
        .iter()
        .map(|id| serde_json::json!({ "id": id, "object": "model", "created": 0, "owned_by": "voxlane" }))
        .collect();
    axum::Json(serde_json::json!({ "object": "list", "data": data })).into_response()
}
