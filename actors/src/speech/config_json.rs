//! Typed reads of model config JSON (the PyTorch `moshi` schemas): each
//! accessor names the dotted field path when a value has the wrong type, so
//! Mimi's and Moshi's configs report errors the same way.

use serde_json::Value;

/// A config field has the wrong type or an unsupported value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {detail}")]
pub struct FieldError {
    /// Dotted field path, e.g. `seanet.ratios`.
    pub field: String,
    /// What is wrong with it.
    pub detail: String,
}

/// Field accessors that name the dotted path on error.
pub struct Obj<'a> {
    path: &'a str,
    map: Option<&'a serde_json::Map<String, Value>>,
}

impl<'a> Obj<'a> {
    /// The object at `path` (`None`/null: every field takes its default).
    pub fn new(path: &'a str, v: Option<&'a Value>) -> Result<Self, FieldError> {
        match v {
            None | Some(Value::Null) => Ok(Self { path, map: None }),
            Some(Value::Object(map)) => Ok(Self {
                path,
                map: Some(map),
            }),
            Some(_) => Err(field_err(path, "", "must be an object")),
        }
    }

    /// True when the object itself was absent or null.
    pub fn is_absent(&self) -> bool {
        self.map.is_none()
    }

    /// The non-null value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    /// The nested object `key`.
    pub fn sub(&self, key: &'a str) -> Result<Obj<'a>, FieldError> {
        Obj::new(key, self.get(key))
    }

    /// A non-negative integer field, `default` when absent.
    pub fn usize(&self, key: &str, default: usize) -> Result<usize, FieldError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| field_err(self.path, key, "must be a non-negative integer")),
        }
    }

    /// A number field, `default` when absent.
    pub fn f64(&self, key: &str, default: f64) -> Result<f64, FieldError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .ok_or_else(|| field_err(self.path, key, "must be a number")),
        }
    }

    /// A boolean field, `default` when absent.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, FieldError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| field_err(self.path, key, "must be a boolean")),
        }
    }

    /// A string field that must be one of `allowed` (the subset voxlane implements).
    pub fn one_of(&self, key: &str, allowed: &[&str]) -> Result<(), FieldError> {
        match self.get(key) {
            None => Ok(()),
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(()),
            Some(v) => Err(field_err(
                self.path,
                key,
                &format!("{v} is not supported (expected one of {allowed:?})"),
            )),
        }
    }

    /// A list of non-negative integers, `default` when absent.
    pub fn usize_list(&self, key: &str, default: &[usize]) -> Result<Vec<usize>, FieldError> {
        match self.get(key) {
            None => Ok(default.to_vec()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_u64().and_then(|n| usize::try_from(n).ok()))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| field_err(self.path, key, "must be a list of integers")),
            Some(_) => Err(field_err(self.path, key, "must be a list of integers")),
        }
    }
}

/// The error for `key` of the object at `path` (either may be empty).
pub fn field_err(path: &str, key: &str, detail: &str) -> FieldError {
    let field = match (path.is_empty(), key.is_empty()) {
        (true, _) => key.to_string(),
        (false, true) => path.to_string(),
        (false, false) => format!("{path}.{key}"),
    };
    FieldError {
        field,
        detail: detail.to_string(),
    }
}
