//! Errors of the data-plane kernels.

/// A kernel was asked to do something its inputs do not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// A buffer's length does not match the shape it should hold.
    #[error("{what}: expected {expected} elements, got {got}")]
    Shape {
        /// Which operand.
        what: &'static str,
        /// Elements the shape implies.
        expected: usize,
        /// Elements supplied.
        got: usize,
    },
    /// A dimension or parameter is out of its valid range.
    #[error("invalid parameter {what}: {detail}")]
    Param {
        /// Which parameter.
        what: &'static str,
        /// Why it is invalid.
        detail: String,
    },
    /// A lane panicked while computing.
    #[error(transparent)]
    Lane(#[from] voxlane_runtime::LaneError),
}

/// Check that `buf_len == expected`, naming the operand otherwise.
pub fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), KernelError> {
    if expected == got {
        Ok(())
    } else {
        Err(KernelError::Shape {
            what,
            expected,
            got,
        })
    }
}
