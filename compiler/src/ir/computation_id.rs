//! Computations named by their place in a module, not by their name. An
//! op's callee is a [`ComputationId`], so renaming a computation touches
//! nothing that calls it, and comparing or hashing a callee is comparing
//! a number.

/// A computation of a module: its index in
/// [`crate::ir::module::Module::computations`]. Removing computations
/// renumbers the others ([`crate::ir::module::Module::retain_computations`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputationId(usize);

impl ComputationId {
    /// An `async-update`'s or `async-done`'s computation while a reader
    /// has still to take it from the start the op continues
    /// ([`crate::ir::async_ops::find_async_callees`]). No module a reader
    /// returns holds it, and the verifier refuses it as it refuses any id
    /// out of range.
    pub const PENDING: ComputationId = ComputationId(usize::MAX);

    pub const fn new(index: usize) -> Self {
        ComputationId(index)
    }

    pub const fn index(self) -> usize {
        self.0
    }

    pub fn is_pending(self) -> bool {
        self == Self::PENDING
    }

    /// This id `by` places on, as when its computations are appended
    /// after `by` others; a pending one stays pending.
    pub fn shifted(self, by: usize) -> Self {
        if self.is_pending() {
            self
        } else {
            ComputationId(self.0 + by)
        }
    }

    /// `#3`, for messages about an id that names no computation (where
    /// there is a name, messages give the name). Not `Display`, so that
    /// formatting an id where its name belongs does not compile.
    pub fn describe(self) -> String {
        if self.is_pending() {
            "#pending".to_string()
        } else {
            format!("#{}", self.0)
        }
    }
}
