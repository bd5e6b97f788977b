//! [`Module`] to `HloModuleProto`. Deterministic: ids are assigned in
//! definition order, maps are ordered, so the same module gives the same bytes.

use super::attr_fields::aliasing_to_proto;
use super::literal::{literal_to_proto, literal_tree_to_proto};
use super::messages::*;
use super::shape::shape_to_proto;
use super::window::{conv_dims_to_proto, window_to_proto};
use crate::ir::computation::{Computation, InstrId};
use crate::ir::computation_id::ComputationId;
use crate::ir::device_assignment::DeviceAssignment;
use crate::ir::instruction::Instruction;
use crate::ir::literal::LiteralTree;
use crate::ir::module::{AliasKind, Module};
use crate::ir::op::{AsyncStep, CustomCall, DotAlgorithm, Op, Precision};
use prost::Message;
use std::collections::BTreeMap;

fn precision_to_proto(precision: &[Precision], algorithm: DotAlgorithm) -> Option<PrecisionConfig> {
    (!precision.is_empty() || algorithm != DotAlgorithm::Unset).then(|| PrecisionConfig {
        operand_precision: precision.iter().map(|x| x.proto()).collect(),
        algorithm: algorithm.proto(),
    })
}

fn frontend(attrs: &BTreeMap<String, String>) -> Option<FrontendAttributes> {
    (!attrs.is_empty()).then(|| FrontendAttributes { map: attrs.clone() })
}

fn program_shape(c: &Computation) -> ProgramShapeProto {
    let params = c.parameters();
    ProgramShapeProto {
        parameters: params
            .iter()
            .map(|&p| shape_to_proto(&c.instr(p).shape))
            .collect(),
        result: c.root().map(|r| shape_to_proto(&c.instr(r).shape)),
        parameter_names: params.iter().map(|&p| c.instr(p).name.clone()).collect(),
    }
}

/// Builds the proto. The module should have passed [`crate::verify`].
pub fn module_to_proto(m: &Module) -> HloModuleProto {
    let order = m.computation_order();
    // Proto ids count from 1 in printing order, each computation's at
    // its index.
    let mut comp_ids = vec![-1i64; m.computations.len()];
    for (k, &c) in order.iter().enumerate() {
        comp_ids[c.index()] = k as i64 + 1;
    }
    let fused = m.fused_computations();
    // Instruction ids run on across computations, unique in the module.
    let mut next_id = 1i64;
    let mut computations = Vec::with_capacity(order.len());
    let mut schedule = BTreeMap::new();
    for &c in &order {
        let is_fusion = fused.contains(&c);
        let proto = computation_to_proto(m, c, is_fusion, &comp_ids, &mut next_id);
        if m.is_scheduled {
            let instruction_ids = proto.instructions.iter().map(|p| p.id).collect();
            schedule.insert(proto.id, InstructionSequence { instruction_ids });
        }
        computations.push(proto.into());
    }
    let entry = m.entry();
    HloModuleProto {
        name: m.name.clone(),
        entry_computation_name: entry.name.clone(),
        computations,
        host_program_shape: Some(host_program_shape(m)),
        id: 1,
        entry_computation_id: comp_ids[m.entry.index()],
        schedule: m.is_scheduled.then_some(HloScheduleProto {
            sequences: schedule,
        }),
        input_output_alias: io_alias_to_proto(m),
        stack_frame_index: (!m.stack_frames.is_empty())
            .then(|| stack_frames_to_proto(&m.stack_frames)),
        buffer_donor: buffer_donors_to_proto(m),
        frontend_attributes: frontend(&m.frontend_attributes),
        device_assignment: m.device_assignment.as_ref().map(device_assignment_to_proto),
    }
}

/// One computation, its instructions numbered on from `next_id`;
/// `comp_ids` are the module's proto computation ids by index.
fn computation_to_proto(
    m: &Module,
    this: ComputationId,
    is_fusion: bool,
    comp_ids: &[i64],
    next_id: &mut i64,
) -> HloComputationProto {
    let c = m.computation(this);
    // A scheduled module keeps its order; it is the schedule.
    let post: Vec<InstrId> = if m.is_scheduled {
        c.ids().collect()
    } else {
        c.post_order()
    };
    // Proto ids by node index (node indices are dense enough to index).
    // Numbered in order up front: a control predecessor may be listed
    // by id before it is written.
    let mut ids = vec![0i64; post.iter().map(|id| id.index() + 1).max().unwrap_or(0)];
    for &id in &post {
        ids[id.index()] = *next_id;
        *next_id += 1;
    }
    HloComputationProto {
        name: c.name.clone(),
        instructions: post
            .into_iter()
            .map(|id| instruction_to_proto(c, id, &ids, comp_ids).into())
            .collect(),
        program_shape: Some(program_shape(c)),
        id: comp_ids[this.index()],
        root_id: c.root().map(|r| ids[r.index()]).unwrap_or(-1),
        is_fusion_computation: is_fusion,
        execution_thread: c.execution_thread.clone().unwrap_or_default(),
    }
}

/// One instruction of `c`; `ids` are its computation's proto ids by node
/// index.
fn instruction_to_proto(
    c: &Computation,
    id: InstrId,
    ids: &[i64],
    comp_ids: &[i64],
) -> HloInstructionProto {
    let instr = c.instr(id);
    let mut p = HloInstructionProto {
        name: instr.name.clone(),
        opcode: instr.op.opcode().to_string(),
        shape: Some(shape_to_proto(&instr.shape).into()),
        id: ids[id.index()],
        operand_ids: c.operands(id).iter().map(|o| ids[o.index()]).collect(),
        control_predecessor_ids: c
            .control_predecessors(id)
            .iter()
            .map(|p| ids[p.index()])
            .collect(),
        called_computation_ids: called_computation_ids(&instr.op, comp_ids),
        frontend_attributes: frontend(&instr.written_frontend_attributes()),
        ..Default::default()
    };
    fill_annotations(instr, &mut p);
    fill_op_fields(&instr.op, &mut p);
    if let Op::Outfeed { shape: None, .. } = &instr.op {
        // XLA writes it always; unset, it is the data's own shape.
        p.outfeed_shape = c
            .operands(id)
            .first()
            .map(|&d| shape_to_proto(&c.instr(d).shape));
    }
    p
}

fn called_computation_ids(op: &Op, comp_ids: &[i64]) -> Vec<i64> {
    match op {
        // As XLA writes them: the computation on the start only, the
        // update and done taking their start's.
        Op::Async {
            step: AsyncStep::Update | AsyncStep::Done,
            ..
        } => Vec::new(),
        _ => op
            .called_computations()
            .map(|id| comp_ids.get(id.index()).copied().unwrap_or(-1))
            .collect(),
    }
}

/// What any instruction may carry besides its op's attributes.
fn fill_annotations(instr: &Instruction, p: &mut HloInstructionProto) {
    if !instr.metadata.is_empty() {
        p.metadata = Some(Box::new(super::sharding::metadata_to_proto(
            &instr.metadata,
        )));
    }
    p.sharding = instr
        .sharding
        .as_ref()
        .map(|s| Box::new(super::sharding::to_proto(s)));
    p.backend_config = instr.backend_config.clone().into_bytes();
    p.parameter_replication = instr
        .parameter_replication
        .as_ref()
        .map(|r| ParameterReplication {
            replicated_at_leaf_buffers: r.clone(),
        });
    p.statistics_viz = instr
        .statistics
        .as_deref()
        .map(super::annotations::statistics_to_proto);
    p.result_accuracy = instr
        .result_accuracy
        .as_deref()
        .map(super::annotations::result_accuracy_to_proto);
    p.original_value = instr
        .original_value
        .as_ref()
        .map(|v| Box::new(super::annotations::original_value_to_proto(v)));
}

/// The entry's program shape, with the entry layout's shapes where the
/// module has one.
fn host_program_shape(m: &Module) -> ProgramShapeProto {
    let entry = program_shape(m.entry());
    match &m.entry_layout {
        Some(l) => ProgramShapeProto {
            parameters: l.parameters.iter().map(shape_to_proto).collect(),
            result: Some(shape_to_proto(&l.result)),
            ..entry
        },
        None => entry,
    }
}

fn io_alias_to_proto(m: &Module) -> Option<HloInputOutputAliasProto> {
    (!m.input_output_alias.is_empty()).then(|| HloInputOutputAliasProto {
        entries: m
            .input_output_alias
            .iter()
            .map(|a| AliasEntryProto {
                output_shape_index: a.output_index.clone(),
                parameter_number: a.parameter,
                parameter_shape_index: a.parameter_index.clone(),
                kind: match a.kind {
                    AliasKind::MayAlias => 1,
                    AliasKind::MustAlias => 2,
                },
            })
            .collect(),
    })
}

fn buffer_donors_to_proto(m: &Module) -> Option<HloBufferDonorProto> {
    (!m.buffer_donors.is_empty()).then(|| HloBufferDonorProto {
        entries: m
            .buffer_donors
            .iter()
            .map(|d| BufferDonorEntryProto {
                parameter_number: d.parameter,
                parameter_shape_index: d.parameter_index.clone(),
            })
            .collect(),
    })
}

fn device_assignment_to_proto(d: &DeviceAssignment) -> DeviceAssignmentProto {
    DeviceAssignmentProto {
        replica_count: d.replica_count,
        computation_count: d.computation_count,
        computation_devices: d
            .devices
            .iter()
            .map(|ids| ComputationDevice {
                replica_device_ids: ids.clone(),
            })
            .collect(),
    }
}

fn stack_frames_to_proto(s: &crate::ir::stack_frames::StackFrameIndex) -> StackFrameIndexProto {
    StackFrameIndexProto {
        file_names: s.file_names.clone(),
        function_names: s.function_names.clone(),
        file_locations: s
            .file_locations
            .iter()
            .map(|l| FileLocationProto {
                file_name_id: l.file_name_id,
                function_name_id: l.function_name_id,
                line: l.line,
                column: l.column,
                end_line: l.end_line,
                end_column: l.end_column,
            })
            .collect(),
        stack_frames: s
            .stack_frames
            .iter()
            .map(|f| StackFrameProto {
                file_location_id: f.file_location_id,
                parent_frame_id: f.parent_frame_id,
            })
            .collect(),
    }
}

fn fill_op_fields(op: &Op, p: &mut HloInstructionProto) {
    if op.write_described(&mut super::described::ProtoWriter(p)) {
        return;
    }
    match op {
        Op::Parameter(n) => p.parameter_number = *n,
        Op::Constant(lit) => p.literal = Some(Box::new(literal_to_proto(lit))),
        Op::TupleConstant(elems) => {
            let tree = LiteralTree::Tuple(elems.clone());
            p.literal = Some(Box::new(literal_tree_to_proto(&tree)));
        }
        Op::Domain { entry, exit } => {
            p.domain_entry_sharding = Some(Box::new(super::sharding::to_proto(exit)));
            p.domain_exit_sharding = Some(Box::new(super::sharding::to_proto(entry)));
        }
        Op::BatchNorm {
            epsilon,
            feature_index,
            ..
        } => {
            p.epsilon = epsilon.get();
            p.feature_index = *feature_index;
        }
        Op::CustomCall(cc) => fill_custom_call(cc, p),
        Op::Transfer(t) => {
            p.channel_id = t.channel_id.unwrap_or(0);
            p.is_host_transfer = t.is_host_transfer;
        }
        // The callee is written with every op's called computations.
        Op::Async { thread, .. } => {
            p.async_execution_thread = thread.clone().unwrap_or_default();
        }
        Op::Outfeed { config, shape } => {
            p.outfeed_config = config.clone().into_bytes();
            p.outfeed_shape = shape.as_deref().map(shape_to_proto);
        }
        Op::Unary(_)
        | Op::Binary(_)
        | Op::AfterAll
        | Op::AddDependency
        | Op::CopyDone
        | Op::StochasticConvert
        | Op::Select
        | Op::Clamp
        | Op::Convert
        | Op::BitcastConvert
        | Op::Bitcast
        | Op::DynamicUpdateSlice
        | Op::DynamicReshape
        | Op::Tuple
        | Op::OptBarrier
        | Op::Conditional { .. }
        | Op::ReplicaId
        | Op::PartitionId
        | Op::CollectiveDone(_) => {}
        // Written from their description.
        crate::ir::op::description::described_ops!() => {}
    }
}

fn fill_custom_call(cc: &CustomCall, p: &mut HloInstructionProto) {
    p.custom_call_target = cc.target.clone();
    p.custom_call_api_version = cc.api_version.proto();
    p.custom_call_has_side_effect = cc.has_side_effect;
    p.custom_call_schedule = cc.schedule.proto();
    p.padding_type = cc.padding_type.proto();
    p.literal = cc.literal.as_ref().map(|l| Box::new(literal_to_proto(l)));
    p.output_operand_aliasing = aliasing_to_proto(&cc.aliasing);
    if let Some(layouts) = &cc.operand_layouts {
        p.constrain_layout = true;
        p.operand_shapes_with_layout = layouts.iter().map(shape_to_proto).collect();
    }
    if let Some(conv) = &cc.convolution {
        p.window = conv.window.as_ref().and_then(window_to_proto);
        p.convolution_dimension_numbers =
            conv.dims.as_ref().map(|d| Box::new(conv_dims_to_proto(d)));
        p.feature_group_count = conv.feature_group_count;
        p.batch_group_count = conv.batch_group_count;
        p.precision_config = precision_to_proto(&conv.precision, DotAlgorithm::Unset);
    }
}

/// Serialized `HloModuleProto` bytes.
pub fn encode_module(m: &Module) -> Vec<u8> {
    module_to_proto(m).encode_to_vec()
}
