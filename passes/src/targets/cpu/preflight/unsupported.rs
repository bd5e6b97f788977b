//! What XLA CPU aborts or hangs on for a valid module, one variant per
//! case with what it found: the checks in `cpu_preflight` return these,
//! and callers match them rather than read a sentence.

use crate::targets::cpu::xla_cpu_flags::FUSION_EMITTERS_FLAG;
use hlatc_compiler::ir::shape::ArrayShape;
use hlatc_compiler::{ElementType, Opcode, Shape};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unsupported {
    #[error(
        "{what} has dynamic dimensions ({shape}); hlatc passes and reads back static arrays only"
    )]
    DynamicAtTheBoundary { what: &'static str, shape: Shape },
    #[error("XLA CPU aborts hoisting an async-start out of a while loop, and compiles no async op; this one cannot run as a call (async-to-sync), as its bundle is read by more than its done")]
    AsyncStartInALoop,
    #[error("XLA CPU writes garbage for a {opcode} of {operand} values into {result}; convert its result instead")]
    ComplexIntoReal {
        opcode: Opcode,
        operand: ElementType,
        result: ElementType,
    },
    #[error("XLA CPU aborts on a {opcode} that mixes {a} and {b}, two 8-bit float formats of the same widths whose precision it cannot order")]
    UnorderedFloat8 {
        opcode: Opcode,
        a: ElementType,
        b: ElementType,
    },
    #[error("on the one device hlatc runs it on, XLA CPU gathers the one shard there is ({from} along dimension {dimension}) and leaves the rest of the {to} unwritten")]
    GatherLeavesUnwritten {
        from: i64,
        to: i64,
        dimension: usize,
    },
    #[error("{opcode} inside a while loop or a conditional, which replicas may reach a different number of times; XLA CPU exits the process once its {replicas} replicas have waited on one another past its timeout, so a program of several replicas keeps its collectives out of control flow")]
    CollectiveInControlFlow { opcode: Opcode, replicas: i64 },
    #[error("{opcode} without a channel_id exchanges between replicas, and the module has one replica of {replicas} partitions; give it a channel_id (and use_global_device_ids=true where the op takes it)")]
    NoChannelAmongPartitions { opcode: Opcode, replicas: i64 },
    #[error("{opcode} with a channel_id exchanges between partitions, and the module has one (its {replicas} replicas exchange without a channel_id); XLA CPU fails running it")]
    ChannelAmongReplicas { opcode: Opcode, replicas: i64 },
    #[error("{opcode} with a channel_id permutes partitions, and the module has one (its {replicas} replicas are permuted without a channel_id); XLA CPU aborts on it")]
    PermutesPartitions { opcode: Opcode, replicas: i64 },
    #[error("source_target_pairs name replica {replica}, and the module has {replicas} (0 to {})", replicas - 1)]
    PermuteBeyondReplicas { replica: i64, replicas: i64 },
    #[error(
        "replica groups {groups:?} {}; the module has {replicas} replicas (0 to {}), and its groups must hold each once",
        match beyond { Some(r) => format!("name replica {r}"), None => format!("hold {held} of them") },
        replicas - 1
    )]
    MisfitGroups {
        groups: Vec<Vec<i64>>,
        /// A replica the groups name that the module does not have.
        beyond: Option<i64>,
        /// How many replicas the groups hold, counting repeats.
        held: usize,
        replicas: i64,
    },
    #[error("{opcode} {how} {operand} into {result}, along dimension {dimension} a factor other than its group size {group_size}")]
    GroupFactor {
        opcode: Opcode,
        /// `gathers` or `scatters`.
        how: &'static str,
        operand: ArrayShape,
        result: ArrayShape,
        dimension: usize,
        group_size: i64,
    },
    #[error("all-to-all splits dimension {dimension} of {operand} into {group_size} pieces (its group size), which does not divide {size}")]
    AllToAllSplit {
        dimension: i64,
        operand: ArrayShape,
        group_size: i64,
        size: i64,
    },
    #[error("all-to-all of {operands} operands sends one to each replica of its group of {group_size}, so it needs {group_size}")]
    AllToAllOperands { operands: usize, group_size: i64 },
    #[error(
        "hlatc runs modules without a host side for {opcode}, so XLA CPU would wait on it forever"
    )]
    NoHostSide { opcode: Opcode },
    #[error("XLA CPU crashes (SIGSEGV) running an in-place collective-permute (slice_sizes); one that sends its operands whole runs")]
    InPlacePermute,
    #[error("XLA CPU throws out of the plugin when device 0, the one it runs on, receives from device {sender}, which a one-device run does not have (source_target_pairs)")]
    ReceivesFromMissingDevice { sender: i64 },
    #[error(
        "XLA CPU aborts when {what} {ty} arrays ({width} elements); convert them to s8 or u8 first"
    )]
    SubByte {
        what: &'static str,
        ty: ElementType,
        width: &'static str,
    },
    #[error("XLA CPU's legacy emitters ({FUSION_EMITTERS_FLAG}=false) abort when padding {ty} arrays (2-bit elements); convert them to s8 or u8 first, or compile with its default emitters")]
    LegacyPad2Bit { ty: ElementType },
}
