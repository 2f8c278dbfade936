//! The server (`machines/src/serve/`): the Ogg/Opus codec, the duplex query
//! parsing, the `/api/chat` protocol against a test-double engine over
//! loopback (Rust and Python clients), the shell's routes and shutdown, and
//! `voxlane serve --duplex` end to end on the tiny PersonaPlex fixture, and
//! the OpenAI-compatible speech routes on the real Kokoro model.

mod codec;
mod debug;
mod duplex_e2e;
mod duplex_protocol;
mod load;
mod python_client;
mod query;
mod shell;
mod speech;
mod support;
