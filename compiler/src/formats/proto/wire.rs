//! What a serialized module holds, read from the protobuf wire format
//! itself. prost skips fields a message does not declare, as protobuf
//! does; hlatc must not, so every field of an incoming proto is checked
//! against the fields hlatc models ([`check_modeled`]) before it is
//! decoded, and one it does not model is refused by its path and XLA's
//! name. The same walk tells an `xla.HloProto` wrapper (what
//! `--xla_dump_hlo_as_proto` writes) from a bare `HloModuleProto`.

/// One protobuf message: the fields hlatc's `messages.rs` declares (with
/// the message type of each nested field) and XLA's names for some that it
/// does not, for errors.
pub(crate) struct Schema {
    pub name: &'static str,
    pub fields: &'static [(u32, &'static str, Option<&'static Schema>)],
    pub unmodeled: &'static [(u32, &'static str)],
    /// Unmodeled integer fields XLA writes even at their default, which
    /// therefore say nothing when they hold it (a layout's
    /// `tail_padding_alignment_in_elements` of 1): accepted at that value,
    /// refused at any other.
    pub defaults: &'static [(u32, u64)],
}

macro_rules! schema {
    ($id:ident, $name:literal, [$(($n:literal, $f:literal $(, $m:ident)?)),* $(,)?], [$(($u:literal, $un:literal)),* $(,)?] $(, defaults [$(($d:literal, $dv:literal)),*])?) => {
        pub(crate) static $id: Schema = Schema {
            name: $name,
            fields: &[$(($n, $f, schema!(@nested $($m)?))),*],
            unmodeled: &[$(($u, $un)),*],
            defaults: &[$($(($d, $dv)),*)?],
        };
    };
    (@nested) => { None };
    (@nested $m:ident) => { Some(&$m) };
}

schema!(
    HLO_MODULE,
    "HloModuleProto",
    [
        (1, "name"),
        (2, "entry_computation_name"),
        (3, "computations", HLO_COMPUTATION),
        (4, "host_program_shape", PROGRAM_SHAPE),
        (5, "id"),
        (6, "entry_computation_id"),
        (7, "schedule", SCHEDULE),
        (8, "input_output_alias", IO_ALIAS),
        (17, "stack_frame_index", STACK_FRAME_INDEX),
        (18, "buffer_donor", BUFFER_DONOR),
        (19, "frontend_attributes", FRONTEND_ATTRIBUTES),
        (15, "device_assignment", DEVICE_ASSIGNMENT),
    ],
    [
        (10, "cross_program_prefetches"),
        (11, "is_dynamic"),
        (12, "spmd_output_sharding"),
        (13, "profile_info"),
        (14, "spmd_parameters_shardings"),
        (16, "use_auto_spmd_partitioning"),
    ]
);
schema!(
    TRIANGULAR_SOLVE_OPTIONS,
    "TriangularSolveOptions",
    [
        (1, "left_side"),
        (2, "lower"),
        (3, "unit_diagonal"),
        (4, "transpose_a"),
    ],
    []
);
schema!(CHOLESKY_OPTIONS, "CholeskyOptions", [(1, "lower")], []);
schema!(
    DEVICE_ASSIGNMENT,
    "DeviceAssignmentProto",
    [
        (1, "replica_count"),
        (2, "computation_count"),
        (3, "computation_devices", COMPUTATION_DEVICE),
    ],
    []
);
schema!(
    COMPUTATION_DEVICE,
    "DeviceAssignmentProto.ComputationDevice",
    [(1, "replica_device_ids")],
    []
);
schema!(
    SCHEDULE,
    "HloScheduleProto",
    [(1, "sequences", SCHEDULE_ENTRY)],
    []
);
schema!(
    SCHEDULE_ENTRY,
    "HloScheduleProto.SequencesEntry",
    [(1, "key"), (2, "value", INSTRUCTION_SEQUENCE)],
    []
);
schema!(
    INSTRUCTION_SEQUENCE,
    "InstructionSequence",
    [(1, "instruction_ids")],
    []
);
schema!(
    HLO_COMPUTATION,
    "HloComputationProto",
    [
        (1, "name"),
        (2, "instructions", HLO_INSTRUCTION),
        (4, "program_shape", PROGRAM_SHAPE),
        (5, "id"),
        (6, "root_id"),
        (7, "is_fusion_computation"),
        (8, "execution_thread"),
    ],
    []
);
schema!(
    HLO_INSTRUCTION,
    "HloInstructionProto",
    [
        (1, "name"),
        (2, "opcode"),
        (3, "shape", SHAPE),
        (7, "metadata", OP_METADATA),
        (8, "literal", LITERAL),
        (9, "parameter_number"),
        (11, "fusion_kind"),
        (13, "tuple_index"),
        (14, "dimensions"),
        (17, "slice_dimensions", SLICE_DIMENSIONS),
        (20, "dynamic_slice_sizes"),
        (21, "padding_config", PADDING_CONFIG),
        (28, "custom_call_target"),
        (30, "dot_dimension_numbers", DOT_DIMENSION_NUMBERS),
        (
            90,
            "ragged_dot_dimension_numbers",
            RAGGED_DOT_DIMENSION_NUMBERS
        ),
        (33, "gather_dimension_numbers", GATHER_DIMENSION_NUMBERS),
        (34, "gather_slice_sizes"),
        (35, "id"),
        (36, "operand_ids"),
        (37, "control_predecessor_ids"),
        (38, "called_computation_ids"),
        (40, "sharding", OP_SHARDING),
        (43, "backend_config"),
        (48, "scatter_dimension_numbers", SCATTER_DIMENSION_NUMBERS),
        (51, "precision_config", PRECISION_CONFIG),
        (63, "comparison_direction"),
        (65, "custom_call_has_side_effect"),
        (67, "indices_are_sorted"),
        (68, "frontend_attributes", FRONTEND_ATTRIBUTES),
        (69, "unique_indices"),
        (70, "rng_algorithm"),
        (72, "comparison_type"),
        (77, "custom_call_api_version"),
        (61, "parameter_replication", PARAMETER_REPLICATION),
        (60, "is_stable"),
        (89, "is_composite"),
        (23, "distribution"),
        (87, "collective_device_list", COLLECTIVE_DEVICE_LIST),
        (92, "iota_collective_device_list", IOTA_REPLICA_GROUP_LIST),
        (
            93,
            "mesh_axes_replica_group_list",
            MESH_AXES_REPLICA_GROUP_LIST
        ),
        (71, "use_global_device_ids"),
        (56, "constrain_layout"),
        (57, "operand_shapes_with_layout", SHAPE),
        (74, "output_operand_aliasing", OUTPUT_OPERAND_ALIASING),
        (52, "source_target_pairs", SOURCE_TARGET),
        (49, "replica_groups", REPLICA_GROUP),
        (26, "channel_id"),
        (47, "is_host_transfer"),
        (79, "async_execution_thread"),
        (18, "exponent_bits"),
        (19, "mantissa_bits"),
        (81, "k"),
        (85, "largest"),
        (59, "triangular_solve_options", TRIANGULAR_SOLVE_OPTIONS),
        (62, "cholesky_options", CHOLESKY_OPTIONS),
        (31, "fft_type"),
        (32, "fft_length"),
        (76, "custom_call_schedule"),
        (24, "epsilon"),
        (25, "feature_index"),
        (54, "domain_entry_sharding", OP_SHARDING),
        (55, "domain_exit_sharding", OP_SHARDING),
        (80, "cross_program_prefetch_index"),
        (27, "infeed_config"),
        (22, "outfeed_config"),
        (29, "outfeed_shape", SHAPE),
        (15, "window", WINDOW),
        (
            16,
            "convolution_dimension_numbers",
            CONVOLUTION_DIMENSION_NUMBERS
        ),
        (50, "feature_group_count"),
        (58, "batch_group_count"),
        (66, "delta"),
        (75, "padding_type"),
        (82, "statistics_viz", STATISTICS_VIZ),
        (88, "original_value", ORIGINAL_VALUE),
        (91, "result_accuracy", RESULT_ACCURACY),
    ],
    [
        (45, "all_reduce_id"),
        (73, "is_cross_program_prefetch"),
        (86, "dot_sparsity"),
    ]
);
schema!(
    STATISTICS_VIZ,
    "StatisticsViz",
    [(1, "stat_index_to_visualize"), (2, "statistics", STATISTIC)],
    []
);
schema!(
    STATISTIC,
    "Statistic",
    [(1, "stat_name"), (2, "stat_val")],
    []
);
schema!(
    RESULT_ACCURACY,
    "ResultAccuracy",
    [(1, "mode"), (2, "tolerance", TOLERANCE)],
    []
);
schema!(
    TOLERANCE,
    "ResultAccuracy.Tolerance",
    [(1, "atol"), (2, "rtol"), (3, "ulps")],
    []
);
schema!(
    ORIGINAL_VALUE,
    "OriginalValueProto",
    [(1, "leaves", ORIGINAL_TENSOR), (2, "is_synthetic_call")],
    []
);
schema!(
    ORIGINAL_TENSOR,
    "OriginalTensorProto",
    [
        (1, "leaf_shape_index"),
        (2, "original_array", ORIGINAL_ARRAY)
    ],
    []
);
schema!(
    ORIGINAL_ARRAY,
    "OriginalArrayProto",
    [(1, "instruction_name"), (2, "shape_index")],
    []
);
schema!(REPLICA_GROUP, "ReplicaGroup", [(1, "replica_ids")], []);
schema!(
    PARAMETER_REPLICATION,
    "ParameterReplication",
    [(1, "replicated_at_leaf_buffers")],
    []
);
schema!(
    SOURCE_TARGET,
    "SourceTarget",
    [(1, "source"), (2, "target")],
    []
);
schema!(
    COLLECTIVE_DEVICE_LIST,
    "CollectiveDeviceListProto",
    [
        (1, "replica_groups", REPLICA_GROUP),
        (2, "iota_replica_group_list", IOTA_REPLICA_GROUP_LIST),
    ],
    []
);
schema!(
    MESH_AXES_REPLICA_GROUP_LIST,
    "MeshAxesReplicaGroupListProto",
    [(1, "mesh", MESH), (2, "axes", AXIS_REF)],
    []
);
schema!(
    MESH,
    "MeshProto",
    [
        (1, "axes", MESH_AXIS),
        (2, "device_ids"),
        (3, "iota_device_ids", IOTA_DEVICE_IDS),
    ],
    []
);
schema!(
    MESH_AXIS,
    "MeshProto.MeshAxis",
    [(1, "name"), (2, "size")],
    []
);
schema!(
    IOTA_DEVICE_IDS,
    "MeshProto.IotaDeviceIds",
    [(1, "reshape_dims"), (2, "transpose_perm")],
    []
);
schema!(
    AXIS_REF,
    "AxisRefProto",
    [(1, "mesh_axis_index"), (2, "sub_axis_info", SUB_AXIS)],
    []
);
schema!(
    SUB_AXIS,
    "AxisRefProto.SubAxis",
    [(1, "pre_size"), (2, "size")],
    []
);
schema!(
    IOTA_REPLICA_GROUP_LIST,
    "IotaReplicaGroupListProto",
    [
        (1, "num_replica_groups"),
        (2, "num_devices_per_group"),
        (3, "iota_reshape_dims"),
        (4, "iota_transpose_perm"),
    ],
    []
);
schema!(
    SHAPE,
    "ShapeProto",
    [
        (2, "element_type"),
        (3, "dimensions"),
        (4, "tuple_shapes", SHAPE),
        (5, "layout", LAYOUT),
        (6, "is_dynamic_dimension"),
    ],
    []
);
schema!(
    LAYOUT,
    "LayoutProto",
    [
        (1, "minor_to_major"),
        (6, "tiles", TILE),
        (7, "element_size_in_bits"),
        (8, "memory_space"),
        (16, "tail_padding_alignment_in_elements"),
        (17, "split_configs", SPLIT_CONFIG),
    ],
    [
        (9, "dim_level_types"),
        (10, "physical_shape"),
        (11, "index_primitive_type"),
        (12, "pointer_primitive_type"),
        (13, "dim_unique"),
        (14, "dim_ordered"),
        (15, "dynamic_shape_metadata_prefix_bytes"),
    ]
);
schema!(TILE, "TileProto", [(1, "dimensions")], []);
schema!(
    SPLIT_CONFIG,
    "SplitConfigProto",
    [(1, "dimension"), (2, "split_indices")],
    []
);
schema!(
    PROGRAM_SHAPE,
    "ProgramShapeProto",
    [
        (1, "parameters", SHAPE),
        (2, "result", SHAPE),
        (3, "parameter_names")
    ],
    []
);
schema!(
    LITERAL,
    "LiteralProto",
    [
        (1, "shape", SHAPE),
        (2, "preds"),
        (3, "u8s"),
        (4, "s32s"),
        (5, "s64s"),
        (6, "u32s"),
        (7, "u64s"),
        (8, "f32s"),
        (9, "f64s"),
        (11, "f16s"),
        (12, "c64s"),
        (13, "bf16s"),
        (15, "s8s"),
        (16, "u16s"),
        (17, "s16s"),
        (18, "c128s"),
        (19, "f8e5m2s"),
        (20, "f8e4m3fns"),
        (21, "s4s"),
        (22, "u4s"),
        (23, "f8e4m3b11fnuzs"),
        (24, "f8e5m2fnuzs"),
        (25, "f8e4m3fnuzs"),
        (26, "s2s"),
        (27, "u2s"),
        (28, "f8e4m3s"),
        (29, "f8e3m4s"),
        (32, "f4e2m1fns"),
        (33, "f8e8m0fnus"),
        (10, "tuple_literals", LITERAL),
    ],
    [(14, "sparse_indices"), (30, "s1s"), (31, "u1s"),]
);
schema!(
    OP_SHARDING,
    "OpSharding",
    [
        (1, "type"),
        (2, "tile_shape", SHAPE),
        (3, "tile_assignment_dimensions"),
        (4, "tile_assignment_devices"),
        (5, "tuple_shardings", OP_SHARDING),
        (6, "replicate_on_last_tile_dim"),
        (7, "metadata", OP_METADATA),
        (8, "last_tile_dims"),
        (9, "iota_reshape_dims"),
        (10, "iota_transpose_perm"),
        (11, "is_shard_group"),
        (12, "shard_group_id"),
        (13, "shard_group_type"),
    ],
    [(14, "named_sharding")]
);
schema!(
    OP_METADATA,
    "OpMetadata",
    [
        (1, "op_type"),
        (2, "op_name"),
        (3, "source_file"),
        (4, "source_line"),
        (12, "deduplicated_name"),
        (15, "stack_frame_id"),
        (16, "scheduling_name"),
        (17, "source_end_line"),
        (18, "source_column"),
        (19, "source_end_column"),
    ],
    [
        (5, "profile_type"),
        (8, "size_of_generated_code_in_bytes"),
        (9, "size_of_memory_working_set_in_bytes"),
        (10, "profile_info"),
        (13, "preserve_layout")
    ]
);
schema!(
    STACK_FRAME_INDEX,
    "StackFrameIndexProto",
    [
        (1, "file_names"),
        (2, "function_names"),
        (3, "file_locations", FILE_LOCATION),
        (4, "stack_frames", STACK_FRAME),
    ],
    []
);
schema!(
    FILE_LOCATION,
    "StackFrameIndexProto.FileLocation",
    [
        (1, "file_name_id"),
        (2, "function_name_id"),
        (3, "line"),
        (4, "column"),
        (5, "end_line"),
        (6, "end_column"),
    ],
    []
);
schema!(
    STACK_FRAME,
    "StackFrameIndexProto.StackFrame",
    [(1, "file_location_id"), (2, "parent_frame_id")],
    []
);
schema!(
    FRONTEND_ATTRIBUTES,
    "FrontendAttributes",
    [(1, "map", STRING_MAP_ENTRY)],
    []
);
schema!(
    STRING_MAP_ENTRY,
    "FrontendAttributes.MapEntry",
    [(1, "key"), (2, "value")],
    []
);
schema!(
    DOT_DIMENSION_NUMBERS,
    "DotDimensionNumbers",
    [
        (1, "lhs_contracting_dimensions"),
        (2, "rhs_contracting_dimensions"),
        (3, "lhs_batch_dimensions"),
        (4, "rhs_batch_dimensions"),
    ],
    []
);
schema!(
    RAGGED_DOT_DIMENSION_NUMBERS,
    "RaggedDotDimensionNumbers",
    [
        (1, "dot_dimension_numbers", DOT_DIMENSION_NUMBERS),
        (2, "lhs_ragged_dimensions"),
        (3, "rhs_group_dimensions"),
    ],
    []
);
schema!(
    OUTPUT_OPERAND_ALIASING,
    "OutputOperandAliasing",
    [
        (1, "output_shape_index"),
        (2, "operand_index"),
        (3, "operand_shape_index"),
    ],
    []
);
schema!(WINDOW, "Window", [(1, "dimensions", WINDOW_DIMENSION)], []);
schema!(
    WINDOW_DIMENSION,
    "WindowDimension",
    [
        (1, "size"),
        (2, "stride"),
        (3, "padding_low"),
        (4, "padding_high"),
        (5, "window_dilation"),
        (6, "base_dilation"),
        (7, "window_reversal"),
    ],
    []
);
schema!(
    CONVOLUTION_DIMENSION_NUMBERS,
    "ConvolutionDimensionNumbers",
    [
        (7, "input_batch_dimension"),
        (8, "input_feature_dimension"),
        (11, "input_spatial_dimensions"),
        (3, "kernel_input_feature_dimension"),
        (4, "kernel_output_feature_dimension"),
        (6, "kernel_spatial_dimensions"),
        (9, "output_batch_dimension"),
        (10, "output_feature_dimension"),
        (12, "output_spatial_dimensions"),
    ],
    []
);
schema!(
    GATHER_DIMENSION_NUMBERS,
    "GatherDimensionNumbers",
    [
        (1, "offset_dims"),
        (2, "collapsed_slice_dims"),
        (3, "start_index_map"),
        (4, "index_vector_dim"),
        (5, "operand_batching_dims"),
        (6, "start_indices_batching_dims"),
    ],
    []
);
schema!(
    SCATTER_DIMENSION_NUMBERS,
    "ScatterDimensionNumbers",
    [
        (1, "update_window_dims"),
        (2, "inserted_window_dims"),
        (3, "scatter_dims_to_operand_dims"),
        (4, "index_vector_dim"),
        (5, "input_batching_dims"),
        (6, "scatter_indices_batching_dims"),
    ],
    []
);
schema!(
    SLICE_DIMENSIONS,
    "HloInstructionProto.SliceDimensions",
    [(1, "start"), (2, "limit"), (3, "stride")],
    []
);
schema!(
    PADDING_CONFIG,
    "PaddingConfig",
    [(1, "dimensions", PADDING_DIMENSION)],
    []
);
schema!(
    PADDING_DIMENSION,
    "PaddingConfig.PaddingConfigDimension",
    [
        (1, "edge_padding_low"),
        (2, "edge_padding_high"),
        (3, "interior_padding")
    ],
    []
);
schema!(
    PRECISION_CONFIG,
    "PrecisionConfig",
    [(1, "operand_precision"), (2, "algorithm")],
    []
);
schema!(
    IO_ALIAS,
    "HloInputOutputAliasProto",
    [(1, "entries", ALIAS_ENTRY)],
    []
);
schema!(
    ALIAS_ENTRY,
    "HloInputOutputAliasProto.AliasEntryProto",
    [
        (1, "output_shape_index"),
        (2, "parameter_number"),
        (3, "parameter_shape_index"),
        (4, "kind")
    ],
    []
);
schema!(
    BUFFER_DONOR,
    "HloBufferDonorProto",
    [(1, "entries", BUFFER_DONOR_ENTRY)],
    []
);
schema!(
    BUFFER_DONOR_ENTRY,
    "HloBufferDonorProto.BufferDonorEntryProto",
    [(1, "parameter_number"), (2, "parameter_shape_index")],
    []
);

/// A field read off the wire: its number and, when length-delimited, its
/// payload.
struct Field<'b> {
    number: u32,
    payload: Option<&'b [u8]>,
    /// The value of a varint field.
    value: Option<u64>,
}

fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, in order; `None` when the bytes are not a
/// well-formed message.
fn fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let key = varint(bytes, &mut pos)?;
        let number = u32::try_from(key >> 3).ok().filter(|&n| n > 0)?;
        let mut value = None;
        let payload = match key & 7 {
            0 => {
                value = Some(varint(bytes, &mut pos)?);
                None
            }
            1 => {
                pos = pos.checked_add(8).filter(|&p| p <= bytes.len())?;
                None
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|&e| e <= bytes.len())?;
                let p = &bytes[pos..end];
                pos = end;
                Some(p)
            }
            5 => {
                pos = pos.checked_add(4).filter(|&p| p <= bytes.len())?;
                None
            }
            // Groups (3, 4) are not in XLA's protos; 6 and 7 do not exist.
            _ => return None,
        };
        out.push(Field {
            number,
            payload,
            value,
        });
    }
    Some(out)
}

/// Checks that every field in `bytes`, at any depth, is one `schema`
/// models. Malformed bytes pass: decoding reports them.
pub(crate) fn check_modeled(bytes: &[u8], schema: &'static Schema) -> Result<(), String> {
    walk(bytes, schema, schema.name.to_string(), 0)
}

fn walk(bytes: &[u8], schema: &'static Schema, path: String, depth: usize) -> Result<(), String> {
    // Deeper than any module nests (shapes are capped at 64 tuple levels).
    if depth > 200 {
        return Err(format!("{path}: messages nest too deep"));
    }
    let Some(fields) = fields(bytes) else {
        return Ok(());
    };
    let mut seen: Vec<(u32, usize)> = Vec::new();
    for f in fields {
        // An empty length-delimited field (an empty message, string or
        // list, as XLA writes `statistics_viz {}`) holds nothing to lose.
        let at_default = f.payload.is_some_and(<[u8]>::is_empty)
            || schema
                .defaults
                .iter()
                .any(|&(n, v)| n == f.number && f.value == Some(v));
        if at_default {
            continue;
        }
        let Some(&(_, name, nested)) = schema.fields.iter().find(|(n, ..)| *n == f.number) else {
            let xla_name = schema
                .unmodeled
                .iter()
                .find(|(n, _)| *n == f.number)
                .map_or_else(String::new, |(_, name)| format!(" ({name})"));
            return Err(format!(
                "{path}: field {}{xla_name} of {} is not modeled by hlatc",
                f.number, schema.name
            ));
        };
        if let (Some(nested), Some(payload)) = (nested, f.payload) {
            let index = match seen.iter_mut().find(|(n, _)| *n == f.number) {
                Some((_, i)) => {
                    *i += 1;
                    *i
                }
                None => {
                    seen.push((f.number, 0));
                    0
                }
            };
            walk(
                payload,
                nested,
                format!("{path}.{name}[{index}]"),
                depth + 1,
            )?;
        }
    }
    Ok(())
}

/// The module inside an `xla.HloProto` wrapper, if `bytes` is one (its
/// fields are only `hlo_module` (1) and `buffer_assignment` (3), and the
/// first holds computations), and whether a buffer assignment came with it.
pub(crate) fn unwrap_hlo_proto(bytes: &[u8]) -> Option<(&[u8], bool)> {
    let top = fields(bytes)?;
    if top.iter().any(|f| f.number != 1 && f.number != 3) {
        return None;
    }
    // A module's field 1 is its name, which never reads as a message with
    // computations (field 3) in it.
    let module = top.iter().find(|f| f.number == 1)?.payload?;
    let inner = fields(module)?;
    if !inner.iter().any(|f| f.number == 3 && f.payload.is_some()) {
        return None;
    }
    let has_assignment = top.iter().any(|f| f.number == 3);
    Some((module, has_assignment))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message `messages.rs` declares, with its schema here.
    const DECLARED: [(&str, &Schema); 55] = [
        ("TriangularSolveOptions", &TRIANGULAR_SOLVE_OPTIONS),
        ("CholeskyOptions", &CHOLESKY_OPTIONS),
        ("HloModuleProto", &HLO_MODULE),
        ("DeviceAssignmentProto", &DEVICE_ASSIGNMENT),
        ("ComputationDevice", &COMPUTATION_DEVICE),
        ("HloScheduleProto", &SCHEDULE),
        ("InstructionSequence", &INSTRUCTION_SEQUENCE),
        ("HloComputationProto", &HLO_COMPUTATION),
        ("SliceDimensions", &SLICE_DIMENSIONS),
        ("HloInstructionProto", &HLO_INSTRUCTION),
        ("ShapeProto", &SHAPE),
        ("LayoutProto", &LAYOUT),
        ("TileProto", &TILE),
        ("SplitConfigProto", &SPLIT_CONFIG),
        ("ProgramShapeProto", &PROGRAM_SHAPE),
        ("LiteralProto", &LITERAL),
        ("OpSharding", &OP_SHARDING),
        ("OpMetadata", &OP_METADATA),
        ("StackFrameIndexProto", &STACK_FRAME_INDEX),
        ("FileLocationProto", &FILE_LOCATION),
        ("StackFrameProto", &STACK_FRAME),
        ("FrontendAttributes", &FRONTEND_ATTRIBUTES),
        ("DotDimensionNumbers", &DOT_DIMENSION_NUMBERS),
        ("RaggedDotDimensionNumbers", &RAGGED_DOT_DIMENSION_NUMBERS),
        ("WindowProto", &WINDOW),
        ("OutputOperandAliasing", &OUTPUT_OPERAND_ALIASING),
        ("WindowDimension", &WINDOW_DIMENSION),
        (
            "ConvolutionDimensionNumbers",
            &CONVOLUTION_DIMENSION_NUMBERS,
        ),
        ("GatherDimensionNumbers", &GATHER_DIMENSION_NUMBERS),
        ("ScatterDimensionNumbers", &SCATTER_DIMENSION_NUMBERS),
        ("PaddingConfigDimension", &PADDING_DIMENSION),
        ("PaddingConfig", &PADDING_CONFIG),
        ("PrecisionConfig", &PRECISION_CONFIG),
        ("AliasEntryProto", &ALIAS_ENTRY),
        ("HloInputOutputAliasProto", &IO_ALIAS),
        ("HloBufferDonorProto", &BUFFER_DONOR),
        ("BufferDonorEntryProto", &BUFFER_DONOR_ENTRY),
        ("ReplicaGroup", &REPLICA_GROUP),
        ("ParameterReplication", &PARAMETER_REPLICATION),
        ("SourceTarget", &SOURCE_TARGET),
        ("CollectiveDeviceListProto", &COLLECTIVE_DEVICE_LIST),
        ("IotaReplicaGroupListProto", &IOTA_REPLICA_GROUP_LIST),
        (
            "MeshAxesReplicaGroupListProto",
            &MESH_AXES_REPLICA_GROUP_LIST,
        ),
        ("MeshProto", &MESH),
        ("MeshAxisProto", &MESH_AXIS),
        ("IotaDeviceIdsProto", &IOTA_DEVICE_IDS),
        ("AxisRefProto", &AXIS_REF),
        ("SubAxisProto", &SUB_AXIS),
        ("StatisticsViz", &STATISTICS_VIZ),
        ("Statistic", &STATISTIC),
        ("ResultAccuracyProto", &RESULT_ACCURACY),
        ("ToleranceProto", &TOLERANCE),
        ("OriginalValueProto", &ORIGINAL_VALUE),
        ("OriginalTensorProto", &ORIGINAL_TENSOR),
        ("OriginalArrayProto", &ORIGINAL_ARRAY),
    ];

    /// The tags of each `pub struct` in `messages.rs`, read from its
    /// `#[prost(..., tag = "N")]` attributes.
    fn declared_tags() -> Vec<(String, Vec<u32>)> {
        let src = include_str!("messages.rs");
        let mut out: Vec<(String, Vec<u32>)> = Vec::new();
        for line in src.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("pub struct ") {
                let name = rest.split_whitespace().next().unwrap().to_string();
                out.push((name, Vec::new()));
            } else if let Some(at) = line.find("tag = \"") {
                let rest = &line[at + 7..];
                let tag: u32 = rest[..rest.find('"').unwrap()].parse().unwrap();
                out.last_mut().unwrap().1.push(tag);
            }
        }
        out
    }

    #[test]
    fn the_schemas_are_exactly_what_the_messages_declare() {
        let declared = declared_tags();
        assert_eq!(declared.len(), DECLARED.len(), "{declared:?}");
        for (name, mut tags) in declared {
            let schema = DECLARED
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("{name} has no schema in wire.rs"))
                .1;
            let mut modeled: Vec<u32> = schema.fields.iter().map(|f| f.0).collect();
            tags.sort_unstable();
            modeled.sort_unstable();
            assert_eq!(tags, modeled, "{name}: declared tags vs schema");
            for (n, _) in schema.unmodeled {
                assert!(!tags.contains(n), "{name}: field {n} is both");
            }
        }
    }
}
