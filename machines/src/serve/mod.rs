//! voxlane's HTTP/websocket server, `voxlane serve` (cargo feature `serve`,
//! on by default so the `voxlane` binary has it; `default-features = false`
//! leaves it out of a library build).
//!
//! - [`shell`]: the listener, the concurrent-stream limit, `/health`,
//!   `/metrics`, graceful shutdown: what every route family shares;
//! - [`duplex`]: `--duplex`, Kyutai's full-duplex websocket protocol at
//!   `/api/chat` over a [`duplex::DuplexEngine`];
//! - [`codec`]: Ogg pages and Opus (libopus) streams as `sphn` writes them;
//! - [`speech`]: the OpenAI-compatible speech routes (`/v1/audio/speech`,
//!   `/v1/audio/voices`, `/v1/models`) over Kokoro workers;
//! - [`debug`]: `/debug/machines` and the `/debug` page, the live machines'
//!   states and counters over their diagrams.
//!
//! Routes are axum routers built against [`shell::ShellState`], so the
//! duplex and speech routes plug into the same shell. Model work runs
//! on OS threads of its own, never on the async executor.

pub mod codec;
pub mod debug;
pub mod duplex;
pub mod shell;
pub mod speech;
