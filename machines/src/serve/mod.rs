//! Where voxlane's HTTP/websocket server goes (cargo feature `serve`, on by
//! default so the `voxlane` binary has it; `default-features = false` leaves
//! it out of a library build).
//!
//! Nothing is served yet: the module and the feature exist so the server
//! lands in its own family instead of beside the machines. It will hold the
//! listener and a machine per connection (each a folder with the usual six
//! files, listed in [`crate::core::registry`]), driving the same public
//! entry points the CLI drives ([`crate::tts::Tts`], the Mimi machines in
//! [`crate::speech`]), never the data plane directly. Its dependencies join
//! the `serve` feature in `machines/Cargo.toml` when it lands.
