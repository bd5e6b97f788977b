//! The annotations any instruction may carry (`statistics=`,
//! `result_accuracy=`, `origin=`) and a custom call's `padding_type=` and
//! `literal=`: kept through text and proto, refused with the place named
//! where XLA refuses them or would abort on them (golden files:
//! `compiler/tests/filetests/parse/`, `result_accuracy_*`, `statistics_*`,
//! `origin_*`, `custom_call_unknown_padding_type`).
//! (`tests/fixtures/hlo/annotations.hlo` carries each through XLA itself.)

use hlatc_compiler::ir::original_value::{OriginalArray, OriginalLeaf, OriginalValue};
use hlatc_compiler::ir::result_accuracy::ResultAccuracy;
use hlatc_compiler::{formats::proto, formats::text, verify, Module, Op};

fn module(body: &str) -> Result<Module, String> {
    let src = format!("HloModule m\n\nENTRY e {{\n  p = f32[4] parameter(0)\n{body}\n}}\n");
    let m = text::parse_module(&src).map_err(|e| e.to_string())?;
    verify(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

fn root(m: &Module) -> &hlatc_compiler::Instruction {
    let e = m.entry();
    e.instr(e.root().unwrap())
}

fn through_proto(m: &Module) -> Module {
    proto::decode_module(&proto::encode_module(m)).unwrap()
}

#[test]
fn result_accuracy_is_kept_as_its_bounds() {
    let m = module(
        "  ROOT x = f32[4] exponential(p), result_accuracy={tolerance={rtol=0.1,atol=1e-30}}",
    )
    .unwrap();
    let ResultAccuracy::Tolerance { atol, rtol, ulps } = *root(&m).result_accuracy.clone().unwrap()
    else {
        panic!("expected a tolerance");
    };
    assert_eq!((atol.get(), rtol.get(), ulps), (1e-30, 0.1, 0));
    // Every bound printed, at full precision (XLA prints six digits).
    assert!(
        text::print_module(&m).contains("result_accuracy={tolerance={atol=1e-30,rtol=0.1,ulps=0}}")
    );
    assert_eq!(through_proto(&m), m);
    let highest = module("  ROOT x = f32[4] sqrt(p), result_accuracy={mode=HIGHEST}").unwrap();
    assert_eq!(
        root(&highest).result_accuracy.as_deref(),
        Some(&ResultAccuracy::Highest)
    );
    // XLA's default mode is no annotation at all.
    let default = module("  ROOT x = f32[4] sqrt(p), result_accuracy={mode=default}").unwrap();
    assert_eq!(root(&default).result_accuracy, None);
}

#[test]
fn statistics_are_kept_in_order_and_need_their_index_first() {
    let m = module(
        "  ROOT x = f32[4] negate(p), statistics={visualizing_index=1,stat-1=33,mean.abs=-0.5}",
    )
    .unwrap();
    let s = root(&m).statistics.as_ref().unwrap();
    assert_eq!(s.visualizing_index, 1);
    let values: Vec<(&str, f64)> = s
        .values
        .iter()
        .map(|(n, v)| (n.as_str(), v.get()))
        .collect();
    assert_eq!(values, [("stat-1", 33.0), ("mean.abs", -0.5)]);
    assert_eq!(through_proto(&m), m);
}

#[test]
fn origins_keep_their_tree_and_unknown_leaves() {
    let m = module(
        "  q = (f32[4], f32[4]) tuple(p, p)\n  ROOT x = (f32[4], (f32[4], f32[4])) tuple(p, q), origin={({\"a\\\"b\" {0,1}}, ({}, {\"c\"}))}",
    )
    .unwrap();
    let Some(OriginalValue::Tree(leaves)) = root(&m).original_value.as_deref() else {
        panic!("expected a tree");
    };
    assert_eq!(
        leaves,
        &[
            OriginalLeaf {
                index: vec![0],
                array: Some(OriginalArray {
                    instruction: "a\"b".into(),
                    shape_index: vec![0, 1],
                }),
            },
            OriginalLeaf {
                index: vec![1, 0],
                array: None,
            },
            OriginalLeaf {
                index: vec![1, 1],
                array: Some(OriginalArray {
                    instruction: "c".into(),
                    shape_index: vec![],
                }),
            },
        ]
    );
    // The quote escaped, which XLA's printer forgets to do.
    assert!(text::print_module(&m).contains(r#"origin={({"a\"b" {0,1}}, ({}, {"c"}))}"#));
    assert_eq!(through_proto(&m), m);
}

#[test]
fn a_custom_calls_padding_and_literal_are_kept() {
    let m = module(
        "  ROOT x = f32[4] custom-call(p), custom_call_target=\"t\", padding_type=PADDING_VALID, literal=f32[2]{0} {0.5, -2}",
    )
    .unwrap();
    let Op::CustomCall(cc) = &root(&m).op else {
        panic!("expected a custom call");
    };
    assert_eq!(cc.padding_type.name(), "PADDING_VALID");
    let lit = cc.literal.as_ref().unwrap();
    assert_eq!(lit.to_f64_vec(), [0.5, -2.0]);
    assert_eq!(through_proto(&m), m);
}

#[test]
fn a_literal_on_an_op_that_has_none_is_refused_from_a_proto() {
    // Written by hand: a negate whose proto carries a literal, which an
    // importer that only read it for constants would drop.
    let m = module("  c = f32[4] constant({1, 2, 3, 4})\n  ROOT x = f32[4] negate(c)").unwrap();
    let mut p = proto::module_to_proto(&m);
    let instrs = &mut p.computations[0].instructions;
    let lit = instrs
        .iter()
        .find(|i| i.opcode == "constant")
        .unwrap()
        .literal
        .clone();
    instrs
        .iter_mut()
        .find(|i| i.opcode == "negate")
        .unwrap()
        .literal = lit;
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("literal (8)") && e.contains("constant and custom-call"),
        "{e}"
    );
}

#[test]
fn a_malformed_origin_is_named_and_still_prints() {
    // Built by hand, as a library user could: two leaves at one index.
    let leaf = |name: &str| OriginalLeaf {
        index: vec![],
        array: Some(OriginalArray {
            instruction: name.into(),
            shape_index: vec![],
        }),
    };
    let v = OriginalValue::Tree(vec![leaf("a"), leaf("b")]);
    assert!(v.problem().unwrap().contains("do not form a tuple tree"));
    assert_eq!(v.to_string(), r#"{({"a"}, {"b"})}"#);
}

/// Autodiff's mark on a recomputed copy is a typed field, written as a
/// frontend attribute beside the others and read back into the field;
/// a name says nothing, and a value hlatc never writes is refused.
#[test]
fn the_recomputed_mark_is_kept_through_text_and_proto() {
    let m = module(
        "  ROOT x = f32[4] negate(p), frontend_attributes={_hlatc_recomputed=\"true\",layer=\"3\"}",
    )
    .unwrap();
    let x = root(&m);
    assert!(x.recomputed);
    assert_eq!(
        x.frontend_attributes.iter().collect::<Vec<_>>(),
        [(&"layer".to_string(), &"3".to_string())]
    );
    let printed = text::print_module(&m);
    assert!(
        printed.contains("frontend_attributes={_hlatc_recomputed=\"true\",layer=\"3\"}"),
        "{printed}"
    );
    assert_eq!(text::parse_module(&printed).unwrap(), m);
    assert_eq!(through_proto(&m), m);
    assert!(root(&through_proto(&m)).recomputed);
    // A name is only a name.
    let named = module("  ROOT recomputed.1 = f32[4] negate(p)").unwrap();
    assert!(!root(&named).recomputed);
    let e = module("  ROOT x = f32[4] negate(p), frontend_attributes={_hlatc_recomputed=\"yes\"}")
        .unwrap_err();
    assert!(
        e.contains("_hlatc_recomputed=\"yes\": hlatc writes it only as \"true\""),
        "{e}"
    );
}
