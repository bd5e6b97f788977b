//! The computations an instruction may call while its computation is read:
//! those read before it, then the ones it writes inline or its short-form
//! async starts wrap. Ids are places in the module the reader returns,
//! which lists them in that order, the computation itself after them.

use super::*;
use crate::analysis::shape_inference::CalleeSignature;

pub(super) struct Scope<'a> {
    /// The module's computations read so far: ids `0..before.len()`.
    pub(super) before: &'a [Computation],
    /// The reading computation's own callees, numbered on after them.
    pub(super) own: &'a [Computation],
}

impl<'a> Scope<'a> {
    fn all(&self) -> impl Iterator<Item = &'a Computation> {
        self.before.iter().chain(self.own)
    }

    /// The computation named `name`, if one is in scope.
    pub(super) fn id(&self, name: &str) -> Option<ComputationId> {
        self.all()
            .position(|c| c.name == name)
            .map(ComputationId::new)
    }

    pub(super) fn taken(&self, name: &str) -> bool {
        self.all().any(|c| c.name == name)
    }

    /// The id the next computation of the reading one's own gets.
    pub(super) fn next_id(&self) -> ComputationId {
        ComputationId::new(self.before.len() + self.own.len())
    }

    fn get(&self, id: ComputationId) -> Option<&'a Computation> {
        let i = id.index();
        self.before
            .get(i)
            .or_else(|| self.own.get(i.checked_sub(self.before.len())?))
    }

    /// What shape inference asks of a callee.
    pub(super) fn signature(&self, id: ComputationId) -> Option<(&'a str, CalleeSignature)> {
        let c = self.get(id)?;
        Some((c.name.as_str(), c.signature()?))
    }

    /// Gives each callee of `op` read from `written` (as [`Attrs::callee`]
    /// numbered it) the id of the computation it names; `inline` are the
    /// ids of the computations the instruction writes inline.
    pub(super) fn resolve(
        &self,
        op: &mut Op,
        written: &[WrittenCallee<'_>],
        inline: &[ComputationId],
    ) -> Result<(), ParseError> {
        for callee in op.called_computations_mut() {
            let Some(w) = written.get(callee.index()) else {
                // An async op's computation still to take from its start.
                continue;
            };
            *callee = match w {
                WrittenCallee::Inline(k) => {
                    inline.get(*k).copied().unwrap_or(ComputationId::PENDING)
                }
                WrittenCallee::Named { name, at } => match self.id(name) {
                    Some(id) => id,
                    None => return err_at(at, format!("calls unknown computation '{name}'")),
                },
            };
        }
        Ok(())
    }
}
