//! What XLA CPU is given instead of what it has no kernel or thunk for:
//! bitcasts as transposes and reshapes, mixed-precision dots over widened
//! operands, tuples at the entry's edges as their leaves, and which
//! emitters the flags choose.

use hlatc_compiler::{formats::text, verify, ElementType};
use hlatc_passes::targets::cpu::xla_cpu_flags::Emitters;
use hlatc_passes::targets::cpu::{lower, widens_exactly};
use hlatc_passes::{BitcastToReshape, Pass, PassContext, Target, WidenMixedDots};

fn rewritten(src: &str) -> String {
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    assert!(BitcastToReshape.run(&mut m, &mut ctx).unwrap());
    verify(&m).unwrap();
    text::print_module(&m)
}

#[test]
fn a_column_major_operand_is_transposed_into_its_physical_order() {
    let out = rewritten(
        "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT b = f32[6]{0} bitcast(p)\n}\n",
    );
    assert!(
        out.contains("b.1 = f32[3,2]{1,0} transpose(p), dimensions={1,0}"),
        "{out}"
    );
    assert!(out.contains("ROOT b.2 = f32[6]{0} reshape(b.1)"), "{out}");
    assert!(!out.contains("bitcast"), "{out}");
}

#[test]
fn a_result_layout_is_reached_by_a_transpose_back() {
    let out = rewritten(
        "HloModule m\nENTRY e {\n  p = f32[6]{0} parameter(0)\n  ROOT b = f32[2,3]{0,1} bitcast(p)\n}\n",
    );
    assert!(out.contains("b.1 = f32[3,2]{1,0} reshape(p)"), "{out}");
    assert!(
        out.contains("ROOT b.2 = f32[2,3]{0,1} transpose(b.1), dimensions={1,0}"),
        "{out}"
    );
}

#[test]
fn a_bitcast_that_changes_the_type_is_left_alone() {
    let src = "HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT b = s32[2]{0} bitcast(p)\n}\n";
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    assert!(!BitcastToReshape.run(&mut m, &mut ctx).unwrap());
}

#[test]
fn bf16_operands_of_an_f32_dot_are_converted_first() {
    let mut m = text::parse_module(
        "HloModule m\nENTRY e {\n a = bf16[2,3] parameter(0)\n b = bf16[3,4] parameter(1)\n \
         ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
    )
    .unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    assert!(WidenMixedDots.run(&mut m, &mut ctx).unwrap());
    verify(&m).unwrap();
    let printed = text::print_module(&m);
    assert!(printed.contains("f32[2,3]{1,0} convert(a)"), "{printed}");
    assert!(printed.contains("f32[3,4]{1,0} convert(b)"), "{printed}");
    // A dot over its own type, or over integers, is left alone.
    let mut same = text::parse_module(
        "HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[3,4] parameter(1)\n \
         ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
    )
    .unwrap();
    assert!(!WidenMixedDots.run(&mut same, &mut ctx).unwrap());
}

/// Exactly the conversions that lose nothing, into the float types a
/// dot accumulates in.
#[test]
fn only_exact_widenings_count() {
    use ElementType::*;
    for (narrow, wide) in [
        (Bf16, F32),
        (F16, F32),
        (F32, F64),
        (Bf16, F64),
        (F8E4M3FN, F16),
        (F8E5M2, Bf16),
        (F8E8M0FNU, Bf16),
        (F8E8M0FNU, F32),
        (F4E2M1FN, F16),
    ] {
        assert!(widens_exactly(narrow, wide), "{narrow} into {wide}");
    }
    for (narrow, wide) in [
        (F8E8M0FNU, F16),
        (Bf16, F16),
        (F16, Bf16),
        (F32, F32),
        (F32, Bf16),
        (S8, F32),
        (S8, S32),
        (F4E2M1FN, F8E4M3FN),
        (C64, C128),
    ] {
        assert!(!widens_exactly(narrow, wide), "{narrow} into {wide}");
    }
}

/// Through `lower`, which flattens the entry after the other rewrites
/// (none of which these modules need).
#[test]
fn tuple_parameters_and_nested_results_become_their_leaves() {
    let src = "HloModule m\nENTRY e {\n  a = f32[2] parameter(1)\n  t = (f32[3], (s32[], f32[2])) parameter(0)\n  x = f32[3] get-tuple-element(t), index=0\n  ROOT r = (f32[3], (f32[2], f32[2])) tuple(x, (f32[2], f32[2]) tuple(a, a))\n}\n";
    let m = text::parse_module(src).unwrap();
    let flat = lower(&m).unwrap().module.expect("edges to flatten");
    verify(&flat).unwrap();
    let e = flat.entry();
    let params: Vec<(String, String)> = e
        .parameters()
        .iter()
        .map(|&p| (e.instr(p).name.clone(), e.instr(p).shape.to_string()))
        .collect();
    let expected = [
        ("t.0", "f32[3]{0}"),
        ("t.1.0", "s32[]"),
        ("t.1.1", "f32[2]{0}"),
        ("a", "f32[2]{0}"),
    ];
    assert_eq!(
        params,
        expected.map(|(n, s)| (n.to_string(), s.to_string())),
        "parameters by number"
    );
    assert_eq!(
        flat.entry_result_shape().unwrap().to_string(),
        "(f32[3]{0}, f32[2]{0}, f32[2]{0})"
    );
    let flat_src = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = (f32[2], f32[2]) tuple(p, p)\n}\n";
    let flat_module = text::parse_module(flat_src).unwrap();
    assert!(lower(&flat_module).unwrap().module.is_none());
}

#[test]
fn the_last_spelling_of_the_flag_decides() {
    use Emitters::*;
    for (flags, emitters) in [
        ("", Fusion),
        ("--xla_backend_optimization_level=0", Fusion),
        ("--xla_cpu_use_fusion_emitters=false", Legacy),
        (
            "--xla_backend_optimization_level=0  --xla_cpu_use_fusion_emitters=FALSE",
            Legacy,
        ),
        ("--xla_cpu_use_fusion_emitters=0", Legacy),
        ("--xla_cpu_use_fusion_emitters", Fusion),
        (
            "--xla_cpu_use_fusion_emitters=false --xla_cpu_use_fusion_emitters=1",
            Fusion,
        ),
        (
            "--xla_cpu_use_fusion_emitters=true --xla_cpu_use_fusion_emitters=False",
            Legacy,
        ),
        ("--xla_cpu_use_fusion_emitters_x=false", Fusion),
    ] {
        assert_eq!(Emitters::from_flags(flags), emitters, "{flags}");
    }
}
