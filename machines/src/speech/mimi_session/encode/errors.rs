//! Errors: the shared session rejections (frame size, closed, ...).

pub use crate::speech::mimi_session::MimiSessionError as EncodeSessionError;
