//! Your own state machine on voxlane's runtime: a `statig` machine with a
//! `TRANSITIONS` table, named guards and actions, hosted on an `ActorHost`
//! mailbox, fanning its work out on a `LanePool` within a thread budget;
//! its diagram rendered by the renderer voxlane's own machines use, and its
//! conformance (every edge it takes is declared, every declared edge is
//! taken) proven by the same trace check.
//!
//! The machine sums a block of numbers: `sum { data }` is rejected when the
//! data is empty (`guard_input_empty`), else summed on the caller alone
//! (`guard_route_serial`: small inputs or a one-thread budget) or over the
//! pool's lanes in fixed chunks (`guard_route_lanes`: the same bits for
//! every budget), and the outcome comes back as `sum_done`.
//!
//! Run: `cargo run --release -p voxlane-machines --example custom_machine`

use crossbeam_channel::{bounded, Sender};
use statig::prelude::*;
use std::sync::Arc;
use voxlane_machines::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use voxlane_machines::core::{Bookkeeping, Fired, Transition};
use voxlane_machines::{internal, transition};
use voxlane_runtime::actor_host::{Actor, ActorHost};
use voxlane_runtime::{Fork, LanePool};

// ---- the table: the diagram's and the conformance check's only source ----

const STATES: &[StateSpec] = &[
    StateSpec {
        name: "summer",
        parent: None,
        superstate: true,
        doc: "diagnostics and unexpected events",
    },
    StateSpec {
        name: "idle",
        parent: Some("summer"),
        superstate: false,
        doc: "waiting for data",
    },
    StateSpec {
        name: "summing",
        parent: Some("summer"),
        superstate: false,
        doc: "summed, awaiting the outcome",
    },
];
const EVENTS: &[&str] = &["sum", "sum_done"];
const TRANSITIONS: &[Transition] = &[
    edge(
        "idle",
        "sum",
        "guard_input_empty",
        "effect_reject_empty",
        "idle",
    ),
    edge(
        "idle",
        "sum",
        "guard_route_serial",
        "effect_sum_serial",
        "summing",
    ),
    edge(
        "idle",
        "sum",
        "guard_route_lanes",
        "effect_sum_lanes",
        "summing",
    ),
    edge("summing", "sum_done", ALWAYS, "effect_reply_sum", "idle"),
    edge(
        "summer",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "summer",
    ),
];
/// The machine's spec.
pub const SPEC: MachineSpec = MachineSpec {
    name: "block_summer",
    doc: "sums a block of numbers on the caller or over the lanes",
    initial: "idle",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};

// ---- events, context and the pure guards ----

/// What the machine reacts to.
pub enum Event<'a> {
    /// Sum these numbers.
    Sum(&'a [f64]),
    /// Outcome: the sum is ready.
    SumDone,
}

impl Event<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Self::Sum(_) => "sum",
            Self::SumDone => "sum_done",
        }
    }
}

/// Per-dispatch scratch: the reply and an outcome event to dispatch next.
#[derive(Default)]
pub struct Sink {
    reply: Option<Result<f64, String>>,
    follow_up: bool,
}

/// What persists: the pool and the last sum.
pub struct Summer {
    pool: Arc<LanePool>,
    sum: f64,
    book: Bookkeeping,
}

/// Below this many values a fork does not pay.
const LANES_MIN: usize = 4096;
/// Chunk size: fixed by the problem, never by the thread count.
const CHUNK: usize = 1024;

fn guard_input_empty(data: &[f64]) -> bool {
    data.is_empty()
}
fn guard_route_serial(m: &Summer, data: &[f64]) -> bool {
    data.len() < LANES_MIN || m.pool.threads() == 1
}

// ---- the named actions ----

fn effect_reject_empty(m: &mut Summer, sink: &mut Sink) {
    m.book.reject("empty");
    sink.reply = Some(Err("nothing to sum".into()));
}
/// Chunk sums added in chunk order: the same bits on either route.
fn chunked(pool: &impl Fork, data: &[f64]) -> f64 {
    let mut partial = vec![0.0f64; data.len().div_ceil(CHUNK)];
    let _ = pool.for_each_chunk_mut(&mut partial, 1, |i, out| {
        out[0] = data[i * CHUNK..((i + 1) * CHUNK).min(data.len())]
            .iter()
            .sum();
    });
    partial.iter().sum()
}
fn effect_sum_serial(m: &mut Summer, data: &[f64], sink: &mut Sink) {
    m.sum = match m.pool.sub(1) {
        Ok(one) => chunked(&one, data),
        Err(_) => chunked(&*m.pool, data),
    };
    sink.follow_up = true;
}
fn effect_sum_lanes(m: &mut Summer, data: &[f64], sink: &mut Sink) {
    m.sum = chunked(&*m.pool, data);
    sink.follow_up = true;
}
fn effect_reply_sum(m: &mut Summer, sink: &mut Sink) {
    sink.reply = Some(Ok(m.sum));
}
fn effect_reject_unexpected(m: &mut Summer, event: &'static str, sink: &mut Sink) {
    m.book.reject("unexpected");
    sink.reply = Some(Err(format!(
        "`{event}` not accepted in `{}`",
        m.book.state()
    )));
}

// ---- the machine: states, then the events each handles ----

#[state_machine(
    initial = "State::idle()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl Summer {
    #[state(superstate = "summer")]
    fn idle(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Sum(d) if guard_input_empty(d) => {
                internal!(self, guard_input_empty, effect_reject_empty(self, context))
            }
            Event::Sum(d) if guard_route_serial(self, d) => transition!(
                self,
                guard_route_serial,
                effect_sum_serial(self, d, context),
                State::summing()
            ),
            Event::Sum(d) => transition!(
                self,
                guard_route_lanes,
                effect_sum_lanes(self, d, context),
                State::summing()
            ),
            _ => Super,
        }
    }

    #[state(superstate = "summer")]
    fn summing(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::SumDone => {
                transition!(self, always, effect_reply_sum(self, context), State::idle())
            }
            _ => Super,
        }
    }

    #[superstate]
    fn summer(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        internal!(
            self,
            always,
            effect_reject_unexpected(self, event.kind(), context)
        )
    }
}

/// The table name of a leaf state (the hooks record it).
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Idle {} => "idle",
        State::Summing {} => "summing",
    }
}

voxlane_machines::machine_hooks!(Summer { event: Event<'_>, sink: Sink });

// ---- hosting: a mailbox in front of the machine ----

/// One request: numbers and where the answer goes.
pub struct Request {
    data: Vec<f64>,
    reply: Sender<Result<f64, String>>,
}

struct SummerActor {
    sm: StateMachine<Summer>,
}

impl Actor for SummerActor {
    type Message = Request;
    fn name(&self) -> &'static str {
        "block_summer"
    }
    fn handle(&mut self, msg: Request) {
        let mut sink = Sink::default();
        self.sm
            .handle_with_context(&Event::Sum(&msg.data), &mut sink);
        if std::mem::take(&mut sink.follow_up) {
            self.sm.handle_with_context(&Event::SumDone, &mut sink);
        }
        let _ = msg.reply.send(sink.reply.unwrap_or(Err("no reply".into())));
    }
}

/// Run the example: returns the edges the machine took.
pub fn run(threads: usize) -> Vec<Fired> {
    let pool = Arc::new(LanePool::new(threads).expect("a budget of at least one thread"));
    let summer = Summer {
        pool,
        sum: 0.0,
        book: Bookkeeping::traced(&SPEC),
    };
    let mut sm = summer.state_machine();
    // An outcome event with no work in flight: rejected by the superstate, with a reason.
    let mut sink = Sink::default();
    sm.handle_with_context(&Event::SumDone, &mut sink);
    if let Some(Err(e)) = sink.reply {
        println!("rejected: {e}");
    }
    let (mut host, address) = ActorHost::new(SummerActor { sm });
    let big: Vec<f64> = (0..100_000).map(|i| (i as f64).sqrt()).collect();
    let (tx, rx) = bounded(4);
    for data in [vec![1.0, 2.0, 3.5], Vec::new(), big] {
        address
            .send(Request {
                data,
                reply: tx.clone(),
            })
            .expect("the host is alive");
    }
    host.run_until_idle();
    for r in rx.try_iter() {
        match r {
            Ok(s) => println!("sum: {s}"),
            Err(e) => println!("rejected: {e}"),
        }
    }
    // The mailbox closes with its last address; `run` then hands the actor back.
    drop(address);
    let mut actor = host.run();
    // SAFETY (statig's contract for inner_mut): the log is not state.
    unsafe { actor.sm.inner_mut().book.take_log() }
}

fn main() {
    println!("{}", voxlane_machines::core::mermaid::render_mermaid(&SPEC));
    let mut fired = run(2);
    fired.extend(run(1));
    assert!(fired.iter().all(|f| SPEC.declares(f)), "an undeclared edge");
    let missing = SPEC.unreached(&fired);
    assert!(missing.is_empty(), "edges never taken: {missing:?}");
    println!(
        "conformance: {} edges taken, all declared, every declared edge taken",
        fired.len()
    );
}
