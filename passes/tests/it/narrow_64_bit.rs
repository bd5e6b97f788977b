//! `narrow-64-bit-integers`: 64-bit integer values that fit in 32 bits are
//! computed in s32; parameters, and what must stay 64-bit, read them
//! converted back.

use hlatc_compiler::{formats::text, verify};
use hlatc_passes::{Narrow64BitIntegers, Pass, PassContext, Target};

fn run(src: &str) -> (String, bool) {
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Neuron);
    let changed = Narrow64BitIntegers.run(&mut m, &mut ctx).unwrap();
    verify(&m).unwrap_or_else(|e| panic!("{e}\n{}", text::print_module(&m)));
    (text::print_module(&m), changed)
}

#[test]
fn an_iota_compared_with_a_constant_is_computed_in_s32() {
    let (out, changed) = run(
        "HloModule m\nENTRY e {\n  i = s64[8] iota(), iota_dimension=0\n  k = s64[] constant(5)\n  b = s64[8] broadcast(k), dimensions={}\n  ROOT c = pred[8] compare(i, b), direction=LT\n}\n",
    );
    assert!(changed);
    assert!(!out.contains("s64"), "{out}");
    assert!(out.contains("i = s32[8]{0} iota()"), "{out}");
}

#[test]
fn what_stays_64_bit_reads_a_convert_back_and_parameters_stay() {
    let (out, changed) = run(
        "HloModule m\nENTRY e {\n  p = s64[4] parameter(0)\n  i = s64[4] iota(), iota_dimension=0\n  one = s64[] constant(1)\n  ones = s64[4] broadcast(one), dimensions={}\n  j = s64[4] add(i, ones)\n  c = pred[4] compare(j, ones), direction=GT\n  s = s64[4] add(p, i)\n  ROOT t = (s64[4], pred[4]) tuple(s, c)\n}\n",
    );
    assert!(changed);
    assert!(out.contains("p = s64[4]{0} parameter(0)"), "{out}");
    assert!(out.contains("i = s32[4]{0} iota()"), "{out}");
    assert!(out.contains("j = s32[4]{0} add(i, ones)"), "{out}");
    assert!(out.contains("i.wide = s64[4]{0} convert(i)"), "{out}");
    assert!(out.contains("s = s64[4]{0} add(p, i.wide)"), "{out}");
}

#[test]
fn a_value_beyond_32_bits_stays_and_so_does_what_only_it_reads() {
    let src = "HloModule m\nENTRY e {\n  i = s64[4] iota(), iota_dimension=0\n  k = s64[] constant(3000000000)\n  b = s64[4] broadcast(k), dimensions={}\n  ROOT s = s64[4] add(i, b)\n}\n";
    let (out, changed) = run(src);
    // The iota would fit, but its one reader stays 64-bit.
    assert!(!changed);
    assert_eq!(out, text::print_module(&text::parse_module(src).unwrap()));
}
