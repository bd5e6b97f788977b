//! Collectives run on XLA CPU, through hlatc's text and its proto alike.

mod common;
use common::*;

/// Collectives on one device: every group is that device alone, so an
/// all-reduce or all-gather hands the operand back and replica-id is 0.
const ONE_DEVICE_COLLECTIVES: &str = "HloModule test

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  r = f32[4] all-reduce(x), replica_groups={{0}}, to_apply=sum
  g = f32[4] all-gather(r), replica_groups={}, dimensions={0}
  s = f32[4] reduce-scatter(g), replica_groups=[1,1]<=[1], dimensions={0}, to_apply=sum
  p = f32[4] collective-permute(s), source_target_pairs={{0,0}}
  a = f32[4] all-to-all(p), replica_groups={{0}}, dimensions={0}
  id = u32[] replica-id()
  ROOT t = (f32[4], u32[]) tuple(a, id)
}
";

#[test]
fn collectives_run_on_one_device() {
    round_trips(ONE_DEVICE_COLLECTIVES);
    let out = run(
        ONE_DEVICE_COLLECTIVES,
        &[f32s(&[4], &[1.0, -2.0, 3.5, 0.25])],
    );
    assert_values(&out[0], &[1.0, -2.0, 3.5, 0.25], 0.0);
    assert_values(&out[1], &[0.0], 0.0);
}
