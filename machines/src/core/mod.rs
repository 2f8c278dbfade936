//! What every machine shares: the transition table types, the transition
//! trace that proves a statig machine obeys its table, and the mermaid
//! renderer that turns a table into a diagram.

pub mod book;
pub mod diagram;
pub mod edges;
pub mod handle;
pub mod table;
pub mod trace;

pub use book::Bookkeeping;
pub use table::{MachineSpec, StateSpec, Transition, ALWAYS, ANY_EVENT};
pub use trace::{Fired, Trace};
