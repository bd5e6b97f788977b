//! Ops are grouped one way, by the families the op table declares
//! (`OpFamily`): a family's attribute types live in `ir/op/<family>.rs`,
//! its shape rules in `analysis/shape_inference/<family>.rs`, its backward
//! rules in `graph/autodiff/rules/<family>.rs`. Every other file of those
//! folders is one of the helpers named here.

use hlatc_compiler::formats::text;
use hlatc_compiler::ir::op::{all_opcodes, OpFamily};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each folder, and the files in it that are helpers, not families.
const FOLDERS: [(&str, &[&str]); 3] = [
    // The module, floats kept by their bits, the op table, a row's arity
    // and traits, `Opcode`.
    (
        "src/ir/op",
        &["mod", "bits", "description", "row_traits", "opcode"],
    ),
    // The module (dispatch and shared checks), the typed errors.
    ("src/analysis/shape_inference", &["mod", "error"]),
    // The module (dispatch and shared helpers), the table that gives each
    // op its rule and what it saves.
    ("src/graph/autodiff/rules", &["mod", "gradient"]),
];

#[test]
fn every_rule_file_is_named_after_a_family_or_a_helper() {
    let families: BTreeSet<&str> = OpFamily::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(families.len(), OpFamily::ALL.len(), "a family name twice");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (folder, helpers) in FOLDERS {
        for h in helpers {
            assert!(
                !families.contains(h),
                "{folder}: {h} is a family, not a helper"
            );
        }
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            assert!(
                path.extension().is_some_and(|e| e == "rs"),
                "{folder}: {} is not a module file",
                path.display()
            );
            assert!(
                families.contains(name.as_str()) || helpers.contains(&name.as_str()),
                "{folder}/{name}.rs is named after no op family ({}) and is not one of \
                 its helpers ({})",
                families.iter().copied().collect::<Vec<_>>().join(", "),
                helpers.join(", ")
            );
        }
    }
}

/// Every op has a family (the op table's match over `Op` is exhaustive;
/// here, every opcode of the fixture that holds them all), and every family
/// has an op.
#[test]
fn every_op_has_a_family_and_every_family_an_op() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hlo/all_ops.hlo");
    let m = text::parse_module(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut by_family: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for c in &m.computations {
        for i in c.ids() {
            let op = &c.instr(i).op;
            by_family
                .entry(op.family().name())
                .or_default()
                .insert(op.opcode());
        }
    }
    let opcodes: BTreeSet<&str> = by_family.values().flatten().copied().collect();
    assert_eq!(opcodes, all_opcodes().into_iter().collect());
    for f in OpFamily::ALL {
        assert!(by_family.contains_key(f.name()), "{f:?} has no op");
    }
}
