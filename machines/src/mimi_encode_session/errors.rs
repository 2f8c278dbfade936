//! Errors: the shared session rejections (frame size, closed, ...).

pub use crate::mimi_session::MimiSessionError as EncodeSessionError;
