//! One `HloInstructionProto` to its [`Op`]: the hand-spelled ops read
//! here, the described ones through [`described`], and every field the op
//! does not carry refused rather than lost.

use super::attr_fields::{aliasing_from_proto, precision_from_proto, utf8_config};
use super::collective::channel_from_proto;
use super::described;
use super::error::InstructionError;
use super::literal::{literal_from_proto, literal_tree_from_proto};
use super::messages::*;
use super::shape::shape_from_proto;
use super::window::{conv_dims_from_proto, window_from_proto};
use crate::formats::{read_by, ReadBy};
use crate::ir::computation_id::ComputationId;
use crate::ir::literal::LiteralTree;
use crate::ir::op::description::Description;
use crate::ir::op::*;
use crate::ir::shape::Shape;

/// The op `p` spells, with every field it writes read or refused;
/// `shape` is the instruction's and `called` its called computations by
/// name.
pub(super) fn op_from_proto(
    p: &HloInstructionProto,
    shape: &Shape,
    called: &[ComputationId],
) -> Result<Op, InstructionError> {
    read_op(p, shape, called).and_then(|op| refuse_fields_elsewhere(p, op))
}

fn one_callee(called: &[ComputationId]) -> Result<ComputationId, InstructionError> {
    match called {
        [c] => Ok(*c),
        _ => Err(InstructionError::OneCallee(called.len())),
    }
}

fn read_op(
    p: &HloInstructionProto,
    shape: &Shape,
    called: &[ComputationId],
) -> Result<Op, InstructionError> {
    let op = read_op_by_opcode(p, shape, called)?;
    if cfg!(debug_assertions) {
        let o = p.opcode.as_str();
        let by = if Op::without_attributes(o).is_some() {
            ReadBy::Opcode
        } else if BatchNormKind::from_opcode(o).is_some()
            || TransferStep::from_opcode(o).is_some()
            || AsyncStep::from_opcode(o).is_some()
        {
            ReadBy::Family
        } else if Description::of(o).is_some() {
            ReadBy::Description
        } else {
            ReadBy::Hand
        };
        debug_assert_eq!(read_by(&op), by, "'{o}' read otherwise than stated");
    }
    Ok(op)
}

fn read_op_by_opcode(
    p: &HloInstructionProto,
    shape: &Shape,
    called: &[ComputationId],
) -> Result<Op, InstructionError> {
    if let Some(op) = Op::without_attributes(&p.opcode) {
        return Ok(op);
    }
    // The op families whose opcodes their step or kind spells.
    if let Some(kind) = BatchNormKind::from_opcode(&p.opcode) {
        return Ok(Op::BatchNorm {
            kind,
            epsilon: F32Bits::new(p.epsilon),
            feature_index: p.feature_index,
        });
    }
    if let Some(step) = TransferStep::from_opcode(&p.opcode) {
        return Ok(Op::Transfer(Transfer {
            step,
            channel_id: channel_from_proto(p),
            is_host_transfer: p.is_host_transfer,
        }));
    }
    if let Some(step) = AsyncStep::from_opcode(&p.opcode) {
        return Ok(Op::Async {
            step,
            // XLA lists the computation on the start only; the update and
            // done take their start's (`async_ops`).
            calls: match (step, called) {
                (AsyncStep::Update | AsyncStep::Done, []) => ComputationId::PENDING,
                _ => one_callee(called)?,
            },
            thread: thread_from_proto(&p.async_execution_thread),
        });
    }
    if let Some(d) = Description::of(&p.opcode) {
        described::check_callees(d, called)?;
    }
    if let Some(op) = Op::read_described(&p.opcode, &mut described::ProtoReader { p, called })? {
        return Ok(op);
    }
    Ok(match p.opcode.as_str() {
        "parameter" => Op::Parameter(p.parameter_number),
        "constant" => {
            let lit = p.literal.as_ref().ok_or(InstructionError::NoLiteral)?;
            match literal_tree_from_proto(lit, shape)? {
                LiteralTree::Array(l) => Op::Constant(l),
                LiteralTree::Tuple(elems) => Op::TupleConstant(elems),
            }
        }
        "conditional" => Op::Conditional {
            branches: called.to_vec(),
        },
        "domain" => domain_from_proto(p)?,
        "outfeed" => Op::Outfeed {
            config: utf8_config(&p.outfeed_config, "outfeed_config")?,
            shape: p
                .outfeed_shape
                .as_ref()
                .map(|s| shape_from_proto(s).map(Box::new))
                .transpose()?,
        },
        "custom-call" => Op::CustomCall(custom_call_from_proto(p, called)?),
        other => return Err(InstructionError::UnsupportedOpcode(other.to_string())),
    })
}

/// XLA writes the operand's side (text `exit`) as the entry.
fn domain_from_proto(p: &HloInstructionProto) -> Result<Op, InstructionError> {
    let side = |s: &Option<Box<OpSharding>>, field: &'static str| {
        let s = s.as_deref().ok_or(InstructionError::DomainWithout(field))?;
        Ok::<_, InstructionError>(Box::new(super::sharding::from_proto(s)?))
    };
    Ok(Op::Domain {
        exit: side(&p.domain_entry_sharding, "domain_entry_sharding (54)")?,
        entry: side(&p.domain_exit_sharding, "domain_exit_sharding (55)")?,
    })
}

fn custom_call_from_proto(
    p: &HloInstructionProto,
    called: &[ComputationId],
) -> Result<CustomCall, InstructionError> {
    Ok(CustomCall {
        target: p.custom_call_target.clone(),
        api_version: CustomCallApiVersion::from_proto(p.custom_call_api_version).ok_or(
            InstructionError::UnknownApiVersion(p.custom_call_api_version),
        )?,
        has_side_effect: p.custom_call_has_side_effect,
        schedule: CustomCallSchedule::from_proto(p.custom_call_schedule)
            .ok_or(InstructionError::UnknownSchedule(p.custom_call_schedule))?,
        padding_type: PaddingType::from_proto(p.padding_type)
            .ok_or(InstructionError::UnknownPaddingType(p.padding_type))?,
        literal: p
            .literal
            .as_ref()
            .map(|l| {
                let shape = l
                    .shape
                    .as_ref()
                    .ok_or(InstructionError::CallLiteralWithoutShape)?;
                Ok::<_, InstructionError>(Box::new(literal_from_proto(
                    l,
                    &shape_from_proto(shape)?,
                )?))
            })
            .transpose()?,
        convolution: call_convolution_from_proto(p)?,
        aliasing: aliasing_from_proto(p),
        called: called.to_vec(),
        operand_layouts: if p.constrain_layout {
            Some(
                p.operand_shapes_with_layout
                    .iter()
                    .map(shape_from_proto)
                    .collect::<Result<_, _>>()?,
            )
        } else if p.operand_shapes_with_layout.is_empty() {
            None
        } else {
            return Err(InstructionError::LayoutsWithoutConstraint);
        },
    })
}

/// A field means something only on the ops that have it; written on any
/// other, it would be lost, and is refused. The described ops' fields are
/// checked from their descriptions; this table holds the hand-spelled
/// ops'. XLA writes both group counts as 1 on every instruction, so 1
/// says nothing.
fn refuse_fields_elsewhere(p: &HloInstructionProto, op: Op) -> Result<Op, InstructionError> {
    let call = matches!(op, Op::CustomCall(_));
    // (written, field, the ops that carry it, whether this op does)
    let fields = [
        (
            !p.operand_shapes_with_layout.is_empty(),
            "operand_shapes_with_layout (57)",
            "custom-call",
            call,
        ),
        (
            p.domain_entry_sharding.is_some() || p.domain_exit_sharding.is_some(),
            "domain_entry_sharding (54) or domain_exit_sharding (55)",
            "domain",
            matches!(op, Op::Domain { .. }),
        ),
        (
            p.epsilon != 0.0 || p.feature_index != 0,
            "epsilon (24) or feature_index (25)",
            "batch-norm-training, batch-norm-inference and batch-norm-grad",
            matches!(op, Op::BatchNorm { .. }),
        ),
        (
            p.custom_call_schedule != 0,
            "custom_call_schedule (76)",
            "custom-call",
            call,
        ),
        (
            p.padding_type != 0,
            "padding_type (75)",
            "custom-call",
            call,
        ),
        (
            p.literal.is_some(),
            "literal (8)",
            "constant and custom-call",
            call || matches!(op, Op::Constant(_) | Op::TupleConstant(_)),
        ),
        (
            p.is_host_transfer,
            "is_host_transfer (47)",
            "send, send-done, recv and recv-done",
            matches!(op, Op::Transfer(_)),
        ),
        (
            !p.async_execution_thread.is_empty(),
            "async_execution_thread (79)",
            "async-start, async-update and async-done",
            matches!(op, Op::Async { .. }),
        ),
        (
            !p.outfeed_config.is_empty() || p.outfeed_shape.is_some(),
            "outfeed_config (22) or outfeed_shape (29)",
            "outfeed",
            matches!(op, Op::Outfeed { .. }),
        ),
    ];
    match fields
        .iter()
        .find(|(written, _, _, carried)| *written && !carried)
    {
        Some(&(_, field, carriers, _)) => Err(InstructionError::StrayField {
            opcode: op.opcode().to_string(),
            field,
            carriers: carriers.to_string(),
        }),
        None => described::stray_field(p, op.opcode()).map(|()| op),
    }
}

/// A custom call's convolution attributes, when any is written.
fn call_convolution_from_proto(
    p: &HloInstructionProto,
) -> Result<Option<Box<CallConvolution>>, InstructionError> {
    if algorithm_from_proto(p)? != DotAlgorithm::Unset {
        return Err(InstructionError::AlgorithmOnCustomCall);
    }
    let any = p.window.is_some()
        || p.convolution_dimension_numbers.is_some()
        || p.feature_group_count > 1
        || p.batch_group_count > 1
        || p.precision_config.is_some();
    if !any {
        return Ok(None);
    }
    let conv = CallConvolution {
        window: p.window.as_ref().map(window_from_proto),
        dims: p
            .convolution_dimension_numbers
            .as_deref()
            .map(conv_dims_from_proto),
        feature_group_count: p.feature_group_count.max(1),
        batch_group_count: p.batch_group_count.max(1),
        precision: precision_from_proto(p)?,
    };
    Ok((!conv.is_empty()).then(|| Box::new(conv)))
}

fn algorithm_from_proto(p: &HloInstructionProto) -> Result<DotAlgorithm, InstructionError> {
    let v = p.precision_config.as_ref().map_or(0, |pc| pc.algorithm);
    DotAlgorithm::from_proto(v).ok_or(InstructionError::UnknownAlgorithm(v))
}

/// XLA writes the main thread's name, `main`; hlatc models it as none.
pub(super) fn thread_from_proto(name: &str) -> Option<String> {
    (!name.is_empty() && name != crate::ir::computation::MAIN_THREAD).then(|| name.to_string())
}
