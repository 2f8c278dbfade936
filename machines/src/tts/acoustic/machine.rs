//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `front` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::KokoroAcousticError;
use super::events::{Event, Load, Reply, Run, Sink};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_actors::tts::kokoro::bind_cache::BindCache;
use voxlane_actors::tts::kokoro::front::{FrontWorkspace, KokoroFront};
use voxlane_runtime::onnx::OnnxModel;

/// Context that persists across events: the bound front half and its workspace.
pub struct KokoroFrontMachine {
    /// The front half, once loaded.
    pub front: Option<KokoroFront>,
    /// Scratch sized for 512 tokens at load, reused by every run.
    pub workspace: FrontWorkspace,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for KokoroFrontMachine {
    fn default() -> Self {
        Self {
            front: None,
            workspace: FrontWorkspace::default(),
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
impl KokoroFrontMachine {
    /// No weights yet.
    #[state(superstate = "front")]
    fn unloaded(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(l) => transition!(
                self,
                always,
                effect_load_front(self, l, context),
                State::loading()
            ),
            Event::Run(_) => internal!(self, always, effect_reject_not_loaded(self, context)),
            _ => Super,
        }
    }

    /// Weights bound; waits for `load_done` / `load_error`.
    #[state(superstate = "front")]
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

    /// Loaded: runs are checked, then routed by whether durations are given.
    #[state(superstate = "front")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(_) => {
                internal!(self, always, effect_reject_already_loaded(self, context))
            }
            Event::Run(r) if guard_token_count_invalid(self, r) => internal!(
                self,
                guard_token_count_invalid,
                effect_reject_token_count(self, r, context)
            ),
            Event::Run(r) if guard_style_invalid(self, r) => internal!(
                self,
                guard_style_invalid,
                effect_reject_style(self, r, context)
            ),
            Event::Run(r) if guard_speed_out_of_range(self, r) => internal!(
                self,
                guard_speed_out_of_range,
                effect_reject_speed(self, r, context)
            ),
            Event::Run(r) if guard_token_out_of_vocab(self, r) => internal!(
                self,
                guard_token_out_of_vocab,
                effect_reject_token_id(self, r, context)
            ),
            Event::Run(r) if guard_durations_mismatch(self, r) => internal!(
                self,
                guard_durations_mismatch,
                effect_reject_durations(self, r, context)
            ),
            Event::Run(r) if guard_route_predicted(self, r) => transition!(
                self,
                guard_route_predicted,
                effect_run_predicted(self, r, context),
                State::running()
            ),
            Event::Run(r) if guard_route_reference(self, r) => transition!(
                self,
                guard_route_reference,
                effect_run_with_durations(self, r, context),
                State::running()
            ),
            _ => Super,
        }
    }

    /// A chunk ran; waits for `front_done` / `front_error`.
    #[state(superstate = "front")]
    fn running(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::FrontDone(o) => transition!(
                self,
                always,
                effect_reply_front(self, o, context),
                State::ready()
            ),
            Event::FrontError(e) => transition!(
                self,
                always,
                effect_reply_front_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Diagnostics in every state; anything else unexpected is rejected.
    #[superstate]
    fn front(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
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
    }
}

crate::machine_hooks!(KokoroFrontMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct AcousticStage {
    sm: StateMachine<KokoroFrontMachine>,
}

crate::machine_handle! {
    /// A front stage in `unloaded`.
    AcousticStage for KokoroFrontMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(KokoroAcousticError::Unexpected { event, state }),
    }
}

impl AcousticStage {
    /// Bind the weights of `model`.
    pub fn load(&mut self, model: &OnnxModel) -> Reply {
        self.handle(&Event::Load(Load { model, cache: None }))
    }

    /// As `load`, the int8 convs' packed weights from `cache` where it has them.
    pub fn load_cached(&mut self, model: &OnnxModel, cache: Option<&BindCache>) -> Reply {
        self.handle(&Event::Load(Load { model, cache }))
    }

    /// Run one chunk.
    pub fn run(&mut self, run: Run<'_>) -> Reply {
        self.handle(&Event::Run(run))
    }

    /// The bound front half, if any.
    pub fn front(&self) -> Option<&KokoroFront> {
        self.sm.inner().front.as_ref()
    }
}
