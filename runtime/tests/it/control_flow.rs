//! `while`, `conditional` and `fusion` run on XLA CPU with the values their
//! callees give, through hlatc's text and its proto alike.

use crate::common::*;

/// Sums 1..=n of a counter with a while loop: state (i, acc), body adds i
/// to acc and bumps i, condition is i <= n.
const WHILE_SUM: &str = "HloModule test

cond {
  s = (s32[], f32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=2
  ROOT le = pred[] compare(i, n), direction=LE
}

body {
  s = (s32[], f32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[] get-tuple-element(s), index=1
  n = s32[] get-tuple-element(s), index=2
  fi = f32[] convert(i)
  acc2 = f32[] add(acc, fi)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[], s32[]) tuple(i2, acc2, n)
}

ENTRY main {
  n = s32[] parameter(0)
  one = s32[] constant(1)
  zero = f32[] constant(0)
  init = (s32[], f32[], s32[]) tuple(one, zero, n)
  w = (s32[], f32[], s32[]) while(init), condition=cond, body=body
  ROOT acc = f32[] get-tuple-element(w), index=1
}
";

/// Branch 0 doubles, branch 1 negates, branch 2 (and any index out of
/// range) squares.
const SWITCH: &str = "HloModule test

double {
  x = f32[2] parameter(0)
  ROOT d = f32[2] add(x, x)
}

neg {
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
}

square {
  x = f32[2] parameter(0)
  ROOT s = f32[2] multiply(x, x)
}

ENTRY main {
  k = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(k, x, x, x), branch_computations={double, neg, square}
}
";

const IF_ELSE: &str = "HloModule test

double {
  x = f32[2] parameter(0)
  ROOT d = f32[2] add(x, x)
}

neg {
  x = f32[2] parameter(0)
  ROOT n = f32[2] negate(x)
}

ENTRY main {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(p, x, x), true_computation=double, false_computation=neg
}
";

const FUSED: &str = "HloModule test

fused_computation {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  m = f32[3] multiply(a, b)
  ROOT r = f32[3] add(m, a)
}

ENTRY main {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT f = f32[3] fusion(x, y), kind=kLoop, calls=fused_computation
}
";

#[test]
fn while_loop_runs_its_body_until_the_condition_fails() {
    round_trips(WHILE_SUM);
    for (n, sum) in [(0, 0.0), (1, 1.0), (4, 10.0), (100, 5050.0)] {
        let out = run(
            WHILE_SUM,
            &[lit(hlatc_compiler::ElementType::S32, &[], &[n as f64])],
        );
        assert_values(&out[0], &[sum], 0.0);
    }
}

#[test]
fn conditional_runs_the_selected_branch() {
    round_trips(SWITCH);
    round_trips(IF_ELSE);
    let x = f32s(&[2], &[3.0, -1.5]);
    let s32 = |k: f64| lit(hlatc_compiler::ElementType::S32, &[], &[k]);
    assert_values(&run(SWITCH, &[s32(0.0), x.clone()])[0], &[6.0, -3.0], 0.0);
    assert_values(&run(SWITCH, &[s32(1.0), x.clone()])[0], &[-3.0, 1.5], 0.0);
    assert_values(&run(SWITCH, &[s32(2.0), x.clone()])[0], &[9.0, 2.25], 0.0);
    // Out of range, either way: the last branch.
    assert_values(&run(SWITCH, &[s32(7.0), x.clone()])[0], &[9.0, 2.25], 0.0);
    assert_values(&run(SWITCH, &[s32(-1.0), x.clone()])[0], &[9.0, 2.25], 0.0);
    let p = |b: f64| lit(hlatc_compiler::ElementType::Pred, &[], &[b]);
    assert_values(&run(IF_ELSE, &[p(1.0), x.clone()])[0], &[6.0, -3.0], 0.0);
    assert_values(&run(IF_ELSE, &[p(0.0), x])[0], &[-3.0, 1.5], 0.0);
}

/// A fusion returning a tuple, as XLA's own passes make them: XLA CPU
/// aborts compiling one, so the runtime hands it a call (XLA test 01869).
const MULTI_OUTPUT_FUSION: &str = "HloModule test

fc {
  p0 = s32[3] parameter(0)
  add = s32[3] add(p0, p0)
  mul = s32[3] multiply(p0, p0)
  ROOT t = (s32[3], s32[3]) tuple(add, mul)
}

ENTRY entry {
  p0 = s32[3] parameter(0)
  f = (s32[3], s32[3]) fusion(p0), kind=kLoop, calls=fc
  g0 = s32[3] get-tuple-element(f), index=0
  g1 = s32[3] get-tuple-element(f), index=1
  ROOT r = s32[3] subtract(g1, g0)
}
";

#[test]
fn a_multi_output_fusion_runs() {
    round_trips(MULTI_OUTPUT_FUSION);
    let x = lit(hlatc_compiler::ElementType::S32, &[3], &[3.0, -2.0, 0.0]);
    assert_values(&run(MULTI_OUTPUT_FUSION, &[x])[0], &[3.0, 8.0, 0.0], 0.0);
}

#[test]
fn fusion_computes_its_fused_computation() {
    round_trips(FUSED);
    let out = run(
        FUSED,
        &[f32s(&[3], &[1.0, 2.0, -3.0]), f32s(&[3], &[4.0, 0.5, 2.0])],
    );
    assert_values(&out[0], &[5.0, 3.0, -9.0], 0.0);
}

/// An async-start in a loop's body whose operand the loop never changes:
/// XLA CPU's loop-invariant code motion hoists it and aborts (XLA's test
/// 00542). The runtime hands XLA CPU a start and done as a call
/// (`async-to-sync`), and the loop runs; a start it cannot make a call (its
/// bundle read elsewhere too) is refused first, naming it.
#[test]
fn an_async_start_in_a_loop_runs_as_a_call_or_is_refused_before_xla_cpu_aborts() {
    let src = "HloModule test

negated {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
}

body {
  s = (s32[], f32[2], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  src = f32[2] get-tuple-element(s), index=1
  start = ((f32[2]), f32[2], s32[]) async-start(src), calls=negated
  done = f32[2] async-done(start), calls=negated
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT t = (s32[], f32[2], f32[2]) tuple(next, src, done)
}

cond {
  s = (s32[], f32[2], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}

ENTRY main {
  x = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2], f32[2]) tuple(zero, x, x)
  w = (s32[], f32[2], f32[2]) while(init), condition=cond, body=body
  ROOT r = f32[2] get-tuple-element(w), index=2
}
";
    let out = run(src, &[f32s(&[2], &[1.5, -2.0])]);
    assert_values(&out[0], &[-1.5, 2.0], 0.0);
    let read_elsewhere = src.replace(
        "  ROOT t = (s32[], f32[2], f32[2]) tuple(next, src, done)",
        "  held = s32[] get-tuple-element(start), index=2\n  ROOT t = (s32[], f32[2], f32[2]) tuple(next, src, done)",
    );
    let m = hlatc_compiler::formats::text::parse_module(&read_elsewhere).unwrap();
    let e = runtime().compile(&m).err().expect("refused").to_string();
    assert!(
        e.contains("computation 'body', instruction 'start': XLA CPU aborts hoisting an async-start out of a while loop"),
        "{e}"
    );
}

/// A loop over a tuple taken whole as the entry's parameter, returning a
/// tuple inside a tuple, as XLA's own tests write them: the runtime passes
/// the parameter as its leaves (`state.0`, `state.1`, `state.2`) and reads
/// the result's leaves back in order.
#[test]
fn tuples_at_the_entry_go_in_and_come_out_as_their_leaves() {
    // WHILE_SUM's loop, under another entry.
    let src = format!(
        "{}\nENTRY tupled {{\n  state = (s32[], f32[], s32[]) parameter(0)\n  w = (s32[], f32[], s32[]) while(state), condition=cond, body=body\n  acc = f32[] get-tuple-element(w), index=1\n  ROOT r = (f32[], (s32[], f32[], s32[])) tuple(acc, w)\n}}\n",
        WHILE_SUM[..WHILE_SUM.find("ENTRY").unwrap()].trim_end()
    );
    let m = hlatc_compiler::formats::text::parse_module(&src).unwrap();
    let p = runtime().compile(&m).unwrap();
    let names: Vec<&str> = p.parameters().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["state.0", "state.1", "state.2"]);
    assert_eq!(
        p.rewrites(),
        [hlatc_runtime::Rewrite::FlatEntry {
            parameters: vec!["state.0".into(), "state.1".into(), "state.2".into()]
        }]
    );
    let s32 = |v: f64| lit(hlatc_compiler::ElementType::S32, &[], &[v]);
    let f32 = |v: f64| lit(hlatc_compiler::ElementType::F32, &[], &[v]);
    let out = p.run(&[s32(1.0), f32(0.5), s32(4.0)]).unwrap();
    let got: Vec<f64> = out.iter().map(|o| o.to_f64_vec()[0]).collect();
    assert_eq!(got, [10.5, 5.0, 10.5, 4.0]);
}
