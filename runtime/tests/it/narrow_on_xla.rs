//! `narrow-64-bit-integers` keeps every value bit for bit, on XLA CPU: the
//! torch-xla steps (whose token ids, positions and masks are s64) and a
//! module of every op it narrows give identical outputs before and after,
//! and what the pre-flight warns about shrinks.

use crate::support::assert_identical;
use hlatc_compiler::{Literal, Module};
use hlatc_passes::neuron_check::{check_module, Chip, Sdk};
use hlatc_passes::{pipeline_from_names, PassContext, Target};
use hlatc_runtime::{read_safetensors, Runtime};
use std::path::Path;

fn narrowed(m: &Module) -> (Module, bool) {
    let mut m = m.clone();
    let report = pipeline_from_names("narrow", &["narrow-64-bit-integers"])
        .unwrap()
        .run_module(&mut m, &mut PassContext::new(Target::Neuron))
        .unwrap();
    (m, report.changed())
}

/// How many 64-bit values the pre-flight says neuronx-cc narrows.
fn narrowing_warnings(m: &Module) -> usize {
    check_module(m, Chip::Trn1, Sdk::V2_32)
        .findings
        .iter()
        .filter(|f| f.rule.id == "narrowed-64-bit-integer")
        .count()
}

#[test]
fn torch_xlas_causal_step_is_bit_for_bit_the_same() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torch_xla");
    let module = crate::support::read_module(&dir.join("torch_xla_llama_step.causal.hlo"));
    let ins =
        read_safetensors(&dir.join("torch_xla_llama_step.causal.inputs.safetensors")).unwrap();
    let inputs: Vec<Literal> = (0..ins.len())
        .map(|i| ins[&format!("arg{i}")].clone())
        .collect();
    let (m, changed) = narrowed(&module);
    assert!(changed);
    let want = rt.compile(&module).unwrap().run(&inputs).unwrap();
    let got = rt.compile(&m).unwrap().run(&inputs).unwrap();
    assert_identical("causal step", &got, &want);
    // Its positions and mask arithmetic (iota, constants) now say s32;
    // the token ids it is fed stay s64.
    assert_eq!(narrowing_warnings(&module), 125);
    assert_eq!(narrowing_warnings(&m), 60);
}

#[test]
fn every_op_it_narrows_keeps_its_values() {
    // Interval arithmetic at the edges of s32: 2^31 - 1 is reached, not
    // passed; a parameter's values stay unknown and 64-bit.
    let src = "HloModule m\n\nENTRY e {\n  p = s64[4] parameter(0)\n  i = s64[4] iota(), iota_dimension=0\n  big = s64[] constant(2147483644)\n  bigs = s64[4] broadcast(big), dimensions={}\n  top = s64[4] add(i, bigs)\n  neg = s64[4] negate(top)\n  two = s64[] constant(2)\n  twos = s64[4] broadcast(two), dimensions={}\n  prod = s64[4] multiply(i, twos)\n  diff = s64[4] subtract(prod, i)\n  mx = s64[4] maximum(diff, twos)\n  mn = s64[4] minimum(mx, i)\n  a = s64[4] abs(neg)\n  r = s64[4] reverse(mn), dimensions={0}\n  cat = s64[8] concatenate(r, a), dimensions={0}\n  sl = s64[4] slice(cat), slice={[2:6]}\n  rs = s64[2,2] reshape(sl)\n  tr = s64[2,2] transpose(rs), dimensions={1,0}\n  b = pred[4] compare(i, twos), direction=LT\n  sel = s64[4] select(b, i, neg)\n  zero = s64[] constant(0)\n  pd = s64[6] pad(sel, zero), padding=1_1\n  s8 = s8[4] constant({-128, 0, 1, 127})\n  w8 = s64[4] convert(s8)\n  lt = pred[4] compare(w8, i), direction=LT\n  f = f32[4] convert(top)\n  mixed = s64[4] add(p, sel)\n  ROOT t = (s64[2,2], s64[6], pred[4], f32[4], s64[4], pred[4]) tuple(tr, pd, lt, f, mixed, b)\n}\n";
    let module = hlatc_compiler::formats::text::parse_module(src).unwrap();
    hlatc_compiler::verify(&module).unwrap();
    let (m, changed) = narrowed(&module);
    assert!(changed);
    let printed = hlatc_compiler::formats::text::print_module(&m);
    for narrow in [
        "top = s32[4]",
        "neg = s32[4]",
        "cat = s32[8]",
        "sel = s32[4]",
        "w8 = s32[4]",
    ] {
        assert!(printed.contains(narrow), "{narrow}\n{printed}");
    }
    assert!(printed.contains("p = s64[4]{0} parameter(0)"), "{printed}");
    assert!(
        printed.contains("mixed = s64[4]{0} add(p, sel.wide)"),
        "{printed}"
    );
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let p = Literal::from_scalars(
        hlatc_compiler::ElementType::S64,
        vec![4],
        &[
            hlatc_compiler::Scalar::Int(i64::MIN),
            hlatc_compiler::Scalar::Int(-1),
            hlatc_compiler::Scalar::Int(1 << 40),
            hlatc_compiler::Scalar::Int(i64::MAX - 10),
        ],
    )
    .unwrap();
    let want = rt
        .compile(&module)
        .unwrap()
        .run(std::slice::from_ref(&p))
        .unwrap();
    let got = rt.compile(&m).unwrap().run(&[p]).unwrap();
    assert_identical("every op", &got, &want);
}
