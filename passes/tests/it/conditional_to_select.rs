//! `conditional-to-select`: a conditional whose branches are small becomes
//! a select of both branches' values; one over the bound is left alone
//! and said so.

use hlatc_compiler::{formats::text, verify};
use hlatc_passes::{ConditionalToSelect, Pass, PassContext, Target, MAX_BRANCH_INSTRUCTIONS};

fn run(src: &str) -> (String, bool, Vec<String>) {
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Neuron);
    let changed = ConditionalToSelect.run(&mut m, &mut ctx).unwrap();
    verify(&m).unwrap_or_else(|e| panic!("{e}\n{}", text::print_module(&m)));
    (text::print_module(&m), changed, ctx.notes().to_vec())
}

#[test]
fn a_pred_conditional_becomes_a_select_of_both_branches() {
    let (out, changed, notes) = run(
        "HloModule m\n\nneg {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n\nexp {\n  b = f32[4] parameter(0)\n  ROOT e = f32[4] exponential(b)\n}\n\nENTRY e {\n  p = pred[] parameter(0)\n  x = f32[4] parameter(1)\n  ROOT c = f32[4] conditional(p, x, x), true_computation=neg, false_computation=exp\n}\n",
    );
    assert!(changed);
    assert!(!out.contains("conditional("), "{out}");
    assert!(out.contains("select(broadcast, n.1, e.1)"), "{out}");
    assert!(notes[0].contains("1 conditional(s)"), "{notes:?}");
}

#[test]
fn an_index_conditional_becomes_a_chain_ending_in_the_last_branch() {
    let (out, changed, _) = run(
        "HloModule m\n\nb0 {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n\nb1 {\n  b = f32[] parameter(0)\n  ROOT e = f32[] exponential(b)\n}\n\nb2 {\n  ROOT c = f32[] parameter(0)\n}\n\nENTRY e {\n  i = s32[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT k = f32[] conditional(i, x, x, x), branch_computations={b0, b1, b2}\n}\n",
    );
    assert!(changed);
    assert_eq!(out.matches("select(").count(), 2, "{out}");
    assert_eq!(out.matches("direction=EQ").count(), 2, "{out}");
}

#[test]
fn a_branch_over_the_bound_is_left_alone_and_said_so() {
    let body: String = (0..=MAX_BRANCH_INSTRUCTIONS)
        .map(|k| {
            let from = if k == 0 {
                "a".into()
            } else {
                format!("n{}", k - 1)
            };
            format!("  n{k} = f32[] negate({from})\n")
        })
        .collect();
    let last = MAX_BRANCH_INSTRUCTIONS;
    let src = format!(
        "HloModule m\n\nbig {{\n  a = f32[] parameter(0)\n{body}  ROOT r = f32[] copy(n{last})\n}}\n\nsmall {{\n  ROOT b = f32[] parameter(0)\n}}\n\nENTRY e {{\n  p = pred[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT c = f32[] conditional(p, x, x), true_computation=big, false_computation=small\n}}\n"
    );
    let (out, changed, notes) = run(&src);
    assert!(!changed);
    assert!(out.contains("conditional("), "{out}");
    assert!(notes[0].contains("above the bound of 16"), "{notes:?}");
}
