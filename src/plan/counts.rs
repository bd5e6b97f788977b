//! What one rank's program asks of the hardware, read off the compiled
//! module: the matrix multiplies' work in TensorE tiles, the bytes the
//! ops between them move through device memory, and every collective's
//! bytes split into what crosses NeuronLink within a node and what crosses
//! the network between nodes. Nothing here is a formula of the model: a
//! layout that adds a recomputation, a collective or a padded vocabulary
//! row adds it here because the program holds it.

use hlatc_compiler::graph::scope;
use hlatc_compiler::ir::collective::ReplicaGroups;
use hlatc_compiler::ir::op::DotDims;
use hlatc_compiler::ir::op::OpFamily;
use hlatc_compiler::Instruction;
use hlatc_compiler::{Computation, InstrId, Module, Op};
use hlatc_models::Parallelism;
use hlatc_passes::mx_calls::scaled_dot_operands;
use hlatc_passes::neuron_check::{
    dot_instructions, dot_operands, trip_count, MOVING_COLUMNS, PARTITIONS,
};
use std::collections::HashMap;

/// Where ranks sit: which node each is on.
#[derive(Clone, Copy, Debug)]
pub struct Placement {
    pub parallel: Parallelism,
    pub cores_per_node: i64,
}

/// A program's work, per rank, per run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramCounts {
    /// FLOPs of the dots whose operands are 16 bits or narrower, counted
    /// in whole TensorE tiles (a dot of 100 rows costs what one of 128
    /// does).
    pub matmul_flops: f64,
    /// The same for dots in f32 or wider, which run at the FP32 peak.
    pub matmul_flops_f32: f64,
    /// The same for block-scaled dots of MX operands
    /// (`__op$block_scaled_dot`), which run at the MX peak.
    pub matmul_flops_mx: f64,
    /// `2 M N K` of every dot, without the tiles' padding.
    pub dot_flops: f64,
    /// Bytes written by the values a fusing compiler keeps in device
    /// memory (see [`writes_memory`]): the ops between the dots, which run
    /// at memory bandwidth.
    pub memory_bytes: f64,
    /// Collectives on the step's critical path (tensor and sequence
    /// parallelism, pipeline sends).
    pub exposed: Traffic,
    /// The pipeline's sends between stages (collective-permutes, or
    /// all-gathers over pairs of stages).
    pub sends: Traffic,
    /// Collectives over the data-parallel groups (the gradient sums and
    /// ZeRO-1's gathers), which a scheduler may overlap with compute.
    pub data_parallel: Traffic,
    /// Collective instructions.
    pub collectives: usize,
}

/// Collective traffic of one rank, as a hierarchical ring moves it: each
/// group's members on one node exchange over NeuronLink, and each node's
/// share crosses the network once per node in the group.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Bytes a rank sends over NeuronLink.
    pub link_bytes: f64,
    /// Bytes a rank sends over the network; every core of a node sends
    /// its own at once, so each gets `1 / cores_per_node` of the node's
    /// bandwidth.
    pub network_bytes: f64,
    /// Ring steps within a node, each paying the link's latency.
    pub link_steps: f64,
    /// Ring steps between nodes, each paying the network's latency.
    pub network_steps: f64,
}

impl Traffic {
    pub fn add(&mut self, o: &Traffic) {
        self.link_bytes += o.link_bytes;
        self.network_bytes += o.network_bytes;
        self.link_steps += o.link_steps;
        self.network_steps += o.network_steps;
    }

    pub fn scaled(&self, k: f64) -> Traffic {
        Traffic {
            link_bytes: self.link_bytes * k,
            network_bytes: self.network_bytes * k,
            link_steps: self.link_steps * k,
            network_steps: self.network_steps * k,
        }
    }
}

impl ProgramCounts {
    /// Reads `module`'s entry and the computations it calls, a loop's
    /// body as many times as it runs (a loop whose trip count its form
    /// does not say, once).
    pub fn of(module: &Module, placement: &Placement) -> ProgramCounts {
        let mut counts = ProgramCounts::default();
        let mut groups = GroupShapes::default();
        let mut stack = vec![(module.entry(), 1.0, false)];
        while let Some((c, times, in_loop)) = stack.pop() {
            for id in c.ids() {
                match &c.instr(id).op {
                    Op::Call { to_apply, .. } => {
                        stack.push((module.computation(*to_apply), times, in_loop));
                    }
                    Op::While { body, .. } => {
                        let trips = trip_count(module, c, id).unwrap_or(1) as f64;
                        stack.push((module.computation(*body), times * trips, true));
                    }
                    // A loop's accumulator is updated in place: a trip
                    // writes only its tile.
                    Op::DynamicUpdateSlice if in_loop => {
                        let update = c.operand_ids(id).get(1).copied();
                        let bytes = update.map_or(0, |u| c.instr(u).shape.byte_size());
                        counts.memory_bytes += bytes as f64 * times;
                    }
                    _ => counts.add_instruction(c, id, placement, &mut groups, times),
                }
            }
        }
        counts
    }

    fn add_instruction(
        &mut self,
        c: &Computation,
        id: InstrId,
        placement: &Placement,
        groups: &mut GroupShapes,
        times: f64,
    ) {
        let instr = c.instr(id);
        match &instr.op {
            Op::Dot { .. } => {
                let Some((dims, lhs, rhs)) = dot_operands(c, id) else {
                    return;
                };
                let wide = c
                    .operand_ids(id)
                    .first()
                    .and_then(|&o| c.instr(o).shape.as_array())
                    .is_some_and(|a| a.ty.is_float() && a.ty.byte_size() >= 4);
                let padded = self.add_dot(dims, lhs, rhs, instr, times);
                if wide {
                    self.matmul_flops_f32 += padded;
                } else {
                    self.matmul_flops += padded;
                }
            }
            Op::CustomCall(_) => {
                if let Some((dims, [lhs, rhs])) = scaled_dot_operands(c, id) {
                    self.matmul_flops_mx += self.add_dot(&dims, &lhs, &rhs, instr, times);
                } else if writes_memory(c, id) {
                    self.memory_bytes += instr.shape.byte_size() as f64 * times;
                }
            }
            op if op.family() == OpFamily::Collective => {
                if let Some(t) = collective_traffic(c, id, placement, groups) {
                    self.collectives += 1;
                    let (traffic, kind) = t;
                    let target = match kind {
                        Kind::DataParallel => &mut self.data_parallel,
                        Kind::Send => &mut self.sends,
                        Kind::Exposed => &mut self.exposed,
                    };
                    target.add(&traffic.scaled(times));
                }
            }
            _ if writes_memory(c, id) => {
                self.memory_bytes += instr.shape.byte_size() as f64 * times;
            }
            _ => {}
        }
    }

    /// Counts a dot of these operand dimensions into [`Self::dot_flops`];
    /// its FLOPs in whole TensorE tiles, for the caller's peak.
    fn add_dot(
        &mut self,
        dims: &DotDims,
        lhs: &[i64],
        rhs: &[i64],
        instr: &Instruction,
        times: f64,
    ) -> f64 {
        let tiles = dot_instructions(dims, lhs, rhs) as f64;
        let tile_flops = 2.0 * (PARTITIONS * PARTITIONS * MOVING_COLUMNS) as f64;
        let contracted: i64 = dims
            .lhs_contracting
            .iter()
            .map(|&k| lhs.get(k as usize).copied().unwrap_or(1))
            .product();
        let out = instr.shape.as_array().map_or(0, |a| a.element_count());
        self.dot_flops += 2.0 * out as f64 * contracted as f64 * times;
        tiles * tile_flops * times
    }

    /// `self` plus `k` times `other`: a program of more layers from the
    /// difference of two that differ by one.
    pub fn plus_scaled(&self, other: &ProgramCounts, k: f64) -> ProgramCounts {
        let mut exposed = self.exposed;
        exposed.add(&other.exposed.scaled(k));
        let mut data_parallel = self.data_parallel;
        data_parallel.add(&other.data_parallel.scaled(k));
        let mut sends = self.sends;
        sends.add(&other.sends.scaled(k));
        ProgramCounts {
            matmul_flops: self.matmul_flops + k * other.matmul_flops,
            matmul_flops_f32: self.matmul_flops_f32 + k * other.matmul_flops_f32,
            matmul_flops_mx: self.matmul_flops_mx + k * other.matmul_flops_mx,
            dot_flops: self.dot_flops + k * other.dot_flops,
            memory_bytes: self.memory_bytes + k * other.memory_bytes,
            exposed,
            sends,
            data_parallel,
            collectives: (self.collectives as f64 + k * other.collectives as f64).round() as usize,
        }
    }

    /// `self - other`, field by field.
    pub fn minus(&self, other: &ProgramCounts) -> ProgramCounts {
        self.plus_scaled(other, -1.0)
    }
}

/// Whether a value takes device memory of its own in a fusing compiler
/// (the rule the memory plan's working memory follows): views, broadcasts,
/// iotas, constants and parameters take none; an elementwise op, move or
/// slice is fused into its one reader unless several loops read it or the
/// program returns it; every other op (reductions, custom calls, gathers,
/// scatters, random bits) writes its result.
fn writes_memory(c: &Computation, id: InstrId) -> bool {
    let op = &c.instr(id).op;
    match op {
        Op::Tuple
        | Op::GetTupleElement { .. }
        | Op::Reshape { .. }
        | Op::Bitcast
        | Op::OptBarrier
        | Op::Broadcast { .. }
        | Op::Iota { .. }
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Parameter(_) => false,
        _ if fusible(op) => {
            let users = c.users(id);
            c.root() == Some(id)
                || users.len() != 1
                || users.iter().any(|&u| !fuses_operands(&c.instr(u).op))
        }
        _ => true,
    }
}

fn fusible(op: &Op) -> bool {
    matches!(
        op,
        Op::Transpose { .. }
            | Op::Concatenate { .. }
            | Op::Pad { .. }
            | Op::Reverse { .. }
            | Op::Slice { .. }
            | Op::DynamicSlice { .. }
    ) || (op.family() == OpFamily::Elementwise && !matches!(op, Op::Map { .. }))
}

/// Whether `op` reads its operands inside its own loop, so that a fusible
/// operand costs no memory of its own.
fn fuses_operands(op: &Op) -> bool {
    fusible(op)
        || matches!(
            op,
            Op::Reduce { .. } | Op::Reshape { .. } | Op::Bitcast | Op::Broadcast { .. }
        )
}

/// How a collective's bytes scale with its group: the fraction of the
/// whole tensor each member sends in a ring, and how many ring steps a
/// member of `n` takes per member of the ring.
#[derive(Clone, Copy)]
enum Ring {
    /// all-reduce: reduce-scatter then all-gather, `2 (n - 1) / n` of the
    /// bytes in `2 (n - 1)` steps.
    Reduce,
    /// all-gather, reduce-scatter, all-to-all: `(n - 1) / n` in `n - 1`.
    Share,
}

impl Ring {
    fn fraction(self, n: f64) -> f64 {
        match self {
            Ring::Reduce => 2.0 * (n - 1.0) / n,
            Ring::Share => (n - 1.0) / n,
        }
    }

    fn steps(self, n: f64) -> f64 {
        match self {
            Ring::Reduce => 2.0 * (n - 1.0),
            Ring::Share => n - 1.0,
        }
    }
}

/// The shape of a set of replica groups, found once per set.
#[derive(Clone, Copy)]
struct GroupShape {
    /// Members of a group.
    size: i64,
    /// Nodes a group spans.
    nodes: i64,
    /// Whether the groups join the same TP rank of different DP replicas
    /// (the data-parallel groups).
    data_parallel: bool,
    /// Whether a group spans pipeline stages (a pipeline's sends in the
    /// all-gather form, or its loss summed over the stages).
    across_stages: bool,
}

#[derive(Default)]
struct GroupShapes(HashMap<ReplicaGroups, GroupShape>);

impl GroupShapes {
    fn shape(&mut self, groups: &ReplicaGroups, placement: &Placement) -> GroupShape {
        if let Some(s) = self.0.get(groups) {
            return *s;
        }
        let world = placement.parallel.world();
        let mut listed = groups.expanded();
        if listed.is_empty() {
            listed = vec![(0..world).collect()];
        }
        let first = listed.first().cloned().unwrap_or_default();
        let node = |r: &i64| r / placement.cores_per_node;
        let mut nodes: Vec<i64> = first.iter().map(node).collect();
        nodes.dedup();
        let p = &placement.parallel;
        let data_parallel = first.len() > 1
            && first
                .iter()
                .all(|&r| p.tp_rank(r) == p.tp_rank(first[0]) && p.stage(r) == p.stage(first[0]))
            && first.iter().any(|&r| p.replica(r) != p.replica(first[0]));
        let across_stages = first.iter().any(|&r| p.stage(r) != p.stage(first[0]));
        let shape = GroupShape {
            size: first.len() as i64,
            nodes: nodes.len() as i64,
            data_parallel,
            across_stages,
        };
        self.0.insert(groups.clone(), shape);
        shape
    }
}

/// One collective's traffic per rank, and whether it is data-parallel.
fn collective_traffic(
    c: &Computation,
    id: InstrId,
    placement: &Placement,
    groups: &mut GroupShapes,
) -> Option<(Traffic, Kind)> {
    let instr = c.instr(id);
    let operand_bytes = || {
        c.operand_ids(id)
            .iter()
            .map(|&o| c.instr(o).shape.byte_size() as f64)
            .sum::<f64>()
    };
    let result_bytes = instr.shape.byte_size() as f64;
    // The bytes of the whole tensor a ring moves a share of; an
    // all-gather-start's result holds its operands beside the gathered
    // tensors, so its whole is found from the operands and the group.
    let (ring, bytes) = match &instr.op {
        Op::AllReduce { .. } | Op::AllReduceStart { .. } => (Ring::Reduce, result_bytes),
        Op::AllGather { .. } => (Ring::Share, result_bytes),
        Op::AllGatherStart { collective, .. } => {
            let size = groups.shape(&collective.replica_groups, placement).size;
            (Ring::Share, operand_bytes() * size as f64)
        }
        Op::ReduceScatter { .. } | Op::AllToAll { .. } | Op::RaggedAllToAll { .. } => {
            (Ring::Share, operand_bytes())
        }
        Op::CollectiveBroadcast { .. } => (Ring::Share, result_bytes),
        Op::CollectivePermute { pairs, .. } | Op::CollectivePermuteStart { pairs, .. } => {
            let node = |r: i64| r / placement.cores_per_node;
            let crosses = pairs.iter().any(|&(s, t)| node(s) != node(t));
            let bytes = operand_bytes();
            let t = if crosses {
                Traffic {
                    network_bytes: bytes,
                    network_steps: 1.0,
                    ..Traffic::default()
                }
            } else {
                Traffic {
                    link_bytes: bytes,
                    link_steps: 1.0,
                    ..Traffic::default()
                }
            };
            // A ring's pass is context parallelism's exchange, which
            // attention waits for as it waits for an all-gather's keys.
            let kind = match in_scope(&instr.metadata.op_name, scope::CONTEXT_RING) {
                true => Kind::Exposed,
                false => Kind::Send,
            };
            return Some((t, kind));
        }
        // Dones, and the ranks' own numbers, move nothing.
        _ => return None,
    };
    let collective = instr.op.collective()?;
    let shape = groups.shape(&collective.replica_groups, placement);
    let nodes = shape.nodes.max(1) as f64;
    let per_node = shape.size as f64 / nodes;
    let mut t = Traffic::default();
    if per_node > 1.0 {
        t.link_bytes = ring.fraction(per_node) * bytes;
        t.link_steps = ring.steps(per_node);
    }
    if nodes > 1.0 {
        // After the members of a node have combined their parts over
        // NeuronLink, each carries 1 / per_node of the tensor across.
        t.network_bytes = ring.fraction(nodes) * bytes / per_node;
        t.network_steps = ring.steps(nodes);
    }
    // An all-gather across stages is a send in neuronx-distributed's form
    // (each rank taking its partner's half); the loss's all-reduce over
    // the stages is a scalar, exposed like any other.
    // An expert exchange's groups are DP replicas too, but the tokens wait
    // for it: in the all-to-all form and the all-gather form alike (its
    // tokens gathered and outputs reduce-scattered inside the layers).
    // So is context parallelism's: its groups are replicas, and attention
    // waits for the keys and values it gathers.
    let op_name = &instr.metadata.op_name;
    let exchange = matches!(instr.op, Op::AllToAll { .. })
        || in_scope(op_name, scope::EXPERTS)
        || in_scope(op_name, scope::CONTEXT_GATHER);
    let kind = match (
        &instr.op,
        shape.data_parallel && !exchange,
        shape.across_stages,
    ) {
        (_, true, _) => Kind::DataParallel,
        (Op::AllGather { .. }, _, true) => Kind::Send,
        _ => Kind::Exposed,
    };
    Some((t, kind))
}

/// Whether an instruction's provenance is under component `name` (a
/// layer's experts, its context gather: the forward pass's scope, or the
/// backward's of it).
fn in_scope(op_name: &str, name: &str) -> bool {
    scope::prefix_through(op_name, |part| part == name).is_some()
}

/// Which of a program's traffic a collective's is.
#[derive(Clone, Copy)]
enum Kind {
    Exposed,
    Send,
    DataParallel,
}
