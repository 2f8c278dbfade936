//! voxlane machines: every kernel and model stage as a statig state machine
//! with typed events, pure named guards, named actions and a declared
//! transition table (rendered to `diagrams/`). The public API and the
//! `voxlane` CLI live here, at the top of the stack.
//!
//! The machines are grouped by family, one folder each, as the data plane in
//! `voxlane-actors` is:
//!
//! - [`core`]: what every machine shares (tables, trace, the mermaid
//!   renderer, the registry of every machine, the generated `diagrams/`);
//! - [`pool`]: `lane_dispatch`, the lane pool's dispatcher;
//! - [`kernels`]: the shared kernel machine and, one submodule each, the
//!   kernels that specialise it (`kernel_matmul`, `conv1d`, ...);
//! - [`speech`]: the Mimi codec's machines;
//! - [`tts`]: the Kokoro machines and the [`tts::Tts`] library;
//! - [`cli`]: the `voxlane` commands, one file each;
//! - `serve` (cargo feature `serve`, on by default): the HTTP/websocket
//!   server, `voxlane serve` (the shell, the duplex `/api/chat` route, the
//!   Ogg/Opus codec).

#![warn(missing_docs)]

pub mod cli;
pub mod core;
pub mod kernels;
pub mod pool;
pub mod speech;
pub mod tts;

#[cfg(feature = "serve")]
pub mod serve;
