//! `bound_loops`: every while loop gets a trip counter in its state and a
//! bound in its condition, and the module still verifies.

use hlatc_compiler::{formats::text, verify, Op};
use hlatc_passes::bound_loops;

const COUNTING: &str = "HloModule m
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  limit = s32[] constant(100)
  ROOT lt = pred[] compare(i, limit), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[2] get-tuple-element(s), index=1
  y = f32[2] add(x, x)
  ROOT t = (s32[], f32[2]) tuple(next, y)
}
ENTRY e {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, x)
  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body
}
";

#[test]
fn every_loop_gets_a_counted_state_and_still_verifies() {
    let mut m = text::parse_module(COUNTING).unwrap();
    assert_eq!(bound_loops(&mut m, 3).unwrap(), 1);
    verify(&m).unwrap();
    let e = m.entry();
    let root = e.instr(e.root().unwrap());
    assert_eq!(root.op, Op::GetTupleElement { index: 0 });
    assert_eq!(root.shape.to_string(), "(s32[], f32[2]{0})");
    let printed = text::print_module(&m);
    assert!(printed.contains("condition=w.bounded_condition, body=w.bounded_body"));
    assert!(printed.contains("s32[] constant(3)"), "{printed}");
    // Bounding again bounds the new loop (and leaves the old ones'
    // computations called from the new ones).
    assert_eq!(bound_loops(&mut m, 3).unwrap(), 1);
    verify(&m).unwrap();
    // A schedule does not hold the new instructions (XLA's test 05001).
    let scheduled = COUNTING.replace("HloModule m", "HloModule m, is_scheduled=true");
    let mut m = text::parse_module(&scheduled).unwrap();
    assert!(m.is_scheduled);
    bound_loops(&mut m, 3).unwrap();
    assert!(!m.is_scheduled);
}

#[test]
fn a_module_without_loops_is_left_alone() {
    let src = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n";
    let mut m = text::parse_module(src).unwrap();
    assert_eq!(bound_loops(&mut m, 3).unwrap(), 0);
    assert_eq!(
        text::print_module(&m),
        text::print_module(&text::parse_module(src).unwrap())
    );
}
