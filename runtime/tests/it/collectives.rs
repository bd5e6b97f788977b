//! Collectives run on XLA CPU, through hlatc's text and its proto alike.

use crate::common::*;

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

/// The async forms: started, then done, with the same values.
const ONE_DEVICE_ASYNC: &str = "HloModule test

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  rs = f32[4] all-reduce-start(x), replica_groups={{0}}, to_apply=sum
  r = f32[4] all-reduce-done(rs)
  gs = (f32[4], f32[4]) all-gather-start(r), replica_groups={{0}}, dimensions={0}
  g = f32[4] all-gather-done(gs)
  ps = (f32[4], f32[4], u32[], u32[]) collective-permute-start(g), source_target_pairs={{0,0}}
  ROOT p = f32[4] collective-permute-done(ps)
}
";

/// XLA CPU compiles no async collective (its thunk emitter has none), so
/// the runtime hands it each start and done as the one collective they
/// split (`async-to-sync`): the module runs, with the collectives' values.
/// A start read by anything else stays, and XLA's refusal comes back as an
/// error, not a crash.
#[test]
fn async_collectives_run_as_the_collectives_they_split() {
    round_trips(ONE_DEVICE_ASYNC);
    let x = f32s(&[4], &[1.0, -2.0, 3.5, 0.25]);
    let out = run(ONE_DEVICE_ASYNC, std::slice::from_ref(&x));
    assert_values(&out[0], &[1.0, -2.0, 3.5, 0.25], 0.0);
    let m = hlatc_compiler::formats::text::parse_module(ONE_DEVICE_ASYNC).unwrap();
    let p = runtime().compile(&m).unwrap();
    assert_eq!(p.rewrites(), [hlatc_runtime::Rewrite::AsyncToSync]);
    let plain = hlatc_compiler::formats::text::parse_module(ONE_DEVICE_COLLECTIVES).unwrap();
    assert!(runtime().compile(&plain).unwrap().rewrites().is_empty());
    let read_twice = ONE_DEVICE_ASYNC.replace(
        "  ROOT p = f32[4] collective-permute-done(ps)",
        "  p = f32[4] collective-permute-done(ps)\n  held = f32[4] get-tuple-element(ps), index=0\n  ROOT t = (f32[4], f32[4]) tuple(held, p)",
    );
    let m = hlatc_compiler::formats::text::parse_module(&read_twice).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    let e = match runtime().compile(&m) {
        Ok(_) => panic!("XLA CPU compiled an async collective"),
        Err(e) => e.to_string(),
    };
    // XLA names the start by its opcode (xla-cpu-pjrt 0.0.1) or by its
    // instruction (jaxlib 0.11's XLA: "instruction ps is live and cannot be
    // removed").
    assert!(
        e.contains("collective-permute-start") || e.contains("instruction 'ps'"),
        "{e}"
    );
}

/// A permute of several operands (XLA's combined form) runs on one device
/// and hands each back; the in-place form crashed XLA CPU with a segfault,
/// so it is refused before the plugin.
#[test]
fn combined_permutes_run_and_in_place_ones_are_refused() {
    let combined = entry("  x = f32[2] parameter(0)\n  y = f32[3] parameter(1)\n  ROOT p = (f32[2], f32[3]) collective-permute(x, y), source_target_pairs={{0,0}}");
    round_trips(&combined);
    let out = run(
        &combined,
        &[f32s(&[2], &[1.0, 2.0]), f32s(&[3], &[3.0, 4.0, 5.0])],
    );
    assert_values(&out[0], &[1.0, 2.0], 0.0);
    assert_values(&out[1], &[3.0, 4.0, 5.0], 0.0);
    let in_place = entry("  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  z = s32[] constant(0)\n  o = (s32[]) tuple(z)\n  ROOT p = f32[4] collective-permute(x, y, o, o), source_target_pairs={{0,0}}, slice_sizes={{2}}");
    let m = hlatc_compiler::formats::text::parse_module(&in_place).unwrap();
    let e = runtime().compile(&m).err().expect("refused").to_string();
    assert!(
        e.ends_with("instruction 'p': XLA CPU crashes (SIGSEGV) running an in-place collective-permute (slice_sizes); one that sends its operands whole runs"),
        "{e}"
    );
}

/// On its one device, a permute that sends to a device the run does not
/// have hands back zeros; one in which device 0 receives from another
/// throws a C++ exception out of the plugin (XLA's test 04808), so it is
/// refused first.
#[test]
fn a_permute_into_device_zero_from_a_missing_device_is_refused() {
    let sends_away = entry("  x = f32[2] parameter(0)\n  ROOT p = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,2}}");
    let out = run(&sends_away, &[f32s(&[2], &[1.0, 2.0])]);
    assert_values(&out[0], &[0.0, 0.0], 0.0);
    for pairs in ["{{1,0}}", "{{0,1},{2,0}}"] {
        let src = entry(&format!(
            "  x = f32[2] parameter(0)\n  ROOT p = f32[2] collective-permute(x), source_target_pairs={pairs}"
        ));
        let m = hlatc_compiler::formats::text::parse_module(&src).unwrap();
        let e = runtime().compile(&m).err().expect("refused").to_string();
        assert!(
            e.contains("instruction 'p': XLA CPU throws out of the plugin when device 0, the one it runs on, receives from device"),
            "{pairs}: {e}"
        );
    }
}

/// An all-gather over the one device gives back its operand; one written
/// to grow its dimension would leave XLA CPU's result partly unwritten
/// (XLA's tests 01605 and 06592 gave other values run to run), so it is
/// refused first.
#[test]
fn an_all_gather_that_would_leave_its_result_unwritten_is_refused() {
    let one = entry("  x = f32[2] parameter(0)\n  ROOT g = f32[2] all-gather(x), replica_groups={}, dimensions={0}");
    assert_values(&run(&one, &[f32s(&[2], &[1.0, 2.0])])[0], &[1.0, 2.0], 0.0);
    let grows = entry("  x = f32[2] parameter(0)\n  ROOT g = f32[8] all-gather(x), replica_groups={}, dimensions={0}");
    let m = hlatc_compiler::formats::text::parse_module(&grows).unwrap();
    let e = runtime().compile(&m).err().expect("refused").to_string();
    assert!(
        e.ends_with("instruction 'g': on the one device hlatc runs it on, XLA CPU gathers the one shard there is (2 along dimension 0) and leaves the rest of the 8 unwritten"),
        "{e}"
    );
}
