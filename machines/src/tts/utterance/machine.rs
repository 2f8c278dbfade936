//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). The utterance in flight is state-local data of
//! `synthesizing`, `running_front` and `running_back`, moved along each
//! edge. Events a state does not name fall through to `loaded` (busy /
//! already loaded) and then `tts`, which rejects them with a reason.

use super::actions::*;
use super::errors::TtsError;
use super::events::{Event, Load, Sink, Synthesize, TtsReply, Utterance, WordTime};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::tts::acoustic::AcousticStage;
use crate::tts::text::TextStage;
use crate::tts::vocoder::VocoderStage;
use crate::{internal, transition};
use statig::prelude::*;
use std::mem::take;
use voxlane_actors::tts::voices::Voices;
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// Everything `load` sets up: the lanes, the voices and the three stage machines.
pub struct Stages {
    /// The lane pool every stage computes on.
    pub pool: LanePool,
    /// The voice packs.
    pub voices: Voices,
    /// Text → token chunks (`kokoro_text`).
    pub text: TextStage,
    /// Tokens + style + speed → front output (`kokoro_acoustic`).
    pub acoustic: AcousticStage,
    /// Front output → audio (`kokoro_vocoder`).
    pub vocoder: VocoderStage,
}

/// Context that persists across events: the loaded stages.
pub struct KokoroTtsMachine {
    /// The stages, once loaded.
    pub stages: Option<Stages>,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
    /// The timed words of the last chunk run (kept past the utterance's
    /// end, as its audio is, so the last chunk's words can be read).
    pub word_times: Vec<WordTime>,
}

impl Default for KokoroTtsMachine {
    fn default() -> Self {
        Self {
            stages: None,
            book: Bookkeeping::new(&SPEC),
            word_times: Vec::new(),
        }
    }
}

#[state_machine(
    initial = "State::unloaded()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug))
)]
impl KokoroTtsMachine {
    /// Nothing loaded.
    #[state(superstate = "tts")]
    fn unloaded(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(l) => transition!(
                self,
                always,
                effect_load_stages(self, l, context),
                State::loading()
            ),
            Event::Synthesize(_) | Event::NextChunk | Event::Cancel => {
                internal!(self, always, effect_reject_not_loaded(self, context))
            }
            _ => Super,
        }
    }

    /// The stages loaded; waits for `load_done` / `load_error`.
    #[state(superstate = "tts")]
    fn loading(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::LoadDone => transition!(
                self,
                always,
                effect_reply_loaded(self, context),
                State::ready()
            ),
            Event::LoadError(e) => transition!(
                self,
                always,
                effect_reply_load_error(self, e, context),
                State::unloaded()
            ),
            _ => Super,
        }
    }

    /// Loaded and idle: a `synthesize` is checked, then prepared.
    #[state(superstate = "loaded")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Synthesize(s) if guard_text_empty(self, s) => internal!(
                self,
                guard_text_empty,
                effect_reject_empty_text(self, context)
            ),
            Event::Synthesize(s) if guard_speed_out_of_range(self, s) => internal!(
                self,
                guard_speed_out_of_range,
                effect_reject_speed(self, s, context)
            ),
            Event::Synthesize(s) if guard_voice_unknown(self, s) => internal!(
                self,
                guard_voice_unknown,
                effect_reject_voice(self, s, context)
            ),
            Event::Synthesize(s) if guard_request_valid(self, s) => transition!(
                self,
                guard_request_valid,
                effect_prepare_utterance(self, s, context),
                State::preparing()
            ),
            Event::NextChunk | Event::Cancel => {
                internal!(self, always, effect_reject_not_synthesizing(self, context))
            }
            _ => Super,
        }
    }

    /// The text was tokenized and the voice selected; waits for `prepare_done` / `prepare_error`.
    #[state(superstate = "loaded")]
    fn preparing(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PrepareDone(u) => transition!(
                self,
                always,
                effect_reply_prepared(self, u, context),
                State::synthesizing(u.take().unwrap_or_default())
            ),
            Event::PrepareError(e) => transition!(
                self,
                always,
                effect_reply_prepare_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// An utterance in flight, between chunks: `next_chunk` runs one, `cancel` drops the rest.
    #[state(superstate = "loaded")]
    fn synthesizing(
        &mut self,
        utterance: &mut Utterance,
        context: &mut Sink,
        event: &Event<'_>,
    ) -> Outcome<State> {
        match event {
            Event::NextChunk => transition!(
                self,
                always,
                effect_run_front(self, utterance, context),
                State::running_front(take(utterance))
            ),
            Event::Cancel => transition!(
                self,
                always,
                effect_cancel(self, utterance, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// The chunk went through the front stage; waits for `front_done` / `front_error`.
    #[state(superstate = "loaded")]
    fn running_front(
        &mut self,
        utterance: &mut Utterance,
        context: &mut Sink,
        event: &Event<'_>,
    ) -> Outcome<State> {
        match event {
            Event::FrontDone(o) if guard_whole_chunk(utterance) => transition!(
                self,
                guard_whole_chunk,
                effect_run_back(self, utterance, o, context),
                State::running_back(take(utterance))
            ),
            Event::FrontDone(o) if guard_stream_chunk(utterance) => transition!(
                self,
                guard_stream_chunk,
                effect_stream_back(self, utterance, o, context),
                State::running_back(take(utterance))
            ),
            Event::FrontError(e) => transition!(
                self,
                always,
                effect_reply_chunk_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// The chunk (or a window of it) went through the back stage; waits for
    /// `chunk_done` / `window_done` / `chunk_error`.
    #[state(superstate = "loaded")]
    fn running_back(
        &mut self,
        utterance: &mut Utterance,
        context: &mut Sink,
        event: &Event<'_>,
    ) -> Outcome<State> {
        match event {
            Event::ChunkDone(samples) if guard_more_chunks(utterance) => transition!(
                self,
                guard_more_chunks,
                effect_emit_chunk(self, utterance, *samples, context),
                State::synthesizing(take(utterance))
            ),
            Event::ChunkDone(samples) if guard_last_chunk(utterance) => transition!(
                self,
                guard_last_chunk,
                effect_emit_last_chunk(self, utterance, *samples, context),
                State::ready()
            ),
            Event::WindowDone(samples) => transition!(
                self,
                always,
                effect_emit_window(self, utterance, *samples, context),
                State::streaming_chunk(take(utterance))
            ),
            Event::ChunkError(e) => transition!(
                self,
                always,
                effect_reply_chunk_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// A chunk part-way through its windows: `next_chunk` generates the next
    /// window, `cancel` drops the rest.
    #[state(superstate = "loaded")]
    fn streaming_chunk(
        &mut self,
        utterance: &mut Utterance,
        context: &mut Sink,
        event: &Event<'_>,
    ) -> Outcome<State> {
        match event {
            Event::NextChunk => transition!(
                self,
                always,
                effect_run_next_window(self, utterance, context),
                State::running_back(take(utterance))
            ),
            Event::Cancel => transition!(
                self,
                always,
                effect_cancel_stream(self, utterance, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Loaded: a second `load` and a `synthesize` while busy are rejected.
    #[superstate(superstate = "tts")]
    fn loaded(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(_) => {
                internal!(self, always, effect_reject_already_loaded(self, context))
            }
            Event::Synthesize(_) => internal!(self, always, effect_reject_busy(self, context)),
            _ => Super,
        }
    }

    /// Diagnostics in every state; anything else unexpected is rejected.
    #[superstate]
    fn tts(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::CaptureDiagnostics => {
                internal!(self, always, effect_capture_diagnostics(self, context))
            }
            other => internal!(
                self,
                always,
                effect_reject_unexpected(self, other.kind(), context)
            ),
        }
    }
}

/// The table name of a leaf state.
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Unloaded {} => "unloaded",
        State::Loading {} => "loading",
        State::Ready {} => "ready",
        State::Preparing {} => "preparing",
        State::Synthesizing { .. } => "synthesizing",
        State::RunningFront { .. } => "running_front",
        State::RunningBack { .. } => "running_back",
        State::StreamingChunk { .. } => "streaming_chunk",
    }
}

crate::machine_hooks!(KokoroTtsMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply; a chunk's audio stays
/// readable through [`TtsMachine::audio`] until the next chunk runs.
pub struct TtsMachine {
    sm: StateMachine<KokoroTtsMachine>,
}

crate::machine_handle! {
    /// A machine in `unloaded`.
    TtsMachine for KokoroTtsMachine {
        event: Event<'_>,
        sink: Sink,
        reply: TtsReply,
        unexpected: |event, state| TtsReply::Error(TtsError::Unexpected { event, state }),
    }
}

impl TtsMachine {
    /// Start the lanes and load the stages.
    pub fn load(&mut self, load: Load) -> TtsReply {
        self.handle(&Event::Load(load))
    }

    /// Start an utterance (its first chunk streamed in windows when `early`).
    pub fn synthesize(&mut self, text: &str, voice: &str, speed: f32, early: bool) -> TtsReply {
        self.synthesize_with(Synthesize {
            text,
            voice,
            speed,
            early,
            words: false,
        })
    }

    /// Start an utterance as `request` asks (word timings included).
    pub fn synthesize_with(&mut self, request: Synthesize<'_>) -> TtsReply {
        self.handle(&Event::Synthesize(request))
    }

    /// The timed words of the last chunk run (its audio, or first window,
    /// is the one just replied); empty unless the utterance times words.
    pub fn chunk_words(&self) -> &[WordTime] {
        &self.sm.inner().word_times
    }

    /// Run the next chunk; its audio is then in [`Self::audio`].
    pub fn next_chunk(&mut self) -> TtsReply {
        self.handle(&Event::NextChunk)
    }

    /// Drop the rest of the utterance.
    pub fn cancel(&mut self) -> TtsReply {
        self.handle(&Event::Cancel)
    }

    /// The last chunk's audio (24 kHz; empty before the first).
    pub fn audio(&self) -> &[f32] {
        self.sm
            .inner()
            .stages
            .as_ref()
            .map_or(&[], |s| s.vocoder.audio())
    }

    /// The loaded stages, if any.
    pub fn stages(&self) -> Option<&Stages> {
        self.sm.inner().stages.as_ref()
    }

    /// Diagnostics of this machine and of its stage machines (text,
    /// acoustic, vocoder) once loaded.
    pub fn machines(&mut self) -> Vec<DiagnosticsSnapshot> {
        use crate::tts::{acoustic, text, vocoder};
        let mut out = Vec::with_capacity(4);
        if let TtsReply::Diagnostics(d) = self.handle(&Event::CaptureDiagnostics) {
            out.push(d);
        }
        // SAFETY (statig's contract for inner_mut): only the stages' own
        // diagnostics are read; no state's invariant on them changes.
        if let Some(st) = unsafe { self.sm.inner_mut().stages.as_mut() } {
            if let text::events::Reply::Diagnostics(d) =
                st.text.handle(&text::events::Event::CaptureDiagnostics)
            {
                out.push(d);
            }
            if let acoustic::events::Reply::Diagnostics(d) = st
                .acoustic
                .handle(&acoustic::events::Event::CaptureDiagnostics)
            {
                out.push(d);
            }
            if let vocoder::events::Reply::Diagnostics(d) = st
                .vocoder
                .handle(&vocoder::events::Event::CaptureDiagnostics)
            {
                out.push(d);
            }
        }
        out
    }
}
