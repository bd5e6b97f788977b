//! The described ops' attributes ([`crate::op_description`]) in
//! `HloInstructionProto`'s fields: one writer for emission, one reader for
//! import, and the check that no described field is written on an op that
//! does not carry it.

use std::borrow::Cow;

use super::collective::{collective_from_proto, fill_collective};
use super::emit::aliasing_to_proto;
use super::import::aliasing_from_proto;
use super::messages::{CholeskyOptions, HloInstructionProto, TriangularSolveOptions};
use super::window::{window_from_proto, window_to_proto};
use crate::op_description::{
    AttrReader, AttrValue, AttrWriter, Attribute, Description, FieldError, ProtoField,
};

/// Sets each attribute's field. Called computations are written with the
/// others' (`called_computation_ids`), from the op's callees.
pub(super) struct ProtoWriter<'a>(pub &'a mut HloInstructionProto);

impl AttrWriter for ProtoWriter<'_> {
    fn write(&mut self, a: &'static Attribute, v: AttrValue<'_>) {
        if v == AttrValue::Absent {
            return;
        }
        let p = &mut *self.0;
        let int = v.int().unwrap_or_default();
        let int32 = i32::try_from(int).unwrap_or_default();
        let ints = || v.ints().map(Cow::into_owned).unwrap_or_default();
        let word = || v.word().unwrap_or_default().to_string();
        match a.proto {
            ProtoField::Dimensions => p.dimensions = ints(),
            ProtoField::DynamicSliceSizes => p.dynamic_slice_sizes = ints(),
            ProtoField::FftLength => p.fft_length = ints(),
            ProtoField::TupleIndex => p.tuple_index = int,
            ProtoField::Delta => p.delta = int,
            ProtoField::K => p.k = int,
            ProtoField::ExponentBits => p.exponent_bits = int32,
            ProtoField::MantissaBits => p.mantissa_bits = int32,
            ProtoField::Distribution => p.distribution = int32,
            ProtoField::RngAlgorithm => p.rng_algorithm = int32,
            ProtoField::FftType => p.fft_type = int32,
            ProtoField::IsStable => p.is_stable = v.flag(),
            ProtoField::IsComposite => p.is_composite = v.flag(),
            ProtoField::Largest => p.largest = v.flag(),
            ProtoField::ComparisonDirection => p.comparison_direction = word(),
            ProtoField::ComparisonType => p.comparison_type = word(),
            ProtoField::CholeskyLower => {
                p.cholesky_options = Some(CholeskyOptions { lower: v.flag() })
            }
            ProtoField::TriangularLeftSide => triangular(p).left_side = v.flag(),
            ProtoField::TriangularLower => triangular(p).lower = v.flag(),
            ProtoField::TriangularUnitDiagonal => triangular(p).unit_diagonal = v.flag(),
            ProtoField::TriangularTransposeA => triangular(p).transpose_a = int32,
            ProtoField::FusionKind => p.fusion_kind = word(),
            ProtoField::Window => {
                if let AttrValue::Window(w) = &v {
                    p.window = window_to_proto(w);
                }
            }
            ProtoField::OutputOperandAliasing => {
                if let AttrValue::Aliasing(a) = &v {
                    p.output_operand_aliasing = aliasing_to_proto(a);
                }
            }
            ProtoField::Collective => {
                if let AttrValue::Collective(c) = &v {
                    fill_collective(c, p);
                }
            }
            ProtoField::Called(_) => {}
        }
    }
}

fn triangular(p: &mut HloInstructionProto) -> &mut TriangularSolveOptions {
    p.triangular_solve_options
        .get_or_insert_with(Default::default)
}

/// Reads each attribute's field; `called` are the instruction's called
/// computations by name, in `called_computation_ids` order.
pub(super) struct ProtoReader<'a> {
    pub p: &'a HloInstructionProto,
    pub called: &'a [String],
}

impl AttrReader for ProtoReader<'_> {
    type Error = String;

    fn read(&mut self, a: &'static Attribute) -> Result<AttrValue<'static>, String> {
        let p = self.p;
        let triangular = p.triangular_solve_options.clone().unwrap_or_default();
        let ints = |v: &[i64]| AttrValue::Ints(Cow::Owned(v.to_vec()));
        let word = |w: &str| match w {
            "" => AttrValue::Absent,
            w => AttrValue::Word(Cow::Owned(w.to_string())),
        };
        Ok(match a.proto {
            ProtoField::Dimensions => ints(&p.dimensions),
            ProtoField::DynamicSliceSizes => ints(&p.dynamic_slice_sizes),
            ProtoField::FftLength => ints(&p.fft_length),
            ProtoField::TupleIndex => AttrValue::Int(p.tuple_index),
            ProtoField::Delta => AttrValue::Int(p.delta),
            ProtoField::K => AttrValue::Int(p.k),
            ProtoField::ExponentBits => AttrValue::Int(p.exponent_bits.into()),
            ProtoField::MantissaBits => AttrValue::Int(p.mantissa_bits.into()),
            ProtoField::Distribution => AttrValue::Int(p.distribution.into()),
            ProtoField::RngAlgorithm => AttrValue::Int(p.rng_algorithm.into()),
            ProtoField::FftType => AttrValue::Int(p.fft_type.into()),
            ProtoField::IsStable => AttrValue::Flag(p.is_stable),
            ProtoField::IsComposite => AttrValue::Flag(p.is_composite),
            ProtoField::Largest => AttrValue::Flag(p.largest),
            ProtoField::ComparisonDirection => word(&p.comparison_direction),
            ProtoField::ComparisonType => word(&p.comparison_type),
            ProtoField::CholeskyLower => {
                AttrValue::Flag(p.cholesky_options.as_ref().is_some_and(|o| o.lower))
            }
            ProtoField::TriangularLeftSide => AttrValue::Flag(triangular.left_side),
            ProtoField::TriangularLower => AttrValue::Flag(triangular.lower),
            ProtoField::TriangularUnitDiagonal => AttrValue::Flag(triangular.unit_diagonal),
            ProtoField::TriangularTransposeA => AttrValue::Int(triangular.transpose_a.into()),
            ProtoField::FusionKind => word(&p.fusion_kind),
            ProtoField::Window => p.window.as_ref().map_or(AttrValue::Absent, |w| {
                AttrValue::Window(Cow::Owned(window_from_proto(w)))
            }),
            ProtoField::OutputOperandAliasing => {
                AttrValue::Aliasing(Cow::Owned(aliasing_from_proto(p)))
            }
            ProtoField::Collective => AttrValue::Collective(Cow::Owned(collective_from_proto(p)?)),
            ProtoField::Called(i) => self.called.get(i).map_or(AttrValue::Absent, |c| word(c)),
        })
    }

    fn invalid(&mut self, a: &'static Attribute, e: FieldError) -> String {
        let (opcode, field) = (&self.p.opcode, a.proto.name());
        match e {
            FieldError::Missing => format!("{opcode} needs {field}"),
            FieldError::NotOneDimension(v) => {
                format!("{opcode} needs exactly one dimension, has {v:?}")
            }
            FieldError::Unknown { written, choices } => {
                format!("has unknown {field} {written} (expected one of {choices})")
            }
            FieldError::OutOfRange(n) => format!("{field} {n} is out of range"),
            FieldError::WrongKind(kind) => format!("{field} must be {kind}"),
        }
    }
}

/// Whether `p` writes `field` (a value other than the proto's default).
fn is_written(p: &HloInstructionProto, field: ProtoField) -> bool {
    match field {
        ProtoField::Dimensions => !p.dimensions.is_empty(),
        ProtoField::DynamicSliceSizes => !p.dynamic_slice_sizes.is_empty(),
        ProtoField::FftLength => !p.fft_length.is_empty(),
        ProtoField::TupleIndex => p.tuple_index != 0,
        ProtoField::Delta => p.delta != 0,
        ProtoField::K => p.k != 0,
        ProtoField::ExponentBits => p.exponent_bits != 0,
        ProtoField::MantissaBits => p.mantissa_bits != 0,
        ProtoField::Distribution => p.distribution != 0,
        ProtoField::RngAlgorithm => p.rng_algorithm != 0,
        ProtoField::FftType => p.fft_type != 0,
        ProtoField::IsStable => p.is_stable,
        ProtoField::IsComposite => p.is_composite,
        ProtoField::Largest => p.largest,
        ProtoField::ComparisonDirection => !p.comparison_direction.is_empty(),
        ProtoField::ComparisonType => !p.comparison_type.is_empty(),
        ProtoField::CholeskyLower => p.cholesky_options.is_some(),
        ProtoField::TriangularLeftSide
        | ProtoField::TriangularLower
        | ProtoField::TriangularUnitDiagonal
        | ProtoField::TriangularTransposeA => p.triangular_solve_options.is_some(),
        ProtoField::FusionKind => !p.fusion_kind.is_empty(),
        ProtoField::Window => p.window.is_some(),
        ProtoField::OutputOperandAliasing => !p.output_operand_aliasing.is_empty(),
        ProtoField::Collective => {
            !p.replica_groups.is_empty()
                || p.collective_device_list.is_some()
                || p.iota_collective_device_list.is_some()
                || p.mesh_axes_replica_group_list.is_some()
                || p.use_global_device_ids
        }
        ProtoField::Called(_) => !p.called_computation_ids.is_empty(),
    }
}

/// A described field written on an op that does not carry it: it would be
/// lost, so it is refused by name. (Called computations are checked with
/// the others'.)
pub(super) fn stray_field(p: &HloInstructionProto, opcode: &str) -> Result<(), String> {
    let stray = crate::op_description::DESCRIPTIONS
        .iter()
        .flat_map(|d| d.attributes)
        .map(|a| a.proto)
        .filter(|f| !matches!(f, ProtoField::Called(_)))
        .filter(|&f| is_written(p, f))
        .find(|&f| !Description::carriers(f).contains(&opcode));
    match stray {
        None => Ok(()),
        Some(field) => Err(format!(
            "{opcode} has field {}, which hlatc reads only on {}; here it would be lost",
            field.name(),
            and_list(&Description::carriers(field))
        )),
    }
}

/// A described op that calls computations calls as many as it has
/// callee attributes.
pub(super) fn check_callees(d: &Description, called: &[String]) -> Result<(), String> {
    let keys = d.callees();
    if keys.is_empty() || keys.len() == called.len() {
        return Ok(());
    }
    let count = match keys.len() {
        1 => "one called computation".to_string(),
        2 => "two called computations".to_string(),
        n => format!("{n} called computations"),
    };
    Err(format!(
        "{} needs {count} ({}), has {}",
        d.opcode,
        keys.join(", "),
        called.len()
    ))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
