//! The speech routes' model side: `workers` Kokoro instances (each a
//! [`Tts`] with its share of the thread budget) on OS threads of their own,
//! fed from one job queue. A job's chunks come back over a bounded channel
//! as each is synthesized; when the client goes away the channel closes and
//! the worker drops the synthesis (which cancels the rest) and takes the
//! next job.

use super::voices::{openai_aliases, to_voice_spec};
use crate::serve::debug::LiveMachines;
use crate::tts::{SynthOptions, Tts, TtsError, TtsPaths, WordTime, SAMPLE_RATE};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use voxlane_actors::tts::voices::Voices;
use voxlane_runtime::DiagnosticsSnapshot;
use voxlane_runtime::{PoolError, PoolOptions};

/// Chunks in flight between a worker and its client (back-pressure beyond):
/// one waits while the client plays the one before (a chunk holds up to
/// ~30 s of audio, so more would hold minutes of audio a slow client has
/// not asked for yet).
const CHUNKS_IN_FLIGHT: usize = 1;

/// One synthesized piece of audio and the words timed in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    /// 24 kHz mono samples.
    pub pcm: Vec<f32>,
    /// Its chunk's words, seconds from the start of the utterance (only with
    /// `timestamps`, and only on a chunk's first piece).
    pub words: Vec<WordTime>,
}

/// One synthesized chunk, or why synthesis stopped.
pub type Chunk = Result<Audio, TtsError>;

/// How the engine splits its thread budget.
#[derive(Debug, Clone, Copy)]
pub struct SpeechEngineConfig {
    /// Syntheses run at once (one Kokoro instance each).
    pub workers: usize,
    /// Compute threads in all, split between the workers (each ≥ 1).
    pub threads: usize,
    /// Pin each lane to its own core.
    pub pin: bool,
    /// The longest `input` a request may carry, in characters (a 413 beyond).
    pub max_input_chars: usize,
}

impl SpeechEngineConfig {
    /// `threads` split into as many workers as leave each two threads
    /// (one worker below four threads): first audio stays quick for one
    /// client while a bigger budget serves several.
    pub fn for_threads(threads: usize) -> Self {
        Self {
            workers: (threads / 2).max(1),
            threads,
            pin: false,
            max_input_chars: super::request::MAX_INPUT_CHARS,
        }
    }

    /// Each worker's lanes: the budget split as evenly as it goes.
    pub fn lanes(&self) -> Vec<usize> {
        let (k, n) = (self.workers.max(1), self.threads);
        (0..k).map(|i| n / k + usize::from(i < n % k)).collect()
    }
}

/// Each worker's machines as of its last chunk (read by `/debug/machines`).
type Published = Arc<Mutex<Vec<Vec<DiagnosticsSnapshot>>>>;

struct Job {
    text: String,
    options: SynthOptions,
    out: tokio::sync::mpsc::Sender<Chunk>,
}

/// Kokoro workers behind a job queue.
pub struct SpeechEngine {
    jobs: Option<crossbeam_channel::Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
    voices: Voices,
    aliases: Vec<(&'static str, String)>,
    busy: Arc<AtomicUsize>,
    published: Published,
    config: SpeechEngineConfig,
}

impl std::fmt::Debug for SpeechEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpeechEngine")
            .field("config", &self.config)
            .field("voices", &self.voices.names())
            .finish_non_exhaustive()
    }
}

/// The engine has stopped (its workers are gone).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the speech engine has stopped")]
pub struct EngineStopped;

impl SpeechEngine {
    /// Loads one Kokoro per worker (threads split by `config.lanes()`).
    pub fn load(paths: &TtsPaths, config: SpeechEngineConfig) -> Result<Self, TtsError> {
        if config.workers == 0 || config.threads == 0 {
            return Err(TtsError::Threads(PoolError::ZeroThreads));
        }
        if config.threads < config.workers {
            // Every worker computes on at least its own thread.
            return Err(TtsError::Threads(PoolError::BudgetExceeded {
                requested: config.workers,
                available: config.threads,
            }));
        }
        let voices = Voices::open(&paths.voices).map_err(TtsError::Voice)?;
        let aliases = openai_aliases(voices.names());
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        let busy = Arc::new(AtomicUsize::new(0));
        let published: Published = Arc::new(Mutex::new(vec![Vec::new(); config.workers]));
        let mut workers = Vec::with_capacity(config.workers);
        for (i, threads) in config.lanes().into_iter().enumerate() {
            let mut tts = Tts::load_with(
                paths,
                PoolOptions {
                    threads,
                    pin: config.pin,
                },
            )?;
            publish(&published, i, tts.machines());
            let queue = queue.clone();
            let busy = busy.clone();
            let published = published.clone();
            let handle = std::thread::Builder::new()
                .name(format!("voxlane-speech-{i}"))
                .spawn(move || work(tts, &queue, &busy, &published, i))
                .map_err(|e| TtsError::Threads(PoolError::Spawn(e.to_string())))?;
            workers.push(handle);
        }
        Ok(Self {
            jobs: Some(jobs),
            workers,
            voices,
            aliases,
            busy,
            published,
            config,
        })
    }

    /// The split of the thread budget.
    pub fn config(&self) -> SpeechEngineConfig {
        self.config
    }

    /// The voices of the loaded pack.
    pub fn voices(&self) -> &[String] {
        self.voices.names()
    }

    /// OpenAI's voice names served, with the pack voice each stands for.
    pub fn aliases(&self) -> &[(&'static str, String)] {
        &self.aliases
    }

    /// Syntheses running now.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }

    /// A client's voice (a name, blend, OpenAI name or Kokoro-FastAPI blend)
    /// as a voice spec every part of which the pack has.
    pub fn resolve_voice(&self, voice: &str) -> Result<String, String> {
        let spec = to_voice_spec(voice, &self.aliases)?;
        self.voices.check(&spec).map_err(|e| e.to_string())?;
        Ok(spec)
    }

    /// Queues a synthesis; its chunks arrive on the receiver in order. The
    /// caller bounds the queue (the shell's stream permits).
    pub fn submit(
        &self,
        text: String,
        options: SynthOptions,
    ) -> Result<tokio::sync::mpsc::Receiver<Chunk>, EngineStopped> {
        let (out, rx) = tokio::sync::mpsc::channel(CHUNKS_IN_FLIGHT);
        self.jobs
            .as_ref()
            .ok_or(EngineStopped)?
            .send(Job { text, options, out })
            .map_err(|_| EngineStopped)?;
        Ok(rx)
    }

    /// The audio rate of every chunk.
    pub fn sample_rate(&self) -> u32 {
        SAMPLE_RATE
    }
}

impl Drop for SpeechEngine {
    fn drop(&mut self) {
        // Closing the queue ends each worker after its current job.
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl LiveMachines for SpeechEngine {
    /// Every worker's machines as of its last chunk (never waits on a synthesis).
    fn machines(&self, _wait: Duration) -> Option<Vec<DiagnosticsSnapshot>> {
        let published = self.published.lock().unwrap_or_else(|e| e.into_inner());
        Some(published.iter().flatten().cloned().collect())
    }
}

fn publish(published: &Published, worker: usize, machines: Vec<DiagnosticsSnapshot>) {
    let mut p = published.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(slot) = p.get_mut(worker) {
        *slot = machines;
    }
}

/// A worker: one job at a time until the queue closes; its machines are
/// published after every chunk and job.
fn work(
    mut tts: Tts,
    queue: &crossbeam_channel::Receiver<Job>,
    busy: &AtomicUsize,
    published: &Published,
    worker: usize,
) {
    while let Ok(job) = queue.recv() {
        if job.out.is_closed() {
            continue; // the client left while the job was queued
        }
        busy.fetch_add(1, Ordering::SeqCst);
        match tts.synthesize(&job.text, &job.options) {
            Err(e) => {
                let _ = job.out.blocking_send(Err(e));
            }
            Ok(mut synthesis) => {
                while let Some(chunk) = synthesis.next_chunk() {
                    let chunk = chunk.map(<[f32]>::to_vec).map(|pcm| Audio {
                        pcm,
                        words: synthesis.words().to_vec(),
                    });
                    let failed = chunk.is_err();
                    publish(published, worker, synthesis.machines());
                    // A closed channel: the client is gone; dropping the
                    // synthesis cancels what is left.
                    if job.out.blocking_send(chunk).is_err() || failed {
                        break;
                    }
                }
            }
        }
        publish(published, worker, tts.machines());
        busy.fetch_sub(1, Ordering::SeqCst);
    }
}
