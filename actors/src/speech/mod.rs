//! Speech models built on the kernels: the Mimi codec and its streaming
//! sessions, the Moshi speech-text language model and its sampler, and the
//! attention and config reading they share.

pub mod attention;
pub mod config_json;
pub mod mimi;
pub mod moshi;
pub mod sampler;
pub mod voice;

/// A fresh id tying a state to the component that sized its buffers.
pub(crate) fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
