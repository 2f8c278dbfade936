//! Speech models built on the kernels: codecs and their streaming sessions.

pub mod mimi;
