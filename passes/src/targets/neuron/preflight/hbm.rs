//! A module's device memory from its boundary alone, for any module (hlatc's
//! own steps have a memory plan that counts their activations too): the
//! bytes of its inputs and of its outputs that do not reuse an input's
//! buffer (`input_output_alias`). neuronx-cc places the I/O tensors in a
//! core's HBM beside its scratchpad and spills (the EOOM001 page's list),
//! so I/O beyond the core can never fit; I/O with as much again of scratch
//! (the budget observed for compiled modules) is an estimate, not a proof.

use hlatc_compiler::util::fx::FxHashSet;
use hlatc_compiler::{Module, Shape};

/// Bytes of the entry's parameters and of its result's leaves that alias
/// no parameter.
pub(super) fn io_bytes(m: &Module) -> u64 {
    let e = m.entry();
    let inputs = e
        .parameters()
        .into_iter()
        .fold(0u64, |n, p| n.saturating_add(e.instr(p).shape.byte_size()));
    let Some(root) = e.root() else {
        return inputs;
    };
    // A step has thousands of outputs and as many aliases: found once.
    let aliased: FxHashSet<&[i64]> = m
        .input_output_alias
        .iter()
        .map(|a| a.output_index.as_slice())
        .collect();
    let outputs = match &e.instr(root).shape {
        Shape::Tuple(leaves) => leaves
            .iter()
            .enumerate()
            .filter(|(i, _)| !aliased.contains(&[*i as i64][..]))
            .fold(0u64, |n, (_, s)| n.saturating_add(s.byte_size())),
        s if !aliased.contains(&[][..]) => s.byte_size(),
        _ => 0,
    };
    inputs.saturating_add(outputs)
}

/// The `n` largest of the entry's parameters and of its result's leaves
/// that alias no parameter (each by the instruction that holds it), with
/// their bytes, largest first; ties in the module's order.
pub(super) fn largest_io(m: &Module, n: usize) -> Vec<(String, u64)> {
    let e = m.entry();
    let mut all: Vec<(String, u64)> = e
        .parameters()
        .into_iter()
        .map(|p| (e.instr(p).name.clone(), e.instr(p).shape.byte_size()))
        .collect();
    if let Some(root) = e.root() {
        let aliased: FxHashSet<&[i64]> = m
            .input_output_alias
            .iter()
            .map(|a| a.output_index.as_slice())
            .collect();
        if matches!(e.instr(root).op, hlatc_compiler::Op::Tuple) {
            for (i, &leaf) in e.operand_ids(root).iter().enumerate() {
                if !aliased.contains(&[i as i64][..]) {
                    all.push((e.instr(leaf).name.clone(), e.instr(leaf).shape.byte_size()));
                }
            }
        } else if !aliased.contains(&[][..]) {
            all.push((e.instr(root).name.clone(), e.instr(root).shape.byte_size()));
        }
    }
    // An output that is an input itself is one tensor, named once.
    let mut seen = FxHashSet::default();
    all.retain(|(name, _)| seen.insert(name.clone()));
    all.sort_by_key(|t| std::cmp::Reverse(t.1));
    all.truncate(n);
    all
}

/// `bytes` in the largest unit that keeps it at least 1 (GiB, MiB, KiB,
/// bytes), as a tensor's size is listed.
pub(super) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => gib(b),
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.2} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

/// `bytes` in GiB, as findings print it.
pub(super) fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}
