//! FSDP's gathers in the forward, issued one unit ahead, as torchtitan's
//! FSDP2 prefetches: resharded (`--reshard always`), each unit's shards
//! are read through an `opt-barrier` that also waits for the input of the
//! unit before it, so the unit's gather can overlap that unit's compute
//! and no scheduler gathers every unit at the start and holds them all
//! whole. The embedding and the first decoder layer wait for nothing (the
//! step begins with them); each later layer waits for the layer before it
//! to begin, and the final norm with the LM head for the last layer.
//!
//! The backward's gathers again are issued one unit ahead by the `remat`
//! pass, which holds them behind their barriers (its
//! `prefetch_regathers`). So at most two neighbouring units are whole at
//! once, which the memory plan counts (`GatheredWeights::alive`).

use crate::zero1::GatherUnit;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::scope;
use hlatc_compiler::InstrId;
use hlatc_models::ParamSpec;
use std::collections::BTreeMap;

/// Reads each unit's `shards` (the step's parameter inputs, in `specs`
/// order) in its gather through a barrier on the input of the unit before
/// it, from `layer_inputs` (the residual stream as each decoder layer
/// began). Only the gather's reads change: the optimizer reads the shards
/// themselves. Returns the shards as the gathers now read them, which
/// autodiff must take as constants: the barrier's tuple passes no
/// gradient, and the weights the step differentiates are the gathers'
/// results.
pub(crate) fn issue_gathers_ahead(
    b: &mut Builder,
    shards: &[InstrId],
    specs: &[ParamSpec],
    layer_inputs: &[InstrId],
) -> Result<Vec<InstrId>, BuildError> {
    let last = GatherUnit::last_layer(specs);
    let mut units: BTreeMap<GatherUnit, Vec<InstrId>> = BTreeMap::new();
    for (&shard, spec) in shards.iter().zip(specs) {
        units.entry(GatherUnit::of(spec)).or_default().push(shard);
    }
    let mut read = Vec::new();
    for (unit, shards) in units {
        let before = match unit {
            GatherUnit::Embedding | GatherUnit::Layer(0) => None,
            GatherUnit::Layer(l) => layer_inputs.get(l as usize - 1),
            GatherUnit::Head => layer_inputs.last(),
        };
        let Some(&before) = before else { continue };
        // The gather's own reads of each shard, found before the barrier
        // adds readers of its own.
        let readers: Vec<Vec<InstrId>> = shards.iter().map(|&s| gather_reads(b, s)).collect();
        b.push_scope(scope::PARAMETER_ALL_GATHER);
        b.push_scope(&scope::gather_unit(unit.place(last)));
        let held = b.held_until_all(&shards, before)?;
        b.pop_scope();
        b.pop_scope();
        for ((&shard, held), readers) in shards.iter().zip(held).zip(readers) {
            for r in readers {
                b.replace_uses_in(r, shard, held);
            }
            read.push(held);
        }
    }
    Ok(read)
}

/// The instructions of the forward's gathers that read `shard`.
fn gather_reads(b: &Builder, shard: InstrId) -> Vec<InstrId> {
    let c = b.computation();
    c.users(shard)
        .into_iter()
        .filter(|&u| {
            let name = &c.instr(u).metadata.op_name;
            !scope::is_backward(name) && scope::is_parameter_gather(name)
        })
        .collect()
}
