//! What every machine shares: the transition table types, the transition
//! trace that proves a statig machine obeys its table, the mermaid renderer
//! that turns a table into a diagram (`mermaid`), the registry of every
//! machine (`registry`) and the generated `diagrams/` folder as data
//! (`diagrams`).

pub mod book;
pub mod diagrams;
pub mod edges;
pub mod handle;
pub mod mermaid;
pub mod registry;
pub mod slot;
pub mod table;
pub mod trace;

pub use book::Bookkeeping;
pub use slot::Slot;
pub use table::{MachineSpec, StateSpec, Transition, ALWAYS, ANY_EVENT};
pub use trace::{Fired, Trace};
