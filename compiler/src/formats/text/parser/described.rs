//! The described ops' attributes ([`crate::ir::op::description`]) read
//! back from XLA's text, as `formats/text/described.rs` writes them.

use std::borrow::Cow;

use super::{
    channel_id, collective, error_at, flag_value, int_value, ints_value, permute_slice_sizes,
    source_target_pairs, word_value, AttrPlace, Attrs, ParseError, Value,
};
use crate::ir::op::description::{AttrReader, AttrValue, Attribute, FieldError, Form, ProtoField};
use crate::ir::op::{DotDims, GatherDims, RaggedDims, ScatterDims};

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
