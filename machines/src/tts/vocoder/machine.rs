//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `back` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::KokoroVocoderError;
use super::events::{Event, Load, NextWindow, Reply, Run, Sink};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_actors::tts::kokoro::back::{BackOutput, KokoroBack};
use voxlane_actors::tts::kokoro::bind_cache::BindCache;
use voxlane_actors::tts::kokoro::window::WindowPlan;
use voxlane_runtime::onnx::OnnxModel;

/// Context that persists across events: the bound back half (with its
/// workspaces), the output buffer it reuses and, while a chunk streams, its
/// window plan.
pub struct KokoroBackMachine {
    /// Decoder + generator, once loaded.
    pub back: Option<KokoroBack>,
    /// The windows of the chunk being streamed.
    pub plan: Option<WindowPlan>,
    /// The last chunk's `conv_post` and audio.
    pub output: BackOutput,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for KokoroBackMachine {
    fn default() -> Self {
        Self {
            back: None,
            plan: None,
            output: BackOutput::default(),
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::unloaded()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl KokoroBackMachine {
    /// No weights yet.
    #[state(superstate = "back")]
    fn unloaded(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(l) => transition!(
                self,
                always,
                effect_load_back(self, l, context),
                State::loading()
            ),
            Event::Run(_) => internal!(self, always, effect_reject_not_loaded(self, context)),
            _ => Super,
        }
    }

    /// Weights bound; waits for `load_done` / `load_error`.
    #[state(superstate = "back")]
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

    /// Loaded: runs are shape-checked, then decoded.
    #[state(superstate = "back")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(_) => {
                internal!(self, always, effect_reject_already_loaded(self, context))
            }
            Event::Run(r) if guard_asr_invalid(self, r) => {
                internal!(self, guard_asr_invalid, effect_reject_asr(self, r, context))
            }
            Event::Run(r) if guard_curves_invalid(self, r) => internal!(
                self,
                guard_curves_invalid,
                effect_reject_curves(self, r, context)
            ),
            Event::Run(r) if guard_style_invalid(self, r) => internal!(
                self,
                guard_style_invalid,
                effect_reject_style(self, r, context)
            ),
            Event::Run(r) if guard_run_whole(self, r) => transition!(
                self,
                guard_run_whole,
                effect_run_back(self, r, context),
                State::running()
            ),
            Event::Run(r) if guard_stream_windows(self, r) => transition!(
                self,
                guard_stream_windows,
                effect_run_first_window(self, r, context),
                State::running()
            ),
            _ => Super,
        }
    }

    /// A chunk (or a window of it) was decoded; waits for `back_done` /
    /// `window_done` / `back_error`.
    #[state(superstate = "back")]
    fn running(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::BackDone(samples) => transition!(
                self,
                always,
                effect_reply_audio(self, *samples, context),
                State::ready()
            ),
            Event::WindowDone(samples) => transition!(
                self,
                always,
                effect_reply_window(self, *samples, context),
                State::streaming()
            ),
            Event::BackError(e) => transition!(
                self,
                always,
                effect_reply_back_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// A streamed chunk between windows: `next_window` generates the next,
    /// `cancel` drops the rest.
    #[state(superstate = "back")]
    fn streaming(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::NextWindow(w) if guard_window_matches(self, w) => transition!(
                self,
                guard_window_matches,
                effect_run_next_window(self, w, context),
                State::running()
            ),
            Event::NextWindow(w) if guard_window_mismatch(self, w) => internal!(
                self,
                guard_window_mismatch,
                effect_reject_window(self, w, context)
            ),
            Event::Cancel => transition!(
                self,
                always,
                effect_cancel_stream(self, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Diagnostics in every state; anything else unexpected is rejected.
    #[superstate]
    fn back(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
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
        State::Running {} => "running",
        State::Streaming {} => "streaming",
    }
}

crate::machine_hooks!(KokoroBackMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply; the audio stays readable
/// through [`VocoderStage::audio`] until the next run.
pub struct VocoderStage {
    sm: StateMachine<KokoroBackMachine>,
}

crate::machine_handle! {
    /// A back stage in `unloaded`.
    VocoderStage for KokoroBackMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(KokoroVocoderError::Unexpected { event, state }),
    }
}

impl VocoderStage {
    /// Bind the weights of `model`.
    pub fn load(&mut self, model: &OnnxModel) -> Reply {
        self.handle(&Event::Load(Load { model, cache: None }))
    }

    /// As `load`, the int8 convs' packed weights from `cache` where it has them.
    pub fn load_cached(&mut self, model: &OnnxModel, cache: Option<&BindCache>) -> Reply {
        self.handle(&Event::Load(Load { model, cache }))
    }

    /// Decode one chunk (or, streamed, its first window).
    pub fn run(&mut self, run: Run<'_>) -> Reply {
        self.handle(&Event::Run(run))
    }

    /// Generate the next window of a streamed chunk.
    pub fn next_window(&mut self, next: NextWindow<'_>) -> Reply {
        self.handle(&Event::NextWindow(next))
    }

    /// Drop the rest of a streamed chunk.
    pub fn cancel(&mut self) -> Reply {
        self.handle(&Event::Cancel)
    }

    /// The last chunk's audio (24 kHz).
    pub fn audio(&self) -> &[f32] {
        &self.sm.inner().output.audio
    }

    /// The last chunk's whole output (`conv_post` and audio).
    pub fn output(&self) -> &BackOutput {
        &self.sm.inner().output
    }
}
