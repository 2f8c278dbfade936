//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs. Events a state does not name
//! fall through to the `wavefront` superstate, which rejects them.

use super::actions::*;
use super::errors::WavefrontError;
use super::events::{Event, OutFrame, Reply, Sink};
use super::guards::*;
use super::stages::{Shape, Slots, Stages};
use super::table::SPEC;
use crate::core::{Bookkeeping, Slot};
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_runtime::DiagnosticsSnapshot;

/// Context that persists: the stages, their sizes, the slots between ticks.
pub struct WavefrontMachine {
    /// The child machines.
    pub stages: Option<Box<Stages>>,
    /// Their common sizes.
    pub shape: Shape,
    /// What one tick hands the next.
    pub slots: Slots,
    /// Ticks run since `bind` / `reset` (the next input's sequence number).
    pub ticks: u64,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl WavefrontMachine {
    /// The input frame the last tick's output must answer: two ticks back.
    pub fn expected_seq(&self) -> Option<u64> {
        self.ticks.checked_sub(3)
    }
}

impl Default for WavefrontMachine {
    fn default() -> Self {
        Self {
            stages: None,
            shape: Shape {
                frame_size: 0,
                codebooks: 0,
                user: 0,
                agent: 0,
            },
            slots: Slots::default(),
            ticks: 0,
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::unbound()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl WavefrontMachine {
    /// No stages: `bind` checks that they fit, then sizes the slots.
    #[state(superstate = "wavefront")]
    fn unbound(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Bind(s) if guard_stages_invalid(s) => internal!(
                self,
                guard_stages_invalid,
                effect_reject_stages(self, s, context)
            ),
            Event::Bind(s) => transition!(
                self,
                guard_stages_valid,
                effect_bind_stages(self, s, context),
                State::fill()
            ),
            _ => Super,
        }
    }

    /// The first ticks: frames go in, none has come out yet.
    #[state(superstate = "wavefront")]
    fn fill(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PushFrame(p) if guard_frame_invalid(self, p) => internal!(
                self,
                guard_frame_invalid,
                effect_reject_frame(self, p, context)
            ),
            Event::PushFrame(p) if guard_split_serial(self) => transition!(
                self,
                guard_split_serial,
                effect_tick_serial(self, p, context),
                State::ticking()
            ),
            Event::PushFrame(p) => transition!(
                self,
                guard_split_parallel,
                effect_tick_parallel(self, p, context),
                State::ticking()
            ),
            Event::Flush => self.start_flush(context),
            _ => Super,
        }
    }

    /// A frame out per frame in, two ticks behind.
    #[state(superstate = "wavefront")]
    fn steady(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PushFrame(p) if guard_frame_invalid(self, p) => internal!(
                self,
                guard_frame_invalid,
                effect_reject_frame(self, p, context)
            ),
            Event::PushFrame(p) if guard_split_serial(self) => transition!(
                self,
                guard_split_serial,
                effect_tick_serial(self, p, context),
                State::ticking()
            ),
            Event::PushFrame(p) => transition!(
                self,
                guard_split_parallel,
                effect_tick_parallel(self, p, context),
                State::ticking()
            ),
            Event::Flush => self.start_flush(context),
            _ => Super,
        }
    }

    /// A tick's stages ran; its outcome decides whether a frame leaves.
    #[state(superstate = "wavefront")]
    fn ticking(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::TickDone if guard_output_pending(self) => transition!(
                self,
                guard_output_pending,
                effect_reply_filling(self, context),
                State::fill()
            ),
            Event::TickDone if guard_output_attributed(self) => transition!(
                self,
                guard_output_attributed,
                effect_emit_frame(self, context),
                State::steady()
            ),
            Event::TickDone => transition!(
                self,
                guard_output_misattributed,
                effect_reject_attribution(self, context),
                State::errored()
            ),
            Event::TickError(e) => transition!(
                self,
                always,
                effect_reply_stage_error(self, e, context),
                State::errored()
            ),
            _ => Super,
        }
    }

    /// Flushing: each `flush` runs one tick without input, until nothing is in flight.
    #[state(superstate = "wavefront")]
    fn drain(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Flush => self.start_flush(context),
            Event::PushFrame(_) => internal!(self, always, effect_reject_draining(self, context)),
            _ => Super,
        }
    }

    /// A drain tick's stages ran.
    #[state(superstate = "wavefront")]
    fn draining(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::TickDone if guard_output_pending(self) => transition!(
                self,
                guard_output_pending,
                effect_reply_filling(self, context),
                State::drain()
            ),
            Event::TickDone if guard_output_attributed(self) => transition!(
                self,
                guard_output_attributed,
                effect_emit_frame(self, context),
                State::drain()
            ),
            Event::TickDone => transition!(
                self,
                guard_output_misattributed,
                effect_reject_attribution(self, context),
                State::errored()
            ),
            Event::TickError(e) => transition!(
                self,
                always,
                effect_reply_stage_error(self, e, context),
                State::errored()
            ),
            _ => Super,
        }
    }

    /// Every frame is out: only `reset` (or `release`) starts another conversation.
    #[state(superstate = "wavefront")]
    fn complete(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PushFrame(_) => internal!(self, always, effect_reject_complete(self, context)),
            Event::Flush => internal!(self, always, effect_reply_complete(self, context)),
            _ => Super,
        }
    }

    /// A stage failed or a frame was misattributed: only `reset` / `release` leave.
    #[state(superstate = "wavefront")]
    fn errored(&mut self, event: &Event<'_>) -> Outcome<State> {
        let _ = event;
        Super
    }

    /// Reset, release and diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn wavefront(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Reset if guard_stages_bound(self) => transition!(
                self,
                guard_stages_bound,
                effect_reset_pipeline(self, context),
                State::fill()
            ),
            Event::Reset => transition!(
                self,
                guard_stages_unbound,
                effect_reject_not_bound(self, context),
                State::unbound()
            ),
            Event::Release => transition!(
                self,
                always,
                effect_release_stages(self, context),
                State::unbound()
            ),
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

impl WavefrontMachine {
    /// `flush` in `fill`, `steady` or `drain`: done, or one drain tick.
    fn start_flush(&mut self, context: &mut Sink) -> Outcome<State> {
        if guard_pipeline_empty(self) {
            transition!(
                self,
                guard_pipeline_empty,
                effect_reply_complete(self, context),
                State::complete()
            )
        } else if guard_split_serial(self) {
            transition!(
                self,
                guard_split_serial,
                effect_drain_serial(self, context),
                State::draining()
            )
        } else {
            transition!(
                self,
                guard_split_parallel,
                effect_drain_parallel(self, context),
                State::draining()
            )
        }
    }
}

/// The table name of a leaf state.
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Unbound {} => "unbound",
        State::Fill {} => "fill",
        State::Steady {} => "steady",
        State::Ticking {} => "ticking",
        State::Drain {} => "drain",
        State::Draining {} => "draining",
        State::Complete {} => "complete",
        State::Errored {} => "errored",
    }
}

crate::machine_hooks!(WavefrontMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct Wavefront {
    sm: StateMachine<WavefrontMachine>,
}

crate::machine_handle! {
    /// A wavefront in `unbound`.
    Wavefront for WavefrontMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(WavefrontError::Unexpected { event, state }),
    }
}

impl Wavefront {
    /// Take the child machines; returns the samples per input frame.
    pub fn bind(&mut self, stages: Stages) -> Result<usize, WavefrontError> {
        match self.handle(&Event::Bind(Slot::new(Box::new(stages)))) {
            Reply::Bound { frame_size } => Ok(frame_size),
            Reply::Error(e) => Err(e),
            other => Err(self.unexpected("bind", &other)),
        }
    }

    /// Push one input frame; the frame that comes out of the tick, if any.
    pub fn push(&mut self, pcm: &[f32]) -> Result<Option<OutFrame<'_>>, WavefrontError> {
        let r = self.handle(&Event::PushFrame(pcm));
        self.out(r, "push_frame")
    }

    /// One drain tick: `Some` frame while frames are in flight, `None` once complete.
    pub fn flush(&mut self) -> Result<Option<OutFrame<'_>>, WavefrontError> {
        loop {
            match self.handle(&Event::Flush) {
                Reply::Complete => return Ok(None),
                // A drain tick whose LM answer is still delayed: run the next.
                Reply::Filling => continue,
                r => return self.out(r, "flush"),
            }
        }
    }

    /// Back to `fill` (frames in flight dropped, every stage restarted).
    pub fn reset(&mut self) -> Result<(), WavefrontError> {
        match self.handle(&Event::Reset) {
            Reply::Ok => Ok(()),
            Reply::Error(e) => Err(e),
            other => Err(self.unexpected("reset", &other)),
        }
    }

    /// Hand the child machines back.
    pub fn release(&mut self) -> Option<Stages> {
        match self.handle(&Event::Release) {
            Reply::Released(s) => s.map(|b| *b),
            _ => None,
        }
    }

    /// The diagnostics counters.
    pub fn diagnostics(&mut self) -> Option<DiagnosticsSnapshot> {
        match self.handle(&Event::CaptureDiagnostics) {
            Reply::Diagnostics(d) => Some(d),
            _ => None,
        }
    }

    /// The bound stages (their diagnostics, the LM's model).
    pub fn stages_mut(&mut self) -> Option<&mut Stages> {
        // SAFETY (statig's contract for inner_mut): the stages are not part of
        // any state's invariant beyond being present, which this keeps.
        unsafe { self.sm.inner_mut().stages.as_deref_mut() }
    }

    fn unexpected(&self, event: &'static str, _r: &Reply) -> WavefrontError {
        WavefrontError::Unexpected {
            event,
            state: self.state(),
        }
    }

    fn out(
        &mut self,
        r: Reply,
        event: &'static str,
    ) -> Result<Option<OutFrame<'_>>, WavefrontError> {
        match r {
            Reply::Filling => Ok(None),
            Reply::Frame => {
                let m = self.sm.inner();
                match m.slots.out.as_ref() {
                    Some((seq, tokens)) => Ok(Some(OutFrame {
                        seq: *seq,
                        pcm: &m.slots.pcm,
                        tokens: tokens.as_slice(),
                    })),
                    None => Err(WavefrontError::MissingPayload("frame")),
                }
            }
            Reply::Complete => Ok(None),
            Reply::Error(e) => Err(e),
            other => Err(self.unexpected(event, &other)),
        }
    }
}
