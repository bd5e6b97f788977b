//! `HloModuleProto` to [`Module`], validating everything an untrusted proto
//! can get wrong (unknown ids, types, opcodes) as typed errors.

use super::error::{ImportError, InstructionError, ProtoError};
use super::instruction::{op_from_proto, thread_from_proto};
use super::messages::*;
use super::shape::shape_from_proto;
use crate::ir::collective::{GroupList, ReplicaGroups};
use crate::ir::computation::{Computation, InstrId};
use crate::ir::computation_id::ComputationId;
use crate::ir::device_assignment::DeviceAssignment;
use crate::ir::instruction::Instruction;
use crate::ir::module::{AliasKind, BufferDonor, EntryLayout, IoAlias, Module};
use crate::ir::stack_frames::{FileLocation, StackFrame, StackFrameIndex};
use prost::Message;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

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
    super::wire::check_modeled::<HloModuleProto>(module_bytes)?;
    Ok((
        module_from_proto(&HloModuleProto::decode(module_bytes)?)?,
        notes,
    ))
}

pub fn module_from_proto(p: &HloModuleProto) -> Result<Module, ProtoError> {
    let module_err = |error: ImportError| ProtoError::Invalid {
        computation: p.name.clone(),
        instruction: None,
        error: Box::new(error),
    };
    let comp_ids = computation_ids(p).map_err(module_err)?;
    let mut computations = Vec::with_capacity(p.computations.len());
    for c in &p.computations {
        let c = in_schedule_order(p, c).map_err(|error| ProtoError::Invalid {
            computation: c.name.clone(),
            instruction: None,
            error: Box::new(error),
        })?;
        computations.push(computation_from_proto(&c, &comp_ids)?);
    }
    let entry =
        entry_index(p).ok_or_else(|| module_err(ImportError::NoEntry(p.entry_computation_id)))?;
    let mut m = Module {
        is_scheduled: p.schedule.is_some(),
        entry_layout: None,
        allow_spmd_sharding_propagation: Default::default(),
        alias_passthrough_params: false,
        devices: Default::default(),
        device_assignment: p
            .device_assignment
            .as_ref()
            .map(device_assignment_from_proto),
        stack_frames: p
            .stack_frame_index
            .as_ref()
            .map(stack_frames_from_proto)
            .unwrap_or_default(),
        name: p.name.clone(),
        computations,
        entry: ComputationId::new(entry),
        input_output_alias: io_alias_from_proto(p),
        buffer_donors: buffer_donors_from_proto(p),
        frontend_attributes: p
            .frontend_attributes
            .as_ref()
            .map(|f| f.map.clone())
            .unwrap_or_default(),
    };
    m.entry_layout = entry_layout_from_proto(p, &m).map_err(module_err)?;
    refuse_stray_fusion_flags(p, &m).map_err(module_err)?;
    crate::analysis::canonical::drop_default_attributes(&mut m);
    share_group_lists(&mut m);
    Ok(m)
}

/// Each computation's place in the module (its order in the proto), by
/// its proto id; each id once.
fn computation_ids(p: &HloModuleProto) -> Result<HashMap<i64, ComputationId>, ImportError> {
    let mut ids = HashMap::new();
    for (k, c) in p.computations.iter().enumerate() {
        if ids.insert(c.id, ComputationId::new(k)).is_some() {
            return Err(ImportError::ComputationIdTwice(c.id));
        }
    }
    Ok(ids)
}

/// The entry: the computation of the entry id (the last, if several
/// hold it), or with no id written, the first of the entry's name.
fn entry_index(p: &HloModuleProto) -> Option<usize> {
    let mut entry = None;
    for (k, c) in p.computations.iter().enumerate() {
        if c.id == p.entry_computation_id
            || (entry.is_none()
                && c.name == p.entry_computation_name
                && p.entry_computation_id == 0)
        {
            entry = Some(k);
        }
    }
    entry
}

/// `c` with its instructions in the order of `p`'s schedule, when it has
/// one for `c`: hlatc keeps a schedule as each computation's instruction
/// order, while XLA lists a proto's instructions in post-order. A schedule
/// that is not a permutation of the computation's instructions is refused.
fn in_schedule_order<'a>(
    p: &HloModuleProto,
    c: &'a HloComputationProto,
) -> Result<Cow<'a, HloComputationProto>, ImportError> {
    let Some(seq) = p.schedule.as_ref().and_then(|s| s.sequences.get(&c.id)) else {
        return Ok(Cow::Borrowed(c));
    };
    let listed: Vec<i64> = c.instructions.iter().map(|i| i.id).collect();
    if seq.instruction_ids == listed {
        return Ok(Cow::Borrowed(c));
    }
    let by_id: HashMap<i64, &HloInstructionProto> =
        c.instructions.iter().map(|i| (i.id, &**i)).collect();
    let mut seen = HashSet::new();
    let mut ordered = Vec::with_capacity(c.instructions.len());
    for id in &seq.instruction_ids {
        match by_id.get(id) {
            Some(i) if seen.insert(*id) => ordered.push((*i).clone().into()),
            _ => return Err(ImportError::ScheduleId(*id)),
        }
    }
    if ordered.len() != c.instructions.len() {
        return Err(ImportError::ScheduleCount {
            ordered: ordered.len(),
            held: c.instructions.len(),
        });
    }
    Ok(Cow::Owned(HloComputationProto {
        instructions: ordered,
        ..c.clone()
    }))
}

/// The entry's layout, where `host_program_shape` gives one other than
/// the entry's own.
fn entry_layout_from_proto(
    p: &HloModuleProto,
    m: &Module,
) -> Result<Option<EntryLayout>, ImportError> {
    let Some(ps) = &p.host_program_shape else {
        return Ok(None);
    };
    let parameters = ps
        .parameters
        .iter()
        .map(shape_from_proto)
        .collect::<Result<Vec<_>, _>>()?;
    let Some(result) = &ps.result else {
        return Ok(None);
    };
    EntryLayout::against(m, parameters, shape_from_proto(result)?)
        .map_err(|e| ImportError::HostProgramShape(e.0))
}

/// The flag is derived (a computation is fused when a fusion calls it);
/// one set on anything else would be lost, so it is refused.
fn refuse_stray_fusion_flags(p: &HloModuleProto, m: &Module) -> Result<(), ImportError> {
    let fused = m.fused_computations();
    match p
        .computations
        .iter()
        .enumerate()
        .find(|(k, c)| c.is_fusion_computation && !fused.contains(&ComputationId::new(*k)))
        .map(|(_, c)| c)
    {
        Some(c) => Err(ImportError::StrayFusionFlag(c.name.clone())),
        None => Ok(()),
    }
}

fn io_alias_from_proto(p: &HloModuleProto) -> Vec<IoAlias> {
    p.input_output_alias
        .iter()
        .flat_map(|a| &a.entries)
        .map(|e| IoAlias {
            output_index: e.output_shape_index.clone(),
            parameter: e.parameter_number,
            parameter_index: e.parameter_shape_index.clone(),
            kind: if e.kind == 2 {
                AliasKind::MustAlias
            } else {
                AliasKind::MayAlias
            },
        })
        .collect()
}

fn buffer_donors_from_proto(p: &HloModuleProto) -> Vec<BufferDonor> {
    p.buffer_donor
        .iter()
        .flat_map(|d| &d.entries)
        .map(|e| BufferDonor {
            parameter: e.parameter_number,
            parameter_index: e.parameter_shape_index.clone(),
        })
        .collect()
}

fn device_assignment_from_proto(d: &DeviceAssignmentProto) -> DeviceAssignment {
    DeviceAssignment {
        replica_count: d.replica_count,
        computation_count: d.computation_count,
        devices: d
            .computation_devices
            .iter()
            .map(|c| c.replica_device_ids.clone())
            .collect(),
    }
}

fn stack_frames_from_proto(p: &StackFrameIndexProto) -> StackFrameIndex {
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
    comp_ids: &HashMap<i64, ComputationId>,
) -> Result<Computation, ProtoError> {
    let err = |instruction: Option<&str>, error: ImportError| ProtoError::Invalid {
        computation: c.name.clone(),
        instruction: instruction.map(str::to_string),
        error: Box::new(error),
    };
    let mut comp = Computation::new(c.name.clone());
    comp.execution_thread = thread_from_proto(&c.execution_thread);
    let mut ids: HashMap<i64, InstrId> = HashMap::with_capacity(c.instructions.len());
    for ip in &c.instructions {
        let instr = instruction_from_proto(ip, comp_ids).map_err(|e| err(Some(&ip.name), e))?;
        if ids.insert(ip.id, comp.add(instr, &[])).is_some() {
            return Err(err(Some(&ip.name), ImportError::InstructionIdTwice(ip.id)));
        }
    }
    for ip in &c.instructions {
        connect_from_proto(ip, &ids, &mut comp).map_err(|e| err(Some(&ip.name), e))?;
    }
    let root = ids
        .get(&c.root_id)
        .copied()
        .ok_or_else(|| err(None, ImportError::NoRoot(c.root_id)))?;
    comp.set_root(root);
    crate::ir::async_ops::find_async_callees(&mut comp)
        .map_err(|e| err(None, ImportError::AsyncCallee(e)))?;
    Ok(comp)
}

/// One instruction, its operands not yet connected; `comp_ids` are the
/// module's computations by proto id.
fn instruction_from_proto(
    ip: &HloInstructionProto,
    comp_ids: &HashMap<i64, ComputationId>,
) -> Result<Instruction, ImportError> {
    let shape = shape_from_proto(ip.shape.as_ref().ok_or(ImportError::NoShape)?)?;
    let called: Vec<ComputationId> = ip
        .called_computation_ids
        .iter()
        .map(|id| {
            comp_ids
                .get(id)
                .copied()
                .ok_or(ImportError::UnknownCallee(*id))
        })
        .collect::<Result<_, _>>()?;
    let op = op_from_proto(ip, &shape, &called)?;
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
        .map_err(ImportError::Sharding)?;
    let backend_config = String::from_utf8(ip.backend_config.clone())
        .map_err(|_| InstructionError::NotUtf8("backend_config"))?;
    let statistics = ip
        .statistics_viz
        .as_ref()
        .map(super::annotations::statistics_from_proto)
        .transpose()
        .map_err(InstructionError::Annotation)?
        .flatten()
        .map(Box::new);
    let result_accuracy = ip
        .result_accuracy
        .as_ref()
        .map(super::annotations::result_accuracy_from_proto)
        .transpose()
        .map_err(InstructionError::Annotation)?
        .flatten()
        .map(Box::new);
    let original_value = ip
        .original_value
        .as_ref()
        .map(|v| super::annotations::original_value_from_proto(v).map(Box::new))
        .transpose()
        .map_err(ImportError::OriginalValue)?;
    let mut instr = Instruction {
        name: ip.name.clone(),
        statistics,
        result_accuracy,
        original_value,
        shape,
        backend_config,
        parameter_replication: ip
            .parameter_replication
            .as_ref()
            .map(|r| r.replicated_at_leaf_buffers.clone()),
        op,
        metadata,
        frontend_attributes: BTreeMap::new(),
        sharding,
        recomputed: false,
    };
    let attrs = ip.frontend_attributes.as_ref().map(|f| f.map.clone());
    instr
        .set_written_frontend_attributes(attrs.unwrap_or_default())
        .map_err(InstructionError::from)?;
    Ok(instr)
}

/// Connects `ip`'s operands and control predecessors, by their ids in
/// `ids`.
fn connect_from_proto(
    ip: &HloInstructionProto,
    ids: &HashMap<i64, InstrId>,
    comp: &mut Computation,
) -> Result<(), ImportError> {
    let operands: Vec<InstrId> = ip
        .operand_ids
        .iter()
        .map(|o| ids.get(o).copied().ok_or(ImportError::UnknownOperand(*o)))
        .collect::<Result<_, _>>()?;
    comp.connect_operands(ids[&ip.id], &operands);
    for p in &ip.control_predecessor_ids {
        let pred = ids
            .get(p)
            .copied()
            .ok_or(ImportError::UnknownPredecessor(*p))?;
        comp.add_control_dependency(pred, ids[&ip.id]);
    }
    Ok(())
}

/// Makes every collective of `m` that names the same explicit groups share
/// one [`GroupList`], as the builder's do: this reader makes one list per
/// collective, and a step of 2,048 ranks has a thousand collectives over
/// a handful of sets. Shared, each set is checked, printed and encoded
/// once (`--verify` reads a 2,048-rank bundle back).
fn share_group_lists(m: &mut Module) {
    let mut sets: HashSet<GroupList> = HashSet::new();
    for c in &mut m.computations {
        let ids: Vec<_> = c.ids().collect();
        for id in ids {
            let Some(coll) = c.instr_mut(id).op.collective_mut() else {
                continue;
            };
            let ReplicaGroups::List(list) = &mut coll.replica_groups else {
                continue;
            };
            match sets.get(list) {
                Some(set) => *list = set.clone(),
                None => {
                    sets.insert(list.clone());
                }
            }
        }
    }
}
