//! The speech family (`machines/src/speech/`): the Mimi and Moshi machines
//! obey their tables and reproduce PyTorch `moshi` bit for bit (codec) or
//! token for token (LM), the bind contract predicts
//! routes and workspaces, and the codec matches PyTorch on the `mimi-tiny`
//! fixture, and PersonaPlex's audio side equals NVIDIA's reference. Also the streaming benchmark (ignored; run it alone:
//! `cargo test --release -p voxlane-tests --test speech mimi_bench -- --ignored --nocapture`).
//!
//! The no-allocation test is its own target (`speech_alloc.rs`): it installs
//! a counting global allocator for the whole process.

mod converse;
mod machine_mimi;
mod machine_moshi;
mod mimi_bench;
mod mimi_contract;
mod mimi_parity;
mod personaplex;
