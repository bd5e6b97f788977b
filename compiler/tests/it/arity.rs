//! The op table's operand counts against an instance of every opcode that
//! XLA's own parser accepts (`tests/fixtures/hlo/all_ops.hlo`, cross-checked
//! through XLA): each fixed count is what the instance has, shape inference
//! refuses any other count by its number, and no count of operands makes a
//! shape rule panic.

use std::path::PathBuf;

use hlatc_compiler::analysis::shape_inference::OperandRule;
use hlatc_compiler::ir::op::description::Arity;
use hlatc_compiler::{formats::text, infer_shape, CalleeSignature, Module, ShapeError};

fn all_ops() -> Module {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hlo/all_ops.hlo");
    let src = std::fs::read_to_string(&path).unwrap();
    text::parse_module(&src).unwrap_or_else(|e| panic!("{}:{e}", path.display()))
}

#[test]
fn every_fixed_arity_matches_an_instance_xla_accepts() {
    let m = all_ops();
    let callee = |id| {
        let c = m.get_computation(id)?;
        Some((c.name.as_str(), c.signature()?))
    };
    let mut checked = Vec::new();
    for c in &m.computations {
        for id in c.ids() {
            let instr = c.instr(id);
            let shapes: Vec<_> = c.operands(id).iter().map(|&o| &c.instr(o).shape).collect();
            let opcode = instr.op.opcode();
            if let Arity::Exactly(n) = instr.op.arity() {
                assert_eq!(shapes.len(), n, "{opcode} {}", instr.name);
                checked.push(opcode);
            }
            // Every count from none to three past the instance's, built
            // from its own operands' shapes (or a scalar).
            let scalar = hlatc_compiler::Shape::scalar(hlatc_compiler::ElementType::F32);
            for count in 0..shapes.len() + 4 {
                let given: Vec<_> = (0..count)
                    .map(|i| shapes.get(i).copied().unwrap_or(&scalar))
                    .collect();
                let got = infer_shape(&instr.op, &given, Some(&instr.shape), &callee);
                if let Arity::Exactly(n) = instr.op.arity() {
                    if count != n {
                        assert_eq!(
                            got,
                            Err(ShapeError::OperandCount {
                                expected: OperandRule::Exactly(n),
                                got: count,
                            }),
                            "{opcode} {} with {count} operands",
                            instr.name
                        );
                    }
                }
            }
        }
    }
    checked.sort_unstable();
    checked.dedup();
    // The elementwise families, the batch norms, transfers, async updates
    // and dones, and the table's fixed rows.
    assert!(
        checked.len() >= 90,
        "{} fixed-arity opcodes: {checked:?}",
        checked.len()
    );
    for opcode in [
        "add",
        "select",
        "batch-norm-grad",
        "send",
        "async-done",
        "iota",
    ] {
        assert!(checked.contains(&opcode), "{opcode} is not checked");
    }
}

#[test]
fn the_table_and_the_ops_agree_on_arity() {
    use hlatc_compiler::ir::op::description::{Description, DESCRIPTIONS};
    let m = all_ops();
    for d in DESCRIPTIONS {
        let instance = m
            .computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
            .find(|op| op.opcode() == d.opcode)
            .unwrap_or_else(|| panic!("no {} in all_ops.hlo", d.opcode));
        assert_eq!(instance.arity(), d.arity, "{}", d.opcode);
        assert_eq!(Description::of(d.opcode).map(|x| x.arity), Some(d.arity));
    }
    let callee = |_| -> Option<(&str, CalleeSignature)> { None };
    let err = infer_shape(
        &hlatc_compiler::Op::Select,
        &[&hlatc_compiler::Shape::scalar(
            hlatc_compiler::ElementType::Pred,
        )],
        None,
        &callee,
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "expects 3 operand(s), got 1");
}
