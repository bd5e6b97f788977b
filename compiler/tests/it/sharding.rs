//! Shardings (`sharding={...}`, `OpSharding`) are read in every form XLA
//! writes, kept on their instruction, printed back as written and carried
//! through the proto; a malformed one is refused where it goes wrong
//! (golden files: `compiler/tests/filetests/parse/sharding_*.hlo`, and
//! `parameter_replication_*` in `parse/` and `verify/`).

use hlatc_compiler::ir::sharding::{
    ShardingKind, SingleSharding, SubgroupKind, Subgroups, TileDevices, TiledSharding,
};
use hlatc_compiler::{formats::proto, formats::text, Sharding, ShardingError};

const SHARDED: &str = r#"HloModule m, entry_computation_layout={(f32[8,4]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0})->(f32[8,4]{1,0}, f32[8,4]{1,0})}

ENTRY e {
  p0 = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate metadata={op_name="a" source_line=3}}
  p1 = f32[8,4]{1,0} parameter(1), sharding={devices=[2,2]<=[2,2]T(1,0)}
  a = f32[8,4]{1,0} add(p0, p1), sharding={maximal device=3}
  p2 = f32[8,4]{1,0} parameter(2), sharding={devices=[4,1,2]<=[8] last_tile_dims={manual}}
  b = f32[8,4]{1,0} add(a, p2), sharding={replicated metadata={{op_name="x"}, {op_name="y"}}}
  c = f32[8,4]{1,0} negate(b), sharding={unknown shard_as 1}
  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(b, c), sharding={{manual}, {devices=[2,1]1,0 shard_like 2}}
}
"#;

fn sharding_of<'m>(m: &'m hlatc_compiler::Module, name: &str) -> &'m Sharding {
    let e = m.entry();
    e.instr(e.find(name).unwrap()).sharding.as_ref().unwrap()
}

#[test]
fn every_sharding_form_reads_prints_back_and_survives_the_proto() {
    let m = text::parse_module(SHARDED).unwrap();
    assert_eq!(text::print_module(&m), SHARDED);
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), SHARDED);

    let Sharding::Single(p0) = sharding_of(&m, "p0") else {
        panic!("p0 is one sharding")
    };
    let ShardingKind::Tiled(t) = &p0.kind else {
        panic!("p0 is tiled")
    };
    assert_eq!(t.dims, [2, 1, 2]);
    assert_eq!(t.devices, TileDevices::List(vec![0, 2, 1, 3]));
    assert_eq!(t.subgroups, Subgroups::ReplicateLast);
    assert_eq!(p0.metadata[0].op_name, "a");
    assert_eq!(p0.metadata[0].source_line, 3);

    let Sharding::Single(p1) = sharding_of(&m, "p1") else {
        panic!()
    };
    assert!(
        matches!(&p1.kind, ShardingKind::Tiled(t) if t.devices == TileDevices::Iota { reshape: vec![2, 2], transpose: vec![1, 0] })
    );
    let Sharding::Single(p2) = sharding_of(&m, "p2") else {
        panic!()
    };
    assert!(
        matches!(&p2.kind, ShardingKind::Tiled(t) if t.subgroups == Subgroups::Kinds(vec![SubgroupKind::Manual]))
    );
    let Sharding::Tuple(leaves) = sharding_of(&m, "t") else {
        panic!("t has one sharding per leaf")
    };
    assert_eq!(leaves.len(), 2);
    assert_eq!(
        leaves[1].shard_group.map(|g| (g.id, g.like)),
        Some((2, true))
    );
}

#[test]
fn parameter_replication_is_kept_per_leaf_and_checked() {
    let src = "HloModule m, entry_computation_layout={(f32[2]{0}, (f32[2]{0}, s32[]))->f32[2]{0}}\n\nENTRY e {\n  p1 = (f32[2]{0}, s32[]) parameter(1), parameter_replication={false,true}\n  p0 = f32[2]{0} parameter(0), parameter_replication={true}\n  ROOT n = f32[2]{0} negate(p0)\n}\n";
    let m = text::parse_module(src).unwrap();
    assert_eq!(text::print_module(&m), src);
    let e = m.entry();
    assert_eq!(
        e.instr(e.find("p1").unwrap()).parameter_replication,
        Some(vec![false, true])
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), src);
}

fn tiled(dims: Vec<i64>, devices: TileDevices) -> Sharding {
    Sharding::Single(SingleSharding::new(ShardingKind::Tiled(TiledSharding {
        dims,
        devices,
        subgroups: Subgroups::None,
    })))
}

#[test]
fn malformed_shardings_are_named() {
    let twice = tiled(vec![2], TileDevices::List(vec![1, 1]));
    assert_eq!(twice.check(), Err(ShardingError::DeviceTwice(1)));
    let short = tiled(
        vec![2, 2],
        TileDevices::Iota {
            reshape: vec![2],
            transpose: vec![],
        },
    );
    assert_eq!(
        short.check().unwrap_err().to_string(),
        "tile assignment [2,2] has 4 tiles but the device iota <=[2] has 2"
    );
    let unpermuted = tiled(
        vec![4],
        TileDevices::Iota {
            reshape: vec![2, 2],
            transpose: vec![1, 1],
        },
    );
    assert_eq!(
        unpermuted.check().unwrap_err().to_string(),
        "T(1,1) does not permute the 2 iota dimensions"
    );
}
