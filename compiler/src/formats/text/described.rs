//! The described ops' attributes ([`crate::ir::op::description`]) as XLA's
//! text spells them, written for the printer; `parser/described.rs` reads
//! them back.

use std::fmt::Write;

use super::attr_values::{
    list, list_if_any, write_aliasing, write_collective, write_padding, write_precision,
};
use super::collective::{write_pairs, write_slice_sizes};
use crate::ir::module::Module;
use crate::ir::op::description::{AttrValue, AttrWriter, Attribute, Form};
use crate::ir::op::{DotDims, GatherDims, ScatterDims, SliceDim};
use crate::util::escape::escape;
use crate::util::join::write_joined;

/// Appends `, key=value` for each attribute the form says is written;
/// callees by their names in `module`.
pub(super) struct TextWriter<'a> {
    pub out: &'a mut String,
    pub module: &'a Module,
}

impl AttrWriter for TextWriter<'_> {
    fn write(&mut self, a: &'static Attribute, v: AttrValue<'_>) {
        let out = &mut *self.out;
        let key = a.key;
        match a.form {
            _ if v == AttrValue::Absent => {}
            Form::Flag if !v.flag() => {}
            Form::Flag | Form::FlagDefaultTrue => {
                let _ = write!(out, ", {key}={}", v.flag());
            }
            Form::List | Form::ListOrEmpty | Form::ListIfAny | Form::OneDimension => {
                let ints = v.ints().unwrap_or_default();
                if a.form != Form::ListIfAny || !ints.is_empty() {
                    let _ = write!(out, ", {key}={{");
                    let _ = write_joined(out, &ints);
                    out.push('}');
                }
            }
            Form::Int => {
                if let Some(n) = v.int() {
                    let _ = write!(out, ", {key}={n}");
                }
            }
            Form::Word => {
                if let AttrValue::Callee(id) = v {
                    let _ = write!(out, ", {key}={}", self.module.callee_name(id));
                } else if let Some(w) = v.word() {
                    let _ = write!(out, ", {key}={w}");
                }
            }
            Form::Window => {
                if let AttrValue::Window(w) = &v {
                    let _ = write!(out, ", {key}={{{w}}}");
                }
            }
            Form::Aliasing => {
                if let AttrValue::Aliasing(a) = &v {
                    write_aliasing(out, a);
                }
            }
            Form::Collective => {
                if let AttrValue::Collective(c) = &v {
                    write_collective(out, c);
                }
            }
            Form::IntUnlessOne => {
                if let Some(n) = v.int().filter(|&n| n != 1) {
                    let _ = write!(out, ", {key}={n}");
                }
            }
            Form::WindowIfAny => {
                if let AttrValue::Window(w) = &v {
                    if !w.dims.is_empty() {
                        let _ = write!(out, ", {key}={{{w}}}");
                    }
                }
            }
            Form::Slices => {
                if let AttrValue::Slices(slices) = &v {
                    write_slices(out, key, slices);
                }
            }
            Form::Padding => {
                if let AttrValue::Padding(config) = &v {
                    let _ = write!(out, ", {key}=");
                    write_padding(out, config);
                }
            }
            Form::GatherDims => {
                if let AttrValue::GatherDims(d) = &v {
                    write_gather_dims(out, d);
                }
            }
            Form::ScatterDims => {
                if let AttrValue::ScatterDims(d) = &v {
                    write_scatter_dims(out, d);
                }
            }
            Form::DotDims => {
                if let AttrValue::DotDims(d) = &v {
                    write_dot_dims(out, d);
                }
            }
            Form::RaggedDims => {
                if let AttrValue::RaggedDims(r) = &v {
                    list_if_any(out, "lhs_ragged_dims", &r.lhs_ragged);
                    list_if_any(out, "rhs_group_dims", &r.rhs_group);
                }
            }
            Form::DimLabels => {
                if let AttrValue::ConvDims(d) = &v {
                    let _ = write!(out, ", {key}={d}");
                }
            }
            Form::Precision => {
                if let AttrValue::Precision(p) = &v {
                    write_precision(out, p);
                }
            }
            Form::ChannelId => {
                if let Some(id) = v.int() {
                    let _ = write!(out, ", {key}={id}");
                }
            }
            Form::Pairs => {
                if let AttrValue::Pairs(pairs) = &v {
                    let _ = write!(out, ", {key}=");
                    write_pairs(out, pairs);
                }
            }
            Form::SliceSizes => {
                if let AttrValue::IntLists(sizes) = &v {
                    if !sizes.is_empty() {
                        let _ = write!(out, ", {key}=");
                        write_slice_sizes(out, sizes);
                    }
                }
            }
            Form::QuotedIfAny => {
                if let Some(text) = v.word().filter(|t| !t.is_empty()) {
                    let _ = write!(out, ", {key}=\"{}\"", escape(text));
                }
            }
        }
    }
}

fn write_gather_dims(out: &mut String, d: &GatherDims) {
    list(out, "offset_dims", &d.offset_dims);
    list(out, "collapsed_slice_dims", &d.collapsed_slice_dims);
    list(out, "start_index_map", &d.start_index_map);
    list_if_any(out, "operand_batching_dims", &d.operand_batching_dims);
    list_if_any(
        out,
        "start_indices_batching_dims",
        &d.start_indices_batching_dims,
    );
    let _ = write!(out, ", index_vector_dim={}", d.index_vector_dim);
}

fn write_scatter_dims(out: &mut String, d: &ScatterDims) {
    list(out, "update_window_dims", &d.update_window_dims);
    list(out, "inserted_window_dims", &d.inserted_window_dims);
    list(
        out,
        "scatter_dims_to_operand_dims",
        &d.scatter_dims_to_operand_dims,
    );
    list_if_any(out, "input_batching_dims", &d.input_batching_dims);
    list_if_any(
        out,
        "scatter_indices_batching_dims",
        &d.scatter_indices_batching_dims,
    );
    let _ = write!(out, ", index_vector_dim={}", d.index_vector_dim);
}

fn write_dot_dims(out: &mut String, d: &DotDims) {
    list_if_any(out, "lhs_batch_dims", &d.lhs_batch);
    list(out, "lhs_contracting_dims", &d.lhs_contracting);
    list_if_any(out, "rhs_batch_dims", &d.rhs_batch);
    list(out, "rhs_contracting_dims", &d.rhs_contracting);
}

/// `, slice={[0:2], [1:9:2]}`: a stride of 1 is left out.
fn write_slices(out: &mut String, key: &str, slices: &[SliceDim]) {
    let _ = write!(out, ", {key}={{");
    for (i, s) in slices.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "[{}:{}", s.start, s.limit);
        if s.stride != 1 {
            let _ = write!(out, ":{}", s.stride);
        }
        out.push(']');
    }
    out.push('}');
}
