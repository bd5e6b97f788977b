//! The runtime passes arrays in and reads arrays, or a flat tuple of them,
//! back. An entry that takes a tuple, or returns tuples inside its tuple
//! (XLA's own tests write both, around their loops), is given to XLA CPU
//! with the same body over flat edges: each tuple parameter becomes one
//! parameter per leaf, named `NAME.0`, `NAME.1.0`, ... by its index in the
//! tuple, rebuilt into the tuple inside; a nested result becomes the flat
//! tuple of its leaves, in order. What the module computes is unchanged.
//! Aliasing and the entry's written layout describe the old edges, and go.

use crate::infra::names::Names;
use hlatc_compiler::{Computation, InstrId, Instruction, Module, Op, Shape};

/// `module` with flat entry edges, or `None` when they are flat already.
pub(crate) fn flatten_entry(module: &Module) -> Option<Module> {
    let e = module.entry();
    let tuple_parameter = e
        .parameters()
        .iter()
        .any(|&p| matches!(e.instr(p).shape, Shape::Tuple(_)));
    let nested_result = match module.entry_result_shape() {
        Some(Shape::Tuple(elems)) => elems.iter().any(|s| matches!(s, Shape::Tuple(_))),
        _ => false,
    };
    if !tuple_parameter && !nested_result {
        return None;
    }
    let mut m = module.clone();
    let mut names = Names::of_module(&m);
    let c = m.entry_mut();
    if tuple_parameter {
        flatten_parameters(c, &mut names);
    }
    if nested_result {
        flatten_result(c, &mut names);
    }
    m.input_output_alias.clear();
    m.buffer_donors.clear();
    m.entry_layout = None;
    m.is_scheduled = false;
    Some(m)
}

fn flatten_parameters(c: &mut Computation, names: &mut Names) {
    let mut number = 0;
    for p in c.parameters() {
        let shape = c.instr(p).shape.clone();
        if !matches!(shape, Shape::Tuple(_)) {
            c.instr_mut(p).op = Op::Parameter(number);
            number += 1;
            continue;
        }
        let stem = c.instr(p).name.clone();
        let rebuilt = leaves_as_parameters(c, names, &stem, &shape, &mut number);
        c.replace_all_uses(p, rebuilt);
        c.remove(p);
    }
}

/// Parameters for the leaves of `shape` from `number` on, and the tuple
/// they make again.
fn leaves_as_parameters(
    c: &mut Computation,
    names: &mut Names,
    stem: &str,
    shape: &Shape,
    number: &mut i64,
) -> InstrId {
    match shape {
        Shape::Tuple(elems) => {
            let parts: Vec<InstrId> = elems
                .iter()
                .enumerate()
                .map(|(i, s)| leaves_as_parameters(c, names, &format!("{stem}.{i}"), s, number))
                .collect();
            let tuple = Instruction::new(names.fresh(stem), shape.clone(), Op::Tuple);
            c.add(tuple, &parts)
        }
        leaf => {
            let p = Instruction::new(names.fresh(stem), leaf.clone(), Op::Parameter(*number));
            *number += 1;
            c.add(p, &[])
        }
    }
}

fn flatten_result(c: &mut Computation, names: &mut Names) {
    let root = c.root().expect("a verified module has a root");
    let stem = c.instr(root).name.clone();
    let mut leaves = Vec::new();
    leaves_of(c, names, root, &mut leaves);
    let shapes = leaves.iter().map(|&l| c.instr(l).shape.clone()).collect();
    let flat = Instruction::new(names.fresh(&stem), Shape::Tuple(shapes), Op::Tuple);
    let flat = c.add(flat, &leaves);
    c.set_root(flat);
}

/// The array leaves of `value`, in order, read out with get-tuple-element.
fn leaves_of(c: &mut Computation, names: &mut Names, value: InstrId, out: &mut Vec<InstrId>) {
    let Shape::Tuple(elems) = c.instr(value).shape.clone() else {
        out.push(value);
        return;
    };
    let stem = c.instr(value).name.clone();
    for (i, s) in elems.into_iter().enumerate() {
        let gte = Instruction::new(
            names.fresh(&format!("{stem}.{i}")),
            s,
            Op::GetTupleElement { index: i as i64 },
        );
        let gte = c.add(gte, &[value]);
        leaves_of(c, names, gte, out);
    }
}
