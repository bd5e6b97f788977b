//! What autodiff does with each op, end to end: a rule's gradient flows,
//! an op without one is refused by name with the reason the op table
//! gives (`build::autodiff::gradient`), and an integer-valued op passes no
//! contribution.

use hlatc_compiler::graph::autodiff::{grad, gradient, AutodiffError, GradHints, Gradient};
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::ir::op::{BinaryOp, UnaryOp};
use hlatc_compiler::{ElementType, Op, Shape};

fn vector(b: &mut Builder, name: &str) -> hlatc_compiler::InstrId {
    b.parameter(name, Shape::array(ElementType::F32, [4]))
}

#[test]
fn an_op_without_a_rule_is_refused_with_the_tables_reason() {
    let mut b = Builder::new("m");
    let x = vector(&mut b, "x");
    let y = b
        .add(
            Op::Reverse {
                dimensions: vec![0],
            },
            &[x],
            None,
        )
        .unwrap();
    // Rounding ops have no rule: the reverse before it has one, so the
    // refusal comes from the op itself.
    let rp = b
        .add(
            Op::ReducePrecision {
                exponent_bits: 8,
                mantissa_bits: 7,
            },
            &[y],
            None,
        )
        .unwrap();
    let loss = b.reduce_sum(rp, &[0]).unwrap();
    let e = grad(&mut b, loss, &[x], &GradHints::default()).unwrap_err();
    let Gradient::Refused(reason) = gradient(&b.computation().instr(rp).op) else {
        panic!("reduce-precision has no rule");
    };
    assert_eq!(
        e,
        AutodiffError::NotDifferentiable {
            instruction: b.computation().instr(rp).name.clone(),
            opcode: "reduce-precision",
            reason: reason.into_owned(),
        }
    );
}

#[test]
fn integer_valued_ops_pass_no_contribution_and_rules_flow() {
    let mut b = Builder::new("m");
    let x = vector(&mut b, "x");
    // floor(x) has zero derivative almost everywhere; x * x has 2x.
    let floor = b.unary(UnaryOp::Floor, x).unwrap();
    assert_eq!(gradient(&b.computation().instr(floor).op), Gradient::Zero);
    let sq = b.binary(BinaryOp::Multiply, x, x).unwrap();
    assert!(matches!(
        gradient(&b.computation().instr(sq).op),
        Gradient::Rule { saves } if saves.len() == 2
    ));
    let sum = b.add2(floor, sq).unwrap();
    let loss = b.reduce_sum(sum, &[0]).unwrap();
    let g = grad(&mut b, loss, &[x], &GradHints::default()).unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(b.shape(g[0]), &Shape::array(ElementType::F32, [4]));
}

/// The forward values a backward instruction reads: what the step keeps
/// from its forward pass for its backward.
fn kept_for_backward(b: &Builder) -> Vec<hlatc_compiler::InstrId> {
    use hlatc_compiler::graph::scope::is_backward;
    let c = b.computation();
    let backward = |id| is_backward(&c.instr(id).metadata.op_name);
    let mut kept: Vec<_> = c
        .ids()
        .filter(|&id| !backward(id) && c.users(id).into_iter().any(backward))
        .collect();
    kept.sort();
    kept
}

/// SwiGLU's composite keeps its inputs, the gate and up projections, and
/// recomputes the logistic and the SiLU; its gradient is the chain rule's.
#[test]
fn swiglu_keeps_only_its_inputs() {
    use hlatc_compiler::graph::autodiff::{Composite, CompositeRule};
    let mut b = Builder::new("m");
    let p = b.parameter("p", Shape::array(ElementType::F32, [4, 6]));
    let e = b.unary(UnaryOp::Exp, p).unwrap();
    let gate = b.add(Op::Slice { slices: slices(0) }, &[e], None).unwrap();
    let up = b.add(Op::Slice { slices: slices(3) }, &[e], None).unwrap();
    let s = b.unary(UnaryOp::Logistic, gate).unwrap();
    let silu = b.mul(gate, s).unwrap();
    let a = b.mul(silu, up).unwrap();
    let loss = b.reduce_sum(a, &[0, 1]).unwrap();
    let hints = GradHints {
        stop: vec![],
        composites: vec![Composite {
            inputs: vec![gate, up],
            output: a,
            rule: CompositeRule::SwiGlu,
        }],
    };
    grad(&mut b, loss, &[p], &hints).unwrap();
    let kept = kept_for_backward(&b);
    assert!(kept.contains(&gate) && kept.contains(&up), "{kept:?}");
    for inner in [s, silu, a] {
        assert!(!kept.contains(&inner), "{kept:?}");
    }
}

fn slices(start: i64) -> Vec<hlatc_compiler::ir::op::SliceDim> {
    use hlatc_compiler::ir::op::SliceDim;
    vec![
        SliceDim {
            start: 0,
            limit: 4,
            stride: 1,
        },
        SliceDim {
            start,
            limit: start + 3,
            stride: 1,
        },
    ]
}
