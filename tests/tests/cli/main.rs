//! The `voxlane` CLI (`machines/src/cli/`), driven in-process: flag
//! validation and the small commands, `voxlane mimi`, `voxlane moshi`, and `voxlane speak`
//! end to end on the real model.

mod commands;
mod converse;
mod examples;
mod mimi;
mod moshi;
mod speak_e2e;
