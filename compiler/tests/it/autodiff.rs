//! What autodiff does with each op, end to end: a rule's gradient flows,
//! an op without one is refused by name with the reason the op table
//! gives (`build::autodiff::gradient`), and an integer-valued op passes no
//! contribution.

use hlatc_compiler::graph::autodiff::{grad, gradient, AutodiffError, GradHints, Gradient};
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::ir::op::{BinaryOp, UnaryOp};
use hlatc_compiler::{ElementType, InstrId, Op, Shape};

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
    assert!(matches!(
        gradient(&b.computation().instr(floor).op),
        Gradient::Zero
    ));
    let sq = b.binary(BinaryOp::Multiply, x, x).unwrap();
    assert!(matches!(
        gradient(&b.computation().instr(sq).op),
        Gradient::Rule(rule) if rule.saves.len() == 2
    ));
    let sum = b.add2(floor, sq).unwrap();
    let loss = b.reduce_sum(sum, &[0]).unwrap();
    let g = grad(&mut b, loss, &[x], &GradHints::default()).unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(b.shape(g[0]), &Shape::array(ElementType::F32, [4]));
}

/// The forward values other than parameters and constants that a
/// backward instruction reads: what the step keeps from its forward pass
/// for its backward (the memory plan's measure).
fn kept_for_backward(b: &Builder) -> Vec<hlatc_compiler::InstrId> {
    use hlatc_compiler::graph::scope::is_backward;
    let c = b.computation();
    let backward = |id| is_backward(&c.instr(id).metadata.op_name);
    let mut kept: Vec<_> = c
        .ids()
        .filter(|&id| !matches!(c.instr(id).op, Op::Parameter(_) | Op::Constant(_)))
        .filter(|&id| !backward(id) && c.users(id).into_iter().any(backward))
        .collect();
    kept.sort();
    kept
}

/// How many copies of forward values autodiff made, each reading forward
/// values or other copies only.
fn recomputed(b: &Builder) -> usize {
    use hlatc_compiler::graph::autodiff::RECOMPUTED;
    use hlatc_compiler::graph::scope::is_backward;
    let c = b.computation();
    let is_copy = |id| c.instr(id).recomputed;
    // The mark, not the name, makes a copy; the name shows it.
    for id in c.ids() {
        assert_eq!(
            is_copy(id),
            c.instr(id).name.starts_with(&format!("{RECOMPUTED}.")),
            "{}",
            c.instr(id).name
        );
    }
    let copies: Vec<_> = c.ids().filter(|&id| is_copy(id)).collect();
    for &copy in &copies {
        assert!(is_backward(&c.instr(copy).metadata.op_name));
        for o in c.operands(copy) {
            assert!(is_copy(o) || !is_backward(&c.instr(o).metadata.op_name));
        }
    }
    copies.len()
}

/// A SwiGLU block's values: `e = exp(p)` split into gate and up, then
/// `silu(gate) * up` through a down projection `w`, summed to the loss.
struct Swiglu {
    p: InstrId,
    w: InstrId,
    e: InstrId,
    gate: InstrId,
    up: InstrId,
    s: InstrId,
    silu: InstrId,
    a: InstrId,
    loss: InstrId,
}

fn swiglu() -> (Builder, Swiglu) {
    let mut b = Builder::new("m");
    let p = b.parameter("p", Shape::array(ElementType::F32, [4, 6]));
    let w = b.parameter("w", Shape::array(ElementType::F32, [5, 3]));
    let e = b.unary(UnaryOp::Exp, p).unwrap();
    let gate = b.add(Op::Slice { slices: slices(0) }, &[e], None).unwrap();
    let up = b.add(Op::Slice { slices: slices(3) }, &[e], None).unwrap();
    let s = b.unary(UnaryOp::Logistic, gate).unwrap();
    let silu = b.mul(gate, s).unwrap();
    let a = b.mul(silu, up).unwrap();
    let down = b.dot(a, w, linear()).unwrap();
    let loss = b.reduce_sum(down, &[0, 1]).unwrap();
    let values = Swiglu {
        p,
        w,
        e,
        gate,
        up,
        s,
        silu,
        a,
        loss,
    };
    (b, values)
}

/// SwiGLU named for recomputation keeps its inputs, the gate and up
/// projections: the logistic, the SiLU and the product the down
/// projection reads are recomputed.
#[test]
fn swiglu_keeps_only_gate_and_up() {
    let (mut b, v) = swiglu();
    let hints = GradHints {
        recompute: vec![v.s, v.silu, v.a],
        ..GradHints::default()
    };
    grad(&mut b, v.loss, &[v.p, v.w], &hints).unwrap();
    // exp's rule reads its output, e.
    assert_eq!(kept_for_backward(&b), vec![v.e, v.gate, v.up]);
    assert_eq!(recomputed(&b), 3);
    // Without the hint the chain rule keeps all five.
    let (mut b, v) = swiglu();
    grad(&mut b, v.loss, &[v.p, v.w], &GradHints::default()).unwrap();
    assert_eq!(
        kept_for_backward(&b),
        vec![v.e, v.gate, v.up, v.s, v.silu, v.a]
    );
    assert_eq!(recomputed(&b), 0);
}

/// An RMSNorm named for recomputation keeps its input and its `[N]`
/// scale: the broadcasts of the scale and the weight to `[N, D]` and the
/// normalized input are recomputed.
#[test]
fn an_rms_norm_keeps_its_input_and_its_scale() {
    let (n, d) = (4, 8);
    let mut b = Builder::new("m");
    let p = b.parameter("p", Shape::array(ElementType::F32, [n, d]));
    let w = b.parameter("w", Shape::array(ElementType::F32, [d]));
    let x = b.unary(UnaryOp::Exp, p).unwrap();
    let sq = b.mul(x, x).unwrap();
    let ss = b.reduce_sum(sq, &[1]).unwrap();
    let ms = b.scale(ss, 1.0 / d as f64).unwrap();
    let eps = b.full_like(ms, 1e-6).unwrap();
    let var = b.add2(ms, eps).unwrap();
    let r = b.unary(UnaryOp::Rsqrt, var).unwrap();
    let rb = b.broadcast(r, &[n, d], &[0]).unwrap();
    let wb = b.broadcast(w, &[n, d], &[1]).unwrap();
    let y = b.mul(x, rb).unwrap();
    let out = b.mul(y, wb).unwrap();
    let loss = b.reduce_sum(out, &[0, 1]).unwrap();
    let hints = GradHints {
        recompute: vec![rb, wb, y],
        ..GradHints::default()
    };
    grad(&mut b, loss, &[p, w], &hints).unwrap();
    // Besides x and the scale, the [N] broadcast of 1/D that the mean's
    // rule reads.
    let inv_d = b.computation().operands(ms)[1];
    let mut expected = vec![x, inv_d, r];
    expected.sort();
    assert_eq!(kept_for_backward(&b), expected);
    // x * scale and the broadcasts of the scale and the weight.
    assert_eq!(recomputed(&b), 3);
}

fn linear() -> hlatc_compiler::ir::op::DotDims {
    hlatc_compiler::ir::op::DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        ..Default::default()
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
