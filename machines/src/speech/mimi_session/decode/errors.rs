//! Errors: the shared session rejections (code count, code range, closed, ...).

pub use crate::speech::mimi_session::MimiSessionError as DecodeSessionError;
