//! Pure predicates shared by every kernel machine.

use super::contract::KernelContract;
use super::events::{Bind, Execute, KernelSink};
use super::machine::KernelMachine;
use voxlane_runtime::Fork;

/// The bind limits fit the prepared kernel and ask for at least one lane.
pub fn guard_limits_valid<K: KernelContract>(m: &KernelMachine<K>, b: &Bind<K::Limits>) -> bool {
    b.lanes >= 1
        && m.prepared
            .as_ref()
            .is_some_and(|k| K::check_limits(k, &b.limits).is_ok())
}

/// The bind limits are unusable.
pub fn guard_limits_invalid<K: KernelContract>(m: &KernelMachine<K>, b: &Bind<K::Limits>) -> bool {
    !guard_limits_valid(m, b)
}

/// The request's lane share is larger than the bound budget.
pub fn guard_lanes_exceed_budget<K: KernelContract>(
    m: &KernelMachine<K>,
    e: &Execute<'_, K>,
) -> bool {
    e.lanes.threads() > m.lanes
}

/// The request does not fit the kernel or the bound limits.
pub fn guard_shape_invalid<K: KernelContract>(
    m: &KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &KernelSink<'_, K>,
) -> bool {
    !guard_lanes_exceed_budget(m, e) && m.check_request(e, s).is_err()
}

fn runnable<K: KernelContract>(
    m: &KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &KernelSink<'_, K>,
) -> bool {
    !guard_lanes_exceed_budget(m, e) && m.check_request(e, s).is_ok()
}

fn splits<K: KernelContract>(m: &KernelMachine<K>, e: &Execute<'_, K>) -> bool {
    e.lanes.threads() > 1
        && m.prepared
            .as_ref()
            .is_some_and(|k| K::worth_splitting(k, &e.request))
}

/// A valid request on one lane, or too little work to fork.
pub fn guard_route_serial<K: KernelContract>(
    m: &KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &KernelSink<'_, K>,
) -> bool {
    runnable(m, e, s) && !splits(m, e)
}

/// A valid request with work worth forking over several lanes.
pub fn guard_route_lanes<K: KernelContract>(
    m: &KernelMachine<K>,
    e: &Execute<'_, K>,
    s: &KernelSink<'_, K>,
) -> bool {
    runnable(m, e, s) && splits(m, e)
}

/// Largest buffer (in f32 elements) a workspace or packed weight may need;
/// anything larger is a configuration mistake, not a model.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Why a convolution weight of `rows · cols · kernel` values (`formula`
/// names the product) and an optional bias of `bias_len` for `c_out`
/// channels do not fit the `weight_len` given, if they do not.
pub fn conv_weights_problem(
    (rows, cols, kernel): (usize, usize, usize),
    formula: &str,
    weight_len: usize,
    bias_len: Option<usize>,
    c_out: usize,
) -> Option<String> {
    let want = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(kernel))
        .filter(|n| *n <= MAX_ELEMENTS);
    match want {
        None => return Some(format!("weight count {rows}·{cols}·{kernel} overflows")),
        Some(n) if n != weight_len => {
            return Some(format!("weights hold {weight_len} values, {formula} = {n}"))
        }
        Some(_) => {}
    }
    match bias_len {
        Some(b) if b != c_out => Some(format!("bias holds {b} values, c_out = {c_out}")),
        _ => None,
    }
}
