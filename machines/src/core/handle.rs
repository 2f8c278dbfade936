//! The public handle a machine is driven through: one statig machine behind
//! `new` / `traced` / `step` / `handle` and the conformance hooks, written
//! once for every machine whose events carry no generic parameters.

/// Implements `Default`, `new`, `traced`, `step`, `step_follow_up`,
/// `handle`, `state`, `take_trace` and `dangling` for a handle struct
/// `$handle { sm: StateMachine<$machine> }`.
///
/// At the call site: `SPEC` (the table), `state_name`, statig's prelude, a
/// machine with a `book: Bookkeeping` field and `Default`, a sink with
/// `reply` / `follow_up` fields whose follow-up has `into_event()`, and an
/// event with `kind()`. `unexpected` builds the reply for an event that
/// ended without one, from the event kind and the state it arrived in.
#[macro_export]
macro_rules! machine_handle {
    (
        $(#[$new_doc:meta])*
        $handle:ident for $machine:ident {
            event: $event:ty,
            sink: $sink:ty,
            reply: $reply:ty,
            unexpected: |$ev:ident, $st:ident| $unexpected:expr $(,)?
        }
    ) => {
        impl Default for $handle {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $handle {
            $(#[$new_doc])*
            pub fn new() -> Self {
                Self {
                    sm: $machine::default().state_machine(),
                }
            }

            /// The same machine, logging every edge it takes (for conformance tests).
            pub fn traced() -> Self {
                let m = $machine {
                    book: $crate::core::Bookkeeping::traced(&SPEC),
                    ..Default::default()
                };
                Self {
                    sm: m.state_machine(),
                }
            }

            /// Step exactly one event, without feeding back the outcome event
            /// its action raised (left in the returned sink).
            pub fn step(&mut self, event: &$event) -> $sink {
                let mut sink = <$sink>::default();
                self.sm.handle_with_context(event, &mut sink);
                sink
            }

            /// Feed the outcome event [`Self::step`] left in `sink` (one more step).
            pub fn step_follow_up(&mut self, sink: &mut $sink) {
                if let Some(next) = sink.follow_up.take() {
                    self.sm.handle_with_context(&next.into_event(), sink);
                }
            }

            /// Handle `event` run-to-completion and return the reply.
            pub fn handle(&mut self, event: &$event) -> $reply {
                let mut sink = self.step(event);
                while let Some(next) = sink.follow_up.take() {
                    self.sm.handle_with_context(&next.into_event(), &mut sink);
                }
                match sink.reply {
                    Some(reply) => reply,
                    None => {
                        let ($ev, $st) = (event.kind(), self.state());
                        $unexpected
                    }
                }
            }

            /// The current leaf state's name.
            pub fn state(&self) -> &'static str {
                state_name(self.sm.state())
            }

            /// The edges taken so far (empty unless built with [`Self::traced`]).
            pub fn take_trace(&mut self) -> Vec<$crate::core::Fired> {
                // SAFETY (statig's contract for inner_mut): taking the log does
                // not touch any state the machine's invariants depend on.
                unsafe { self.sm.inner_mut().book.take_log() }
            }

            /// Whether the last event ended without taking any declared edge.
            pub fn dangling(&self) -> bool {
                self.sm.inner().book.dangling()
            }
        }
    };
}

/// Implements the statig hooks every machine names in its
/// `#[state_machine]` attribute: `before_dispatch` counts the event kind,
/// `after_transition` records the edge by the states' table names
/// (`state_name` at the call site), for the bookkeeping in `self.book`.
#[macro_export]
macro_rules! machine_hooks {
    ($machine:ident { event: $event:ty, sink: $sink:ty $(,)? }) => {
        impl $machine {
            fn before_dispatch(
                &mut self,
                _s: StateOrSuperstate<'_, State, Superstate>,
                event: &$event,
                _c: &mut $sink,
            ) {
                self.book.dispatching(event.kind());
            }

            fn after_transition(&mut self, source: &State, target: &State, _c: &mut $sink) {
                self.book
                    .transitioned(state_name(source), state_name(target));
            }
        }
    };
}
