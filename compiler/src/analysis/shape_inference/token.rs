//! Ops ordered by tokens: `after-all`, `add-dependency`, the point-to-point
//! transfers and the host feeds. A token carries no data; these rules only
//! check that tokens go where tokens belong and build the tuples XLA gives
//! the transfers: `(data, u32[] context, token[])` while one is in flight.

use super::{refuse, AttributeError, DeclaredError, OperandError, ShapeError};
use crate::ir::op::{Transfer, TransferStep};
use crate::ir::shape::{ElementType, Shape};

fn token(operands: &[&Shape], index: usize, what: &'static str) -> Result<(), ShapeError> {
    if operands[index].is_token() {
        Ok(())
    } else {
        refuse(OperandError::NotToken {
            what,
            shape: operands[index].clone(),
        })
    }
}

/// Data that goes through a transfer or a feed: anything but a token.
fn data<'a>(s: &'a Shape, what: &'static str) -> Result<&'a Shape, ShapeError> {
    if s.any_leaf(&Shape::is_token) {
        return refuse(OperandError::HoldsToken {
            what,
            shape: s.clone(),
        });
    }
    Ok(s)
}

/// `(data, u32[], token[])`: a send's or recv's value while in flight.
fn in_flight(data: Shape) -> Shape {
    Shape::Tuple(vec![data, Shape::scalar(ElementType::U32), Shape::Token])
}

/// The data of an in-flight transfer's value, which a `-done` takes.
fn in_flight_data<'a>(s: &'a Shape, what: &'static str) -> Result<&'a Shape, ShapeError> {
    match s {
        Shape::Tuple(e)
            if e.len() == 3 && e[1].is_scalar_of(ElementType::U32) && e[2].is_token() =>
        {
            Ok(&e[0])
        }
        _ => refuse(OperandError::NotInFlight {
            what,
            shape: s.clone(),
        }),
    }
}

/// A token that follows its operands. XLA's verifier takes any operands,
/// not only tokens, and its tests order work after a value this way
/// (`after-all(f32[] %add)`), so hlatc does too.
pub(super) fn after_all(_operands: &[&Shape]) -> Result<Shape, ShapeError> {
    Ok(Shape::Token)
}

pub(super) fn add_dependency(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    token(operands, 1, "the dependency (operand 1)")?;
    Ok(operands[0].clone())
}

pub(super) fn transfer(
    t: &Transfer,
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let opcode = t.step.opcode();
    match t.step {
        TransferStep::Send => {
            token(operands, 1, "send's operand 1")?;
            Ok(in_flight(data(operands[0], "sent data")?.clone()))
        }
        TransferStep::Recv => {
            token(operands, 0, "recv's operand")?;
            let declared = declared.ok_or(ShapeError::NeedsResultShape)?;
            let received = in_flight_data(declared, "recv's result")?;
            Ok(in_flight(data(received, "received data")?.clone()))
        }
        TransferStep::SendDone => {
            in_flight_data(operands[0], opcode)?;
            Ok(Shape::Token)
        }
        TransferStep::RecvDone => {
            let received = in_flight_data(operands[0], opcode)?;
            Ok(Shape::Tuple(vec![received.clone(), Shape::Token]))
        }
    }
}

pub(super) fn infeed(operands: &[&Shape], declared: Option<&Shape>) -> Result<Shape, ShapeError> {
    token(operands, 0, "infeed's operand")?;
    match declared {
        Some(Shape::Tuple(e)) if e.len() == 2 && e[1].is_token() => {
            data(&e[0], "infeed data")?;
            Ok(Shape::Tuple(e.clone()))
        }
        Some(s) => refuse(DeclaredError::Infeed(s.clone())),
        None => Err(ShapeError::NeedsResultShape),
    }
}

pub(super) fn outfeed(
    operands: &[&Shape],
    outfeed_shape: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    token(operands, 1, "outfeed's operand 1")?;
    let sent = data(operands[0], "outfeed data")?;
    if let Some(s) = outfeed_shape {
        if !s.compatible(sent) {
            return refuse(AttributeError::OutfeedShape {
                outfeed_shape: s.clone(),
                sent: sent.clone(),
            });
        }
    }
    Ok(Shape::Token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::shape_inference::infer_shape;
    use crate::ir::op::Op;

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
}
