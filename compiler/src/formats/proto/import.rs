//! `HloModuleProto` to [`Module`], validating everything an untrusted proto
//! can get wrong (unknown ids, types, opcodes) as typed errors.

use super::collective::channel_from_proto;
use super::described;
use super::messages::*;
use super::window::{conv_dims_from_proto, window_from_proto};
use crate::ir::computation::{Computation, InstrId};
use crate::ir::device_assignment::DeviceAssignment;
use crate::ir::instruction::Instruction;
use crate::ir::literal::{Literal, LiteralTree};
use crate::ir::module::BufferDonor;
use crate::ir::module::{AliasKind, IoAlias, Module};
use crate::ir::op::description::Description;
use crate::ir::op::*;
use crate::ir::shape::{ArrayShape, ElementType, PhysicalLayout, Shape, SplitConfig};
use prost::Message;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("not a valid HloModuleProto: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A field XLA writes that hlatc does not model, by its path.
    #[error("{0}")]
    Unmodeled(String),
    #[error("computation '{computation}'{}: {message}", instruction.as_ref().map(|i| format!(", instruction '{i}'")).unwrap_or_default())]
    Invalid {
        computation: String,
        instruction: Option<String>,
        message: String,
    },
}

/// Reads a serialized `HloModuleProto`, or the module of an `xla.HloProto`
/// (what `--xla_dump_hlo_as_proto` writes). A field hlatc does not model
/// is refused by name.
pub fn decode_module(bytes: &[u8]) -> Result<Module, ProtoError> {
    decode_module_noted(bytes).map(|(m, _)| m)
}

/// [`decode_module`], with a note of what the bytes held besides the
/// module: an `xla.HloProto`'s buffer assignment, which XLA derived from
/// compiling the module and which is not part of the program.
pub fn decode_module_noted(bytes: &[u8]) -> Result<(Module, Vec<String>), ProtoError> {
    let mut notes = Vec::new();
    let module_bytes = match super::wire::unwrap_hlo_proto(bytes) {
        Some((module, has_assignment)) => {
            notes.push(if has_assignment {
                "an xla.HloProto: its module is read; its buffer_assignment (XLA's analysis of the compiled module) is not part of the program and is not kept".to_string()
            } else {
                "an xla.HloProto: its module is read".to_string()
            });
            module
        }
        None => bytes,
    };
    super::wire::check_modeled::<HloModuleProto>(module_bytes).map_err(ProtoError::Unmodeled)?;
    Ok((
        module_from_proto(&HloModuleProto::decode(module_bytes)?)?,
        notes,
    ))
}

fn shape_from_proto(p: &ShapeProto, depth: usize) -> Result<Shape, String> {
    if depth > 64 {
        return Err("shape nesting is too deep".into());
    }
    if p.element_type == 13 {
        return Ok(Shape::Tuple(
            p.tuple_shapes
                .iter()
                .map(|s| shape_from_proto(s, depth + 1))
                .collect::<Result<_, _>>()?,
        ));
    }
    if p.element_type == crate::ir::shape::BUFFER_PRIMITIVE_TYPE {
        return match (&p.dimensions[..], &p.tuple_shapes[..], &p.layout) {
            ([], [inner], None) => match shape_from_proto(inner, depth + 1)? {
                Shape::Array(a) => Ok(Shape::Buffer(a)),
                other => Err(format!("a buffer holds an array, not {other}")),
            },
            _ => Err("a buffer shape has dimensions, a layout or other than one element".into()),
        };
    }
    if p.element_type == crate::ir::shape::TOKEN_PRIMITIVE_TYPE {
        return match (&p.dimensions[..], &p.tuple_shapes[..]) {
            ([], []) => Ok(Shape::Token),
            _ => Err("a token shape has dimensions or elements".into()),
        };
    }
    let ty = ElementType::from_primitive_type(p.element_type).ok_or_else(|| {
        format!(
            "unsupported element type {} (PrimitiveType number)",
            p.element_type
        )
    })?;
    // A dynamic dimension may be unbounded (XLA's kUnboundedSize).
    let unbounded = |i: usize| p.is_dynamic_dimension.get(i) == Some(&true);
    if let Some((i, d)) = p
        .dimensions
        .iter()
        .enumerate()
        .find(|&(i, &d)| d < 0 && !(d == crate::ir::shape::UNBOUNDED && unbounded(i)))
    {
        return Err(format!("negative dimension {d} (dimension {i})"));
    }
    let mut a = ArrayShape::new(ty, p.dimensions.clone());
    // XLA writes one flag per dimension, or none for a static shape.
    let flags = &p.is_dynamic_dimension;
    if !flags.is_empty() && flags.len() != a.rank() {
        return Err(format!(
            "is_dynamic_dimension has {} entries for rank {}",
            flags.len(),
            a.rank()
        ));
    }
    if let Some(i) = flags
        .iter()
        .rposition(|&d| d)
        .filter(|&i| i > crate::ir::shape::MAX_DYNAMIC_DIMENSION)
    {
        return Err(format!(
            "dimension {i} is dynamic; hlatc keeps dynamic dimensions up to {} only",
            crate::ir::shape::MAX_DYNAMIC_DIMENSION
        ));
    }
    for (i, &d) in flags.iter().enumerate() {
        a.set_dynamic(i, d);
    }
    if let Some(l) = &p.layout {
        if l.minor_to_major.len() == a.rank() {
            a.minor_to_major = l.minor_to_major.clone();
        } else if !l.minor_to_major.is_empty() {
            return Err(format!(
                "layout has {} entries for rank {}",
                l.minor_to_major.len(),
                a.rank()
            ));
        }
        a.physical = physical_layout_from_proto(l);
    }
    Ok(Shape::Array(a))
}

fn physical_layout_from_proto(l: &LayoutProto) -> Option<Box<PhysicalLayout>> {
    PhysicalLayout {
        tiles: l.tiles.iter().map(|t| t.dimensions.clone()).collect(),
        // XLA writes 1 for "none", and an unwritten field reads 0.
        tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements.max(1),
        element_size_in_bits: l.element_size_in_bits,
        memory_space: l.memory_space,
        split_configs: l
            .split_configs
            .iter()
            .map(|sc| SplitConfig {
                dimension: sc.dimension,
                split_indices: sc.split_indices.clone(),
            })
            .collect(),
    }
    .boxed_unless_default()
}

/// A field means something only on the ops that have it; written on any
/// other, it would be lost, and is refused. The described ops' fields are
/// checked from their descriptions; this table holds the hand-spelled
/// ops'. XLA writes both group counts as 1 on every instruction, so 1
/// says nothing.
fn refuse_fields_elsewhere(p: &HloInstructionProto, op: Op) -> Result<Op, String> {
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
        Some((_, field, carriers, _)) => Err(format!(
            "{} has field {field}, which hlatc reads only on {carriers}; here it would be lost",
            op.opcode()
        )),
        None => described::stray_field(p, op.opcode()).map(|()| op),
    }
}

/// A feed's configuration: bytes on the wire, text in hlatc (as in XLA's
/// text, where it is a quoted string).
pub(super) fn utf8_config(bytes: &[u8], field: &str) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| format!("{field} is not UTF-8"))
}

/// A custom call's convolution attributes, when any is written.
fn call_convolution_from_proto(
    p: &HloInstructionProto,
) -> Result<Option<Box<CallConvolution>>, String> {
    if algorithm_from_proto(p)? != DotAlgorithm::Unset {
        return Err(
            "custom-call has precision_config.algorithm, which hlatc reads only on dot and ragged-dot".into(),
        );
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

pub(super) fn aliasing_from_proto(p: &HloInstructionProto) -> Vec<OperandAlias> {
    p.output_operand_aliasing
        .iter()
        .map(|a| OperandAlias {
            output_index: a.output_shape_index.clone(),
            operand: a.operand_index,
            operand_index: a.operand_shape_index.clone(),
        })
        .collect()
}

pub(super) fn dot_dims_from_proto(d: &DotDimensionNumbers) -> DotDims {
    DotDims {
        lhs_batch: d.lhs_batch_dimensions.clone(),
        lhs_contracting: d.lhs_contracting_dimensions.clone(),
        rhs_batch: d.rhs_batch_dimensions.clone(),
        rhs_contracting: d.rhs_contracting_dimensions.clone(),
    }
}

fn algorithm_from_proto(p: &HloInstructionProto) -> Result<DotAlgorithm, String> {
    let v = p.precision_config.as_ref().map_or(0, |pc| pc.algorithm);
    DotAlgorithm::from_proto(v).ok_or_else(|| format!("unknown precision_config.algorithm {v}"))
}

pub(super) fn precision_from_proto(p: &HloInstructionProto) -> Result<Vec<Precision>, String> {
    p.precision_config
        .as_ref()
        .map(|pc| {
            pc.operand_precision
                .iter()
                .map(|&v| Precision::from_proto(v).ok_or_else(|| format!("unknown precision {v}")))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()
        .map(Option::unwrap_or_default)
}

/// XLA writes the main thread's name, `main`; hlatc models it as none.
fn thread_from_proto(name: &str) -> Option<String> {
    (!name.is_empty() && name != crate::ir::computation::MAIN_THREAD).then(|| name.to_string())
}

/// A constant's value: an array's, or a tuple's from one literal per
/// element (`tuple_literals`).
fn literal_tree_from_proto(p: &LiteralProto, shape: &Shape) -> Result<LiteralTree, String> {
    let Shape::Tuple(elems) = shape else {
        return literal_from_proto(p, shape).map(LiteralTree::Array);
    };
    if p.tuple_literals.len() != elems.len() {
        return Err(format!(
            "a constant of {shape} needs {} tuple_literals, has {}",
            elems.len(),
            p.tuple_literals.len()
        ));
    }
    p.tuple_literals
        .iter()
        .zip(elems)
        .map(|(l, e)| literal_tree_from_proto(l, e))
        .collect::<Result<_, _>>()
        .map(LiteralTree::Tuple)
}

fn literal_from_proto(p: &LiteralProto, shape: &Shape) -> Result<Literal, String> {
    let a = shape
        .as_array()
        .ok_or("tuple constants are not supported")?;
    let n = usize::try_from(a.element_count()).map_err(|_| "constant is too large")?;
    let bytes: Vec<u8> = match (p.bytes_of(a.ty), a.ty) {
        (Some(raw), _) => raw.clone(),
        (None, ElementType::Pred) => p.preds.iter().map(|&b| b as u8).collect(),
        (None, ElementType::S32) => p.s32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::S64) => p.s64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::U32) => p.u32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::U64) => p.u64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::F32) => p.f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::F64) => p.f64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::C64) => p.c64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::C128) => p.c128s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ty) => unreachable!("{ty} literals are raw bytes"),
    };
    if bytes.len() != n * a.ty.byte_size() {
        return Err(format!(
            "literal for {a} holds {} bytes, needs {}",
            bytes.len(),
            n * a.ty.byte_size()
        ));
    }
    let mut lit = Literal::from_bytes(a.ty, a.dims.clone(), bytes).map_err(|e| e.to_string())?;
    lit.shape.minor_to_major = a.minor_to_major.clone();
    lit.shape.physical = a.physical.clone();
    Ok(lit)
}

/// `c` with its instructions in the order of `p`'s schedule, when it has
/// one for `c`: hlatc keeps a schedule as each computation's instruction
/// order, while XLA lists a proto's instructions in post-order. A schedule
/// that is not a permutation of the computation's instructions is refused.
fn in_schedule_order<'a>(
    p: &HloModuleProto,
    c: &'a HloComputationProto,
) -> Result<std::borrow::Cow<'a, HloComputationProto>, ProtoError> {
    let Some(seq) = p.schedule.as_ref().and_then(|s| s.sequences.get(&c.id)) else {
        return Ok(std::borrow::Cow::Borrowed(c));
    };
    let listed: Vec<i64> = c.instructions.iter().map(|i| i.id).collect();
    if seq.instruction_ids == listed {
        return Ok(std::borrow::Cow::Borrowed(c));
    }
    let by_id: HashMap<i64, &HloInstructionProto> =
        c.instructions.iter().map(|i| (i.id, i)).collect();
    let mut seen = std::collections::HashSet::new();
    let mut ordered = Vec::with_capacity(c.instructions.len());
    for id in &seq.instruction_ids {
        match by_id.get(id) {
            Some(i) if seen.insert(*id) => ordered.push((*i).clone()),
            _ => {
                return Err(ProtoError::Invalid {
                    computation: c.name.clone(),
                    instruction: None,
                    message: format!(
                        "the schedule lists instruction id {id}, which the computation does not hold once"
                    ),
                })
            }
        }
    }
    if ordered.len() != c.instructions.len() {
        return Err(ProtoError::Invalid {
            computation: c.name.clone(),
            instruction: None,
            message: format!(
                "the schedule orders {} of its {} instructions",
                ordered.len(),
                c.instructions.len()
            ),
        });
    }
    Ok(std::borrow::Cow::Owned(HloComputationProto {
        instructions: ordered,
        ..c.clone()
    }))
}

pub fn module_from_proto(p: &HloModuleProto) -> Result<Module, ProtoError> {
    let module_err = |message: String| ProtoError::Invalid {
        computation: p.name.clone(),
        instruction: None,
        message,
    };
    let mut comp_names: HashMap<i64, String> = HashMap::new();
    for c in &p.computations {
        if comp_names.insert(c.id, c.name.clone()).is_some() {
            return Err(module_err(format!("computation id {} is used twice", c.id)));
        }
    }
    let mut computations = Vec::with_capacity(p.computations.len());
    let mut entry = None;
    for (k, c) in p.computations.iter().enumerate() {
        if c.id == p.entry_computation_id
            || (entry.is_none()
                && c.name == p.entry_computation_name
                && p.entry_computation_id == 0)
        {
            entry = Some(k);
        }
        let c = in_schedule_order(p, c)?;
        computations.push(computation_from_proto(&c, &comp_names)?);
    }
    let entry = entry.ok_or_else(|| {
        module_err(format!(
            "entry computation id {} not found",
            p.entry_computation_id
        ))
    })?;
    let mut input_output_alias = Vec::new();
    if let Some(a) = &p.input_output_alias {
        for e in &a.entries {
            input_output_alias.push(IoAlias {
                output_index: e.output_shape_index.clone(),
                parameter: e.parameter_number,
                parameter_index: e.parameter_shape_index.clone(),
                kind: if e.kind == 2 {
                    AliasKind::MustAlias
                } else {
                    AliasKind::MayAlias
                },
            });
        }
    }
    let buffer_donors = p
        .buffer_donor
        .iter()
        .flat_map(|d| &d.entries)
        .map(|e| BufferDonor {
            parameter: e.parameter_number,
            parameter_index: e.parameter_shape_index.clone(),
        })
        .collect();
    let is_scheduled = p.schedule.is_some();
    let mut m = Module {
        is_scheduled,
        entry_layout: None,
        allow_spmd_sharding_propagation: Default::default(),
        alias_passthrough_params: false,
        devices: Default::default(),
        device_assignment: p.device_assignment.as_ref().map(|d| DeviceAssignment {
            replica_count: d.replica_count,
            computation_count: d.computation_count,
            devices: d
                .computation_devices
                .iter()
                .map(|c| c.replica_device_ids.clone())
                .collect(),
        }),
        stack_frames: p
            .stack_frame_index
            .as_ref()
            .map(stack_frames_from_proto)
            .unwrap_or_default(),
        name: p.name.clone(),
        computations,
        entry,
        input_output_alias,
        buffer_donors,
        frontend_attributes: p
            .frontend_attributes
            .as_ref()
            .map(|f| f.map.clone())
            .unwrap_or_default(),
    };
    if let Some(ps) = &p.host_program_shape {
        let shapes = ps
            .parameters
            .iter()
            .map(|s| shape_from_proto(s, 0))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&module_err)?;
        if let Some(r) = &ps.result {
            let result = shape_from_proto(r, 0).map_err(&module_err)?;
            m.entry_layout =
                crate::ir::module::EntryLayout::against(&m, shapes, result).map_err(|e| {
                    module_err(e.replace("entry_computation_layout", "host_program_shape"))
                })?;
        }
    }
    // The flag is derived (a computation is fused when a fusion calls it);
    // one set on anything else would be lost, so it is refused.
    let fused = m.fused_computations();
    if let Some(c) = p
        .computations
        .iter()
        .find(|c| c.is_fusion_computation && !fused.contains(c.name.as_str()))
    {
        return Err(module_err(format!(
            "computation '{}' is marked is_fusion_computation but no fusion calls it",
            c.name
        )));
    }
    crate::analysis::canonical::drop_default_attributes(&mut m);
    Ok(m)
}

fn stack_frames_from_proto(p: &StackFrameIndexProto) -> crate::ir::stack_frames::StackFrameIndex {
    use crate::ir::stack_frames::{FileLocation, StackFrame, StackFrameIndex};
    StackFrameIndex {
        file_names: p.file_names.clone(),
        function_names: p.function_names.clone(),
        file_locations: p
            .file_locations
            .iter()
            .map(|l| FileLocation {
                file_name_id: l.file_name_id,
                function_name_id: l.function_name_id,
                line: l.line,
                end_line: l.end_line,
                column: l.column,
                end_column: l.end_column,
            })
            .collect(),
        stack_frames: p
            .stack_frames
            .iter()
            .map(|f| StackFrame {
                file_location_id: f.file_location_id,
                parent_frame_id: f.parent_frame_id,
            })
            .collect(),
    }
}

fn computation_from_proto(
    c: &HloComputationProto,
    comp_names: &HashMap<i64, String>,
) -> Result<Computation, ProtoError> {
    let err = |instr: Option<&str>, message: String| ProtoError::Invalid {
        computation: c.name.clone(),
        instruction: instr.map(str::to_string),
        message,
    };
    let mut comp = Computation::new(c.name.clone());
    comp.execution_thread = thread_from_proto(&c.execution_thread);
    let mut ids: HashMap<i64, InstrId> = HashMap::with_capacity(c.instructions.len());
    for ip in &c.instructions {
        let here = Some(ip.name.as_str());
        let shape = shape_from_proto(
            ip.shape
                .as_ref()
                .ok_or_else(|| err(here, "has no shape".into()))?,
            0,
        )
        .map_err(|m| err(here, m))?;
        let called: Vec<String> = ip
            .called_computation_ids
            .iter()
            .map(|id| {
                comp_names
                    .get(id)
                    .cloned()
                    .ok_or_else(|| err(here, format!("calls unknown computation id {id}")))
            })
            .collect::<Result<_, _>>()?;
        let op = op_from_proto(ip, &shape, &called)
            .and_then(|op| refuse_fields_elsewhere(ip, op))
            .map_err(|m| err(here, m))?;
        let metadata = ip
            .metadata
            .as_ref()
            .map(|m| super::sharding::metadata_from_proto(m))
            .unwrap_or_default();
        let sharding = ip
            .sharding
            .as_ref()
            .map(|s| super::sharding::from_proto(s))
            .transpose()
            .map_err(|m| err(here, format!("sharding: {m}")))?;
        let backend_config = String::from_utf8(ip.backend_config.clone())
            .map_err(|_| err(here, "backend_config is not UTF-8".into()))?;
        let parameter_replication = ip
            .parameter_replication
            .as_ref()
            .map(|r| r.replicated_at_leaf_buffers.clone());
        let statistics = ip
            .statistics_viz
            .as_ref()
            .map(super::annotations::statistics_from_proto)
            .transpose()
            .map_err(|m| err(here, m))?
            .flatten()
            .map(Box::new);
        let result_accuracy = ip
            .result_accuracy
            .as_ref()
            .map(super::annotations::result_accuracy_from_proto)
            .transpose()
            .map_err(|m| err(here, m))?
            .flatten()
            .map(Box::new);
        let original_value = ip
            .original_value
            .as_ref()
            .map(|v| super::annotations::original_value_from_proto(v).map(Box::new))
            .transpose()
            .map_err(|m| err(here, format!("original_value: {m}")))?;
        let instr = Instruction {
            name: ip.name.clone(),
            statistics,
            result_accuracy,
            original_value,
            shape,
            backend_config,
            parameter_replication,
            op,
            metadata,
            frontend_attributes: ip
                .frontend_attributes
                .as_ref()
                .map(|f| f.map.clone())
                .unwrap_or_default(),
            sharding,
        };
        let id = comp.add(instr, &[]);
        if ids.insert(ip.id, id).is_some() {
            return Err(err(here, format!("instruction id {} is used twice", ip.id)));
        }
    }
    for ip in &c.instructions {
        let operands: Vec<InstrId> = ip
            .operand_ids
            .iter()
            .map(|o| {
                ids.get(o).copied().ok_or_else(|| {
                    err(
                        Some(&ip.name),
                        format!("operand id {o} is not in this computation"),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        comp.connect_operands(ids[&ip.id], &operands);
        for p in &ip.control_predecessor_ids {
            let pred = ids.get(p).copied().ok_or_else(|| {
                err(
                    Some(&ip.name),
                    format!("control predecessor id {p} is not in this computation"),
                )
            })?;
            comp.add_control_dependency(pred, ids[&ip.id]);
        }
    }
    let root = ids
        .get(&c.root_id)
        .copied()
        .ok_or_else(|| err(None, format!("root id {} not found", c.root_id)))?;
    comp.set_root(root);
    crate::ir::async_ops::find_async_callees(&mut comp).map_err(|m| err(None, m))?;
    Ok(comp)
}

fn one_callee(called: &[String]) -> Result<String, String> {
    match called {
        [c] => Ok(c.clone()),
        _ => Err(format!(
            "needs exactly one called computation, has {}",
            called.len()
        )),
    }
}

fn op_from_proto(p: &HloInstructionProto, shape: &Shape, called: &[String]) -> Result<Op, String> {
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
                (AsyncStep::Update | AsyncStep::Done, []) => String::new(),
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
            let lit = p.literal.as_ref().ok_or("constant has no literal")?;
            match literal_tree_from_proto(lit, shape)? {
                LiteralTree::Array(l) => Op::Constant(l),
                LiteralTree::Tuple(elems) => Op::TupleConstant(elems),
            }
        }
        "conditional" => Op::Conditional {
            branches: called.to_vec(),
        },
        // XLA writes the operand's side (text `exit`) as the entry.
        "domain" => {
            let side = |s: &Option<Box<OpSharding>>, field: &str| {
                s.as_deref()
                    .ok_or_else(|| format!("domain has no {field}"))
                    .and_then(|s| super::sharding::from_proto(s).map(Box::new))
            };
            Op::Domain {
                exit: side(&p.domain_entry_sharding, "domain_entry_sharding (54)")?,
                entry: side(&p.domain_exit_sharding, "domain_exit_sharding (55)")?,
            }
        }
        "outfeed" => Op::Outfeed {
            config: utf8_config(&p.outfeed_config, "outfeed_config")?,
            shape: p
                .outfeed_shape
                .as_ref()
                .map(|s| shape_from_proto(s, 0).map(Box::new))
                .transpose()?,
        },
        "custom-call" => Op::CustomCall(CustomCall {
            target: p.custom_call_target.clone(),
            api_version: CustomCallApiVersion::from_proto(p.custom_call_api_version).ok_or_else(
                || {
                    format!(
                        "unknown custom-call api version {}",
                        p.custom_call_api_version
                    )
                },
            )?,
            has_side_effect: p.custom_call_has_side_effect,
            schedule: CustomCallSchedule::from_proto(p.custom_call_schedule).ok_or_else(|| {
                format!("unknown custom_call_schedule {}", p.custom_call_schedule)
            })?,
            padding_type: PaddingType::from_proto(p.padding_type)
                .ok_or_else(|| format!("unknown padding_type {}", p.padding_type))?,
            literal: p
                .literal
                .as_ref()
                .map(|l| {
                    let shape = l
                        .shape
                        .as_ref()
                        .ok_or_else(|| "custom-call's literal has no shape".to_string())
                        .and_then(|s| shape_from_proto(s, 0))?;
                    literal_from_proto(l, &shape).map(Box::new)
                })
                .transpose()?,
            convolution: call_convolution_from_proto(p)?,
            aliasing: aliasing_from_proto(p),
            called: called.to_vec(),
            operand_layouts: if p.constrain_layout {
                Some(
                    p.operand_shapes_with_layout
                        .iter()
                        .map(|s| shape_from_proto(s, 0))
                        .collect::<Result<_, _>>()?,
                )
            } else if p.operand_shapes_with_layout.is_empty() {
                None
            } else {
                return Err(
                    "custom-call has operand_shapes_with_layout without constrain_layout".into(),
                );
            },
        }),
        other => return Err(format!("unsupported opcode '{other}'")),
    })
}
