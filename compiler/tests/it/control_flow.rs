//! `while`, `conditional` and `fusion`: each callee must take exactly what
//! the op hands it and give what the op returns; a module that breaks this
//! is refused by name (`compiler/tests/filetests/{parse,verify}/`: `while_*`,
//! `conditional_*`, `fusion_*`, `composite_call_*`), in text and in the
//! proto.

use hlatc_compiler::{formats::proto, formats::text, verify, Module, Op};

const CALLEES: &str = "cond {
  cs = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(ci, ten), direction=LT
}

body {
  bs = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bs), index=0
  bx = f32[4] get-tuple-element(bs), index=1
  one = s32[] constant(1)
  bi2 = s32[] add(bi, one)
  bx2 = f32[4] add(bx, bx)
  ROOT bt = (s32[], f32[4]) tuple(bi2, bx2)
}

neg {
  nx = f32[4] parameter(0)
  ROOT nn = f32[4] negate(nx)
}

half {
  hx = f32[2] parameter(0)
  ROOT hn = f32[2] negate(hx)
}
";

fn parse(entry: &str) -> Result<Module, String> {
    let src = format!("HloModule m\n\n{CALLEES}\nENTRY e {{\n{entry}\n}}\n");
    let m = text::parse_module(&src).map_err(|e| e.to_string())?;
    verify(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

#[test]
fn ops_keep_their_callees_in_xla_order() {
    let m = parse(
        "  x = f32[4] parameter(0)\n  i = s32[] constant(0)\n  s = (s32[], f32[4]) tuple(i, x)\n  w = (s32[], f32[4]) while(s), condition=cond, body=body\n  k = s32[] constant(1)\n  ROOT c = f32[4] conditional(k, x, x), branch_computations={%neg, %neg}",
    )
    .unwrap();
    let e = m.entry();
    let id = |name| m.find_computation(name).unwrap();
    let names = |op: &Op| -> Vec<&str> {
        op.called_computations()
            .map(|c| m.computation(c).name.as_str())
            .collect()
    };
    let w = &e.instr(e.find("w").unwrap()).op;
    assert_eq!(
        w,
        &Op::While {
            condition: id("cond"),
            body: id("body")
        }
    );
    // XLA's called_computation_ids: the body first, then the condition.
    assert_eq!(names(w), ["body", "cond"]);
    let c = &e.instr(e.find("c").unwrap()).op;
    assert_eq!(names(c), ["neg", "neg"]);
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), text::print_module(&m));
}

#[test]
fn a_fusion_keeps_its_kind_through_text_and_proto() {
    let m =
        parse("  x = f32[4] parameter(0)\n  ROOT f = f32[4] fusion(x), kind=kOutput, calls=neg")
            .unwrap();
    let bytes = proto::encode_module(&m);
    let back = proto::decode_module(&bytes).unwrap();
    assert_eq!(text::print_module(&back), text::print_module(&m));
    assert!(text::print_module(&m).contains("fusion(x), kind=kOutput, calls=neg"));
}

/// A composite call (`is_composite=true`) stands for the op its frontend
/// attributes name; its callee is the decomposition. Shardy and StableHLO
/// composites write the attributes as an unquoted dictionary.
#[test]
fn a_composite_call_keeps_its_flag_and_names_its_op() {
    let call = |attrs: &str| {
        format!("  x = f32[4] parameter(0)\n  ROOT c = f32[4] call(x), to_apply=neg, is_composite=true, frontend_attributes={{{attrs}}}")
    };
    let m = parse(&call(
        "composite.attributes={n = 1 : i32},composite.name=\"foo.bar\",composite.version=\"1\"",
    ))
    .unwrap();
    let e = m.entry();
    let c = e.instr(e.find("c").unwrap());
    assert_eq!(
        c.op,
        Op::Call {
            to_apply: m.find_computation("neg").unwrap(),
            is_composite: true
        }
    );
    assert_eq!(
        c.frontend_attributes["composite.attributes"],
        "{n = 1 : i32}"
    );
    let printed = text::print_module(&m);
    assert!(
        printed.contains("to_apply=neg, is_composite=true"),
        "{printed}"
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), printed);
}

/// A computation the entry never reaches may still call one it does (XLA's
/// tests keep dead copies of regions that way). Both are kept, each callee
/// printed before its caller.
#[test]
fn an_unreached_computation_may_call_a_reached_one() {
    let src = "HloModule m\n\nsum {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT r = s32[] add(a, b)\n}\n\nENTRY e {\n  p = s32[4] parameter(0)\n  z = s32[] constant(0)\n  ROOT s = s32[] reduce(p, z), dimensions={0}, to_apply=sum\n}\n\ndead {\n  q = s32[4] parameter(0)\n  y = s32[] constant(0)\n  ROOT t = s32[] reduce(q, y), dimensions={0}, to_apply=sum\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let printed = text::print_module(&m);
    let at = |name: &str| printed.find(name).unwrap_or_else(|| panic!("{printed}"));
    assert!(
        at("sum {") < at("dead {") && at("dead {") < at("ENTRY e {"),
        "{printed}"
    );
    assert_eq!(text::parse_module(&printed).unwrap(), m);
}

/// A computation may be written inline as a callee (`to_apply={ ... }`):
/// it is read as its own computation named `_`, as XLA's reader names it
/// (then `_.1`, ...), printed before its caller; an error inside it
/// points into the text where it is written
/// (`filetests/parse/error_inside_an_inline_computation.hlo`).
#[test]
fn computations_written_inline_are_read_as_their_own() {
    let src = "HloModule m\n\nENTRY e {\n  a = s32[4] parameter(0)\n  z = s32[] constant(0)\n  s = s32[] reduce(a, z), dimensions={0}, to_apply={\n    x = s32[] parameter(0)\n    y = s32[] parameter(1)\n    ROOT r = add(x, y)\n  }\n  ROOT c = s32[] call(s), to_apply={ p = s32[] parameter(0)\n ROOT n = s32[] negate(p) }\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let names: Vec<&str> = m.computations.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["_", "_.1", "e"]);
    let e = m.entry();
    assert!(
        matches!(&e.instr(e.find("s").unwrap()).op, Op::Reduce { to_apply, .. } if m.computation(*to_apply).name == "_")
    );
    assert!(
        matches!(&e.instr(e.find("c").unwrap()).op, Op::Call { to_apply, .. } if m.computation(*to_apply).name == "_.1")
    );
    let printed = text::print_module(&m);
    assert!(
        printed.contains("_.1 {\n  p = s32[] parameter(0)\n  ROOT n = s32[] negate(p)\n}"),
        "{printed}"
    );
    assert_eq!(text::parse_module(&printed).unwrap(), m);
}

/// A custom call's `to_apply=f` is its one called computation, as XLA's
/// reader takes it; it prints back as XLA prints it (and cannot have
/// `called_computations` too: `filetests/parse/custom_call_to_apply_and_called_computations.hlo`).
#[test]
fn a_custom_calls_to_apply_is_its_called_computation() {
    let src = "HloModule m\n\nf {\n  a = s32[] parameter(0)\n  ROOT n = s32[] negate(a)\n}\n\nENTRY e {\n  p = s32[] parameter(0)\n  ROOT c = s32[] custom-call(p), custom_call_target=\"t\", to_apply=f\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let printed = text::print_module(&m);
    assert!(
        printed.contains("custom-call(p), custom_call_target=\"t\", called_computations={f}"),
        "{printed}"
    );
}
