//! `sort-to-topk`: a descending sort sliced to its first k becomes Neuron's
//! TopK custom call (XLA's topk on CPU); any other sort is left alone.

use hlatc_compiler::{formats::text, verify};
use hlatc_passes::{Pass, PassContext, SortToTopK, Target};

const TOPK: &str = "HloModule m\n\ngt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n  ROOT g = pred[] compare(a, b), direction=GT\n}\n\nENTRY e {\n  x = f32[2,8] parameter(0)\n  i = s32[2,8] iota(), iota_dimension=1\n  s = (f32[2,8], s32[2,8]) sort(x, i), dimensions={1}, is_stable=true, to_apply=gt\n  v = f32[2,8] get-tuple-element(s), index=0\n  j = s32[2,8] get-tuple-element(s), index=1\n  vk = f32[2,3] slice(v), slice={[0:2], [0:3]}\n  jk = s32[2,3] slice(j), slice={[0:2], [0:3]}\n  ROOT t = (f32[2,3], s32[2,3]) tuple(vk, jk)\n}\n";

fn run(src: &str, target: Target) -> (String, bool, Vec<String>) {
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(target);
    let changed = SortToTopK.run(&mut m, &mut ctx).unwrap();
    verify(&m).unwrap_or_else(|e| panic!("{e}\n{}", text::print_module(&m)));
    (text::print_module(&m), changed, ctx.notes().to_vec())
}

#[test]
fn a_descending_sort_sliced_to_k_becomes_the_neuron_topk() {
    let (out, changed, notes) = run(TOPK, Target::Neuron);
    assert!(changed);
    assert!(!out.contains("sort("), "{out}");
    assert!(
        out.contains(
            "(f32[2,3]{1,0}, u32[2,3]{1,0}) custom-call(x), custom_call_target=\"AwsNeuronTopK\""
        ),
        "{out}"
    );
    assert!(out.contains("backend_config=\"3\""), "{out}");
    assert!(out.contains("s32[2,3]{1,0} convert("), "{out}");
    assert!(notes[0].contains("%s (k=3)"), "{notes:?}");
}

#[test]
fn on_cpu_it_is_xlas_topk() {
    let (out, changed, _) = run(TOPK, Target::Cpu);
    assert!(changed);
    assert!(out.contains("topk(x), k=3, largest=true"), "{out}");
    assert!(!out.contains("convert("), "{out}");
}

#[test]
fn an_ascending_sort_or_one_read_whole_is_left_alone() {
    for (src, why) in [
        (TOPK.replace("direction=GT", "direction=LT"), "comparator"),
        (
            TOPK.replace("tuple(vk, jk)", "tuple(vk, jk, v)").replace(
                "(f32[2,3], s32[2,3]) tuple",
                "(f32[2,3], s32[2,3], f32[2,8]) tuple",
            ),
            "other than as their first k",
        ),
    ] {
        let (out, changed, notes) = run(&src, Target::Neuron);
        assert!(!changed, "{src}");
        assert!(out.contains("sort("), "{out}");
        assert!(notes[0].contains(why), "{notes:?}");
    }
}
