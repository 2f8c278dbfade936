//! Effects shared by every kernel machine. Actions that can fail raise an
//! outcome event in the sink instead of choosing a state.

use super::contract::KernelContract;
use super::errors::KernelMachineError;
use super::events::{Bind, Execute, FollowUp, KernelReply, KernelSink, LaneRoute};
use super::machine::KernelMachine;
use voxlane_runtime::Fork;

fn reply_error<K: KernelContract>(
    m: &mut KernelMachine<K>,
    s: &mut KernelSink<'_, K>,
    e: KernelMachineError,
) {
    m.book.reject(e.reason());
    s.reply = Some(KernelReply::Error(e));
}

/// Pack the weights along prepare route `route`.
pub fn effect_prepare<K: KernelContract>(
    m: &mut KernelMachine<K>,
    route: usize,
    p: &K::Params,
    s: &mut KernelSink<'_, K>,
) {
    match K::prepare(route, p) {
        Ok(k) => {
            m.prepared = Some(k);
            s.reply = Some(KernelReply::PrepareDone {
                route: K::PREPARE_ROUTES[route].1,
            });
        }
        Err(e) => s.follow_up = Some(FollowUp::SetupError(e)),
    }
}

/// Reject invalid params.
pub fn effect_reject_params<K: KernelContract>(
    m: &mut KernelMachine<K>,
    p: &K::Params,
    s: &mut KernelSink<'_, K>,
) {
    reply_error(m, s, K::params_error(p));
}

/// Size the workspace and fix the lane budget.
pub fn effect_bind_workspace<K: KernelContract>(
    m: &mut KernelMachine<K>,
    b: &Bind<K::Limits>,
    s: &mut KernelSink<'_, K>,
) {
    let Some(k) = m.prepared.as_ref() else {
        s.follow_up = Some(FollowUp::SetupError(KernelMachineError::Limits(
            "nothing prepared".into(),
        )));
        return;
    };
    match K::bind(k, &b.limits) {
        Ok(ws) => {
            m.workspace = Some(ws);
            m.limits = Some(b.limits);
            m.lanes = b.lanes;
            s.reply = Some(KernelReply::BindDone);
        }
        Err(e) => s.follow_up = Some(FollowUp::SetupError(e)),
    }
}

/// Reject unusable bind limits.
pub fn effect_reject_limits<K: KernelContract>(
    m: &mut KernelMachine<K>,
    b: &Bind<K::Limits>,
    s: &mut KernelSink<'_, K>,
) {
    let e = match (b.lanes, m.prepared.as_ref()) {
        (0, _) => KernelMachineError::Limits("lane budget must be at least 1".into()),
        (_, Some(k)) => K::check_limits(k, &b.limits)
            .err()
            .unwrap_or_else(|| KernelMachineError::Limits(format!("{:?}", b.limits))),
        (_, None) => KernelMachineError::Limits("nothing prepared".into()),
    };
    reply_error(m, s, e);
}

/// Reply with a setup failure raised by prepare or bind.
pub fn effect_reply_setup_error<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &KernelMachineError,
    s: &mut KernelSink<'_, K>,
) {
    m.workspace = None;
    reply_error(m, s, e.clone());
}

/// Reject a request whose lane share exceeds the bound budget.
pub fn effect_reject_lanes<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &mut KernelSink<'_, K>,
) {
    let err = KernelMachineError::LanesExceedBudget {
        requested: e.lanes.threads(),
        bound: m.lanes,
    };
    reply_error(m, s, err);
}

/// Reject a request whose shape does not fit.
pub fn effect_reject_shape<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &mut KernelSink<'_, K>,
) {
    let err = m
        .check_request(e, s)
        .err()
        .unwrap_or_else(|| KernelMachineError::Shape("rejected".into()));
    reply_error(m, s, err);
}

fn run<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &mut KernelSink<'_, K>,
    serial: bool,
) {
    let result = match (m.prepared.as_ref(), m.workspace.as_mut(), s.output.as_mut()) {
        (Some(k), Some(ws), Some(out)) => {
            let one;
            let lanes = if serial {
                match e.lanes.sub(1) {
                    Ok(share) => {
                        one = share;
                        &one
                    }
                    Err(_) => &e.lanes,
                }
            } else {
                &e.lanes
            };
            K::run(k, ws, &e.request, out, lanes).map_err(KernelMachineError::from)
        }
        _ => Err(KernelMachineError::Shape(
            "no output buffer or workspace".into(),
        )),
    };
    s.route = Some(if serial {
        LaneRoute::Serial
    } else {
        LaneRoute::Lanes
    });
    s.follow_up = Some(match result {
        Ok(()) => FollowUp::ExecuteDone,
        Err(err) => FollowUp::ExecuteError(err),
    });
}

/// Compute on the calling thread (a one-lane share).
pub fn effect_run_serial<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &mut KernelSink<'_, K>,
) {
    run(m, e, s, true);
}

/// Compute across the request's lane share.
pub fn effect_dispatch_lanes<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &mut KernelSink<'_, K>,
) {
    run(m, e, s, false);
}

/// Reply `execute_done`.
pub fn effect_reply_executed<K: KernelContract>(
    _m: &mut KernelMachine<K>,
    s: &mut KernelSink<'_, K>,
) {
    let route = s.route.take().unwrap_or(LaneRoute::Serial);
    s.reply = Some(KernelReply::ExecuteDone { route });
}

/// Reply `execute_error`.
pub fn effect_reply_execute_error<K: KernelContract>(
    m: &mut KernelMachine<K>,
    e: &KernelMachineError,
    s: &mut KernelSink<'_, K>,
) {
    s.route = None;
    reply_error(m, s, e.clone());
}

/// Drop weights and workspace.
pub fn effect_reset<K: KernelContract>(m: &mut KernelMachine<K>, s: &mut KernelSink<'_, K>) {
    m.prepared = None;
    m.workspace = None;
    m.limits = None;
    m.lanes = 0;
    s.reply = Some(KernelReply::ResetDone);
}

/// Reply with the counters.
pub fn effect_capture_diagnostics<K: KernelContract>(
    m: &mut KernelMachine<K>,
    s: &mut KernelSink<'_, K>,
) {
    s.reply = Some(KernelReply::Diagnostics(m.book.snapshot()));
}

/// Reject an event the current state does not take.
pub fn effect_reject_unexpected<K: KernelContract>(
    m: &mut KernelMachine<K>,
    event: &'static str,
    s: &mut KernelSink<'_, K>,
) {
    let state = m.book.state();
    reply_error(m, s, KernelMachineError::Unexpected { event, state });
}
