//! The described ops' attributes ([`crate::ir::op::description`]) in
//! `HloInstructionProto`'s fields: one writer for emission, one reader for
//! import, and the check that no described field is written on an op that
//! does not carry it.

use std::borrow::Cow;

use super::attr_fields::{
    aliasing_from_proto, aliasing_to_proto, dot_dims_from_proto, dot_dims_to_proto,
    precision_from_proto, utf8_config,
};
use super::collective::{
    channel_from_proto, collective_from_proto, fill_collective, pairs_from_proto, pairs_to_proto,
    slice_sizes_from_proto,
};
use super::error::InstructionError;
use super::messages::{
    CholeskyOptions, GatherDimensionNumbers, HloInstructionProto, PaddingConfig,
    PaddingConfigDimension, PrecisionConfig, RaggedDotDimensionNumbers, ScatterDimensionNumbers,
    SliceDimensions, TriangularSolveOptions,
};
use super::window::{conv_dims_from_proto, conv_dims_to_proto, window_from_proto, window_to_proto};
use crate::ir::computation_id::ComputationId;
use crate::ir::op::description::{
    AttrReader, AttrValue, AttrWriter, Attribute, Description, FieldError, ProtoField,
};
use crate::ir::op::{GatherDims, PadDim, RaggedDims, ScatterDims, SliceDim};

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
            ProtoField::SliceDimensions => {
                if let AttrValue::Slices(slices) = &v {
                    p.slice_dimensions = slices_to_proto(slices);
                }
            }
            ProtoField::PaddingConfig => {
                if let AttrValue::Padding(config) = &v {
                    p.padding_config = Some(padding_to_proto(config));
                }
            }
            ProtoField::GatherDimensionNumbers => {
                if let AttrValue::GatherDims(d) = &v {
                    p.gather_dimension_numbers = Some(Box::new(gather_dims_to_proto(d)));
                }
            }
            ProtoField::ScatterDimensionNumbers => {
                if let AttrValue::ScatterDims(d) = &v {
                    p.scatter_dimension_numbers = Some(Box::new(scatter_dims_to_proto(d)));
                }
            }
            ProtoField::GatherSliceSizes => p.gather_slice_sizes = ints(),
            ProtoField::IndicesAreSorted => p.indices_are_sorted = v.flag(),
            ProtoField::UniqueIndices => p.unique_indices = v.flag(),
            ProtoField::DotDimensionNumbers => {
                if let AttrValue::DotDims(d) = &v {
                    p.dot_dimension_numbers = Some(Box::new(dot_dims_to_proto(d)));
                }
            }
            ProtoField::RaggedDotDimensions => {
                if let AttrValue::DotDims(d) = &v {
                    ragged(p).dot_dimension_numbers = Some(dot_dims_to_proto(d));
                }
            }
            ProtoField::RaggedDims => {
                if let AttrValue::RaggedDims(r) = &v {
                    let numbers = ragged(p);
                    numbers.lhs_ragged_dimensions = r.lhs_ragged.clone();
                    numbers.rhs_group_dimensions = r.rhs_group.clone();
                }
            }
            ProtoField::OperandPrecision => {
                if let AttrValue::Precision(precision) = &v {
                    if !precision.is_empty() {
                        precision_config(p).operand_precision =
                            precision.iter().map(|x| x.proto()).collect();
                    }
                }
            }
            ProtoField::DotAlgorithm => precision_config(p).algorithm = int32,
            ProtoField::ConvolutionDimensionNumbers => {
                if let AttrValue::ConvDims(d) = &v {
                    p.convolution_dimension_numbers = Some(Box::new(conv_dims_to_proto(d)));
                }
            }
            ProtoField::FeatureGroupCount => p.feature_group_count = int,
            ProtoField::BatchGroupCount => p.batch_group_count = int,
            ProtoField::ChannelId => p.channel_id = int,
            ProtoField::SourceTargetPairs => {
                if let AttrValue::Pairs(pairs) = &v {
                    p.source_target_pairs = pairs_to_proto(pairs);
                }
            }
            ProtoField::PermuteSliceSizes => {
                if let AttrValue::IntLists(sizes) = &v {
                    p.dynamic_slice_sizes = sizes.concat();
                }
            }
            ProtoField::InfeedConfig => p.infeed_config = word().into_bytes(),
            ProtoField::CrossProgramPrefetchIndex => p.cross_program_prefetch_index = Some(int32),
            ProtoField::Called(_) => {}
        }
    }
}

fn slices_to_proto(slices: &[SliceDim]) -> Vec<SliceDimensions> {
    slices
        .iter()
        .map(|s| SliceDimensions {
            start: s.start,
            limit: s.limit,
            stride: s.stride,
        })
        .collect()
}

fn padding_to_proto(config: &[PadDim]) -> PaddingConfig {
    PaddingConfig {
        dimensions: config
            .iter()
            .map(|d| PaddingConfigDimension {
                edge_padding_low: d.low,
                edge_padding_high: d.high,
                interior_padding: d.interior,
            })
            .collect(),
    }
}

fn gather_dims_to_proto(d: &GatherDims) -> GatherDimensionNumbers {
    GatherDimensionNumbers {
        offset_dims: d.offset_dims.clone(),
        collapsed_slice_dims: d.collapsed_slice_dims.clone(),
        start_index_map: d.start_index_map.clone(),
        index_vector_dim: d.index_vector_dim,
        operand_batching_dims: d.operand_batching_dims.clone(),
        start_indices_batching_dims: d.start_indices_batching_dims.clone(),
    }
}

fn scatter_dims_to_proto(d: &ScatterDims) -> ScatterDimensionNumbers {
    ScatterDimensionNumbers {
        update_window_dims: d.update_window_dims.clone(),
        inserted_window_dims: d.inserted_window_dims.clone(),
        scatter_dims_to_operand_dims: d.scatter_dims_to_operand_dims.clone(),
        index_vector_dim: d.index_vector_dim,
        input_batching_dims: d.input_batching_dims.clone(),
        scatter_indices_batching_dims: d.scatter_indices_batching_dims.clone(),
    }
}

fn ragged(p: &mut HloInstructionProto) -> &mut RaggedDotDimensionNumbers {
    p.ragged_dot_dimension_numbers
        .get_or_insert_with(Default::default)
}

fn precision_config(p: &mut HloInstructionProto) -> &mut PrecisionConfig {
    p.precision_config.get_or_insert_with(Default::default)
}

/// A flag of the options as written; unwritten, false.
fn triangular_flag(p: &HloInstructionProto, flag: fn(&TriangularSolveOptions) -> bool) -> bool {
    p.triangular_solve_options.as_ref().is_some_and(flag)
}

fn triangular(p: &mut HloInstructionProto) -> &mut TriangularSolveOptions {
    p.triangular_solve_options
        .get_or_insert_with(Default::default)
}

/// Reads each attribute's field; `called` are the instruction's called
/// computations by name, in `called_computation_ids` order.
pub(super) struct ProtoReader<'a> {
    pub p: &'a HloInstructionProto,
    pub called: &'a [ComputationId],
}

impl AttrReader for ProtoReader<'_> {
    type Error = InstructionError;

    fn read(&mut self, a: &'static Attribute) -> Result<AttrValue<'static>, InstructionError> {
        let p = self.p;
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
            ProtoField::TriangularLeftSide => AttrValue::Flag(triangular_flag(p, |o| o.left_side)),
            ProtoField::TriangularLower => AttrValue::Flag(triangular_flag(p, |o| o.lower)),
            ProtoField::TriangularUnitDiagonal => {
                AttrValue::Flag(triangular_flag(p, |o| o.unit_diagonal))
            }
            ProtoField::TriangularTransposeA => AttrValue::Int(
                p.triangular_solve_options
                    .as_ref()
                    .map_or(0, |o| o.transpose_a)
                    .into(),
            ),
            ProtoField::FusionKind => word(&p.fusion_kind),
            ProtoField::Window => p.window.as_ref().map_or(AttrValue::Absent, |w| {
                AttrValue::Window(Cow::Owned(window_from_proto(w)))
            }),
            ProtoField::OutputOperandAliasing => {
                AttrValue::Aliasing(Cow::Owned(aliasing_from_proto(p)))
            }
            ProtoField::Collective => AttrValue::Collective(Cow::Owned(collective_from_proto(p)?)),
            ProtoField::SliceDimensions => AttrValue::Slices(Cow::Owned(
                p.slice_dimensions
                    .iter()
                    .map(|s| SliceDim {
                        start: s.start,
                        limit: s.limit,
                        stride: s.stride,
                    })
                    .collect(),
            )),
            ProtoField::PaddingConfig => p.padding_config.as_ref().map_or(AttrValue::Absent, |c| {
                AttrValue::Padding(Cow::Owned(
                    c.dimensions
                        .iter()
                        .map(|d| PadDim {
                            low: d.edge_padding_low,
                            high: d.edge_padding_high,
                            interior: d.interior_padding,
                        })
                        .collect(),
                ))
            }),
            ProtoField::GatherDimensionNumbers => {
                p.gather_dimension_numbers
                    .as_deref()
                    .map_or(AttrValue::Absent, |d| {
                        AttrValue::GatherDims(Cow::Owned(GatherDims {
                            offset_dims: d.offset_dims.clone(),
                            collapsed_slice_dims: d.collapsed_slice_dims.clone(),
                            start_index_map: d.start_index_map.clone(),
                            operand_batching_dims: d.operand_batching_dims.clone(),
                            start_indices_batching_dims: d.start_indices_batching_dims.clone(),
                            index_vector_dim: d.index_vector_dim,
                        }))
                    })
            }
            ProtoField::ScatterDimensionNumbers => {
                p.scatter_dimension_numbers
                    .as_deref()
                    .map_or(AttrValue::Absent, |d| {
                        AttrValue::ScatterDims(Cow::Owned(ScatterDims {
                            update_window_dims: d.update_window_dims.clone(),
                            inserted_window_dims: d.inserted_window_dims.clone(),
                            scatter_dims_to_operand_dims: d.scatter_dims_to_operand_dims.clone(),
                            input_batching_dims: d.input_batching_dims.clone(),
                            scatter_indices_batching_dims: d.scatter_indices_batching_dims.clone(),
                            index_vector_dim: d.index_vector_dim,
                        }))
                    })
            }
            ProtoField::GatherSliceSizes => ints(&p.gather_slice_sizes),
            ProtoField::IndicesAreSorted => AttrValue::Flag(p.indices_are_sorted),
            ProtoField::UniqueIndices => AttrValue::Flag(p.unique_indices),
            ProtoField::DotDimensionNumbers => p
                .dot_dimension_numbers
                .as_deref()
                .map_or(AttrValue::Absent, |d| {
                    AttrValue::DotDims(Cow::Owned(dot_dims_from_proto(d)))
                }),
            ProtoField::RaggedDotDimensions => p
                .ragged_dot_dimension_numbers
                .as_ref()
                .and_then(|r| r.dot_dimension_numbers.as_ref())
                .map_or(AttrValue::Absent, |d| {
                    AttrValue::DotDims(Cow::Owned(dot_dims_from_proto(d)))
                }),
            ProtoField::RaggedDims => {
                p.ragged_dot_dimension_numbers
                    .as_ref()
                    .map_or(AttrValue::Absent, |r| {
                        AttrValue::RaggedDims(Cow::Owned(RaggedDims {
                            lhs_ragged: r.lhs_ragged_dimensions.clone(),
                            rhs_group: r.rhs_group_dimensions.clone(),
                        }))
                    })
            }
            ProtoField::OperandPrecision => {
                AttrValue::Precision(Cow::Owned(precision_from_proto(p)?))
            }
            ProtoField::DotAlgorithm => AttrValue::Int(
                p.precision_config
                    .as_ref()
                    .map_or(0, |c| c.algorithm)
                    .into(),
            ),
            ProtoField::ConvolutionDimensionNumbers => p
                .convolution_dimension_numbers
                .as_deref()
                .map_or(AttrValue::Absent, |d| {
                    AttrValue::ConvDims(Cow::Owned(conv_dims_from_proto(d)))
                }),
            // An unwritten count reads 0 on the wire; XLA means 1.
            ProtoField::FeatureGroupCount => AttrValue::Int(p.feature_group_count.max(1)),
            ProtoField::BatchGroupCount => AttrValue::Int(p.batch_group_count.max(1)),
            ProtoField::ChannelId => {
                channel_from_proto(p).map_or(AttrValue::Absent, AttrValue::Int)
            }
            ProtoField::SourceTargetPairs => AttrValue::Pairs(Cow::Owned(pairs_from_proto(p))),
            ProtoField::PermuteSliceSizes => {
                AttrValue::IntLists(Cow::Owned(slice_sizes_from_proto(p)?))
            }
            ProtoField::InfeedConfig => {
                AttrValue::Word(Cow::Owned(utf8_config(&p.infeed_config, "infeed_config")?))
            }
            ProtoField::CrossProgramPrefetchIndex => p
                .cross_program_prefetch_index
                .map_or(AttrValue::Absent, |i| AttrValue::Int(i.into())),
            ProtoField::Called(i) => self
                .called
                .get(i)
                .map_or(AttrValue::Absent, |&c| AttrValue::Callee(c)),
        })
    }

    fn invalid(&mut self, a: &'static Attribute, e: FieldError) -> InstructionError {
        let (opcode, field) = (self.p.opcode.clone(), a.proto.name());
        match e {
            FieldError::Missing => InstructionError::MissingField { opcode, field },
            FieldError::NotOneDimension(dims) => InstructionError::NotOneDimension { opcode, dims },
            FieldError::Unknown { written, choices } => InstructionError::UnknownValue {
                field,
                written,
                choices,
            },
            FieldError::OutOfRange(value) => InstructionError::OutOfRange { field, value },
            FieldError::WrongKind(kind) => InstructionError::WrongKind { field, kind },
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
        ProtoField::SliceDimensions => !p.slice_dimensions.is_empty(),
        ProtoField::PaddingConfig => p.padding_config.is_some(),
        ProtoField::GatherDimensionNumbers => p.gather_dimension_numbers.is_some(),
        ProtoField::ScatterDimensionNumbers => p.scatter_dimension_numbers.is_some(),
        ProtoField::GatherSliceSizes => !p.gather_slice_sizes.is_empty(),
        ProtoField::IndicesAreSorted => p.indices_are_sorted,
        ProtoField::UniqueIndices => p.unique_indices,
        ProtoField::DotDimensionNumbers => p.dot_dimension_numbers.is_some(),
        ProtoField::RaggedDotDimensions | ProtoField::RaggedDims => {
            p.ragged_dot_dimension_numbers.is_some()
        }
        ProtoField::OperandPrecision => p
            .precision_config
            .as_ref()
            .is_some_and(|c| !c.operand_precision.is_empty()),
        ProtoField::DotAlgorithm => p
            .precision_config
            .as_ref()
            .is_some_and(|c| c.algorithm != 0),
        ProtoField::ConvolutionDimensionNumbers => p.convolution_dimension_numbers.is_some(),
        // XLA writes 1 on every instruction: 1 says nothing.
        ProtoField::FeatureGroupCount => p.feature_group_count > 1,
        ProtoField::BatchGroupCount => p.batch_group_count > 1,
        ProtoField::ChannelId => p.channel_id > 0,
        ProtoField::SourceTargetPairs => !p.source_target_pairs.is_empty(),
        ProtoField::PermuteSliceSizes => !p.dynamic_slice_sizes.is_empty(),
        ProtoField::InfeedConfig => !p.infeed_config.is_empty(),
        ProtoField::CrossProgramPrefetchIndex => p.cross_program_prefetch_index.is_some(),
        ProtoField::Called(_) => !p.called_computation_ids.is_empty(),
    }
}

/// A described field written on an op that does not carry it: it would be
/// lost, so it is refused by name. (Called computations are checked with
/// the others'.)
pub(super) fn stray_field(p: &HloInstructionProto, opcode: &str) -> Result<(), InstructionError> {
    // An op's own fields are read, not stray: only a field it does not
    // hold costs the (allocating) walk over every carrier.
    let own = Description::of(opcode).map_or(&[][..], |d| d.attributes);
    let stray = crate::ir::op::description::DESCRIPTIONS
        .iter()
        .flat_map(|d| d.attributes)
        .map(|a| a.proto)
        .filter(|f| !matches!(f, ProtoField::Called(_)))
        .filter(|&f| !own.iter().any(|a| a.proto == f) && is_written(p, f))
        .find(|&f| !Description::carriers(f).contains(&opcode));
    match stray {
        None => Ok(()),
        Some(field) => Err(InstructionError::StrayField {
            opcode: opcode.to_string(),
            field: field.name(),
            carriers: and_list(&Description::carriers(field)),
        }),
    }
}

/// A described op that calls computations calls as many as it has
/// callee attributes.
pub(super) fn check_callees(
    d: &Description,
    called: &[ComputationId],
) -> Result<(), InstructionError> {
    let needed = d
        .attributes
        .iter()
        .filter(|a| matches!(a.proto, ProtoField::Called(_)))
        .count();
    if needed == 0 || needed == called.len() {
        return Ok(());
    }
    Err(InstructionError::Callees {
        opcode: d.opcode,
        keys: d.callees(),
        has: called.len(),
    })
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}
