//! The subset of XLA's protos hlatc reads and writes. Unknown fields are
//! skipped on decode, as protobuf requires.

use std::collections::BTreeMap;

#[derive(Clone, PartialEq, prost::Message)]
pub struct HloModuleProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub entry_computation_name: String,
    #[prost(message, repeated, tag = "3")]
    pub computations: Vec<HloComputationProto>,
    #[prost(message, optional, tag = "4")]
    pub host_program_shape: Option<ProgramShapeProto>,
    #[prost(int64, tag = "5")]
    pub id: i64,
    #[prost(int64, tag = "6")]
    pub entry_computation_id: i64,
    #[prost(message, optional, tag = "7")]
    pub schedule: Option<HloScheduleProto>,
    #[prost(message, optional, tag = "8")]
    pub input_output_alias: Option<HloInputOutputAliasProto>,
    #[prost(message, optional, tag = "17")]
    pub stack_frame_index: Option<StackFrameIndexProto>,
    #[prost(message, optional, tag = "18")]
    pub buffer_donor: Option<HloBufferDonorProto>,
    #[prost(message, optional, tag = "19")]
    pub frontend_attributes: Option<FrontendAttributes>,
    #[prost(message, optional, tag = "15")]
    pub device_assignment: Option<DeviceAssignmentProto>,
}

/// `is_scheduled`: per computation id, its instructions in schedule order.
/// xla_data.proto's `TriangularSolveOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TriangularSolveOptions {
    #[prost(bool, tag = "1")]
    pub left_side: bool,
    #[prost(bool, tag = "2")]
    pub lower: bool,
    #[prost(bool, tag = "3")]
    pub unit_diagonal: bool,
    /// 0 is `TRANSPOSE_INVALID`, what XLA writes when none is given.
    #[prost(int32, tag = "4")]
    pub transpose_a: i32,
}

/// xla_data.proto's `CholeskyOptions`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CholeskyOptions {
    #[prost(bool, tag = "1")]
    pub lower: bool,
}

/// xla_data.proto's `DeviceAssignmentProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeviceAssignmentProto {
    #[prost(int32, tag = "1")]
    pub replica_count: i32,
    #[prost(int32, tag = "2")]
    pub computation_count: i32,
    #[prost(message, repeated, tag = "3")]
    pub computation_devices: Vec<ComputationDevice>,
}

/// `DeviceAssignmentProto.ComputationDevice`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ComputationDevice {
    #[prost(int64, repeated, tag = "1")]
    pub replica_device_ids: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HloScheduleProto {
    #[prost(btree_map = "int64, message", tag = "1")]
    pub sequences: BTreeMap<i64, InstructionSequence>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InstructionSequence {
    #[prost(int64, repeated, tag = "1")]
    pub instruction_ids: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HloComputationProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, repeated, tag = "2")]
    pub instructions: Vec<HloInstructionProto>,
    #[prost(message, optional, tag = "4")]
    pub program_shape: Option<ProgramShapeProto>,
    #[prost(int64, tag = "5")]
    pub id: i64,
    #[prost(int64, tag = "6")]
    pub root_id: i64,
    #[prost(bool, tag = "7")]
    pub is_fusion_computation: bool,
    /// XLA writes `main` for the main thread; hlatc writes nothing.
    #[prost(string, tag = "8")]
    pub execution_thread: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SliceDimensions {
    #[prost(int64, tag = "1")]
    pub start: i64,
    #[prost(int64, tag = "2")]
    pub limit: i64,
    #[prost(int64, tag = "3")]
    pub stride: i64,
}

/// Rare, large sub-messages are boxed: tens of thousands of instructions
/// are built per module, and inline they would triple its footprint.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HloInstructionProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub opcode: String,
    #[prost(message, optional, tag = "3")]
    pub shape: Option<ShapeProto>,
    #[prost(message, optional, boxed, tag = "7")]
    pub metadata: Option<Box<OpMetadata>>,
    #[prost(message, optional, boxed, tag = "8")]
    pub literal: Option<Box<LiteralProto>>,
    #[prost(int64, tag = "9")]
    pub parameter_number: i64,
    #[prost(string, tag = "11")]
    pub fusion_kind: String,
    #[prost(int64, tag = "13")]
    pub tuple_index: i64,
    #[prost(int64, repeated, tag = "14")]
    pub dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "17")]
    pub slice_dimensions: Vec<SliceDimensions>,
    #[prost(int64, repeated, tag = "20")]
    pub dynamic_slice_sizes: Vec<i64>,
    #[prost(message, optional, tag = "21")]
    pub padding_config: Option<PaddingConfig>,
    #[prost(string, tag = "28")]
    pub custom_call_target: String,
    #[prost(message, optional, boxed, tag = "30")]
    pub dot_dimension_numbers: Option<Box<DotDimensionNumbers>>,
    #[prost(message, optional, tag = "90")]
    pub ragged_dot_dimension_numbers: Option<RaggedDotDimensionNumbers>,
    #[prost(message, optional, boxed, tag = "33")]
    pub gather_dimension_numbers: Option<Box<GatherDimensionNumbers>>,
    #[prost(int64, repeated, tag = "34")]
    pub gather_slice_sizes: Vec<i64>,
    #[prost(int64, tag = "35")]
    pub id: i64,
    #[prost(int64, repeated, tag = "36")]
    pub operand_ids: Vec<i64>,
    #[prost(int64, repeated, tag = "37")]
    pub control_predecessor_ids: Vec<i64>,
    #[prost(int64, repeated, tag = "38")]
    pub called_computation_ids: Vec<i64>,
    #[prost(bytes = "vec", tag = "43")]
    pub backend_config: Vec<u8>,
    #[prost(message, optional, boxed, tag = "48")]
    pub scatter_dimension_numbers: Option<Box<ScatterDimensionNumbers>>,
    #[prost(message, optional, tag = "51")]
    pub precision_config: Option<PrecisionConfig>,
    #[prost(message, optional, tag = "15")]
    pub window: Option<WindowProto>,
    #[prost(message, optional, boxed, tag = "16")]
    pub convolution_dimension_numbers: Option<Box<ConvolutionDimensionNumbers>>,
    #[prost(int64, tag = "50")]
    pub feature_group_count: i64,
    #[prost(int64, tag = "58")]
    pub batch_group_count: i64,
    #[prost(string, tag = "63")]
    pub comparison_direction: String,
    #[prost(bool, tag = "65")]
    pub custom_call_has_side_effect: bool,
    #[prost(bool, tag = "67")]
    pub indices_are_sorted: bool,
    #[prost(message, optional, tag = "68")]
    pub frontend_attributes: Option<FrontendAttributes>,
    #[prost(bool, tag = "69")]
    pub unique_indices: bool,
    #[prost(int32, tag = "70")]
    pub rng_algorithm: i32,
    #[prost(string, tag = "72")]
    pub comparison_type: String,
    #[prost(int32, tag = "77")]
    pub custom_call_api_version: i32,
    #[prost(message, optional, boxed, tag = "40")]
    pub sharding: Option<Box<OpSharding>>,
    #[prost(int64, tag = "26")]
    pub channel_id: i64,
    #[prost(bool, tag = "47")]
    pub is_host_transfer: bool,
    #[prost(string, tag = "79")]
    pub async_execution_thread: String,
    #[prost(message, optional, boxed, tag = "54")]
    pub domain_entry_sharding: Option<Box<OpSharding>>,
    #[prost(message, optional, boxed, tag = "55")]
    pub domain_exit_sharding: Option<Box<OpSharding>>,
    #[prost(message, optional, tag = "59")]
    pub triangular_solve_options: Option<TriangularSolveOptions>,
    #[prost(message, optional, tag = "62")]
    pub cholesky_options: Option<CholeskyOptions>,
    #[prost(float, tag = "24")]
    pub epsilon: f32,
    #[prost(int64, tag = "25")]
    pub feature_index: i64,
    #[prost(int32, tag = "76")]
    pub custom_call_schedule: i32,
    #[prost(int32, tag = "31")]
    pub fft_type: i32,
    #[prost(int64, repeated, tag = "32")]
    pub fft_length: Vec<i64>,
    #[prost(int64, tag = "81")]
    pub k: i64,
    #[prost(int64, tag = "66")]
    pub delta: i64,
    #[prost(bool, tag = "85")]
    pub largest: bool,
    #[prost(int32, tag = "18")]
    pub exponent_bits: i32,
    #[prost(int32, tag = "19")]
    pub mantissa_bits: i32,
    /// A oneof in hlo.proto: 0 is an index, unset is none.
    #[prost(int32, optional, tag = "80")]
    pub cross_program_prefetch_index: Option<i32>,
    #[prost(bytes = "vec", tag = "27")]
    pub infeed_config: Vec<u8>,
    #[prost(bytes = "vec", tag = "22")]
    pub outfeed_config: Vec<u8>,
    #[prost(message, optional, tag = "29")]
    pub outfeed_shape: Option<ShapeProto>,
    #[prost(int32, tag = "23")]
    pub distribution: i32,
    #[prost(bool, tag = "60")]
    pub is_stable: bool,
    #[prost(bool, tag = "89")]
    pub is_composite: bool,
    #[prost(message, optional, tag = "61")]
    pub parameter_replication: Option<ParameterReplication>,
    #[prost(int32, tag = "75")]
    pub padding_type: i32,
    #[prost(message, optional, tag = "82")]
    pub statistics_viz: Option<StatisticsViz>,
    #[prost(message, optional, boxed, tag = "88")]
    pub original_value: Option<Box<OriginalValueProto>>,
    #[prost(message, optional, tag = "91")]
    pub result_accuracy: Option<ResultAccuracyProto>,
    #[prost(message, repeated, tag = "49")]
    pub replica_groups: Vec<ReplicaGroup>,
    #[prost(message, repeated, tag = "52")]
    pub source_target_pairs: Vec<SourceTarget>,
    #[prost(bool, tag = "56")]
    pub constrain_layout: bool,
    #[prost(message, repeated, tag = "57")]
    pub operand_shapes_with_layout: Vec<ShapeProto>,
    #[prost(message, repeated, tag = "74")]
    pub output_operand_aliasing: Vec<OutputOperandAliasing>,
    #[prost(bool, tag = "71")]
    pub use_global_device_ids: bool,
    #[prost(message, optional, boxed, tag = "87")]
    pub collective_device_list: Option<Box<CollectiveDeviceListProto>>,
    #[prost(message, optional, boxed, tag = "92")]
    pub iota_collective_device_list: Option<Box<IotaReplicaGroupListProto>>,
    #[prost(message, optional, boxed, tag = "93")]
    pub mesh_axes_replica_group_list: Option<Box<MeshAxesReplicaGroupListProto>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ShapeProto {
    #[prost(int32, tag = "2")]
    pub element_type: i32,
    #[prost(int64, repeated, tag = "3")]
    pub dimensions: Vec<i64>,
    #[prost(message, repeated, tag = "4")]
    pub tuple_shapes: Vec<ShapeProto>,
    #[prost(message, optional, tag = "5")]
    pub layout: Option<LayoutProto>,
    #[prost(bool, repeated, tag = "6")]
    pub is_dynamic_dimension: Vec<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LayoutProto {
    #[prost(int64, repeated, tag = "1")]
    pub minor_to_major: Vec<i64>,
    #[prost(message, repeated, tag = "6")]
    pub tiles: Vec<TileProto>,
    #[prost(int64, tag = "7")]
    pub element_size_in_bits: i64,
    #[prost(int64, tag = "8")]
    pub memory_space: i64,
    /// 0 when unwritten, which XLA reads as 1.
    #[prost(int64, tag = "16")]
    pub tail_padding_alignment_in_elements: i64,
    #[prost(message, repeated, tag = "17")]
    pub split_configs: Vec<SplitConfigProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TileProto {
    #[prost(int64, repeated, tag = "1")]
    pub dimensions: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SplitConfigProto {
    #[prost(int64, tag = "1")]
    pub dimension: i64,
    #[prost(int64, repeated, tag = "2")]
    pub split_indices: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ProgramShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub parameters: Vec<ShapeProto>,
    #[prost(message, optional, tag = "2")]
    pub result: Option<ShapeProto>,
    #[prost(string, repeated, tag = "3")]
    pub parameter_names: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LiteralProto {
    #[prost(message, optional, tag = "1")]
    pub shape: Option<ShapeProto>,
    #[prost(message, repeated, tag = "10")]
    pub tuple_literals: Vec<LiteralProto>,
    #[prost(bool, repeated, tag = "2")]
    pub preds: Vec<bool>,
    #[prost(bytes = "vec", tag = "3")]
    pub u8s: Vec<u8>,
    #[prost(int32, repeated, tag = "4")]
    pub s32s: Vec<i32>,
    #[prost(int64, repeated, tag = "5")]
    pub s64s: Vec<i64>,
    #[prost(uint32, repeated, tag = "6")]
    pub u32s: Vec<u32>,
    #[prost(uint64, repeated, tag = "7")]
    pub u64s: Vec<u64>,
    #[prost(float, repeated, tag = "8")]
    pub f32s: Vec<f32>,
    #[prost(double, repeated, tag = "9")]
    pub f64s: Vec<f64>,
    /// Real and imaginary parts interleaved, as they lie in memory.
    #[prost(float, repeated, tag = "12")]
    pub c64s: Vec<f32>,
    #[prost(double, repeated, tag = "18")]
    pub c128s: Vec<f64>,
    #[prost(bytes = "vec", tag = "11")]
    pub f16s: Vec<u8>,
    #[prost(bytes = "vec", tag = "13")]
    pub bf16s: Vec<u8>,
    #[prost(bytes = "vec", tag = "15")]
    pub s8s: Vec<u8>,
    /// Little-endian, as `f16s`.
    #[prost(bytes = "vec", tag = "16")]
    pub u16s: Vec<u8>,
    #[prost(bytes = "vec", tag = "17")]
    pub s16s: Vec<u8>,
    #[prost(bytes = "vec", tag = "19")]
    pub f8e5m2s: Vec<u8>,
    #[prost(bytes = "vec", tag = "20")]
    pub f8e4m3fns: Vec<u8>,
    /// One byte per element, the value in its low bits (as `ml_dtypes`).
    #[prost(bytes = "vec", tag = "21")]
    pub s4s: Vec<u8>,
    #[prost(bytes = "vec", tag = "22")]
    pub u4s: Vec<u8>,
    #[prost(bytes = "vec", tag = "23")]
    pub f8e4m3b11fnuzs: Vec<u8>,
    #[prost(bytes = "vec", tag = "24")]
    pub f8e5m2fnuzs: Vec<u8>,
    #[prost(bytes = "vec", tag = "25")]
    pub f8e4m3fnuzs: Vec<u8>,
    #[prost(bytes = "vec", tag = "26")]
    pub s2s: Vec<u8>,
    #[prost(bytes = "vec", tag = "27")]
    pub u2s: Vec<u8>,
    #[prost(bytes = "vec", tag = "28")]
    pub f8e4m3s: Vec<u8>,
    #[prost(bytes = "vec", tag = "29")]
    pub f8e3m4s: Vec<u8>,
    /// One byte per element, the code in its low bits (as `s4s`).
    #[prost(bytes = "vec", tag = "32")]
    pub f4e2m1fns: Vec<u8>,
    #[prost(bytes = "vec", tag = "33")]
    pub f8e8m0fnus: Vec<u8>,
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

/// `xla.OpSharding` (xla_data.proto), without `named_sharding` (14).
#[derive(Clone, PartialEq, prost::Message)]
pub struct OpSharding {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(message, optional, tag = "2")]
    pub tile_shape: Option<ShapeProto>,
    #[prost(int64, repeated, tag = "3")]
    pub tile_assignment_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "4")]
    pub tile_assignment_devices: Vec<i64>,
    #[prost(message, repeated, tag = "5")]
    pub tuple_shardings: Vec<OpSharding>,
    #[prost(bool, tag = "6")]
    pub replicate_on_last_tile_dim: bool,
    #[prost(message, repeated, tag = "7")]
    pub metadata: Vec<OpMetadata>,
    #[prost(int32, repeated, tag = "8")]
    pub last_tile_dims: Vec<i32>,
    #[prost(int64, repeated, tag = "9")]
    pub iota_reshape_dims: Vec<i64>,
    #[prost(int32, repeated, tag = "10")]
    pub iota_transpose_perm: Vec<i32>,
    #[prost(bool, tag = "11")]
    pub is_shard_group: bool,
    #[prost(int64, tag = "12")]
    pub shard_group_id: i64,
    #[prost(int32, tag = "13")]
    pub shard_group_type: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OpMetadata {
    #[prost(string, tag = "1")]
    pub op_type: String,
    #[prost(string, tag = "2")]
    pub op_name: String,
    #[prost(string, tag = "3")]
    pub source_file: String,
    #[prost(int32, tag = "4")]
    pub source_line: i32,
    #[prost(string, tag = "12")]
    pub deduplicated_name: String,
    #[prost(int32, tag = "15")]
    pub stack_frame_id: i32,
    #[prost(string, tag = "16")]
    pub scheduling_name: String,
    #[prost(int32, tag = "17")]
    pub source_end_line: i32,
    #[prost(int32, tag = "18")]
    pub source_column: i32,
    #[prost(int32, tag = "19")]
    pub source_end_column: i32,
}

/// The stack-frame tables (`HloModuleProto.stack_frame_index`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StackFrameIndexProto {
    #[prost(string, repeated, tag = "1")]
    pub file_names: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub function_names: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub file_locations: Vec<FileLocationProto>,
    #[prost(message, repeated, tag = "4")]
    pub stack_frames: Vec<StackFrameProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FileLocationProto {
    #[prost(int32, tag = "1")]
    pub file_name_id: i32,
    #[prost(int32, tag = "2")]
    pub function_name_id: i32,
    #[prost(int32, tag = "3")]
    pub line: i32,
    #[prost(int32, tag = "4")]
    pub column: i32,
    #[prost(int32, tag = "5")]
    pub end_line: i32,
    #[prost(int32, tag = "6")]
    pub end_column: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StackFrameProto {
    #[prost(int32, tag = "1")]
    pub file_location_id: i32,
    #[prost(int32, tag = "2")]
    pub parent_frame_id: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FrontendAttributes {
    #[prost(btree_map = "string, string", tag = "1")]
    pub map: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DotDimensionNumbers {
    #[prost(int64, repeated, tag = "1")]
    pub lhs_contracting_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "2")]
    pub rhs_contracting_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    pub lhs_batch_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "4")]
    pub rhs_batch_dimensions: Vec<i64>,
}

/// xla_data.proto's `RaggedDotDimensionNumbers`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RaggedDotDimensionNumbers {
    #[prost(message, optional, tag = "1")]
    pub dot_dimension_numbers: Option<DotDimensionNumbers>,
    #[prost(int64, repeated, tag = "2")]
    pub lhs_ragged_dimensions: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    pub rhs_group_dimensions: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OutputOperandAliasing {
    #[prost(int64, repeated, tag = "1")]
    pub output_shape_index: Vec<i64>,
    #[prost(int64, tag = "2")]
    pub operand_index: i64,
    #[prost(int64, repeated, tag = "3")]
    pub operand_shape_index: Vec<i64>,
}

/// `xla.Window` (xla_data.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WindowProto {
    #[prost(message, repeated, tag = "1")]
    pub dimensions: Vec<WindowDimension>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WindowDimension {
    #[prost(int64, tag = "1")]
    pub size: i64,
    #[prost(int64, tag = "2")]
    pub stride: i64,
    #[prost(int64, tag = "3")]
    pub padding_low: i64,
    #[prost(int64, tag = "4")]
    pub padding_high: i64,
    #[prost(int64, tag = "5")]
    pub window_dilation: i64,
    #[prost(int64, tag = "6")]
    pub base_dilation: i64,
    #[prost(bool, tag = "7")]
    pub window_reversal: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConvolutionDimensionNumbers {
    #[prost(int64, tag = "7")]
    pub input_batch_dimension: i64,
    #[prost(int64, tag = "8")]
    pub input_feature_dimension: i64,
    #[prost(int64, repeated, tag = "11")]
    pub input_spatial_dimensions: Vec<i64>,
    #[prost(int64, tag = "3")]
    pub kernel_input_feature_dimension: i64,
    #[prost(int64, tag = "4")]
    pub kernel_output_feature_dimension: i64,
    #[prost(int64, repeated, tag = "6")]
    pub kernel_spatial_dimensions: Vec<i64>,
    #[prost(int64, tag = "9")]
    pub output_batch_dimension: i64,
    #[prost(int64, tag = "10")]
    pub output_feature_dimension: i64,
    #[prost(int64, repeated, tag = "12")]
    pub output_spatial_dimensions: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GatherDimensionNumbers {
    #[prost(int64, repeated, tag = "1")]
    pub offset_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "2")]
    pub collapsed_slice_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    pub start_index_map: Vec<i64>,
    #[prost(int64, tag = "4")]
    pub index_vector_dim: i64,
    #[prost(int64, repeated, tag = "5")]
    pub operand_batching_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "6")]
    pub start_indices_batching_dims: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScatterDimensionNumbers {
    #[prost(int64, repeated, tag = "1")]
    pub update_window_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "2")]
    pub inserted_window_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "3")]
    pub scatter_dims_to_operand_dims: Vec<i64>,
    #[prost(int64, tag = "4")]
    pub index_vector_dim: i64,
    #[prost(int64, repeated, tag = "5")]
    pub input_batching_dims: Vec<i64>,
    #[prost(int64, repeated, tag = "6")]
    pub scatter_indices_batching_dims: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PaddingConfigDimension {
    #[prost(int64, tag = "1")]
    pub edge_padding_low: i64,
    #[prost(int64, tag = "2")]
    pub edge_padding_high: i64,
    #[prost(int64, tag = "3")]
    pub interior_padding: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PaddingConfig {
    #[prost(message, repeated, tag = "1")]
    pub dimensions: Vec<PaddingConfigDimension>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PrecisionConfig {
    #[prost(int32, repeated, tag = "1")]
    pub operand_precision: Vec<i32>,
    #[prost(int32, tag = "2")]
    pub algorithm: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AliasEntryProto {
    #[prost(int64, repeated, tag = "1")]
    pub output_shape_index: Vec<i64>,
    #[prost(int64, tag = "2")]
    pub parameter_number: i64,
    #[prost(int64, repeated, tag = "3")]
    pub parameter_shape_index: Vec<i64>,
    /// 1 = MAY_ALIAS, 2 = MUST_ALIAS.
    #[prost(int32, tag = "4")]
    pub kind: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HloInputOutputAliasProto {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<AliasEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HloBufferDonorProto {
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<BufferDonorEntryProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BufferDonorEntryProto {
    #[prost(int64, tag = "1")]
    pub parameter_number: i64,
    #[prost(int64, repeated, tag = "2")]
    pub parameter_shape_index: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReplicaGroup {
    #[prost(int64, repeated, tag = "1")]
    pub replica_ids: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceTarget {
    #[prost(int64, tag = "1")]
    pub source: i64,
    #[prost(int64, tag = "2")]
    pub target: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CollectiveDeviceListProto {
    #[prost(message, repeated, tag = "1")]
    pub replica_groups: Vec<ReplicaGroup>,
    #[prost(message, optional, tag = "2")]
    pub iota_replica_group_list: Option<IotaReplicaGroupListProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct IotaReplicaGroupListProto {
    #[prost(int64, tag = "1")]
    pub num_replica_groups: i64,
    #[prost(int64, tag = "2")]
    pub num_devices_per_group: i64,
    #[prost(int64, repeated, tag = "3")]
    pub iota_reshape_dims: Vec<i64>,
    #[prost(int32, repeated, tag = "4")]
    pub iota_transpose_perm: Vec<i32>,
}

/// Replica groups along axes of a named mesh (field 93).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MeshAxesReplicaGroupListProto {
    #[prost(message, optional, tag = "1")]
    pub mesh: Option<MeshProto>,
    #[prost(message, repeated, tag = "2")]
    pub axes: Vec<AxisRefProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MeshProto {
    #[prost(message, repeated, tag = "1")]
    pub axes: Vec<MeshAxisProto>,
    #[prost(int64, repeated, tag = "2")]
    pub device_ids: Vec<i64>,
    #[prost(message, optional, tag = "3")]
    pub iota_device_ids: Option<IotaDeviceIdsProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MeshAxisProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int64, tag = "2")]
    pub size: i64,
}

/// A mesh's device ids as an iota, reshaped and transposed.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IotaDeviceIdsProto {
    #[prost(int64, repeated, tag = "1")]
    pub reshape_dims: Vec<i64>,
    #[prost(int32, repeated, tag = "2")]
    pub transpose_perm: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AxisRefProto {
    #[prost(int64, tag = "1")]
    pub mesh_axis_index: i64,
    #[prost(message, optional, tag = "2")]
    pub sub_axis_info: Option<SubAxisProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SubAxisProto {
    #[prost(int64, tag = "1")]
    pub pre_size: i64,
    #[prost(int64, tag = "2")]
    pub size: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ParameterReplication {
    #[prost(bool, repeated, tag = "1")]
    pub replicated_at_leaf_buffers: Vec<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StatisticsViz {
    #[prost(int64, tag = "1")]
    pub stat_index_to_visualize: i64,
    #[prost(message, repeated, tag = "2")]
    pub statistics: Vec<Statistic>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Statistic {
    #[prost(string, tag = "1")]
    pub stat_name: String,
    #[prost(double, tag = "2")]
    pub stat_val: f64,
}

/// A oneof in XLA: `mode` (0 default, 1 highest) or `tolerance`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResultAccuracyProto {
    #[prost(int32, optional, tag = "1")]
    pub mode: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub tolerance: Option<ToleranceProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ToleranceProto {
    #[prost(double, tag = "1")]
    pub atol: f64,
    #[prost(double, tag = "2")]
    pub rtol: f64,
    #[prost(int64, tag = "3")]
    pub ulps: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OriginalValueProto {
    #[prost(message, repeated, tag = "1")]
    pub leaves: Vec<OriginalTensorProto>,
    #[prost(bool, tag = "2")]
    pub is_synthetic_call: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OriginalTensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub leaf_shape_index: Vec<i64>,
    #[prost(message, optional, tag = "2")]
    pub original_array: Option<OriginalArrayProto>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OriginalArrayProto {
    #[prost(string, tag = "1")]
    pub instruction_name: String,
    #[prost(int64, repeated, tag = "2")]
    pub shape_index: Vec<i64>,
}
