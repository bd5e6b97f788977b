//! The subset of XLA's protos hlatc reads and writes (field numbers from
//! xla/service/hlo.proto and xla/xla_data.proto): hlatc's one table of
//! them. Each message's fields are listed once, and `messages!`
//! (`schema.rs`) makes of the list both the prost struct and the schema
//! the wire walk (`wire.rs`) refuses unmodeled fields by; `unmodeled`
//! gives XLA's names of fields hlatc does not model, so that a refusal can
//! name them.

pub use super::listed_group::ListedGroup;
use super::schema::{messages, FieldType, Modeled, Schema};
pub use super::sized_once::SizedOnce;
use std::collections::BTreeMap;

/// For the wire walk: on the wire, a listed group is a `ReplicaGroup`.
impl FieldType for ListedGroup {
    fn nested() -> Option<&'static Schema> {
        Some(ReplicaGroup::schema())
    }
}

/// A message sized once is, on the wire, the message.
impl<M: FieldType> FieldType for SizedOnce<M> {
    fn nested() -> Option<&'static Schema> {
        M::nested()
    }
}

messages! {
    message HloModuleProto {
        1 name: String [string],
        2 entry_computation_name: String [string],
        /// Each computation, instruction and shape is sized once
        /// ([`SizedOnce`]): prost would size them at every level.
        3 computations: Vec<SizedOnce<HloComputationProto>> [message, repeated],
        4 host_program_shape: Option<ProgramShapeProto> [message, optional],
        5 id: i64 [int64],
        6 entry_computation_id: i64 [int64],
        7 schedule: Option<HloScheduleProto> [message, optional],
        8 input_output_alias: Option<HloInputOutputAliasProto> [message, optional],
        17 stack_frame_index: Option<StackFrameIndexProto> [message, optional],
        18 buffer_donor: Option<HloBufferDonorProto> [message, optional],
        19 frontend_attributes: Option<FrontendAttributes> [message, optional],
        15 device_assignment: Option<DeviceAssignmentProto> [message, optional],
    } unmodeled {
        10 cross_program_prefetches,
        11 is_dynamic,
        12 spmd_output_sharding,
        13 profile_info,
        14 spmd_parameters_shardings,
        16 use_auto_spmd_partitioning,
    }

    /// xla_data.proto's `TriangularSolveOptions`.
    message TriangularSolveOptions {
        1 left_side: bool [bool],
        2 lower: bool [bool],
        3 unit_diagonal: bool [bool],
        /// 0 is `TRANSPOSE_INVALID`, what XLA writes when none is given.
        4 transpose_a: i32 [int32],
    }

    /// xla_data.proto's `CholeskyOptions`.
    message CholeskyOptions {
        1 lower: bool [bool],
    }

    /// xla_data.proto's `DeviceAssignmentProto`.
    message DeviceAssignmentProto {
        1 replica_count: i32 [int32],
        2 computation_count: i32 [int32],
        3 computation_devices: Vec<ComputationDevice> [message, repeated],
    }

    message ComputationDevice as "DeviceAssignmentProto.ComputationDevice" {
        1 replica_device_ids: Vec<i64> [int64, repeated],
    }

    /// `is_scheduled`: per computation id, its instructions in schedule order.
    message HloScheduleProto {
        1 sequences: BTreeMap<i64, InstructionSequence> [btree_map = "int64, message"] entry "SequencesEntry",
    }

    message InstructionSequence {
        1 instruction_ids: Vec<i64> [int64, repeated],
    }

    message HloComputationProto {
        1 name: String [string],
        2 instructions: Vec<SizedOnce<HloInstructionProto>> [message, repeated],
        4 program_shape: Option<ProgramShapeProto> [message, optional],
        5 id: i64 [int64],
        6 root_id: i64 [int64],
        7 is_fusion_computation: bool [bool],
        /// XLA writes `main` for the main thread; hlatc writes nothing.
        8 execution_thread: String [string],
    }

    message SliceDimensions as "HloInstructionProto.SliceDimensions" {
        1 start: i64 [int64],
        2 limit: i64 [int64],
        3 stride: i64 [int64],
    }

    /// Rare, large sub-messages are boxed: tens of thousands of instructions
    /// are built per module, and inline they would triple its footprint.
    message HloInstructionProto {
        1 name: String [string],
        2 opcode: String [string],
        3 shape: Option<SizedOnce<ShapeProto>> [message, optional],
        7 metadata: Option<Box<OpMetadata>> [message, optional, boxed],
        8 literal: Option<Box<LiteralProto>> [message, optional, boxed],
        9 parameter_number: i64 [int64],
        11 fusion_kind: String [string],
        13 tuple_index: i64 [int64],
        14 dimensions: Vec<i64> [int64, repeated],
        17 slice_dimensions: Vec<SliceDimensions> [message, repeated],
        20 dynamic_slice_sizes: Vec<i64> [int64, repeated],
        21 padding_config: Option<PaddingConfig> [message, optional],
        28 custom_call_target: String [string],
        30 dot_dimension_numbers: Option<Box<DotDimensionNumbers>> [message, optional, boxed],
        90 ragged_dot_dimension_numbers: Option<RaggedDotDimensionNumbers> [message, optional],
        33 gather_dimension_numbers: Option<Box<GatherDimensionNumbers>> [message, optional, boxed],
        34 gather_slice_sizes: Vec<i64> [int64, repeated],
        35 id: i64 [int64],
        36 operand_ids: Vec<i64> [int64, repeated],
        37 control_predecessor_ids: Vec<i64> [int64, repeated],
        38 called_computation_ids: Vec<i64> [int64, repeated],
        43 backend_config: Vec<u8> [bytes = "vec"],
        48 scatter_dimension_numbers: Option<Box<ScatterDimensionNumbers>> [message, optional, boxed],
        51 precision_config: Option<PrecisionConfig> [message, optional],
        15 window: Option<WindowProto> [message, optional],
        16 convolution_dimension_numbers: Option<Box<ConvolutionDimensionNumbers>> [message, optional, boxed],
        50 feature_group_count: i64 [int64],
        58 batch_group_count: i64 [int64],
        63 comparison_direction: String [string],
        65 custom_call_has_side_effect: bool [bool],
        67 indices_are_sorted: bool [bool],
        68 frontend_attributes: Option<FrontendAttributes> [message, optional],
        69 unique_indices: bool [bool],
        70 rng_algorithm: i32 [int32],
        72 comparison_type: String [string],
        77 custom_call_api_version: i32 [int32],
        40 sharding: Option<Box<OpSharding>> [message, optional, boxed],
        26 channel_id: i64 [int64],
        47 is_host_transfer: bool [bool],
        79 async_execution_thread: String [string],
        54 domain_entry_sharding: Option<Box<OpSharding>> [message, optional, boxed],
        55 domain_exit_sharding: Option<Box<OpSharding>> [message, optional, boxed],
        59 triangular_solve_options: Option<TriangularSolveOptions> [message, optional],
        62 cholesky_options: Option<CholeskyOptions> [message, optional],
        24 epsilon: f32 [float],
        25 feature_index: i64 [int64],
        76 custom_call_schedule: i32 [int32],
        31 fft_type: i32 [int32],
        32 fft_length: Vec<i64> [int64, repeated],
        81 k: i64 [int64],
        66 delta: i64 [int64],
        85 largest: bool [bool],
        18 exponent_bits: i32 [int32],
        19 mantissa_bits: i32 [int32],
        /// A oneof in hlo.proto: 0 is an index, unset is none.
        80 cross_program_prefetch_index: Option<i32> [int32, optional],
        27 infeed_config: Vec<u8> [bytes = "vec"],
        22 outfeed_config: Vec<u8> [bytes = "vec"],
        29 outfeed_shape: Option<ShapeProto> [message, optional],
        23 distribution: i32 [int32],
        60 is_stable: bool [bool],
        89 is_composite: bool [bool],
        61 parameter_replication: Option<ParameterReplication> [message, optional],
        75 padding_type: i32 [int32],
        82 statistics_viz: Option<StatisticsViz> [message, optional],
        88 original_value: Option<Box<OriginalValueProto>> [message, optional, boxed],
        91 result_accuracy: Option<ResultAccuracyProto> [message, optional],
        /// Each group a `ReplicaGroup`; a writer's share one encoding per set.
        49 replica_groups: Vec<ListedGroup> [message, repeated],
        52 source_target_pairs: Vec<SourceTarget> [message, repeated],
        56 constrain_layout: bool [bool],
        57 operand_shapes_with_layout: Vec<ShapeProto> [message, repeated],
        74 output_operand_aliasing: Vec<OutputOperandAliasing> [message, repeated],
        71 use_global_device_ids: bool [bool],
        87 collective_device_list: Option<Box<CollectiveDeviceListProto>> [message, optional, boxed],
        92 iota_collective_device_list: Option<Box<IotaReplicaGroupListProto>> [message, optional, boxed],
        93 mesh_axes_replica_group_list: Option<Box<MeshAxesReplicaGroupListProto>> [message, optional, boxed],
    } unmodeled {
        45 all_reduce_id,
        73 is_cross_program_prefetch,
        86 dot_sparsity,
    }

    message ShapeProto {
        2 element_type: i32 [int32],
        3 dimensions: Vec<i64> [int64, repeated],
        4 tuple_shapes: Vec<ShapeProto> [message, repeated],
        5 layout: Option<LayoutProto> [message, optional],
        6 is_dynamic_dimension: Vec<bool> [bool, repeated],
    }

    message LayoutProto {
        1 minor_to_major: Vec<i64> [int64, repeated],
        6 tiles: Vec<TileProto> [message, repeated],
        7 element_size_in_bits: i64 [int64],
        8 memory_space: i64 [int64],
        /// 0 when unwritten, which XLA reads as 1.
        16 tail_padding_alignment_in_elements: i64 [int64],
        17 split_configs: Vec<SplitConfigProto> [message, repeated],
    } unmodeled {
        9 dim_level_types,
        10 physical_shape,
        11 index_primitive_type,
        12 pointer_primitive_type,
        13 dim_unique,
        14 dim_ordered,
        15 dynamic_shape_metadata_prefix_bytes,
    }

    message TileProto {
        1 dimensions: Vec<i64> [int64, repeated],
    }

    message SplitConfigProto {
        1 dimension: i64 [int64],
        2 split_indices: Vec<i64> [int64, repeated],
    }

    message ProgramShapeProto {
        1 parameters: Vec<ShapeProto> [message, repeated],
        2 result: Option<ShapeProto> [message, optional],
        3 parameter_names: Vec<String> [string, repeated],
    }

    message LiteralProto {
        1 shape: Option<ShapeProto> [message, optional],
        10 tuple_literals: Vec<LiteralProto> [message, repeated],
        2 preds: Vec<bool> [bool, repeated],
        3 u8s: Vec<u8> [bytes = "vec"],
        4 s32s: Vec<i32> [int32, repeated],
        5 s64s: Vec<i64> [int64, repeated],
        6 u32s: Vec<u32> [uint32, repeated],
        7 u64s: Vec<u64> [uint64, repeated],
        8 f32s: Vec<f32> [float, repeated],
        9 f64s: Vec<f64> [double, repeated],
        /// Real and imaginary parts interleaved, as they lie in memory.
        12 c64s: Vec<f32> [float, repeated],
        18 c128s: Vec<f64> [double, repeated],
        11 f16s: Vec<u8> [bytes = "vec"],
        13 bf16s: Vec<u8> [bytes = "vec"],
        15 s8s: Vec<u8> [bytes = "vec"],
        /// Little-endian, as `f16s`.
        16 u16s: Vec<u8> [bytes = "vec"],
        17 s16s: Vec<u8> [bytes = "vec"],
        19 f8e5m2s: Vec<u8> [bytes = "vec"],
        20 f8e4m3fns: Vec<u8> [bytes = "vec"],
        /// One byte per element, the value in its low bits (as `ml_dtypes`).
        21 s4s: Vec<u8> [bytes = "vec"],
        22 u4s: Vec<u8> [bytes = "vec"],
        23 f8e4m3b11fnuzs: Vec<u8> [bytes = "vec"],
        24 f8e5m2fnuzs: Vec<u8> [bytes = "vec"],
        25 f8e4m3fnuzs: Vec<u8> [bytes = "vec"],
        26 s2s: Vec<u8> [bytes = "vec"],
        27 u2s: Vec<u8> [bytes = "vec"],
        28 f8e4m3s: Vec<u8> [bytes = "vec"],
        29 f8e3m4s: Vec<u8> [bytes = "vec"],
        /// One byte per element, the code in its low bits (as `s4s`).
        32 f4e2m1fns: Vec<u8> [bytes = "vec"],
        33 f8e8m0fnus: Vec<u8> [bytes = "vec"],
    } unmodeled {
        14 sparse_indices,
        30 s1s,
        31 u1s,
    }


    /// `xla.OpSharding` (xla_data.proto).
    message OpSharding {
        1 r#type: i32 [int32],
        2 tile_shape: Option<ShapeProto> [message, optional],
        3 tile_assignment_dimensions: Vec<i64> [int64, repeated],
        4 tile_assignment_devices: Vec<i64> [int64, repeated],
        5 tuple_shardings: Vec<OpSharding> [message, repeated],
        6 replicate_on_last_tile_dim: bool [bool],
        7 metadata: Vec<OpMetadata> [message, repeated],
        8 last_tile_dims: Vec<i32> [int32, repeated],
        9 iota_reshape_dims: Vec<i64> [int64, repeated],
        10 iota_transpose_perm: Vec<i32> [int32, repeated],
        11 is_shard_group: bool [bool],
        12 shard_group_id: i64 [int64],
        13 shard_group_type: i32 [int32],
    } unmodeled {
        14 named_sharding,
    }

    message OpMetadata {
        1 op_type: String [string],
        2 op_name: String [string],
        3 source_file: String [string],
        4 source_line: i32 [int32],
        12 deduplicated_name: String [string],
        15 stack_frame_id: i32 [int32],
        16 scheduling_name: String [string],
        17 source_end_line: i32 [int32],
        18 source_column: i32 [int32],
        19 source_end_column: i32 [int32],
    } unmodeled {
        5 profile_type,
        8 size_of_generated_code_in_bytes,
        9 size_of_memory_working_set_in_bytes,
        10 profile_info,
        13 preserve_layout,
    }

    /// The stack-frame tables (`HloModuleProto.stack_frame_index`).
    message StackFrameIndexProto {
        1 file_names: Vec<String> [string, repeated],
        2 function_names: Vec<String> [string, repeated],
        3 file_locations: Vec<FileLocationProto> [message, repeated],
        4 stack_frames: Vec<StackFrameProto> [message, repeated],
    }

    message FileLocationProto as "StackFrameIndexProto.FileLocation" {
        1 file_name_id: i32 [int32],
        2 function_name_id: i32 [int32],
        3 line: i32 [int32],
        4 column: i32 [int32],
        5 end_line: i32 [int32],
        6 end_column: i32 [int32],
    }

    message StackFrameProto as "StackFrameIndexProto.StackFrame" {
        1 file_location_id: i32 [int32],
        2 parent_frame_id: i32 [int32],
    }

    message FrontendAttributes {
        1 map: BTreeMap<String, String> [btree_map = "string, string"] entry "MapEntry",
    }

    message DotDimensionNumbers {
        1 lhs_contracting_dimensions: Vec<i64> [int64, repeated],
        2 rhs_contracting_dimensions: Vec<i64> [int64, repeated],
        3 lhs_batch_dimensions: Vec<i64> [int64, repeated],
        4 rhs_batch_dimensions: Vec<i64> [int64, repeated],
    }

    /// xla_data.proto's `RaggedDotDimensionNumbers`.
    message RaggedDotDimensionNumbers {
        1 dot_dimension_numbers: Option<DotDimensionNumbers> [message, optional],
        2 lhs_ragged_dimensions: Vec<i64> [int64, repeated],
        3 rhs_group_dimensions: Vec<i64> [int64, repeated],
    }

    message OutputOperandAliasing {
        1 output_shape_index: Vec<i64> [int64, repeated],
        2 operand_index: i64 [int64],
        3 operand_shape_index: Vec<i64> [int64, repeated],
    }

    /// `xla.Window` (xla_data.proto).
    message WindowProto as "Window" {
        1 dimensions: Vec<WindowDimension> [message, repeated],
    }

    message WindowDimension {
        1 size: i64 [int64],
        2 stride: i64 [int64],
        3 padding_low: i64 [int64],
        4 padding_high: i64 [int64],
        5 window_dilation: i64 [int64],
        6 base_dilation: i64 [int64],
        7 window_reversal: bool [bool],
    }

    message ConvolutionDimensionNumbers {
        7 input_batch_dimension: i64 [int64],
        8 input_feature_dimension: i64 [int64],
        11 input_spatial_dimensions: Vec<i64> [int64, repeated],
        3 kernel_input_feature_dimension: i64 [int64],
        4 kernel_output_feature_dimension: i64 [int64],
        6 kernel_spatial_dimensions: Vec<i64> [int64, repeated],
        9 output_batch_dimension: i64 [int64],
        10 output_feature_dimension: i64 [int64],
        12 output_spatial_dimensions: Vec<i64> [int64, repeated],
    }

    message GatherDimensionNumbers {
        1 offset_dims: Vec<i64> [int64, repeated],
        2 collapsed_slice_dims: Vec<i64> [int64, repeated],
        3 start_index_map: Vec<i64> [int64, repeated],
        4 index_vector_dim: i64 [int64],
        5 operand_batching_dims: Vec<i64> [int64, repeated],
        6 start_indices_batching_dims: Vec<i64> [int64, repeated],
    }

    message ScatterDimensionNumbers {
        1 update_window_dims: Vec<i64> [int64, repeated],
        2 inserted_window_dims: Vec<i64> [int64, repeated],
        3 scatter_dims_to_operand_dims: Vec<i64> [int64, repeated],
        4 index_vector_dim: i64 [int64],
        5 input_batching_dims: Vec<i64> [int64, repeated],
        6 scatter_indices_batching_dims: Vec<i64> [int64, repeated],
    }

    message PaddingConfigDimension as "PaddingConfig.PaddingConfigDimension" {
        1 edge_padding_low: i64 [int64],
        2 edge_padding_high: i64 [int64],
        3 interior_padding: i64 [int64],
    }

    message PaddingConfig {
        1 dimensions: Vec<PaddingConfigDimension> [message, repeated],
    }

    message PrecisionConfig {
        1 operand_precision: Vec<i32> [int32, repeated],
        2 algorithm: i32 [int32],
    }

    message AliasEntryProto as "HloInputOutputAliasProto.AliasEntryProto" {
        1 output_shape_index: Vec<i64> [int64, repeated],
        2 parameter_number: i64 [int64],
        3 parameter_shape_index: Vec<i64> [int64, repeated],
        /// 1 = MAY_ALIAS, 2 = MUST_ALIAS.
        4 kind: i32 [int32],
    }

    message HloInputOutputAliasProto {
        1 entries: Vec<AliasEntryProto> [message, repeated],
    }

    message HloBufferDonorProto {
        1 entries: Vec<BufferDonorEntryProto> [message, repeated],
    }

    message BufferDonorEntryProto as "HloBufferDonorProto.BufferDonorEntryProto" {
        1 parameter_number: i64 [int64],
        2 parameter_shape_index: Vec<i64> [int64, repeated],
    }

    message ReplicaGroup {
        1 replica_ids: Vec<i64> [int64, repeated],
    }

    message SourceTarget {
        1 source: i64 [int64],
        2 target: i64 [int64],
    }

    message CollectiveDeviceListProto {
        1 replica_groups: Vec<ReplicaGroup> [message, repeated],
        2 iota_replica_group_list: Option<IotaReplicaGroupListProto> [message, optional],
    }

    message IotaReplicaGroupListProto {
        1 num_replica_groups: i64 [int64],
        2 num_devices_per_group: i64 [int64],
        3 iota_reshape_dims: Vec<i64> [int64, repeated],
        4 iota_transpose_perm: Vec<i32> [int32, repeated],
    }

    /// Replica groups along axes of a named mesh (field 93).
    message MeshAxesReplicaGroupListProto {
        1 mesh: Option<MeshProto> [message, optional],
        2 axes: Vec<AxisRefProto> [message, repeated],
    }

    message MeshProto {
        1 axes: Vec<MeshAxisProto> [message, repeated],
        2 device_ids: Vec<i64> [int64, repeated],
        3 iota_device_ids: Option<IotaDeviceIdsProto> [message, optional],
    }

    message MeshAxisProto as "MeshProto.MeshAxis" {
        1 name: String [string],
        2 size: i64 [int64],
    }

    /// A mesh's device ids as an iota, reshaped and transposed.
    message IotaDeviceIdsProto as "MeshProto.IotaDeviceIds" {
        1 reshape_dims: Vec<i64> [int64, repeated],
        2 transpose_perm: Vec<i32> [int32, repeated],
    }

    message AxisRefProto {
        1 mesh_axis_index: i64 [int64],
        2 sub_axis_info: Option<SubAxisProto> [message, optional],
    }

    message SubAxisProto as "AxisRefProto.SubAxis" {
        1 pre_size: i64 [int64],
        2 size: i64 [int64],
    }

    message ParameterReplication {
        1 replicated_at_leaf_buffers: Vec<bool> [bool, repeated],
    }

    message StatisticsViz {
        1 stat_index_to_visualize: i64 [int64],
        2 statistics: Vec<Statistic> [message, repeated],
    }

    message Statistic {
        1 stat_name: String [string],
        2 stat_val: f64 [double],
    }

    /// A oneof in XLA: `mode` (0 default, 1 highest) or `tolerance`.
    message ResultAccuracyProto as "ResultAccuracy" {
        1 mode: Option<i32> [int32, optional],
        2 tolerance: Option<ToleranceProto> [message, optional],
    }

    message ToleranceProto as "ResultAccuracy.Tolerance" {
        1 atol: f64 [double],
        2 rtol: f64 [double],
        3 ulps: i64 [int64],
    }

    message OriginalValueProto {
        1 leaves: Vec<OriginalTensorProto> [message, repeated],
        2 is_synthetic_call: bool [bool],
    }

    message OriginalTensorProto {
        1 leaf_shape_index: Vec<i64> [int64, repeated],
        2 original_array: Option<OriginalArrayProto> [message, optional],
    }

    message OriginalArrayProto {
        1 instruction_name: String [string],
        2 shape_index: Vec<i64> [int64, repeated],
    }
}

/// The `bytes` field that holds a literal of each type XLA writes as raw
/// little-endian bytes; the other types have repeated numeric fields.
macro_rules! literal_bytes_fields {
    ($($ty:ident => $field:ident),* $(,)?) => {
        impl LiteralProto {
            pub fn bytes_of(&self, ty: crate::ir::shape::ElementType) -> Option<&Vec<u8>> {
                match ty {
                    $(crate::ir::shape::ElementType::$ty => Some(&self.$field),)*
                    _ => None,
                }
            }

            pub fn bytes_of_mut(&mut self, ty: crate::ir::shape::ElementType) -> Option<&mut Vec<u8>> {
                match ty {
                    $(crate::ir::shape::ElementType::$ty => Some(&mut self.$field),)*
                    _ => None,
                }
            }
        }
    };
}

literal_bytes_fields!(
    S2 => s2s,
    S4 => s4s,
    S8 => s8s,
    S16 => s16s,
    U2 => u2s,
    U4 => u4s,
    U8 => u8s,
    U16 => u16s,
    F8E5M2 => f8e5m2s,
    F8E4M3 => f8e4m3s,
    F8E4M3FN => f8e4m3fns,
    F8E4M3B11FNUZ => f8e4m3b11fnuzs,
    F8E3M4 => f8e3m4s,
    F8E5M2FNUZ => f8e5m2fnuzs,
    F8E4M3FNUZ => f8e4m3fnuzs,
    F4E2M1FN => f4e2m1fns,
    F8E8M0FNU => f8e8m0fnus,
    F16 => f16s,
    Bf16 => bf16s,
);
