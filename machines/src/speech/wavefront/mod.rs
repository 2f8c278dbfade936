//! `speech_wavefront`: EMEL's speech wavefront, one conversation's frames
//! pipelined through Mimi encode, the LM and Mimi decode.
//!
//! Per pushed frame `t` (a tick) three stages run together: Mimi encodes
//! frame `t`, the LM steps on frame `t − 1`'s codes, Mimi decodes the LM's
//! answer to frame `t − 2`. Each stage reads only what an earlier tick
//! wrote, so at most two frames are in flight and every output is the
//! plain serial loop's, bit for bit, two ticks later. `bind` takes the three
//! child machines; `push_frame` is checked (`guard_frame_invalid`) and run
//! serially on the caller (`guard_split_serial`: a budget of one thread) or
//! as three stage jobs on the lane pool (`guard_split_parallel`); the tick's
//! outcome comes back as `tick_done` / `tick_error`, and an output frame
//! leaves only when `guard_output_attributed` finds it answers the input
//! frame two ticks back. States as EMEL's: `fill` (the first two ticks),
//! `steady`, `draining` on `flush` (the last two frames out), `complete`,
//! `errored`; `reset` returns to `fill`.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod stages;
pub mod table;

pub use errors::WavefrontError;
pub use events::{Event, OutFrame, Reply, Sink};
pub use machine::Wavefront;
pub use stages::Stages;
pub use table::SPEC;
