//! The described ops' attributes ([`crate::ir::op::description`]) as XLA's
//! text spells them: one writer for the printer, one reader for the parser.

use std::borrow::Cow;
use std::fmt::Write;

use super::attr_values::{
    list, list_if_any, write_aliasing, write_collective, write_padding, write_precision,
};
use super::collective::{write_pairs, write_slice_sizes};
use super::parser::{
    channel_id, collective, error_at, flag_value, int_value, ints_value, permute_slice_sizes,
    source_target_pairs, word_value, AttrPlace, Attrs, ParseError, Value,
};
use crate::ir::module::Module;
use crate::ir::op::description::{
    AttrReader, AttrValue, AttrWriter, Attribute, FieldError, Form, ProtoField,
};
use crate::ir::op::{DotDims, GatherDims, RaggedDims, ScatterDims, SliceDim};
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

/// Reads described attributes out of an instruction's attributes,
/// remembering where the last one was written for its errors.
pub(super) struct TextReader<'a, 'i> {
    pub attrs: &'a mut Attrs<'i>,
    pub opcode: &'a str,
    pub last: Option<AttrPlace<'i>>,
}

impl TextReader<'_, '_> {
    /// The values with a syntax of their own, each read by its own
    /// reader with its own default for what is not written; `None` for
    /// the plain forms.
    fn read_structured(&mut self, a: &Attribute) -> Result<Option<AttrValue<'static>>, ParseError> {
        let attrs = &mut *self.attrs;
        let v = match a.form {
            Form::Window | Form::WindowIfAny => AttrValue::Window(Cow::Owned(attrs.window()?)),
            Form::Aliasing => AttrValue::Aliasing(Cow::Owned(attrs.operand_aliasing()?)),
            Form::Collective => AttrValue::Collective(Cow::Owned(collective(attrs)?)),
            Form::Precision => AttrValue::Precision(Cow::Owned(attrs.precision()?)),
            Form::IntUnlessOne => AttrValue::Int(attrs.optional_int(a.key)?.unwrap_or(1)),
            Form::DimLabels => attrs
                .dim_labels()?
                .map_or(AttrValue::Absent, |d| AttrValue::ConvDims(Cow::Owned(d))),
            Form::Slices => match attrs.take(a.key) {
                None => AttrValue::Absent,
                Some((Value::Slices(s), _)) => AttrValue::Slices(Cow::Owned(s)),
                Some((Value::Ints(v), _)) if v.is_empty() => {
                    AttrValue::Slices(Cow::Owned(Vec::new()))
                }
                Some((other, p)) => {
                    return Err(error_at(
                        &p,
                        format!(
                            "'{}' must be ranges like {{[0:2]}}, got {}",
                            a.key,
                            other.kind()
                        ),
                    ))
                }
            },
            Form::Padding => match attrs.take(a.key) {
                None => AttrValue::Absent,
                Some((Value::Padding(c), _)) => AttrValue::Padding(Cow::Owned(c)),
                Some((other, p)) => {
                    return Err(error_at(
                        &p,
                        format!("'{}' must look like 0_0x1_2, got {}", a.key, other.kind()),
                    ))
                }
            },
            Form::GatherDims => AttrValue::GatherDims(Cow::Owned(GatherDims {
                offset_dims: attrs.ints("offset_dims")?,
                collapsed_slice_dims: attrs.ints_or_empty("collapsed_slice_dims")?,
                start_index_map: attrs.ints("start_index_map")?,
                operand_batching_dims: attrs.ints_or_empty("operand_batching_dims")?,
                start_indices_batching_dims: attrs.ints_or_empty("start_indices_batching_dims")?,
                index_vector_dim: attrs.int("index_vector_dim")?,
            })),
            Form::ScatterDims => AttrValue::ScatterDims(Cow::Owned(ScatterDims {
                update_window_dims: attrs.ints("update_window_dims")?,
                inserted_window_dims: attrs.ints_or_empty("inserted_window_dims")?,
                scatter_dims_to_operand_dims: attrs.ints("scatter_dims_to_operand_dims")?,
                input_batching_dims: attrs.ints_or_empty("input_batching_dims")?,
                scatter_indices_batching_dims: attrs
                    .ints_or_empty("scatter_indices_batching_dims")?,
                index_vector_dim: attrs.int("index_vector_dim")?,
            })),
            Form::DotDims => AttrValue::DotDims(Cow::Owned(DotDims {
                lhs_batch: attrs.ints_or_empty("lhs_batch_dims")?,
                lhs_contracting: attrs.ints_or_empty("lhs_contracting_dims")?,
                rhs_batch: attrs.ints_or_empty("rhs_batch_dims")?,
                rhs_contracting: attrs.ints_or_empty("rhs_contracting_dims")?,
            })),
            Form::RaggedDims => AttrValue::RaggedDims(Cow::Owned(RaggedDims {
                lhs_ragged: attrs.ints_or_empty("lhs_ragged_dims")?,
                rhs_group: attrs.ints_or_empty("rhs_group_dims")?,
            })),
            Form::ChannelId => channel_id(attrs)?.map_or(AttrValue::Absent, AttrValue::Int),
            Form::Pairs => AttrValue::Pairs(Cow::Owned(source_target_pairs(attrs)?)),
            Form::SliceSizes => AttrValue::IntLists(Cow::Owned(permute_slice_sizes(attrs)?)),
            Form::QuotedIfAny => {
                AttrValue::Word(Cow::Owned(attrs.string(a.key)?.unwrap_or_default()))
            }
            Form::Int
            | Form::List
            | Form::ListOrEmpty
            | Form::ListIfAny
            | Form::OneDimension
            | Form::Flag
            | Form::FlagDefaultTrue
            | Form::Word => return Ok(None),
        };
        // Each of these reports its own errors where they are written;
        // one missing is reported at the instruction.
        self.last = None;
        Ok(Some(v))
    }
}

impl AttrReader for TextReader<'_, '_> {
    type Error = ParseError;

    fn read(&mut self, a: &'static Attribute) -> Result<AttrValue<'static>, ParseError> {
        if let Some(v) = self.read_structured(a)? {
            return Ok(v);
        }
        let Some(written) = self.attrs.take(a.key) else {
            return Ok(match a.form {
                Form::ListOrEmpty | Form::ListIfAny => AttrValue::Ints(Cow::Owned(Vec::new())),
                Form::Flag => AttrValue::Flag(false),
                Form::FlagDefaultTrue => AttrValue::Flag(true),
                _ => AttrValue::Absent,
            });
        };
        self.last = Some(written.1);
        let key = a.key;
        Ok(match a.form {
            Form::Int => AttrValue::Int(int_value(key, written)?),
            Form::List | Form::ListOrEmpty | Form::ListIfAny | Form::OneDimension => {
                AttrValue::Ints(Cow::Owned(ints_value(key, written)?))
            }
            Form::Flag | Form::FlagDefaultTrue => AttrValue::Flag(flag_value(key, written)?),
            Form::Word if matches!(a.proto, ProtoField::Called(_)) => {
                let (name, at) = word_value(key, written)?;
                AttrValue::Callee(self.attrs.callee(key, &name, at))
            }
            Form::Word => AttrValue::Word(Cow::Owned(word_value(key, written)?.0)),
            _ => AttrValue::Absent,
        })
    }

    fn invalid(&mut self, a: &'static Attribute, e: FieldError) -> ParseError {
        let (opcode, key) = (self.opcode, a.key);
        let at = match (&e, &self.last) {
            (FieldError::Missing, _) | (_, None) => self.attrs.at,
            (_, Some(p)) => p.attribute,
        };
        let message = match e {
            FieldError::Missing => format!("{opcode} needs attribute '{key}'"),
            FieldError::NotOneDimension(v) => {
                format!("{opcode} needs exactly one dimension, got {v:?}")
            }
            FieldError::Unknown { written, choices } => {
                format!("unknown {key} '{written}' (expected one of {choices})")
            }
            FieldError::OutOfRange(n) => format!("{key}={n} is out of range"),
            FieldError::WrongKind(kind) => format!("'{key}' must be {kind}"),
        };
        error_at(&at, message)
    }
}
