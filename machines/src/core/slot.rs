//! The payload slot of outcome events, shared by every machine family.

use std::cell::RefCell;

/// A payload an outcome event carries by shared reference and a handler
/// takes out once (statig hands events to handlers as `&Event`).
pub struct Slot<T>(RefCell<Option<T>>);

impl<T> Slot<T> {
    /// A slot holding `value`.
    pub fn new(value: T) -> Self {
        Self(RefCell::new(Some(value)))
    }

    /// An empty slot (an outcome event forged without its payload).
    pub fn empty() -> Self {
        Self(RefCell::new(None))
    }

    /// Take the payload out (once; `None` after that or if it was empty).
    pub fn take(&self) -> Option<T> {
        self.0.try_borrow_mut().ok().and_then(|mut v| v.take())
    }

    /// Look at the payload without taking it.
    pub fn peek<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        match self.0.try_borrow() {
            Ok(v) => f(v.as_ref()),
            Err(_) => f(None),
        }
    }
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let full = self.peek(|v| v.is_some());
        write!(f, "Slot({})", if full { "full" } else { "empty" })
    }
}
