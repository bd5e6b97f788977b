//! Shape inference's errors: small, typed by what went wrong, and carrying
//! the data their message is made of; tokens and transfers checked where
//! they go.

use hlatc_compiler::analysis::shape_inference::{
    AttributeError, DeclaredError, DimensionError, OperandError, ShapeError, ShapesError, TypeError,
};
use hlatc_compiler::ir::op::{BinaryOp, Transfer, TransferStep, UnaryOp};
use hlatc_compiler::{infer_shape, ElementType, Op, Opcode, Shape};

#[test]
fn an_error_is_no_larger_than_a_shape() {
    assert!(std::mem::size_of::<ShapeError>() <= 40);
    assert_eq!(
        std::mem::size_of::<Result<Shape, ShapeError>>(),
        std::mem::size_of::<Shape>()
    );
}

/// A caller reads what went wrong from the variant, and the message
/// from its data.
#[test]
fn errors_carry_their_data() {
    let infer = |op: Op, operands: &[&Shape]| infer_shape(&op, operands, None, &|_| None);
    let u = Shape::array(ElementType::U32, [4]);
    let f = Shape::array(ElementType::F32, [4]);
    let g = Shape::array(ElementType::F32, [2, 2]);
    let e = infer(Op::Unary(UnaryOp::Abs), &[&u]).unwrap_err();
    assert_eq!(
        e,
        ShapeError::Type(TypeError::NotAccepted {
            opcode: Opcode::new("abs"),
            ty: ElementType::U32,
        })
    );
    assert_eq!(e.to_string(), "abs does not accept u32");
    let e = infer(Op::Binary(BinaryOp::Add), &[&f, &u]).unwrap_err();
    assert!(matches!(
        e,
        ShapeError::Type(TypeError::Differ {
            lhs: ElementType::F32,
            rhs: ElementType::U32,
            ..
        })
    ));
    let e = infer(Op::Binary(BinaryOp::Add), &[&f, &g]).unwrap_err();
    assert!(
        matches!(&e, ShapeError::Shapes(s) if matches!(**s, ShapesError::OperandDims { opcode, .. } if opcode == Opcode::new("add"))),
        "{e}"
    );
    let e = infer(
        Op::Transpose {
            permutation: vec![0, 2],
        },
        &[&g],
    )
    .unwrap_err();
    assert_eq!(
        e,
        ShapeError::Dimension(Box::new(DimensionError::OutOfRange {
            what: "transpose",
            dimension: 2,
            rank: 2,
        }))
    );
    assert_eq!(
        e.to_string(),
        "transpose dimension 2 out of range for rank 2"
    );
}

fn infer(op: Op, operands: &[&Shape], declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    infer_shape(&op, operands, declared, &|_| None)
}

fn step(step: TransferStep) -> Op {
    Op::Transfer(Transfer {
        step,
        channel_id: Some(1),
        is_host_transfer: false,
    })
}

#[test]
fn transfers_carry_data_a_context_and_a_token() {
    let f = Shape::array(ElementType::F32, [16]);
    let t = Shape::Token;
    let sent = infer(step(TransferStep::Send), &[&f, &t], None).unwrap();
    assert_eq!(sent.to_string(), "(f32[16]{0}, u32[], token[])");
    assert_eq!(
        infer(step(TransferStep::SendDone), &[&sent], None),
        Ok(Shape::Token)
    );
    let got = infer(step(TransferStep::Recv), &[&t], Some(&sent)).unwrap();
    assert_eq!(got, sent);
    let done = infer(step(TransferStep::RecvDone), &[&got], None).unwrap();
    assert_eq!(done.to_string(), "(f32[16]{0}, token[])");
    assert_eq!(infer(Op::AfterAll, &[&t, &t], None), Ok(Shape::Token));
    assert_eq!(infer(Op::AfterAll, &[], None), Ok(Shape::Token));
    assert_eq!(infer(Op::AddDependency, &[&f, &t], None), Ok(f.clone()));
}

#[test]
fn tokens_are_checked_where_they_go() {
    let f = Shape::array(ElementType::F32, [16]);
    let t = Shape::Token;
    let operand = |e: ShapeError| match e {
        ShapeError::Operand(o) => *o,
        other => panic!("not an operand's form: {other}"),
    };
    assert_eq!(infer(Op::AfterAll, &[&t, &f], None), Ok(Shape::Token));
    let e = infer(step(TransferStep::Send), &[&f, &f], None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "send's operand 1 must be a token, got f32[16]{0}"
    );
    assert_eq!(
        operand(e),
        OperandError::NotToken {
            what: "send's operand 1",
            shape: f.clone()
        }
    );
    let e = infer(step(TransferStep::Send), &[&t, &t], None).unwrap_err();
    assert!(
        matches!(operand(e), OperandError::HoldsToken { what: "sent data", shape } if shape == t)
    );
    let e = infer(step(TransferStep::SendDone), &[&f], None).unwrap_err();
    assert!(
        matches!(
            operand(e),
            OperandError::NotInFlight {
                what: "send-done",
                ..
            }
        ),
        "a send-done of an array"
    );
    let e = infer(step(TransferStep::Recv), &[&t], None).unwrap_err();
    assert_eq!(e, ShapeError::NeedsResultShape);
    let pair = Shape::Tuple(vec![f.clone(), t.clone()]);
    let outfeed = |shape: Option<Box<Shape>>| Op::Outfeed {
        config: String::new(),
        shape,
    };
    assert_eq!(infer(outfeed(None), &[&f, &t], None), Ok(Shape::Token));
    let wrong = Shape::array(ElementType::F32, [8]);
    let e = infer(outfeed(Some(Box::new(wrong.clone()))), &[&f, &t], None).unwrap_err();
    assert!(
        matches!(&e, ShapeError::Attribute(a) if **a == AttributeError::OutfeedShape {
            outfeed_shape: wrong.clone(),
            sent: f.clone(),
        }),
        "{e}"
    );
    let infeed = Op::Infeed {
        config: String::new(),
    };
    assert_eq!(infer(infeed.clone(), &[&t], Some(&pair)), Ok(pair.clone()));
    let e = infer(infeed, &[&t], Some(&f)).unwrap_err();
    assert!(
        matches!(&e, ShapeError::Declared(d) if **d == DeclaredError::Infeed(f.clone())),
        "{e}"
    );
}
