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
