//! The rewrites of what neuronx-cc refuses, each proven on XLA CPU: a
//! module the pre-flight flags, the pass applied, the result clean for
//! trn1 and trn2 and giving the unrewritten module's outputs (bit for bit,
//! or within f32's precision for `narrow-f64`); and a near miss each pass
//! must leave alone or refuse.

use crate::support::assert_identical;
use hlatc::passes::neuron_check::{check_module, Chip, Sdk, Severity};
use hlatc::passes::{pipeline_from_names, PassContext, PassError, PipelineReport, Target};
use hlatc::runtime::Runtime;
use hlatc::{Literal, Module};

/// `passes` run over a copy of `m` for `target`, the verifier after each.
fn rewritten(
    m: &Module,
    passes: &[&str],
    target: Target,
) -> Result<(Module, PipelineReport), PassError> {
    let mut m = m.clone();
    let report = pipeline_from_names("rewrite", passes)?
        .run_module(&mut m, &mut PassContext::new(target))?;
    Ok((m, report))
}

/// The ids of the rules the pre-flight refuses `m` by, on `chip` under
/// the 2.32 defaults.
fn refusals(m: &Module, chip: Chip) -> Vec<&'static str> {
    let mut ids: Vec<&str> = check_module(m, chip, Sdk::V2_32)
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Refusal)
        .map(|f| f.rule.id)
        .collect();
    ids.dedup();
    ids
}

fn parse(src: &str) -> Module {
    let m = hlatc::text::parse_module(src).unwrap();
    hlatc::verify(&m).unwrap();
    m
}

fn run(m: &Module, inputs: &[Literal]) -> Vec<Literal> {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    rt.compile(m).unwrap().run(inputs).unwrap()
}

// ---- conditional-to-select ----

/// A pred conditional with a tuple result and an index conditional of
/// three branches (an out-of-range index picks the last).
const CONDITIONALS: &str = "HloModule conditionals\n\nscale {\n  sp = (f32[6], f32[]) parameter(0)\n  sv = f32[6] get-tuple-element(sp), index=0\n  sk = f32[] get-tuple-element(sp), index=1\n  sb = f32[6] broadcast(sk), dimensions={}\n  sm = f32[6] multiply(sv, sb)\n  ROOT st = (f32[6], f32[]) tuple(sm, sk)\n}\n\nshift {\n  hp = (f32[6], f32[]) parameter(0)\n  hv = f32[6] get-tuple-element(hp), index=0\n  hk = f32[] get-tuple-element(hp), index=1\n  hn = f32[] negate(hk)\n  hb = f32[6] broadcast(hk), dimensions={}\n  ha = f32[6] add(hv, hb)\n  ROOT ht = (f32[6], f32[]) tuple(ha, hn)\n}\n\nb0 {\n  p0 = f32[6] parameter(0)\n  ROOT r0 = f32[6] exponential(p0)\n}\n\nb1 {\n  p1 = f32[6] parameter(0)\n  ROOT r1 = f32[6] log(p1)\n}\n\nb2 {\n  ROOT p2 = f32[6] parameter(0)\n}\n\nENTRY e {\n  p = pred[] parameter(0)\n  i = s32[] parameter(1)\n  x = f32[6] parameter(2)\n  k = f32[] parameter(3)\n  xk = (f32[6], f32[]) tuple(x, k)\n  c = (f32[6], f32[]) conditional(p, xk, xk), true_computation=scale, false_computation=shift\n  cv = f32[6] get-tuple-element(c), index=0\n  ck = f32[] get-tuple-element(c), index=1\n  n = f32[6] conditional(i, cv, cv, x), branch_computations={b0, b1, b2}\n  ROOT t = (f32[6], f32[]) tuple(n, ck)\n}\n";

#[test]
fn conditional_to_select_computes_both_branches_and_picks_the_same_values() {
    let m = parse(CONDITIONALS);
    for chip in [Chip::Trn1, Chip::Trn2] {
        assert_eq!(refusals(&m, chip), ["conditional"], "{chip:?}");
    }
    let (selected, report) = rewritten(&m, &["conditional-to-select"], Target::Neuron).unwrap();
    assert!(report.changed());
    let note = report.notes.join("\n");
    assert!(
        note.contains("2 conditional(s) now compute every branch"),
        "{note}"
    );
    for chip in [Chip::Trn1, Chip::Trn2] {
        assert!(refusals(&selected, chip).is_empty(), "{chip:?}");
    }
    // log of a negative value is NaN in the unchosen branch: the select
    // must not let it through.
    let x = Literal::from_f32(vec![6], &[-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]).unwrap();
    let k = Literal::from_f32(vec![], &[1.5]).unwrap();
    for p in [true, false] {
        for i in [-1, 0, 1, 2, 7] {
            let inputs = [
                Literal::from_pred(vec![], &[p]).unwrap(),
                Literal::from_s32(vec![], &[i]).unwrap(),
                x.clone(),
                k.clone(),
            ];
            let want = run(&m, &inputs);
            assert_identical(&format!("p={p}, i={i}"), &run(&selected, &inputs), &want);
        }
    }
}

#[test]
fn conditional_to_select_leaves_a_branch_over_its_bound() {
    let bound = hlatc::passes::MAX_BRANCH_INSTRUCTIONS;
    let chain: String = (0..bound)
        .map(|j| format!("  q{} = f32[6] negate(q{j})\n", j + 1))
        .collect();
    let big =
        format!("b1 {{\n  q0 = f32[6] parameter(0)\n{chain}  ROOT r1 = f32[6] log(q{bound})\n}}");
    let src = CONDITIONALS.replace(
        "b1 {\n  p1 = f32[6] parameter(0)\n  ROOT r1 = f32[6] log(p1)\n}",
        &big,
    );
    let m = parse(&src);
    let (out, report) = rewritten(&m, &["conditional-to-select"], Target::Neuron).unwrap();
    // The pred conditional goes; the index one, with a branch of 17, stays.
    assert!(report.changed());
    let note = report.notes.join("\n");
    assert!(
        note.contains("%n (branch 'b1' has 17 instructions, above the bound of 16)"),
        "{note}"
    );
    assert_eq!(refusals(&out, Chip::Trn1), ["conditional"]);
}
