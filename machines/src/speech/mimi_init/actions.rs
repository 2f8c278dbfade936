//! Effects of `mimi_init`'s edges. Actions that can fail (binding the model,
//! allocating a session) raise an outcome event (`initialize_*`, `bind_*`)
//! in the sink instead of choosing a state.

use super::errors::MimiInitError;
use super::events::{
    BindSession, FollowUp, InitReply, InitSink, Initialize, RouteCounts, WeightsSource,
};
use super::guards::{capacity_problem, config_problem, tensors_problem};
use super::machine::MimiInitMachine;
use crate::speech::mimi_session::{DecodeSession, EncodeSession, MimiSession, Side};
use std::sync::Arc;
use voxlane_actors::kernels::matmul::WeightFormat;
use voxlane_actors::speech::mimi::{BindContract, MimiModel, MimiWeights};
use voxlane_runtime::weights::WeightFile;

fn reject(m: &mut MimiInitMachine, sink: &mut InitSink, err: MimiInitError) {
    m.book.reject(err.reason());
    sink.reply = Some(InitReply::Error(err));
}

/// Reject an invalid config (names the field).
pub fn effect_reject_config(m: &mut MimiInitMachine, i: &Initialize, sink: &mut InitSink) {
    let err = config_problem(i).unwrap_or_else(|| MimiInitError::Config("rejected".into()));
    reject(m, sink, err);
}

/// Reject tensors that do not fit the config (names every missing or unknown one).
pub fn effect_reject_tensors(m: &mut MimiInitMachine, i: &Initialize, sink: &mut InitSink) {
    let err = tensors_problem(i).unwrap_or_else(|| MimiInitError::WeightFile("rejected".into()));
    reject(m, sink, err);
}

fn load(i: &Initialize) -> Result<MimiModel, MimiInitError> {
    let weights = match &i.weights {
        WeightsSource::File(path) => {
            let file =
                WeightFile::open(path).map_err(|e| MimiInitError::WeightFile(e.to_string()))?;
            MimiWeights::from_file(&i.config, &file).map_err(MimiInitError::from_mimi)?
        }
        WeightsSource::Memory(slot) => slot
            .try_borrow_mut()
            .ok()
            .and_then(|mut w| w.take())
            .ok_or(MimiInitError::WeightsTaken)?,
    };
    let contract =
        BindContract::plan(&i.config, &weights, i.options).map_err(MimiInitError::from_mimi)?;
    MimiModel::bind(i.config.clone(), weights, contract).map_err(MimiInitError::from_mimi)
}

/// Convert the weights, plan the bind contract (transformer linear routes)
/// and bind the model; raise `initialize_done` or `initialize_error`.
pub fn effect_bind_model(m: &mut MimiInitMachine, i: &Initialize, sink: &mut InitSink) {
    sink.follow_up = Some(match load(i) {
        Ok(model) => {
            m.model = Some(Arc::new(model));
            FollowUp::InitializeDone
        }
        Err(e) => FollowUp::InitializeError(e),
    });
}

/// Reply `initialize_done` with the model's shape and routes.
pub fn effect_reply_initialized(m: &mut MimiInitMachine, sink: &mut InitSink) {
    if let Some(model) = &m.model {
        let c = model.contract();
        sink.reply = Some(InitReply::Initialized {
            num_codebooks: model.num_codebooks(),
            frame_size: model.frame_size(),
            codebook_size: model.config().quantizer.bins,
            routes: RouteCounts {
                f32: c.route_total(WeightFormat::F32),
                half: {
                    let (a, b) = c.route_total(WeightFormat::F16);
                    let (x, y) = c.route_total(WeightFormat::Bf16);
                    (a + x, b + y)
                },
                q8_0: {
                    let (a, b) = c.route_total(WeightFormat::Q8_0);
                    let (x, y) = c.route_total(WeightFormat::Q8_0Act16);
                    (a + x, b + y)
                },
            },
        });
    }
}

/// Reply `initialize_error` for a bind that failed after the checks.
pub fn effect_reply_init_error(m: &mut MimiInitMachine, e: &MimiInitError, sink: &mut InitSink) {
    m.model = None;
    reject(m, sink, e.clone());
}

/// Reject a second `initialize`.
pub fn effect_reject_already_initialized(m: &mut MimiInitMachine, sink: &mut InitSink) {
    reject(m, sink, MimiInitError::AlreadyInitialized);
}

/// Reject a session whose workspace exceeds its capacity (nothing allocated).
pub fn effect_reject_capacity(m: &mut MimiInitMachine, b: &BindSession, sink: &mut InitSink) {
    let err = capacity_problem(m, b).unwrap_or(MimiInitError::ZeroFrames);
    reject(m, sink, err);
}

/// Allocate the session's state; raise `bind_done` (session in the sink) or `bind_error`.
pub fn effect_open_session(m: &mut MimiInitMachine, b: &BindSession, sink: &mut InitSink) {
    let Some(model) = &m.model else {
        sink.follow_up = Some(FollowUp::BindError(MimiInitError::Session(
            "no model bound".into(),
        )));
        return;
    };
    let session = match b.side {
        Side::Encode => EncodeSession::open(model, b.max_frames).map(MimiSession::Encode),
        Side::Decode => DecodeSession::open(model, b.max_frames).map(MimiSession::Decode),
    };
    sink.follow_up = Some(match session {
        Ok(s) => {
            sink.session = Some(s);
            FollowUp::BindDone
        }
        Err(e) => FollowUp::BindError(MimiInitError::Session(e.to_string())),
    });
}

/// Reply `bind_done` describing the session waiting in the sink.
pub fn effect_reply_session(_m: &mut MimiInitMachine, sink: &mut InitSink) {
    sink.reply = sink.session.as_ref().map(|s| InitReply::SessionBound {
        side: s.side(),
        max_frames: match s {
            MimiSession::Encode(e) => e.max_frames(),
            MimiSession::Decode(d) => d.max_frames(),
        },
        bytes: s.bytes(),
    });
}

/// Reply `bind_error` for a session that could not be allocated.
pub fn effect_reply_bind_error(m: &mut MimiInitMachine, e: &MimiInitError, sink: &mut InitSink) {
    sink.session = None;
    reject(m, sink, e.clone());
}

/// Drop the model (open sessions keep their own reference) and reply `ResetDone`.
pub fn effect_reset(m: &mut MimiInitMachine, sink: &mut InitSink) {
    m.model = None;
    sink.reply = Some(InitReply::ResetDone);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut MimiInitMachine, sink: &mut InitSink) {
    sink.reply = Some(InitReply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut MimiInitMachine, event: &'static str, sink: &mut InitSink) {
    let state = m.book.state();
    reject(m, sink, MimiInitError::Unexpected { event, state });
}
