//! Prints modules in XLA's HLO text syntax (the modern short form: no `%`
//! sigils, no operand shapes, layouts always written).

use super::attr_values::{flag, write_aliasing, write_list, write_precision};
use super::described::TextWriter;
use crate::ir::computation::{Computation, InstrId};
use crate::ir::literal::LiteralTree;
use crate::ir::metadata::Metadata;
use crate::ir::module::Module;
use crate::ir::op::{Op, Precision};
use crate::ir::shape::ElementType;
use crate::ir::window::{ConvDims, Window};
use crate::util::escape::{escape, escape_into};
use crate::util::join::write_joined;
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn print_module(m: &Module) -> String {
    let mut out = String::with_capacity(m.instruction_count() * 96);
    let _ = write!(out, "HloModule {}", m.name);
    if m.is_scheduled {
        out.push_str(", is_scheduled=true");
    }
    if !m.input_output_alias.is_empty() {
        out.push_str(", input_output_alias={ ");
        for (i, a) in m.input_output_alias.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('{');
            let _ = write_joined(&mut out, &a.output_index);
            let _ = write!(out, "}}: ({}, {{", a.parameter);
            let _ = write_joined(&mut out, &a.parameter_index);
            let _ = write!(out, "}}, {})", a.kind.name());
        }
        out.push_str(" }");
    }
    if !m.buffer_donors.is_empty() {
        out.push_str(", buffer_donor={ ");
        for (i, d) in m.buffer_donors.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "({}, {{", d.parameter);
            let _ = write_joined(&mut out, &d.parameter_index);
            out.push_str("})");
        }
        out.push_str(" }");
    }
    if m.alias_passthrough_params {
        out.push_str(", alias_passthrough_params=true");
    }
    if !m.frontend_attributes.is_empty() {
        out.push_str(", ");
        write_frontend_attributes(&mut out, &m.frontend_attributes);
    }
    if m.get_computation(m.entry).is_some() {
        let (params, result) = match &m.entry_layout {
            Some(l) => (l.parameters.clone(), Some(l.result.clone())),
            None => (m.entry_parameter_shapes(), m.entry_result_shape()),
        };
        out.push_str(", entry_computation_layout={(");
        write_list(&mut out, &params);
        out.push_str(")->");
        if let Some(r) = result {
            let _ = write!(out, "{r}");
        }
        out.push('}');
    }
    if m.devices.replica_count != 1 {
        let _ = write!(out, ", replica_count={}", m.devices.replica_count);
    }
    if m.devices.num_partitions != 1 {
        let _ = write!(out, ", num_partitions={}", m.devices.num_partitions);
    }
    let spmd = &m.allow_spmd_sharding_propagation;
    for (key, values) in [
        (
            "allow_spmd_sharding_propagation_to_parameters",
            &spmd.to_parameters,
        ),
        ("allow_spmd_sharding_propagation_to_output", &spmd.to_output),
    ] {
        if !values.is_empty() {
            let list: Vec<&str> = values
                .iter()
                .map(|&b| if b { "true" } else { "false" })
                .collect();
            let _ = write!(out, ", {key}={{{}}}", list.join(","));
        }
    }
    out.push_str("\n\n");
    m.stack_frames.print_into(&mut out);
    let order = m.computation_order();
    for (k, &c) in order.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        if c == m.entry {
            out.push_str("ENTRY ");
        }
        print_computation_into(&mut out, m, m.computation(c), m.is_scheduled);
    }
    out
}

/// One computation of `m` (callees named as `m` names them).
pub fn print_computation(m: &Module, c: &Computation) -> String {
    let mut out = String::new();
    print_computation_into(&mut out, m, c, false);
    out
}

/// `scheduled`: in the order instructions were added (the schedule),
/// otherwise in hlatc's deterministic post-order.
fn print_computation_into(out: &mut String, m: &Module, c: &Computation, scheduled: bool) {
    let _ = writeln!(out, "{} {{", c.name);
    let order: Vec<InstrId> = if scheduled {
        c.ids().collect()
    } else {
        c.post_order()
    };
    for id in order {
        out.push_str("  ");
        if c.root() == Some(id) {
            out.push_str("ROOT ");
        }
        print_instruction_into(out, m, c, id);
        out.push('\n');
    }
    out.push('}');
    if let Some(thread) = &c.execution_thread {
        let _ = write!(out, ", execution_thread=\"{}\"", escape(thread));
    }
    out.push('\n');
}

/// One instruction line of a computation of `m`, without indentation or
/// `ROOT`.
pub fn print_instruction(m: &Module, c: &Computation, id: InstrId) -> String {
    let mut out = String::new();
    print_instruction_into(&mut out, m, c, id);
    out
}

fn print_instruction_into(out: &mut String, m: &Module, c: &Computation, id: InstrId) {
    let instr = c.instr(id);
    out.push_str(&instr.name);
    out.push_str(" = ");
    instr.shape.push_text(out);
    out.push(' ');
    out.push_str(instr.op.opcode());
    out.push('(');
    match &instr.op {
        Op::Parameter(n) => {
            let _ = write!(out, "{n}");
        }
        Op::Constant(lit) => {
            let _ = write!(out, "{lit}");
        }
        Op::TupleConstant(elems) => {
            let _ = write!(out, "{}", LiteralTree::Tuple(elems.clone()));
        }
        _ => write_names(out, c, c.operand_ids(id)),
    }
    out.push(')');
    write_attributes(out, m, c, id);
}

/// A feed's `key="config"`, left out when empty as XLA leaves it.
fn config_attribute(out: &mut String, key: &str, config: &str) {
    if !config.is_empty() {
        let _ = write!(out, ", {key}=\"{}\"", escape(config));
    }
}

fn write_attributes(out: &mut String, m: &Module, c: &Computation, id: InstrId) {
    let instr = c.instr(id);
    if !instr.op.write_described(&mut TextWriter { out, module: m }) {
        write_spelled_attributes(out, m, c, id);
    }
    write_annotations(out, c, id);
}

/// The attributes of the ops that spell theirs by hand.
fn write_spelled_attributes(out: &mut String, m: &Module, c: &Computation, id: InstrId) {
    let names = |ids: &[crate::ir::computation_id::ComputationId]| -> String {
        let names: Vec<_> = ids.iter().map(|&id| m.callee_name(id)).collect();
        names.join(", ")
    };
    match &c.instr(id).op {
        Op::Domain { entry, exit } => {
            out.push_str(", domain={kind=\"sharding\", entry=");
            super::sharding::write_sharding(out, entry, &metadata_fields);
            out.push_str(", exit=");
            super::sharding::write_sharding(out, exit, &metadata_fields);
            out.push('}');
        }
        Op::BatchNorm {
            epsilon,
            feature_index,
            ..
        } => {
            let _ = write!(out, ", epsilon={epsilon}, feature_index={feature_index}");
        }
        Op::Conditional { branches } => {
            // XLA requires the pred form's own names for a pred selector.
            let selector_is_pred = c
                .operands(id)
                .first()
                .is_some_and(|&s| c.instr(s).shape.is_scalar_of(ElementType::Pred));
            match branches.as_slice() {
                [t, f] if selector_is_pred => {
                    let (t, f) = (m.callee_name(*t), m.callee_name(*f));
                    let _ = write!(out, ", true_computation={t}, false_computation={f}");
                }
                _ => {
                    let _ = write!(out, ", branch_computations={{{}}}", names(branches));
                }
            }
        }
        Op::CustomCall(cc) => {
            if let Some(conv) = &cc.convolution {
                write_convolution_attributes(
                    out,
                    conv.window.as_ref(),
                    conv.dims.as_ref(),
                    (conv.feature_group_count, conv.batch_group_count),
                    &conv.precision,
                );
            }
            if cc.padding_type != crate::ir::op::PaddingType::Invalid {
                let _ = write!(out, ", padding_type={}", cc.padding_type.name());
            }
            let _ = write!(out, ", custom_call_target=\"{}\"", escape(&cc.target));
            flag(out, "custom_call_has_side_effect", cc.has_side_effect);
            if let Some(lit) = &cc.literal {
                let _ = write!(out, ", literal={} {lit}", lit.shape);
            }
            if cc.schedule != crate::ir::op::CustomCallSchedule::None {
                let _ = write!(out, ", schedule={}", cc.schedule.name());
            }
            if cc.api_version != Default::default() {
                let _ = write!(out, ", api_version={}", cc.api_version.name());
            }
            if !cc.called.is_empty() {
                let _ = write!(out, ", called_computations={{{}}}", names(&cc.called));
            }
            write_aliasing(out, &cc.aliasing);
            if let Some(layouts) = &cc.operand_layouts {
                out.push_str(", operand_layout_constraints={");
                write_list(out, layouts);
                out.push('}');
            }
        }
        Op::Async { calls, thread, .. } => {
            if let Some(t) = thread {
                config_attribute(out, "async_execution_thread", t);
            }
            let _ = write!(out, ", calls={}", m.callee_name(*calls));
        }
        Op::Transfer(t) => {
            if let Some(id) = t.channel_id {
                let _ = write!(out, ", channel_id={id}");
            }
            flag(out, "is_host_transfer", t.is_host_transfer);
        }
        Op::Outfeed { config, shape } => {
            // XLA writes it always; unset, it is the data's own shape.
            let data = c.operands(id).first().map(|&d| &c.instr(d).shape);
            if let Some(s) = shape.as_deref().or(data) {
                let _ = write!(out, ", outfeed_shape={s}");
            }
            config_attribute(out, "outfeed_config", config);
        }
        Op::Parameter(_)
        | Op::CopyDone
        | Op::StochasticConvert
        | Op::AfterAll
        | Op::AddDependency
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert
        | Op::BitcastConvert
        | Op::Bitcast
        | Op::DynamicUpdateSlice
        | Op::DynamicReshape
        | Op::Tuple
        | Op::OptBarrier
        | Op::ReplicaId
        | Op::PartitionId
        | Op::CollectiveDone(_) => {}
        // Written from their description.
        crate::ir::op::description::described_ops!() => {}
    }
}

/// What any instruction may carry after its op's attributes.
fn write_annotations(out: &mut String, c: &Computation, id: InstrId) {
    let instr = c.instr(id);
    if let Some(s) = &instr.sharding {
        out.push_str(", sharding=");
        super::sharding::write_sharding(out, s, &metadata_fields);
    }
    let preds = c.control_predecessors(id);
    if !preds.is_empty() {
        out.push_str(", control-predecessors={");
        write_names(out, c, preds);
        out.push('}');
    }
    // In XLA's order: after the control predecessors, before metadata.
    if let Some(s) = &instr.statistics {
        let _ = write!(out, ", statistics={s}");
    }
    if let Some(a) = &instr.result_accuracy {
        let _ = write!(out, ", result_accuracy={a}");
    }
    if let Some(o) = &instr.original_value {
        let _ = write!(out, ", origin={o}");
    }
    if !instr.metadata.is_empty() {
        out.push_str(", metadata={");
        write_metadata_fields(out, &instr.metadata);
        out.push('}');
    }
    let attrs = instr.written_frontend_attributes();
    if !attrs.is_empty() {
        out.push_str(", ");
        write_frontend_attributes(out, &attrs);
    }
    if let Some(replicated) = &instr.parameter_replication {
        let flags: Vec<&str> = replicated
            .iter()
            .map(|&r| if r { "true" } else { "false" })
            .collect();
        let _ = write!(out, ", parameter_replication={{{}}}", flags.join(","));
    }
    if !instr.backend_config.is_empty() {
        let _ = write!(
            out,
            ", backend_config=\"{}\"",
            escape(&instr.backend_config)
        );
    }
}

/// The `key=value` fields of metadata, space separated, as XLA prints them.
fn metadata_fields(md: &Metadata) -> String {
    let mut out = String::new();
    write_metadata_fields(&mut out, md);
    out
}

/// [`metadata_fields`], appended to `out`: every instruction has some, so
/// they are written in place rather than gathered and joined.
fn write_metadata_fields(out: &mut String, md: &Metadata) {
    let start = out.len();
    let separate = |out: &mut String| {
        if out.len() > start {
            out.push(' ');
        }
    };
    let quoted = |out: &mut String, k: &str, v: &str| {
        if !v.is_empty() {
            separate(out);
            let _ = write!(out, "{k}=\"");
            escape_into(out, v);
            out.push('"');
        }
    };
    quoted(out, "op_type", &md.op_type);
    quoted(out, "op_name", &md.op_name);
    quoted(out, "source_file", &md.source_file);
    let numbers = [
        ("source_line", md.source_line),
        ("source_end_line", md.source_end_line),
        ("source_column", md.source_column),
        ("source_end_column", md.source_end_column),
    ];
    for (k, v) in numbers {
        if v != 0 {
            separate(out);
            let _ = write!(out, "{k}={v}");
        }
    }
    quoted(out, "deduplicated_name", &md.deduplicated_name);
    if md.stack_frame_id != 0 {
        separate(out);
        let _ = write!(out, "stack_frame_id={}", md.stack_frame_id);
    }
    quoted(out, "scheduling_name", &md.scheduling_name);
}

fn write_frontend_attributes(out: &mut String, attrs: &BTreeMap<String, String>) {
    out.push_str("frontend_attributes={");
    for (i, (k, v)) in attrs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{k}=\"{}\"", escape(v));
    }
    out.push('}');
}

/// The names of `ids`, as a list.
fn write_names(out: &mut String, c: &Computation, ids: &[InstrId]) {
    for (i, &id) in ids.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&c.instr(id).name);
    }
}

/// What a convolution (or a custom call standing for one) writes, in
/// XLA's order; group counts of 1 are not written.
fn write_convolution_attributes(
    out: &mut String,
    window: Option<&Window>,
    dims: Option<&ConvDims>,
    (feature_groups, batch_groups): (i64, i64),
    precision: &[Precision],
) {
    if let Some(w) = window {
        let _ = write!(out, ", window={{{w}}}");
    }
    if let Some(d) = dims {
        let _ = write!(out, ", dim_labels={d}");
    }
    if feature_groups != 1 {
        let _ = write!(out, ", feature_group_count={feature_groups}");
    }
    if batch_groups != 1 {
        let _ = write!(out, ", batch_group_count={batch_groups}");
    }
    write_precision(out, precision);
}
