//! Passes keep what a sharding says: value numbering never merges
//! instructions whose shardings differ.

use hlatc_compiler::formats::text;

#[test]
fn cse_keeps_instructions_that_differ_only_in_sharding_apart() {
    use hlatc_passes::{Cse, Pass, PassContext, Target};
    let src = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  a = f32[4] negate(p), sharding={replicated}\n  b = f32[4] negate(p), sharding={maximal device=1}\n  c = f32[4] negate(p), sharding={replicated}\n  s = f32[4] add(a, b)\n  ROOT r = f32[4] add(s, c)\n}\n";
    let mut m = text::parse_module(src).unwrap();
    Cse.run(&mut m, &mut PassContext::new(Target::Cpu)).unwrap();
    let negates: Vec<String> = m
        .entry()
        .ids()
        .filter(|&id| m.entry().instr(id).op.opcode() == "negate")
        .map(|id| m.entry().instr(id).name.clone())
        .collect();
    // `c` repeats `a` (same sharding) and goes; `b` stays.
    assert_eq!(negates.len(), 2, "{negates:?}");
    assert!(!negates.contains(&"c".to_string()));
}
