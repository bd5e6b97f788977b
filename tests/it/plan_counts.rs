//! The planner's counts of one program: collectives' traffic over
//! NeuronLink and the network by where their groups lie, and dots counted
//! in whole tiles.

use hlatc::models::Parallelism;
use hlatc::plan::counts::{Placement, ProgramCounts, Traffic};
use hlatc::text::parse_module;
use hlatc::Module;

/// `f32[1024,1024]` (4 MiB) all-reduced over `groups`, and a dot.
fn module(groups: &str) -> Module {
    parse_module(&format!(
        "HloModule m\n\
         add {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\
         ENTRY e {{\n  x = f32[1024,1024] parameter(0)\n  w = bf16[1024,100] parameter(1)\n  \
         xb = bf16[1024,1024] convert(x)\n  \
         d = bf16[1024,100] dot(xb, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
         r = f32[1024,1024] all-reduce(x), replica_groups={groups}, to_apply=add\n  \
         ROOT t = (f32[1024,1024], bf16[1024,100]) tuple(r, d)\n}}\n"
    ))
    .unwrap()
}

fn placement(tp: i64, dp: i64, cores_per_node: i64) -> Placement {
    Placement {
        parallel: Parallelism {
            tp,
            dp,
            ..Parallelism::SINGLE
        },
        cores_per_node,
    }
}

const BYTES: f64 = 4.0 * 1024.0 * 1024.0;

#[test]
fn a_group_within_a_node_rings_over_neuronlink() {
    let c = ProgramCounts::of(&module("{{0,1,2,3}}"), &placement(4, 1, 32));
    // 2 (n - 1) / n of the bytes in 2 (n - 1) steps, nothing between nodes.
    assert_eq!(c.exposed.link_bytes, 1.5 * BYTES);
    assert_eq!(c.exposed.link_steps, 6.0);
    assert_eq!(c.exposed.network_bytes, 0.0);
    assert_eq!(c.data_parallel, Traffic::default());
    assert_eq!(c.collectives, 1);
}

#[test]
fn a_group_across_nodes_crosses_once_per_node_with_its_share() {
    // DP groups {0,2,4,6} and {1,3,5,7} of TP 2 x DP 4, two cores a
    // node: each group has 2 members on each of 2 nodes.
    let c = ProgramCounts::of(&module("{{0,2,4,6},{1,3,5,7}}"), &placement(2, 4, 4));
    let t = c.data_parallel;
    assert_eq!(t.link_bytes, 1.0 * BYTES); // 2 (2 - 1) / 2 within the node
    assert_eq!(t.link_steps, 2.0);
    // Each member carries half the tensor across: 2 (2 - 1) / 2 of it.
    assert_eq!(t.network_bytes, 0.5 * BYTES);
    assert_eq!(t.network_steps, 2.0);
    assert_eq!(c.exposed, Traffic::default());
}

#[test]
fn dots_are_counted_in_whole_tiles() {
    let c = ProgramCounts::of(&module("{{0,1}}"), &placement(2, 1, 32));
    // [1024, 1024] . [1024, 100]: 2 M N K without padding; with it, the
    // 100 columns fill one tile of 512 (stationary 100 rows: 8 x 1 x 2
    // tiles beats stationary 1024: 8 x 8 x 1).
    assert_eq!(c.dot_flops, 2.0 * 1024.0 * 100.0 * 1024.0);
    let tiles = 8.0 * 1.0 * 2.0;
    assert_eq!(c.matmul_flops, tiles * 2.0 * 128.0 * 128.0 * 512.0);
    assert_eq!(c.matmul_flops_f32, 0.0);
    // The convert feeds only the dot, which reads whole arrays: it is
    // written (2 MiB of bf16).
    assert_eq!(c.memory_bytes, 2.0 * 1024.0 * 1024.0);
}
