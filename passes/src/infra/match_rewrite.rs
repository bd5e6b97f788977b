//! The loop of a pass that finds its matches in each computation and
//! rewrites them one by one: [`rewrite_matches`]. It is written once so
//! that every such pass pays for the module's name index only where it
//! rewrites, hands the index on to the next pass the same way, sweeps
//! what its rewrites leave behind at the same point, and reports a change
//! by the same rule.
//!
//! It fits a pass whose matches are all found before any is rewritten,
//! in one computation at a time. A pass whose matching must see its own
//! earlier rewrites (`simplify`, `coalesce-linear`), that rewrites through
//! the whole module (`conditional-to-select`), or through another writer
//! (the softmax writer) keeps its own loop.

use crate::infra::context::PassContext;
use crate::infra::rewriter::{ModuleRewriter, Rewriter};
use hlatc_compiler::{Computation, Module};

/// What is swept from a computation after all its matches are rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Nothing: the rewrites remove what they replace themselves.
    Nothing,
    /// Every instruction nothing reads ([`Rewriter::remove_dead`]).
    Dead,
    /// Only what the rewrites stopped reading
    /// ([`Rewriter::remove_orphans`]): dead code that was there before
    /// stays.
    Orphans,
}

/// Rewrites every match of every computation of `m`, in the order of the
/// computations and, within one, in the order `find` gives.
///
/// `find` sees the computation as it is before any of its matches is
/// rewritten (and the module, for what a match reads across it); matches
/// that must share what they add (one conversion of an operand for every
/// dot that reads it) belong in one match. A computation without matches
/// is left untouched, and the module's name index is made
/// ([`ModuleRewriter::for_pass`]) only at the first one with a match, so a
/// pass that finds nothing, as the last round of every fixpoint, never
/// pays for it. `rewrite` gets one rewriter over the computation for all
/// its matches, and says whether it changed anything (a match it turns
/// out not to rewrite returns `false`); `sweep` runs once after them.
///
/// Returns whether any `rewrite` changed anything. On an error it returns
/// at once, leaving the rest unrewritten and the name index not handed
/// on, as a failed pass does.
pub fn rewrite_matches<M, I, E>(
    m: &mut Module,
    ctx: &mut PassContext,
    sweep: Sweep,
    mut find: impl FnMut(&Module, &Computation) -> I,
    mut rewrite: impl FnMut(&mut Rewriter<'_>, &mut PassContext, M) -> Result<bool, E>,
) -> Result<bool, E>
where
    I: IntoIterator<Item = M>,
{
    let mut slot: Option<ModuleRewriter> = None;
    let mut changed = false;
    for ci in 0..m.computations.len() {
        let found: Vec<M> = find(m, &m.computations[ci]).into_iter().collect();
        if found.is_empty() {
            continue;
        }
        let mut r = ModuleRewriter::on_demand(&mut slot, m, ci, ctx);
        for one in found {
            changed |= rewrite(&mut r, ctx, one)?;
        }
        match sweep {
            Sweep::Nothing => {}
            Sweep::Dead => {
                r.remove_dead();
            }
            Sweep::Orphans => {
                r.remove_orphans();
            }
        }
    }
    ModuleRewriter::finish_on_demand(slot, ctx);
    Ok(changed)
}
