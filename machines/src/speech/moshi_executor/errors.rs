//! Typed rejections of `moshi_executor`.

use crate::speech::logits_sampler::SamplerMachineError;
use voxlane_actors::speech::moshi::MoshiError;

/// Why the executor refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum MoshiExecutorError {
    /// The model failed: config, weights, kernels.
    #[error(transparent)]
    Moshi(#[from] MoshiError),
    /// A sampler rejected its parameters or logits.
    #[error("{stream} sampler: {source}")]
    Sampler {
        /// `text` or `audio`.
        stream: &'static str,
        /// The sampler's error.
        source: SamplerMachineError,
    },
    /// The other speaker's codes have the wrong count.
    #[error("{got} codes from the other speaker, the model reads {want} per frame")]
    CodesShape {
        /// Codes given.
        got: usize,
        /// Codes per frame (`n_q − dep_q`).
        want: usize,
    },
    /// A code outside the codebook.
    #[error("code {code} at codebook {index} is outside 0..{card}")]
    CodeRange {
        /// Codebook index.
        index: usize,
        /// The code.
        code: u32,
        /// Codebook size.
        card: usize,
    },
    /// Forced tokens of the wrong count or outside their vocabulary.
    #[error("forced tokens: {0}")]
    Forced(String),
    /// The session would not fit the capacity it was given.
    #[error("a session needs {need} bytes, capacity is {capacity}")]
    Capacity {
        /// Bytes the session's rings and buffers need.
        need: usize,
        /// Bytes allowed.
        capacity: usize,
    },
    /// A request that needs a model before `initialize`.
    #[error("the executor has no model: initialize first")]
    NotInitialized,
    /// A second `initialize`.
    #[error("the executor is already initialized")]
    AlreadyInitialized,
    /// A PersonaPlex request (prefill, saved embedding, token ring) on a Moshi session.
    #[error("`{0}` needs a PersonaPlex session (a model whose depformer predicts both speakers)")]
    NotPersona(&'static str),
    /// `step` before `bind_session`.
    #[error("no session is bound: bind_session first")]
    NoSession,
    /// A request after `close`.
    #[error("the executor is closed")]
    Closed,
    /// An outcome event arrived without its payload.
    #[error("outcome event `{0}` carries no payload")]
    MissingPayload(&'static str),
    /// An event that no edge of the current state takes.
    #[error("event `{event}` is not accepted in state `{state}`")]
    Unexpected {
        /// The event kind.
        event: &'static str,
        /// The state it arrived in.
        state: &'static str,
    },
}

impl MoshiExecutorError {
    /// A stable, short reason code (diagnostics key).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Moshi(e) => match e {
                MoshiError::Json(_) | MoshiError::Config { .. } => "config",
                MoshiError::Io { .. } | MoshiError::Weights(_) => "weights_file",
                MoshiError::MissingTensors(_) => "missing_tensors",
                MoshiError::UnexpectedTensors(_) => "unexpected_tensors",
                MoshiError::Shape { .. } => "tensor_shape",
                MoshiError::Dtype { .. } => "tensor_dtype",
                MoshiError::Input(_) => "input",
                MoshiError::Sampler(s) => s.reason(),
                MoshiError::Kernel(_) => "kernel",
                MoshiError::Cache(_) => "weights_cache",
            },
            Self::Sampler { source, .. } => source.reason(),
            Self::CodesShape { .. } => "codes_shape",
            Self::CodeRange { .. } => "code_range",
            Self::Forced(_) => "forced_tokens",
            Self::Capacity { .. } => "capacity",
            Self::NotInitialized => "not_initialized",
            Self::AlreadyInitialized => "already_initialized",
            Self::NoSession => "no_session",
            Self::NotPersona(_) => "not_persona",
            Self::Closed => "closed",
            Self::MissingPayload(_) => "missing_payload",
            Self::Unexpected { .. } => "unexpected_event",
        }
    }
}
