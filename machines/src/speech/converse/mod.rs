//! A full-duplex conversation from Rust: Mimi, the LM (Moshi or
//! PersonaPlex) and a SentencePiece tokenizer loaded once, a persona's
//! prompt phase per conversation, then frames pushed through the
//! [`crate::speech::wavefront`] machine, one 80 ms frame in and (two ticks
//! later) one out. `voxlane converse` and `voxlane serve --duplex` are this
//! API plus files and sockets.

pub mod errors;
pub mod persona_cache;
pub mod prompt;

pub use errors::ConverseError;
pub use persona_cache::PersonaCache;
pub use prompt::{run_prompt, PersonaPrompt, PromptReport};

use crate::speech::mimi_init::{InitReply, MimiInit};
use crate::speech::mimi_session::decode::DecodeSessionMachine;
use crate::speech::mimi_session::encode::EncodeSessionMachine;
use crate::speech::mimi_session::SessionReply;
use crate::speech::moshi_executor::{BindSession, Initialize, MoshiExecutor, WeightsSource};
use crate::speech::wavefront::{OutFrame, Stages, Wavefront};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use voxlane_actors::speech::mimi::{MimiConfig, MimiOptions};
use voxlane_actors::speech::moshi::{
    wrap_with_system_tags, CacheUse, LmWeights, MoshiConfig, StreamSampling,
};
use voxlane_actors::speech::voice::prompt::VoicePrompt;
use voxlane_actors::text::sentencepiece::SentencePiece;
use voxlane_runtime::weights::WeightFile;
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// Streaming state a Mimi session may hold (generous: one frame per push).
const MIMI_SESSION_BYTES: usize = 1 << 30;

/// Where the models are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversePaths {
    /// The LM's weights (safetensors, official naming), or seeded random weights.
    pub lm: WeightsSource,
    /// Mimi's weights (safetensors, official naming).
    pub mimi: PathBuf,
    /// The text stream's SentencePiece model.
    pub tokenizer: PathBuf,
    /// A config JSON (`lm_config` / `mimi_config` keys, or a bare LM
    /// config); without it the official shapes, PersonaPlex's when the
    /// checkpoint holds 16 depformer steps.
    pub config: Option<PathBuf>,
    /// Mimi's config when it is not in `config` (a Mimi config JSON).
    pub mimi_config: Option<PathBuf>,
}

/// How to run the models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConverseOptions {
    /// The whole thread budget, caller included.
    pub threads: usize,
    /// Storage of the LM's linears.
    pub route: LmWeights,
    /// Keep converted linears here (`None`: convert at every load).
    pub weights_cache: Option<PathBuf>,
    /// Force PersonaPlex's config when the checkpoint alone cannot tell.
    pub personaplex: bool,
    /// Keep PersonaPlex sessions after their prompt here (`$VOXLANE_HOME/personas`):
    /// a repeated persona starts without re-running its prompt.
    pub persona_cache: Option<PathBuf>,
}

impl Default for ConverseOptions {
    fn default() -> Self {
        Self {
            threads: 1,
            route: LmWeights::AsStored,
            weights_cache: None,
            personaplex: false,
            persona_cache: None,
        }
    }
}

/// A loaded conversation engine: one conversation at a time.
pub struct Converser {
    wavefront: Wavefront,
    /// The stages while no conversation runs (the prompt phase uses them).
    parked: Option<Stages>,
    spm: SentencePiece,
    cfg: MoshiConfig,
    frame_size: usize,
    sample_rate: u32,
    weights_note: String,
    /// The models' identity in persona cache keys.
    model_id: String,
    persona_cache: Option<PersonaCache>,
}

/// A file's identity: path, size, modification time.
fn file_id(p: &Path) -> String {
    let meta = std::fs::metadata(p).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let path = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    format!("{}:{}:{mtime}", path.display(), meta.map_or(0, |m| m.len()))
}

/// The LM and Mimi configs `paths` selects (see [`ConversePaths::config`]).
pub fn configs(
    paths: &ConversePaths,
    personaplex: bool,
) -> Result<(MoshiConfig, MimiConfig), ConverseError> {
    let cfg_err = |path: &Path, detail: String| ConverseError::Config {
        path: path.to_path_buf(),
        detail,
    };
    let (lm, mimi_in_config) = match &paths.config {
        Some(p) => {
            let lm = MoshiConfig::from_file(p).map_err(|e| cfg_err(p, e.to_string()))?;
            let text = std::fs::read_to_string(p).map_err(|e| cfg_err(p, e.to_string()))?;
            let mimi = if text.contains("\"mimi_config\"") {
                Some(MimiConfig::from_file(p).map_err(|e| cfg_err(p, e.to_string()))?)
            } else {
                None
            };
            (lm, mimi)
        }
        None => {
            let mut lm = MoshiConfig::default();
            // PersonaPlex is Moshi 7B with a depformer over both speakers (dep_q 16).
            let sixteen = match &paths.lm {
                WeightsSource::File(f) => WeightFile::open(f)
                    .map(|w| w.get("linears.15.weight").is_some())
                    .unwrap_or(false),
                WeightsSource::Random(_) => false,
            };
            if personaplex || sixteen {
                lm.dep_q = lm.n_q;
            }
            (lm, None)
        }
    };
    let mimi = match (&paths.mimi_config, mimi_in_config) {
        (Some(p), _) => MimiConfig::from_file(p).map_err(|e| cfg_err(p, e.to_string()))?,
        (None, Some(m)) => m,
        (None, None) => MimiConfig::default(),
    };
    Ok((lm, mimi))
}

fn session_ok(r: SessionReply, what: &str) -> Result<(), ConverseError> {
    match r {
        SessionReply::Opened { .. } | SessionReply::ResetDone | SessionReply::Done { .. } => Ok(()),
        SessionReply::Error(e) => Err(e.into()),
        other => Err(ConverseError::Mismatch(format!("{what} replied {other:?}"))),
    }
}

impl Converser {
    /// Load Mimi, the LM and the tokenizer onto a pool of `opts.threads`.
    pub fn load(paths: &ConversePaths, opts: &ConverseOptions) -> Result<Self, ConverseError> {
        let (cfg, mcfg) = configs(paths, opts.personaplex)?;
        let spm = SentencePiece::open(&paths.tokenizer).map_err(|e| ConverseError::Tokenizer {
            path: paths.tokenizer.clone(),
            detail: e.to_string(),
        })?;
        let pool = Arc::new(
            LanePool::new(opts.threads)
                .map_err(|e| ConverseError::Mismatch(format!("thread budget: {e}")))?,
        );
        let mut init = MimiInit::new();
        // PersonaPlex's Mimi streams with NVIDIA's attention ring, as its LM does.
        let mimi_options = MimiOptions {
            nvidia_ring: cfg.is_persona(),
            ..MimiOptions::default()
        };
        match init.initialize_file(mcfg, &paths.mimi, mimi_options) {
            InitReply::Initialized { .. } => {}
            InitReply::Error(e) => return Err(e.into()),
            other => {
                return Err(ConverseError::Mismatch(format!(
                    "mimi_init replied {other:?}"
                )))
            }
        }
        let model = init
            .model()
            .cloned()
            .ok_or_else(|| ConverseError::Mismatch("mimi_init bound no model".into()))?;
        let mut encoder = EncodeSessionMachine::new();
        session_ok(
            encoder.open(init.bind_encoder(1, MIMI_SESSION_BYTES)?),
            "the Mimi encoder",
        )?;
        let mut decoder = DecodeSessionMachine::new();
        session_ok(
            decoder.open(init.bind_decoder(1, MIMI_SESSION_BYTES)?),
            "the Mimi decoder",
        )?;
        let mut lm = MoshiExecutor::new();
        let (_, cache) = lm.initialize(Initialize {
            config: cfg.clone(),
            weights: paths.lm.clone(),
            route: opts.route,
            pool: pool.clone(),
            cache_dir: opts.weights_cache.clone(),
        })?;
        lm.bind_session(BindSession {
            sampling: StreamSampling::GREEDY,
            seed: 0,
            capacity_bytes: None,
        })?;
        let weights_note = match cache {
            CacheUse::Hit(p) => format!("LM weights mapped from {}", p.display()),
            CacheUse::Written(p) => format!("LM weights converted, kept in {}", p.display()),
            CacheUse::Off => "LM weights converted".to_string(),
        };
        let stages = Stages {
            encoder,
            lm,
            decoder,
            pool,
        };
        stages.shape().map_err(ConverseError::Mismatch)?;
        let rate = u32::try_from(model.config().sample_rate)
            .map_err(|_| ConverseError::Mismatch("Mimi's sample rate".into()))?;
        let lm_id = match &paths.lm {
            WeightsSource::File(f) => file_id(f),
            WeightsSource::Random(seed) => format!("random:{seed}"),
        };
        let model_id = format!(
            "lm={lm_id};mimi={};route={};chunk={};cfg={cfg:?};mcfg={:?}",
            file_id(&paths.mimi),
            opts.route.name(),
            voxlane_actors::speech::moshi::PREFILL_CHUNK,
            model.config()
        );
        Ok(Self {
            wavefront: Wavefront::new(),
            parked: Some(stages),
            model_id,
            persona_cache: opts.persona_cache.clone().map(PersonaCache::new),
            spm,
            cfg,
            frame_size: model.frame_size(),
            sample_rate: rate,
            weights_note,
        })
    }

    /// Whether the LM is PersonaPlex (takes voice and text prompts).
    pub fn is_persona(&self) -> bool {
        self.cfg.dep_q == self.cfg.n_q
    }

    /// The LM's config.
    pub fn config(&self) -> &MoshiConfig {
        &self.cfg
    }

    /// Samples per frame (1920).
    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Mimi's sample rate (24 kHz).
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// How the LM's weights were loaded (converted, cached, mapped).
    pub fn weights_note(&self) -> &str {
        &self.weights_note
    }

    /// A persona from a voice prompt file (`.wav`, `.pt`, `.safetensors`)
    /// and a text prompt (wrapped in `<system>` tags unless it is).
    pub fn persona(
        &self,
        voice: Option<&Path>,
        text: Option<&str>,
    ) -> Result<PersonaPrompt, ConverseError> {
        if !self.is_persona() {
            if voice.is_some() {
                return Err(ConverseError::NotPersona("a voice prompt"));
            }
            if text.is_some() {
                return Err(ConverseError::NotPersona("a text prompt"));
            }
        }
        let (voice, voice_digest) = match voice {
            Some(p) => {
                let v = VoicePrompt::load(p, self.cfg.dim, self.cfg.n_q / 2)?;
                v.check_cache_width(self.cfg.max_delay())?;
                (Some(v), persona_cache::file_digest(p).ok())
            }
            None => (None, None),
        };
        let text_ids = match text {
            Some(t) if t.trim().is_empty() => return Err(ConverseError::EmptyTextPrompt),
            Some(t) => self.spm.encode(&wrap_with_system_tags(t)),
            None => Vec::new(),
        };
        Ok(PersonaPrompt {
            voice,
            text_ids,
            voice_digest,
        })
    }

    fn stages(&mut self) -> Result<Stages, ConverseError> {
        match self.parked.take() {
            Some(s) => Ok(s),
            None => self
                .wavefront
                .release()
                .ok_or_else(|| ConverseError::Mismatch("the stages were lost".into())),
        }
    }

    /// Start a conversation: a fresh LM session (`sampling`, `seed`), the
    /// persona's prompt phase (PersonaPlex; none for Moshi), every stream
    /// restarted, the wavefront bound.
    pub fn start(
        &mut self,
        persona: &PersonaPrompt,
        sampling: StreamSampling,
        seed: u64,
    ) -> Result<PromptReport, ConverseError> {
        let mut st = self.stages()?;
        let r = (|| {
            st.lm.bind_session(BindSession {
                sampling,
                seed,
                capacity_bytes: None,
            })?;
            session_ok(st.encoder.reset(), "the Mimi encoder")?;
            session_ok(st.decoder.reset(), "the Mimi decoder")?;
            if !self.is_persona() {
                return Ok(PromptReport {
                    steps: 0,
                    prefilled: 0,
                    cached: false,
                });
            }
            // A voice prompt whose file could not be digested is never cached.
            let key = match (&self.persona_cache, &persona.voice, persona.voice_digest) {
                (Some(_), Some(_), None) => None,
                (Some(_), _, digest) => Some(PersonaCache::key(
                    &self.model_id,
                    digest.as_ref(),
                    &persona.text_ids,
                )),
                (None, ..) => None,
            };
            if let (Some(cache), Some(key)) = (&self.persona_cache, &key) {
                if let Some(snap) = cache.load(key) {
                    if st.lm.restore(snap).is_ok() {
                        return Ok(PromptReport {
                            steps: st.lm.calls().unwrap_or(0),
                            prefilled: 0,
                            cached: true,
                        });
                    }
                }
            }
            let report = run_prompt(&mut st, persona, self.cfg.text_padding_id as u32)?;
            if let (Some(cache), Some(key)) = (&self.persona_cache, &key) {
                // A cache that cannot be written only costs the next start its prompt.
                match st.lm.snapshot() {
                    Ok(snap) => {
                        if let Err(e) = cache.store(key, &snap) {
                            tracing::warn!("persona cache not written: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("persona session not saved: {e}"),
                }
            }
            Ok(report)
        })();
        match r {
            Ok(report) => {
                self.wavefront.bind(st)?;
                Ok(report)
            }
            Err(e) => {
                self.parked = Some(st);
                Err(e)
            }
        }
    }

    /// Push one frame of the user's PCM; the agent's frame that comes out, if any.
    pub fn push(&mut self, pcm: &[f32]) -> Result<Option<OutFrame<'_>>, ConverseError> {
        Ok(self.wavefront.push(pcm)?)
    }

    /// After the last input: the next frame still in flight, `None` when all are out.
    pub fn flush(&mut self) -> Result<Option<OutFrame<'_>>, ConverseError> {
        Ok(self.wavefront.flush()?)
    }

    /// The text piece of a text token: `None` for padding (`PAD` 3, `EPAD` 0),
    /// else the SentencePiece piece with `▁` as a space.
    pub fn text_piece(&self, token: u32) -> Option<String> {
        match token {
            0 | 3 => None,
            t => Some(
                self.spm
                    .id_to_piece(t)
                    .map_or_else(|| format!("<{t}>"), |p| p.replace('\u{2581}', " ")),
            ),
        }
    }

    /// The wavefront machine (diagnostics, state).
    pub fn wavefront(&mut self) -> &mut Wavefront {
        &mut self.wavefront
    }

    /// Every machine the converser holds, with its live counters: the
    /// wavefront, then the Mimi encoder, the LM and the Mimi decoder it drives
    /// (parked or bound). What a server's `/debug/machines` shows.
    pub fn machines(&mut self) -> Vec<DiagnosticsSnapshot> {
        let mut out: Vec<DiagnosticsSnapshot> = self.wavefront.diagnostics().into_iter().collect();
        let stages = match self.parked.as_mut() {
            Some(s) => Some(s),
            None => self.wavefront.stages_mut(),
        };
        if let Some(st) = stages {
            if let SessionReply::Diagnostics(d) = st.encoder.diagnostics() {
                out.push(d);
            }
            out.extend(st.lm.diagnostics());
            if let SessionReply::Diagnostics(d) = st.decoder.diagnostics() {
                out.push(d);
            }
        }
        out
    }
}
