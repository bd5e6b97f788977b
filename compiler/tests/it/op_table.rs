//! The op table: every opcode spelled once and read back as itself, each
//! description consistent with its proto fields, traits from the rows, and
//! attribute values converted both ways.

use hlatc_compiler::ir::op::description::{
    AttrField, AttrValue, Description, FieldError, Form, OpTraits, ProtoField, DESCRIPTIONS,
};
use hlatc_compiler::ir::op::{
    all_opcodes, AsyncCollective, BinaryOp, ComparisonDirection, FftType, OperandAlias,
    RngDistribution, TransposeA, UnaryOp,
};
use hlatc_compiler::{Op, Opcode};

#[test]
fn every_spelling_of_the_table_is_an_opcode_and_nothing_else() {
    // Every spelling the IR accepts: the op table's, the elementwise
    // tables' and the step-named ops'.
    for s in all_opcodes() {
        assert_eq!(Opcode::parse(s).map(Opcode::as_str), Some(s));
    }
    assert_eq!(
        Opcode::parse("batch-norm-grad").unwrap().as_str(),
        "batch-norm-grad"
    );
    assert_eq!(Opcode::parse("recv-done").unwrap().as_str(), "recv-done");
    assert_eq!(
        Opcode::parse("async-start").unwrap().as_str(),
        "async-start"
    );
    assert_eq!(Opcode::parse("multiplly"), None);
    assert_eq!(Opcode::parse(""), None);
    const DOT: Opcode = Opcode::new("dot");
    assert_eq!(Opcode::of(&Op::Tuple).as_str(), "tuple");
    assert_ne!(Opcode::of(&Op::Tuple), DOT);
    assert_eq!(DOT.to_string(), "dot");
}

/// The elementwise tables and the list of ops without attributes are
/// private: each is read here through the names the IR accepts, every
/// name it lists reading as its op and spelling it back, and counted.
#[test]
fn opcode_tables_are_bijective() {
    let all = all_opcodes();
    let mut dedup = all.clone();
    dedup.dedup();
    assert_eq!(all, dedup, "an opcode is spelled twice");
    let (mut unary, mut binary, mut plain) = (0, 0, 0);
    for &name in &all {
        if let Some(op) = UnaryOp::from_opcode(name) {
            assert_eq!(op.opcode(), name);
            assert_eq!(Op::without_attributes(name), Some(Op::Unary(op)));
            unary += 1;
        } else if let Some(op) = BinaryOp::from_opcode(name) {
            assert_eq!(op.opcode(), name);
            assert_eq!(Op::without_attributes(name), Some(Op::Binary(op)));
            binary += 1;
        } else if let Some(op) = Op::without_attributes(name) {
            assert_eq!(op.opcode(), name);
            plain += 1;
        }
    }
    assert_eq!(
        (unary, binary, plain),
        (25, 16, 18),
        "(unary, binary, plain)"
    );
    assert_eq!(
        Op::without_attributes("add"),
        Some(Op::Binary(BinaryOp::Add))
    );
    assert_eq!(Op::without_attributes("iota"), None);
}

/// Each field's text form and proto field hold the same kind of value,
/// and a called computation's slots are 0..n without gaps.
#[test]
fn descriptions_are_consistent() {
    for d in DESCRIPTIONS {
        for a in d.attributes {
            let called = matches!(a.proto, ProtoField::Called(_));
            let list = matches!(
                a.proto,
                ProtoField::Dimensions
                    | ProtoField::DynamicSliceSizes
                    | ProtoField::FftLength
                    | ProtoField::GatherSliceSizes
            );
            match a.form {
                Form::List | Form::ListOrEmpty | Form::ListIfAny | Form::OneDimension => {
                    assert!(list, "{}: {}", d.opcode, a.key)
                }
                Form::Word => assert!(!list, "{}: {}", d.opcode, a.key),
                Form::Window => assert_eq!(a.proto, ProtoField::Window),
                Form::Aliasing => assert_eq!(a.proto, ProtoField::OutputOperandAliasing),
                Form::Collective => assert_eq!(a.proto, ProtoField::Collective),
                Form::WindowIfAny => assert_eq!(a.proto, ProtoField::Window),
                Form::IntUnlessOne => assert!(matches!(
                    a.proto,
                    ProtoField::FeatureGroupCount | ProtoField::BatchGroupCount
                )),
                Form::Slices
                | Form::Padding
                | Form::GatherDims
                | Form::ScatterDims
                | Form::DotDims
                | Form::RaggedDims
                | Form::DimLabels
                | Form::Precision
                | Form::ChannelId
                | Form::Pairs
                | Form::SliceSizes
                | Form::QuotedIfAny => assert!(!list && !called, "{}: {}", d.opcode, a.key),
                Form::Int | Form::Flag | Form::FlagDefaultTrue => {
                    assert!(!called, "{}: {}", d.opcode, a.key)
                }
            }
        }
        let mut slots: Vec<usize> = d
            .attributes
            .iter()
            .filter_map(|a| match a.proto {
                ProtoField::Called(i) => Some(i),
                _ => None,
            })
            .collect();
        slots.sort_unstable();
        assert!(slots.iter().copied().eq(0..slots.len()), "{}", d.opcode);
        assert_eq!(Description::of(d.opcode).map(|x| x.opcode), Some(d.opcode));
    }
    assert_eq!(
        Description::of("while").map(Description::callees),
        Some(vec!["body", "condition"])
    );
}

#[test]
fn traits_come_from_the_rows() {
    let rng = Op::Rng {
        distribution: RngDistribution::Normal,
    };
    assert!(rng.traits().has(OpTraits::IMPURE) && !rng.is_pure());
    assert!(!rng.is_collective() && !rng.has_side_effect());
    assert!(Op::CollectiveDone(AsyncCollective::AllGather).is_collective());
    let feed = Op::Infeed {
        config: String::new(),
    };
    assert!(feed.has_side_effect() && !feed.is_pure());
    assert!(Op::Iota { dimension: 0 }.is_pure());
    assert!(Op::Select.carries_float_type() && !Op::Convert.carries_float_type());
    assert!(Op::Unary(UnaryOp::Exp).carries_float_type());
    assert!(!Op::Unary(UnaryOp::Not).carries_float_type());
    assert!(Op::Binary(BinaryOp::Atan2).carries_float_type());
    assert!(!Op::Binary(BinaryOp::ShiftLeft).carries_float_type());
    let both = OpTraits::IMPURE.with(OpTraits::COLLECTIVE);
    assert!(both.has(OpTraits::IMPURE) && both.has(OpTraits::COLLECTIVE));
    assert!(!both.has(OpTraits::SIDE_EFFECT), "traits combine");
}

#[test]
fn values_convert_both_ways() {
    assert_eq!(i64::from_value(AttrValue::Ints(vec![3].into())), Ok(3));
    assert_eq!(
        i64::from_value(AttrValue::Ints(vec![0, 1].into())),
        Err(FieldError::NotOneDimension(vec![0, 1]))
    );
    assert_eq!(
        i32::from_value(AttrValue::Int(1 << 40)),
        Err(FieldError::OutOfRange(1 << 40))
    );
    assert_eq!(
        Option::<i64>::from_value(AttrValue::Ints(vec![].into())),
        Ok(None)
    );
    assert_eq!(
        Option::<TransposeA>::from_value(AttrValue::Int(0)),
        Ok(None),
        "the proto's 0 is no transpose_a"
    );
    assert_eq!(FftType::from_value(AttrValue::Int(0)), Ok(FftType::Fft));
    assert!(matches!(
        RngDistribution::from_value(AttrValue::Int(0)),
        Err(FieldError::Unknown { .. })
    ));
    assert_eq!(
        ComparisonDirection::from_value(AttrValue::Word("GE".into())),
        Ok(ComparisonDirection::Ge)
    );
}

#[test]
fn a_malformed_aliasing_reads_as_before() {
    for text in ["{{0}: 1, {}}", "{{0}: (x, {})}", "{0}: (1, {})"] {
        assert_eq!(
            OperandAlias::parse_list(text).map_err(|e| e.to_string()),
            Err(format!(
                "output_to_operand_aliasing '{text}' is not {{{{index}}: (operand, {{index}}), ...}}"
            ))
        );
    }
}
