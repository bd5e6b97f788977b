//! Every backward rule against central finite differences, in f64 on XLA
//! CPU, and every rule keeps to the forward values it declares it saves.

use crate::common::*;
use hlatc_compiler::graph::autodiff::{self, rules};
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::ir::op::*;
use hlatc_compiler::{ElementType, InstrId, Literal, Module, Scalar, Shape};
use hlatc_runtime::inputs::SplitMix64;
use std::collections::HashSet;

type Body = dyn Fn(&mut Builder, &[InstrId]) -> InstrId;

struct Case {
    name: &'static str,
    inputs: Vec<Literal>,
    /// Inputs to differentiate (float ones).
    wrt: Vec<usize>,
    body: Box<Body>,
    eps: f64,
    tol: f64,
}

fn f64s(dims: &[i64], v: &[f64]) -> Literal {
    Literal::from_f64(dims.to_vec(), v).unwrap()
}

fn random(dims: &[i64], seed: u64, lo: f64, hi: f64) -> Literal {
    let mut r = SplitMix64::new(seed);
    let n = dims.iter().product::<i64>() as usize;
    let v: Vec<f64> = (0..n).map(|_| lo + (hi - lo) * r.next_f64()).collect();
    f64s(dims, &v)
}

fn case(
    name: &'static str,
    inputs: Vec<Literal>,
    wrt: Vec<usize>,
    body: impl Fn(&mut Builder, &[InstrId]) -> InstrId + 'static,
) -> Case {
    Case {
        name,
        inputs,
        wrt,
        body: Box::new(body),
        eps: 1e-6,
        tol: 1e-6,
    }
}

fn shape_of(l: &Literal) -> Shape {
    Shape::array(l.ty(), l.dims().to_vec())
}

/// loss = sum(out * w) for fixed pseudo-random w, so every output element
/// carries a different weight.
fn build(case: &Case, with_grads: bool) -> Module {
    let mut b = Builder::new("fd");
    let params: Vec<InstrId> = case
        .inputs
        .iter()
        .enumerate()
        .map(|(i, l)| b.parameter(&format!("x{i}"), shape_of(l)))
        .collect();
    let out = (case.body)(&mut b, &params);
    let od = b.dims(out);
    let w = b.constant(random(&od, 99, -1.0, 1.0).reshaped(od.clone()).unwrap());
    let w = if b.ty(out) == ElementType::F64 {
        w
    } else {
        b.convert(w, b.ty(out)).unwrap()
    };
    let prod = b.mul(out, w).unwrap();
    let all: Vec<i64> = (0..od.len() as i64).collect();
    let loss = b.reduce_sum(prod, &all).unwrap();
    let loss = if b.ty(loss) == ElementType::F64 {
        loss
    } else {
        b.convert(loss, ElementType::F64).unwrap()
    };
    let root = if with_grads {
        let wrt: Vec<InstrId> = case.wrt.iter().map(|&i| params[i]).collect();
        let grads = autodiff::grad(&mut b, loss, &wrt, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let mut all = vec![loss];
        all.extend(grads);
        b.add(Op::Tuple, &all, None).unwrap()
    } else {
        loss
    };
    b.into_module("fd", root)
}

fn check(c: Case) {
    let rt = runtime();
    let grad_prog = rt
        .compile(&build(&c, true))
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let out = grad_prog.run(&c.inputs).unwrap();
    let loss_prog = rt.compile(&build(&c, false)).unwrap();
    for (k, &i) in c.wrt.iter().enumerate() {
        let analytic = out[1 + k].to_f64_vec();
        let x = c.inputs[i].to_f64_vec();
        for j in 0..x.len() {
            let eval = |delta: f64| {
                let mut xs = x.clone();
                xs[j] += delta;
                let mut inputs = c.inputs.clone();
                inputs[i] = f64s(c.inputs[i].dims(), &xs);
                loss_prog.run(&inputs).unwrap()[0].to_f64_vec()[0]
            };
            let fd = (eval(c.eps) - eval(-c.eps)) / (2.0 * c.eps);
            let ad = analytic[j];
            assert!(
                (ad - fd).abs() <= c.tol * fd.abs().max(1.0),
                "{}: d/dx{i}[{j}]: autodiff {ad}, finite differences {fd}",
                c.name
            );
        }
    }
}

fn un(name: &'static str, op: UnaryOp, lo: f64, hi: f64) -> Case {
    case(
        name,
        vec![random(&[2, 3], 1, lo, hi)],
        vec![0],
        move |b, p| b.unary(op, p[0]).unwrap(),
    )
}

fn bin(name: &'static str, op: BinaryOp, lo: f64, hi: f64) -> Case {
    case(
        name,
        vec![random(&[2, 3], 2, lo, hi), random(&[2, 3], 3, lo, hi)],
        vec![0, 1],
        move |b, p| b.binary(op, p[0], p[1]).unwrap(),
    )
}

#[test]
fn unary_rules_match_finite_differences() {
    for c in [
        un("abs", UnaryOp::Abs, 0.1, 2.0),
        un("negate", UnaryOp::Negate, -2.0, 2.0),
        un("exp", UnaryOp::Exp, -2.0, 2.0),
        un("expm1", UnaryOp::Expm1, -2.0, 2.0),
        un("log", UnaryOp::Log, 0.2, 3.0),
        un("log1p", UnaryOp::Log1p, 0.2, 3.0),
        un("sqrt", UnaryOp::Sqrt, 0.2, 3.0),
        un("rsqrt", UnaryOp::Rsqrt, 0.2, 3.0),
        un("sine", UnaryOp::Sin, -2.0, 2.0),
        un("cosine", UnaryOp::Cos, -2.0, 2.0),
        un("tanh", UnaryOp::Tanh, -2.0, 2.0),
        un("tan", UnaryOp::Tan, -1.2, 1.2),
        un("cbrt", UnaryOp::Cbrt, 0.3, 3.0),
        un("erf", UnaryOp::Erf, -2.0, 2.0),
        un("logistic", UnaryOp::Logistic, -3.0, 3.0),
        un("copy", UnaryOp::Copy, -2.0, 2.0),
        un("floor", UnaryOp::Floor, 0.1, 0.9),
        un("sign", UnaryOp::Sign, 0.1, 0.9),
    ] {
        check(c);
    }
}

#[test]
fn binary_rules_match_finite_differences() {
    for c in [
        bin("add", BinaryOp::Add, -2.0, 2.0),
        bin("subtract", BinaryOp::Subtract, -2.0, 2.0),
        bin("multiply", BinaryOp::Multiply, -2.0, 2.0),
        bin("divide", BinaryOp::Divide, 0.5, 2.0),
        bin("maximum", BinaryOp::Maximum, -2.0, 2.0),
        bin("minimum", BinaryOp::Minimum, -2.0, 2.0),
        bin("power", BinaryOp::Power, 0.5, 2.0),
        bin("atan2", BinaryOp::Atan2, 0.5, 2.0),
        case(
            "remainder",
            vec![random(&[2, 3], 4, 2.1, 2.9), random(&[2, 3], 5, 0.6, 0.9)],
            vec![0, 1],
            |b, p| b.binary(BinaryOp::Remainder, p[0], p[1]).unwrap(),
        ),
    ] {
        check(c);
    }
}

#[test]
fn selection_and_conversion_rules() {
    let pred = Literal::from_pred(vec![2, 3], &[true, false, true, false, false, true]).unwrap();
    check(case(
        "select",
        vec![
            pred,
            random(&[2, 3], 6, -1.0, 1.0),
            random(&[2, 3], 7, -1.0, 1.0),
        ],
        vec![1, 2],
        |b, p| b.select(p[0], p[1], p[2]).unwrap(),
    ));
    check(case(
        "clamp",
        vec![
            f64s(&[], &[-0.5]),
            random(&[2, 3], 8, -1.0, 1.0),
            f64s(&[], &[0.5]),
        ],
        vec![0, 1, 2],
        |b, p| b.add(Op::Clamp, &[p[0], p[1], p[2]], None).unwrap(),
    ));
    let mut c = case(
        "convert f64->f32->f64",
        vec![random(&[2, 3], 9, -1.0, 1.0)],
        vec![0],
        |b, p| {
            let f = b.convert(p[0], ElementType::F32).unwrap();
            b.convert(f, ElementType::F64).unwrap()
        },
    );
    // Linear, but rounded to f32 in between: a wide step and f32 tolerance.
    c.eps = 1e-2;
    c.tol = 1e-5;
    check(c);
}

#[test]
fn shape_rules_match_finite_differences() {
    let x = || vec![random(&[2, 3], 10, -1.0, 1.0)];
    check(case("broadcast", x(), vec![0], |b, p| {
        b.broadcast(p[0], &[3, 2, 4], &[1, 0]).unwrap()
    }));
    check(case("reshape", x(), vec![0], |b, p| {
        b.reshape(p[0], &[3, 2]).unwrap()
    }));
    check(case(
        "transpose",
        vec![random(&[2, 3, 4], 12, -1.0, 1.0)],
        vec![0],
        |b, p| b.transpose(p[0], &[2, 0, 1]).unwrap(),
    ));
    check(case("reverse", x(), vec![0], |b, p| {
        b.add(
            Op::Reverse {
                dimensions: vec![1],
            },
            &[p[0]],
            None,
        )
        .unwrap()
    }));
    check(case(
        "slice strided",
        vec![random(&[3, 7], 13, -1.0, 1.0)],
        vec![0],
        |b, p| {
            let slices = vec![
                SliceDim {
                    start: 1,
                    limit: 3,
                    stride: 1,
                },
                SliceDim {
                    start: 1,
                    limit: 6,
                    stride: 2,
                },
            ];
            b.add(Op::Slice { slices }, &[p[0]], None).unwrap()
        },
    ));
    check(case(
        "concatenate",
        vec![
            random(&[2, 3], 14, -1.0, 1.0),
            random(&[2, 2], 15, -1.0, 1.0),
        ],
        vec![0, 1],
        |b, p| b.concatenate(&[p[0], p[1], p[0]], 1).unwrap(),
    ));
    check(case(
        "pad",
        vec![random(&[2, 3], 16, -1.0, 1.0), f64s(&[], &[0.25])],
        vec![0, 1],
        |b, p| {
            let config = vec![
                PadDim {
                    low: 1,
                    high: 0,
                    interior: 0,
                },
                PadDim {
                    low: 0,
                    high: 2,
                    interior: 1,
                },
            ];
            b.add(Op::Pad { config }, &[p[0], p[1]], None).unwrap()
        },
    ));
    let idx = || Literal::from_s32(vec![], &[1]).unwrap();
    check(case(
        "dynamic-slice",
        vec![random(&[4, 3], 17, -1.0, 1.0), idx()],
        vec![0],
        |b, p| {
            let z = b.constant(Literal::from_s32(vec![], &[0]).unwrap());
            b.add(
                Op::DynamicSlice { sizes: vec![2, 3] },
                &[p[0], p[1], z],
                None,
            )
            .unwrap()
        },
    ));
    check(case(
        "dynamic-update-slice",
        vec![
            random(&[4, 3], 18, -1.0, 1.0),
            random(&[2, 3], 19, -1.0, 1.0),
            idx(),
        ],
        vec![0, 1],
        |b, p| {
            let z = b.constant(Literal::from_s32(vec![], &[0]).unwrap());
            b.add(Op::DynamicUpdateSlice, &[p[0], p[1], p[2], z], None)
                .unwrap()
        },
    ));
}

#[test]
fn contraction_and_reduction_rules() {
    let dot = |name: &'static str, lhs: &[i64], rhs: &[i64], seed: u64, dims: DotDims| {
        case(
            name,
            vec![
                random(lhs, seed, -1.0, 1.0),
                random(rhs, seed + 1, -1.0, 1.0),
            ],
            vec![0, 1],
            move |b, p| b.dot(p[0], p[1], dims.clone()).unwrap(),
        )
    };
    let contract = |l: Vec<i64>, r: Vec<i64>| DotDims {
        lhs_contracting: l,
        rhs_contracting: r,
        ..Default::default()
    };
    check(dot(
        "dot matmul",
        &[2, 3],
        &[3, 4],
        20,
        contract(vec![1], vec![0]),
    ));
    check(dot(
        "dot x.W^T",
        &[2, 3],
        &[4, 3],
        22,
        contract(vec![1], vec![1]),
    ));
    check(dot(
        "dot batched attention",
        &[2, 3, 2, 4],
        &[2, 5, 2, 4],
        24,
        DotDims {
            lhs_batch: vec![0, 2],
            lhs_contracting: vec![3],
            rhs_batch: vec![0, 2],
            rhs_contracting: vec![3],
        },
    ));
    check(dot(
        "dot two contracting dims",
        &[3, 2, 4],
        &[4, 5, 3],
        26,
        contract(vec![0, 2], vec![2, 0]),
    ));
    check(case(
        "reduce sum",
        vec![random(&[2, 3, 4], 28, -1.0, 1.0)],
        vec![0],
        |b, p| b.reduce_sum(p[0], &[0, 2]).unwrap(),
    ));
    check(case(
        "reduce max",
        vec![random(&[3, 4], 29, -1.0, 1.0)],
        vec![0],
        |b, p| b.reduce_max(p[0], &[1]).unwrap(),
    ));
    check(case(
        "reduce min",
        vec![random(&[3, 4], 30, -1.0, 1.0)],
        vec![0],
        |b, p| {
            b.reduce(BinaryOp::Minimum, p[0], &[0], f64::INFINITY)
                .unwrap()
        },
    ));
}

fn embedding_gather(b: &mut Builder, table: InstrId, idx: InstrId, width: i64) -> InstrId {
    let dims = GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    b.add(
        Op::Gather {
            dims,
            slice_sizes: vec![1, width],
            indices_are_sorted: false,
        },
        &[table, idx],
        None,
    )
    .unwrap()
}

#[test]
fn gather_and_scatter_rules() {
    let idx = || Literal::from_s32(vec![4, 1], &[2, 0, 2, 3]).unwrap();
    check(case(
        "gather (embedding, repeated rows)",
        vec![random(&[4, 3], 31, -1.0, 1.0), idx()],
        vec![0],
        |b, p| embedding_gather(b, p[0], p[1], 3),
    ));
    check(case(
        "scatter-add",
        vec![
            random(&[4, 3], 32, -1.0, 1.0),
            idx(),
            random(&[4, 3], 33, -1.0, 1.0),
        ],
        vec![0, 2],
        |b, p| {
            let to_apply = b.reducer(BinaryOp::Add, ElementType::F64);
            let dims = ScatterDims {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
                index_vector_dim: 1,
                ..Default::default()
            };
            b.add(
                Op::Scatter {
                    dims,
                    to_apply,
                    indices_are_sorted: false,
                    unique_indices: false,
                },
                &[p[0], p[1], p[2]],
                None,
            )
            .unwrap()
        },
    ));
}

/// A rule may read only the adjoint, the forward values `saves` names, and
/// what it creates itself: checked on every differentiable op here.
#[test]
fn rules_read_only_what_they_declare_saved() {
    let x = || Shape::array(ElementType::F64, [2, 3]);
    let mut checked = 0;
    let ops: Vec<(Op, usize)> = vec![
        (Op::Unary(UnaryOp::Exp), 1),
        (Op::Unary(UnaryOp::Log), 1),
        (Op::Unary(UnaryOp::Rsqrt), 1),
        (Op::Unary(UnaryOp::Logistic), 1),
        (Op::Unary(UnaryOp::Tanh), 1),
        (Op::Unary(UnaryOp::Tan), 1),
        (Op::Unary(UnaryOp::Cbrt), 1),
        (Op::Unary(UnaryOp::Erf), 1),
        (Op::Unary(UnaryOp::Sin), 1),
        (Op::Unary(UnaryOp::Cos), 1),
        (Op::Unary(UnaryOp::Negate), 1),
        (Op::Binary(BinaryOp::Add), 2),
        (Op::Binary(BinaryOp::Multiply), 2),
        (Op::Binary(BinaryOp::Divide), 2),
        (Op::Binary(BinaryOp::Maximum), 2),
        (Op::Binary(BinaryOp::Power), 2),
        (
            Op::Transpose {
                permutation: vec![1, 0],
            },
            1,
        ),
        (
            Op::Dot {
                dims: DotDims {
                    lhs_contracting: vec![1],
                    rhs_contracting: vec![1],
                    ..Default::default()
                },
                precision: vec![],
                algorithm: Default::default(),
            },
            2,
        ),
    ];
    for (op, arity) in ops {
        let mut b = Builder::new("saves");
        let params: Vec<InstrId> = (0..arity)
            .map(|i| b.parameter(&format!("p{i}"), x()))
            .collect();
        // Every unary op's forward also computes the other trigonometric
        // function of the same operand, as rotary embeddings do, so a rule
        // that recomputes it through value numbering reads it undeclared.
        if arity == 1 {
            b.unary(UnaryOp::Sin, params[0]).unwrap();
            b.unary(UnaryOp::Cos, params[0]).unwrap();
        }
        let out = b.add(op.clone(), &params, None).unwrap();
        let g = b.parameter("g", b.shape(out).clone());
        let before: HashSet<InstrId> = b.computation().ids().collect();
        let mut allowed: HashSet<InstrId> = HashSet::from([g]);
        for s in rules::saves(&op, None) {
            match s {
                rules::Saved::Operand(k) => {
                    allowed.insert(params[k]);
                }
                rules::Saved::Output => {
                    allowed.insert(out);
                }
                rules::Saved::OperandsFrom(k) => allowed.extend(params[k..].iter().copied()),
            }
        }
        for i in 0..arity {
            autodiff::rules::vjp(&mut b, out, i, g).unwrap();
        }
        let c = b.computation();
        for id in c.ids().filter(|id| !before.contains(id)) {
            for o in c.operands(id) {
                assert!(
                    !before.contains(&o) || allowed.contains(&o),
                    "{}: backward reads '{}', which saves() does not declare",
                    op.opcode(),
                    c.instr(o).name
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 18);
    let _ = Scalar::Float(0.0);
}
