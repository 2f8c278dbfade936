//! voxlane machines: every kernel and model stage as a statig state machine
//! with typed events, pure named guards, named actions and a declared
//! transition table (rendered to `diagrams/`). The public API and the
//! `voxlane` CLI live here, at the top of the stack.

pub mod cli;
pub mod conv1d;
pub mod conv_transpose1d;
pub mod core;
pub mod diagrams;
pub mod kernel_attention;
pub mod kernel_f32_matvec;
pub mod kernel_matmul;
pub mod kernels;
pub mod kokoro_back;
pub mod kokoro_front;
pub mod kokoro_frontend;
pub mod kokoro_tts;
pub mod lane_dispatch;
pub mod lstm;
pub mod mimi_decode_session;
pub mod mimi_encode_session;
pub mod mimi_init;
pub mod mimi_session;
pub mod registry;
pub mod tts;
