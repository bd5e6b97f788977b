//! The rewriter: names unique across the module, shapes checked where a
//! rewrite is made, value numbering only when asked for.

use hlatc_compiler::ir::op::UnaryOp;
use hlatc_compiler::{formats::text, Module, Op};
use hlatc_passes::rewriter::{ModuleRewriter, RewriteError};

fn module() -> Module {
    text::parse_module(
        "HloModule m\nadd_f32 {\n  negate = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(negate, y)\n}\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n",
    )
    .unwrap()
}

#[test]
fn names_are_unique_across_the_module() {
    let mut m = module();
    let mut rw = ModuleRewriter::new(&m);
    let entry = m.entry;
    let mut r = rw.on(m.computation_mut(entry));
    let p = r.comp().find("p").unwrap();
    // `negate` is taken in another computation, so the entry's new negate
    // may not reuse it.
    let a = r.add(Op::Unary(UnaryOp::Negate), &[p], None).unwrap();
    let b = r.add(Op::Unary(UnaryOp::Negate), &[p], None).unwrap();
    assert_eq!(r.comp().instr(a).name, "negate.1");
    assert_eq!(r.comp().instr(b).name, "negate.2");
}

#[test]
fn value_numbering_is_opt_in() {
    let mut m = module();
    let mut rw = ModuleRewriter::new(&m);
    let entry = m.entry;
    let mut r = rw.on(m.computation_mut(entry));
    let p = r.comp().find("p").unwrap();
    let n = r.comp().find("n").unwrap();
    let fresh = r.add(Op::Unary(UnaryOp::Negate), &[p], None).unwrap();
    assert_ne!(
        fresh, n,
        "without value numbering, a recomputation stays apart"
    );
    r.share_values();
    let shared = r.add(Op::Unary(UnaryOp::Negate), &[p], None).unwrap();
    assert_eq!(shared, n, "with it, the existing value is returned");
}

#[test]
fn a_replacement_of_another_shape_is_refused_and_dead_code_swept() {
    let mut m = module();
    let mut rw = ModuleRewriter::new(&m);
    let entry = m.entry;
    let mut r = rw.on(m.computation_mut(entry));
    let p = r.comp().find("p").unwrap();
    let n = r.comp().find("n").unwrap();
    let shape = hlatc_compiler::Shape::array(hlatc_compiler::ElementType::F32, [1, 2]);
    let reshaped = r.add(Op::RESHAPE, &[p], Some(shape)).unwrap();
    let e = r.replace(n, reshaped).unwrap_err();
    assert!(matches!(e, RewriteError::ShapeChange { .. }), "{e}");
    assert_eq!(r.remove_dead(), 1, "the unread reshape goes");
    let abs = r.add(Op::Unary(UnaryOp::Abs), &[p], None).unwrap();
    r.replace(n, abs).unwrap();
    assert_eq!(r.remove_dead(), 1, "the replaced negate goes");
    assert_eq!(r.comp().root(), Some(abs));
}

#[test]
fn an_in_place_rewrite_is_checked_by_inference() {
    use hlatc_compiler::ir::op::BinaryOp;
    use hlatc_compiler::{ElementType, Shape};
    let mut m = text::parse_module(
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(1)\n  ROOT s = f32[2] multiply(p, q)\n}\n",
    )
    .unwrap();
    let mut rw = ModuleRewriter::new(&m);
    let entry = m.entry;
    let mut r = rw.on(m.computation_mut(entry));
    let [p, q, s] = ["p", "q", "s"].map(|n| r.comp().find(n).unwrap());
    assert!(matches!(
        r.comp().instr(s).op,
        Op::Binary(BinaryOp::Multiply)
    ));
    let pb = r
        .add(
            Op::Convert,
            &[p],
            Some(Shape::array(ElementType::Bf16, [2])),
        )
        .unwrap();
    // Operands of two types do not multiply: refused, nothing changed.
    let e = r
        .rewrite_in_place(s, &[pb, q], Some(Shape::array(ElementType::Bf16, [2])))
        .unwrap_err();
    assert!(matches!(e, RewriteError::Shape { .. }), "{e}");
    assert_eq!(r.comp().operands(s), vec![p, q]);
    // Both operands bf16, the result declared bf16: accepted, same name,
    // the same operand read twice.
    r.rewrite_in_place(s, &[pb, pb], Some(Shape::array(ElementType::Bf16, [2])))
        .unwrap();
    assert_eq!(r.comp().operands(s), vec![pb, pb]);
    assert_eq!(r.comp().instr(s).name, "s");
    assert_eq!(
        r.comp().instr(s).shape,
        Shape::array(ElementType::Bf16, [2])
    );
    // A declared shape inference disagrees with is refused.
    let e = r
        .rewrite_in_place(s, &[pb, pb], Some(Shape::array(ElementType::F32, [3])))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e': 's' would be f32[3]{0}, but multiply over its new operands gives bf16[2]{0}"
    );
}

#[test]
fn fresh_names_skip_those_taken_and_count_past_nine() {
    use hlatc_passes::rewriter::Names;
    let m = text::parse_module(
        "HloModule m\nENTRY e {\n  c = f32[] parameter(0)\n  c.2 = f32[] negate(c)\n  ROOT c.10 = f32[] negate(c.2)\n}\n",
    )
    .unwrap();
    let mut names = Names::of_module(&m);
    let made: Vec<String> = (0..10).map(|_| names.fresh("c")).collect();
    assert_eq!(
        made,
        ["c.1", "c.3", "c.4", "c.5", "c.6", "c.7", "c.8", "c.9", "c.11", "c.12"]
    );
    assert_eq!(names.fresh("d"), "d");
    assert_eq!(names.fresh("d"), "d.1");
}

#[test]
fn a_retyping_is_checked_by_rule_or_else_by_inference() {
    use hlatc_compiler::{ElementType, Shape};
    let mut m = text::parse_module(
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(1)\n  w = f32[3] parameter(2)\n  s = f32[2] add(p, q)\n  ROOT t = pred[2] compare(s, q), direction=LT\n}\n",
    )
    .unwrap();
    let mut rw = ModuleRewriter::new(&m);
    let entry = m.entry;
    let mut r = rw.on(m.computation_mut(entry));
    let [p, q, w, s, t] = ["p", "q", "w", "s", "t"].map(|n| r.comp().find(n).unwrap());
    let bf16 = |r: &mut hlatc_passes::rewriter::Rewriter<'_>, x, dims: &[i64]| {
        r.add(
            Op::Convert,
            &[x],
            Some(Shape::array(ElementType::Bf16, dims.to_vec())),
        )
        .unwrap()
    };
    let (pb, qb, wb) = (
        bf16(&mut r, p, &[2]),
        bf16(&mut r, q, &[2]),
        bf16(&mut r, w, &[3]),
    );
    // An operand of other dims breaks the rule; inference then refuses it,
    // and nothing changes.
    let e = r
        .retype_in_place(s, &[pb, wb], ElementType::Bf16)
        .unwrap_err();
    assert!(matches!(e, RewriteError::Shape { .. }), "{e}");
    assert_eq!(r.comp().operands(s), vec![p, q]);
    // So does a float operand left in another type.
    let e = r
        .retype_in_place(s, &[pb, q], ElementType::Bf16)
        .unwrap_err();
    assert!(matches!(e, RewriteError::Shape { .. }), "{e}");
    // Both bf16: the sum is bf16, the comparison stays pred.
    r.retype_in_place(s, &[pb, qb], ElementType::Bf16).unwrap();
    r.retype_in_place(t, &[s, qb], ElementType::Bf16).unwrap();
    assert_eq!(r.comp().operands(s), vec![pb, qb]);
    assert_eq!(
        r.comp().instr(s).shape,
        Shape::array(ElementType::Bf16, [2])
    );
    assert_eq!(
        r.comp().instr(t).shape,
        Shape::array(ElementType::Pred, [2])
    );
    drop(r);
    hlatc_compiler::verify(&m).unwrap();
}
