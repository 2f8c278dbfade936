//! Pure predicates choosing `mimi_init`'s edges: the config, then the
//! tensors (names, shapes, dtypes: read from the file's header or the
//! in-memory map, nothing converted), then the session capacity against the
//! bound contract's workspace rule, before anything is allocated.

use super::errors::MimiInitError;
use super::events::{BindSession, Initialize, WeightsSource};
use super::machine::MimiInitMachine;
use crate::speech::mimi_session::Side;
use std::collections::BTreeSet;
use voxlane_actors::speech::mimi::weights::{expected_tensors, Expected};
use voxlane_actors::speech::mimi::{MimiConfig, MimiWeights, WorkspaceRule};
use voxlane_runtime::weights::{DType, WeightFile};

/// Why the config cannot be used, if it cannot.
pub fn config_problem(i: &Initialize) -> Option<MimiInitError> {
    i.config.validate().err().map(MimiInitError::from_mimi)
}

/// Missing (required) and unknown names, given which names are present.
fn names_problem<'a>(
    expected: &[Expected],
    present: impl Iterator<Item = &'a str>,
    has: impl Fn(&str) -> bool,
) -> Option<MimiInitError> {
    let known: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    let unexpected: Vec<String> = present
        .filter(|n| !known.contains(n))
        .map(str::to_string)
        .collect();
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| !e.optional && !has(&e.name))
        .map(|e| e.name.clone())
        .collect();
    if !missing.is_empty() {
        Some(MimiInitError::MissingTensors(missing))
    } else if !unexpected.is_empty() {
        Some(MimiInitError::UnexpectedTensors(unexpected))
    } else {
        None
    }
}

fn file_problem(cfg: &MimiConfig, file: &WeightFile) -> Option<MimiInitError> {
    let expected = expected_tensors(cfg);
    if let Some(e) = names_problem(&expected, file.names(), |n| file.get(n).is_some()) {
        return Some(e);
    }
    for e in &expected {
        let Some(t) = file.get(&e.name) else { continue };
        if t.shape != e.shape.as_slice() {
            return Some(MimiInitError::TensorShape {
                tensor: e.name.clone(),
                expected: e.shape.clone(),
                found: t.shape.to_vec(),
            });
        }
        if e.used && !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Some(MimiInitError::TensorDtype {
                tensor: e.name.clone(),
                dtype: t.dtype.name().to_string(),
            });
        }
    }
    None
}

fn memory_problem(cfg: &MimiConfig, w: &MimiWeights) -> Option<MimiInitError> {
    // In-memory weights hold only the tensors the model reads.
    let expected: Vec<Expected> = expected_tensors(cfg)
        .into_iter()
        .filter(|e| e.used)
        .collect();
    if let Some(e) = names_problem(&expected, w.remaining(), |n| w.peek(n).is_some()) {
        return Some(e);
    }
    for e in &expected {
        let n: usize = e.shape.iter().product();
        match w.peek(&e.name) {
            Some(v) if v.len() != n => {
                return Some(MimiInitError::TensorShape {
                    tensor: e.name.clone(),
                    expected: e.shape.clone(),
                    found: vec![v.len()],
                })
            }
            _ => {}
        }
    }
    None
}

/// Why the tensors do not fit the (valid) config, if they do not.
pub fn tensors_problem(i: &Initialize) -> Option<MimiInitError> {
    match &i.weights {
        WeightsSource::File(path) => match WeightFile::open(path) {
            Ok(file) => file_problem(&i.config, &file),
            Err(e) => Some(MimiInitError::WeightFile(e.to_string())),
        },
        WeightsSource::Memory(slot) => match slot.try_borrow() {
            Ok(w) => match w.as_ref() {
                Some(w) => memory_problem(&i.config, w),
                None => Some(MimiInitError::WeightsTaken),
            },
            Err(_) => Some(MimiInitError::WeightsTaken),
        },
    }
}

/// The config is invalid.
pub fn guard_config_invalid(i: &Initialize) -> bool {
    config_problem(i).is_some()
}

/// The config is valid but a tensor is missing, unknown, misshapen or not a float.
pub fn guard_tensors_invalid(i: &Initialize) -> bool {
    !guard_config_invalid(i) && tensors_problem(i).is_some()
}

/// Config and tensors check out: plan the contract and bind.
pub fn guard_init_valid(i: &Initialize) -> bool {
    !guard_config_invalid(i) && !guard_tensors_invalid(i)
}

/// The bound model's workspace rule for `side`.
pub fn workspace_rule(m: &MimiInitMachine, side: Side) -> Option<WorkspaceRule> {
    let c = m.model.as_ref()?.contract();
    Some(match side {
        Side::Encode => c.encoder_workspace(),
        Side::Decode => c.decoder_workspace(),
    })
}

/// Bytes a `side` session of `max_frames` frames needs (`usize::MAX` on overflow).
pub fn bytes_needed(rule: WorkspaceRule, max_frames: usize) -> usize {
    rule.per_frame
        .checked_mul(max_frames.max(1))
        .and_then(|n| n.checked_add(rule.fixed))
        .and_then(|n| n.checked_mul(4))
        .unwrap_or(usize::MAX)
}

/// Why the session cannot be bound, if it cannot (decided before allocating).
pub fn capacity_problem(m: &MimiInitMachine, b: &BindSession) -> Option<MimiInitError> {
    if b.max_frames == 0 {
        return Some(MimiInitError::ZeroFrames);
    }
    let Some(rule) = workspace_rule(m, b.side) else {
        return Some(MimiInitError::Unexpected {
            event: "bind_session",
            state: m.book.state(),
        });
    };
    let needed = bytes_needed(rule, b.max_frames);
    (needed > b.capacity_bytes).then_some(MimiInitError::CapacityTooSmall {
        side: b.side,
        max_frames: b.max_frames,
        needed,
        capacity: b.capacity_bytes,
    })
}

/// The session's workspace fits the capacity.
pub fn guard_capacity_fits(m: &MimiInitMachine, b: &BindSession) -> bool {
    capacity_problem(m, b).is_none()
}

/// Zero frames, or the workspace exceeds the capacity.
pub fn guard_capacity_exceeded(m: &MimiInitMachine, b: &BindSession) -> bool {
    !guard_capacity_fits(m, b)
}
