//! The rewrites of what neuronx-cc refuses, each proven on XLA CPU: a
//! module the pre-flight flags, the pass applied, the result clean for
//! trn1 and trn2 and giving the unrewritten module's outputs (bit for bit,
//! or within f32's precision for `narrow-f64`); and a near miss each pass
//! must leave alone or refuse.

use crate::support::{assert_close, assert_identical, fed_as};
use hlatc_compiler::{Literal, Module};
use hlatc_passes::neuron_check::{check_module, Chip, Sdk, Severity};
use hlatc_passes::{pipeline_from_names, PassContext, PassError, PipelineReport, Target};
use hlatc_runtime::Runtime;

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
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    m
}

fn run(m: &Module, inputs: &[Literal]) -> Vec<Literal> {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    rt.compile(m).unwrap().run(inputs).unwrap()
}

// ---- narrow-f64 ----

/// A small f64 program: a dot, a constant that f32 cannot hold exactly
/// (0.1), exp, a compare and select, and a sum through an f64 reducer.
const F64_PROGRAM: &str = "HloModule f64_program\n\nadd {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n  ROOT s = f64[] add(a, b)\n}\n\nENTRY e {\n  x = f64[4,8] parameter(0)\n  w = f64[8,3] parameter(1)\n  d = f64[4,3] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  tenth = f64[] constant(0.1)\n  tenths = f64[4,3] broadcast(tenth), dimensions={}\n  scaled = f64[4,3] multiply(d, tenths)\n  e = f64[4,3] exponential(scaled)\n  zero = f64[] constant(0)\n  zeros = f64[4,3] broadcast(zero), dimensions={}\n  pos = pred[4,3] compare(d, zeros), direction=GT\n  y = f64[4,3] select(pos, e, d)\n  total = f64[] reduce(y, zero), dimensions={0,1}, to_apply=add\n  ROOT t = (f64[4,3], f64[]) tuple(y, total)\n}\n";

/// Deterministic values in [-1, 1): element k of `n` is a fixed
/// irrational stride around the circle, so no two are equal.
fn spread(n: usize, offset: f64) -> Vec<f64> {
    (0..n)
        .map(|k| ((k as f64 * 0.618_033_988_749 + offset).fract()) * 2.0 - 1.0)
        .collect()
}

#[test]
fn narrow_f64_makes_an_f64_program_compile_for_neuron_with_f32s_precision() {
    let m = parse(F64_PROGRAM);
    for chip in [Chip::Trn1, Chip::Trn2] {
        assert_eq!(refusals(&m, chip), ["f64"], "{chip:?}");
    }
    let (narrow, report) = rewritten(&m, &["narrow-f64"], Target::Neuron).unwrap();
    assert!(report.changed());
    let note = report.notes.join("\n");
    assert!(
        note.contains("constant(s) lost precision in f32: %tenth"),
        "{note}"
    );
    assert!(
        note.contains("signature changed, feed and read f32: parameters x, w and its f64 outputs"),
        "{note}"
    );
    for chip in [Chip::Trn1, Chip::Trn2] {
        assert!(refusals(&narrow, chip).is_empty(), "{chip:?}");
    }
    let (x, w) = (spread(32, 0.1), spread(24, 0.7));
    // The rewritten program takes f32: the same inputs, rounded.
    let inputs = [
        Literal::from_f64(vec![4, 8], &x).unwrap(),
        Literal::from_f64(vec![8, 3], &w).unwrap(),
    ];
    let wide = run(&m, &inputs);
    let got = run(&narrow, &fed_as(&narrow, &inputs));
    assert_eq!(got.len(), 2);
    for (i, (g, w)) in got.iter().zip(&wide).enumerate() {
        assert_eq!(g.ty(), hlatc_compiler::ElementType::F32, "output {i}");
        assert_eq!(w.ty(), hlatc_compiler::ElementType::F64, "output {i}");
        // f32 keeps 24 bits: a few roundings in a row stay well within
        // 1e-6 of the output's largest magnitude.
        assert_close(&format!("narrow-f64 output {i}"), g, w, 1e-6);
    }
    // Not trivially close: some values differ from f64's in the last bits.
    assert!(got[0].to_f64_vec() != wide[0].to_f64_vec());
}

#[test]
fn narrow_f64_refuses_a_constant_beyond_f32s_range_by_name() {
    let m = parse(&F64_PROGRAM.replace("constant(0.1)", "constant(1e39)"));
    let err = rewritten(&m, &["narrow-f64"], Target::Neuron)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("constant 'tenth': 1e39 overflows f32 (largest finite 3.4028235e38)"),
        "{err}"
    );
}

#[test]
fn narrow_f64_clears_torch_xlas_f64_scalars_in_the_neuron_pipeline() {
    // torch-xla passes Python floats as f64[] parameters: the step's only
    // refusals. The neuron pipeline computes them in f32 (the outputs stay
    // within 1e-5 on XLA CPU: `train/tests/it/passes_on_xla.rs`).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torch_xla");
    let m = crate::support::read_module(&dir.join("torch_xla_llama_step.hlo"));
    assert_eq!(refusals(&m, Chip::Trn1), ["f64"]);
    let mut neuron = m.clone();
    let report = hlatc_passes::default_pipeline::<&str>(Target::Neuron, &[])
        .unwrap()
        .run_module(&mut neuron, &mut PassContext::new(Target::Neuron))
        .unwrap();
    assert!(report.fired("narrow-f64"));
    let note = report.notes.join("\n");
    assert!(
        note.contains("feed and read f32: parameters p31.1306, p33.1320"),
        "{note}"
    );
    for chip in [Chip::Trn1, Chip::Trn2] {
        assert!(refusals(&neuron, chip).is_empty(), "{chip:?}");
    }
}

// ---- sort-to-topk ----

/// A top 5 of each row of 16, the way XLA writes one without its `topk`
/// op: values sorted descending with their indices, then the first 5 of
/// each. `COMPARE` and `READ` are replaced to make near misses.
const TOP_K: &str = "HloModule top_k\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ia = s32[] parameter(2)\n  ib = s32[] parameter(3)\n  ROOT gt = pred[] compare(a, b), direction=COMPARE\n}\n\nENTRY e {\n  x = f32[4,16] parameter(0)\n  iota = s32[4,16] iota(), iota_dimension=1\n  sorted = (f32[4,16], s32[4,16]) sort(x, iota), dimensions={1}, is_stable=true, to_apply=cmp\n  v = f32[4,16] get-tuple-element(sorted), index=0\n  i = s32[4,16] get-tuple-element(sorted), index=1\n  vk = f32[4,5] slice(v), slice={[0:4], [0:5]}\n  ik = s32[4,5] slice(i), slice={[0:4], [0:5]}\n  READ\n}\n";

fn top_k_module(compare: &str, read: &str) -> Module {
    parse(&TOP_K.replace("COMPARE", compare).replace("READ", read))
}

const READ_TOP_K: &str = "ROOT t = (f32[4,5], s32[4,5]) tuple(vk, ik)";

/// Rows of 16 distinct values each (a permutation of 16 levels, shifted
/// per row): no ties, so every sort order agrees on the indices too.
fn tie_free_rows() -> Vec<f32> {
    (0..4)
        .flat_map(|r| {
            (0..16).map(move |c| ((c * 7 + r * 3) % 16) as f32 * 0.5 - 3.0 + r as f32 * 0.01)
        })
        .collect()
}

#[test]
fn sort_to_topk_makes_a_top_k_sort_neurons_topk_with_the_same_outputs() {
    let m = top_k_module("GT", READ_TOP_K);
    let (neuron, report) = rewritten(&m, &["sort-to-topk"], Target::Neuron).unwrap();
    assert!(report.changed());
    let text = hlatc_compiler::formats::text::print_module(&neuron);
    assert!(!text.contains(" sort("), "{text}");
    assert!(
        text.contains("custom_call_target=\"AwsNeuronTopK\""),
        "{text}"
    );
    assert!(text.contains("backend_config=\"5\""), "{text}");
    // The pre-flight has no rule against a GT sort (the SDK documents
    // none); the custom call is one neuronx-cc recognizes, on f32.
    for chip in [Chip::Trn1, Chip::Trn2] {
        let report = check_module(&neuron, chip, Sdk::V2_32);
        assert!(
            report.findings.is_empty(),
            "{chip:?}: {:?}",
            report.findings.len()
        );
    }
    // XLA CPU runs the custom call as XLA's topk; the cpu target writes
    // that op directly.
    let (lowered, _) = rewritten(&neuron, &["lower-neuron-calls"], Target::Cpu).unwrap();
    let (on_cpu, _) = rewritten(&m, &["sort-to-topk"], Target::Cpu).unwrap();
    let rows = tie_free_rows();
    for r in rows.chunks(16) {
        let mut distinct = r.to_vec();
        distinct.sort_by(f32::total_cmp);
        distinct.dedup();
        assert_eq!(distinct.len(), 16, "the test's rows are tie-free");
    }
    let x = [Literal::from_f32(vec![4, 16], &rows).unwrap()];
    let want = run(&m, &x);
    assert_identical("AwsNeuronTopK lowered", &run(&lowered, &x), &want);
    assert_identical("cpu topk", &run(&on_cpu, &x), &want);
    // Row 0's largest five, largest first, and where they were.
    assert_eq!(&want[0].to_f64_vec()[..5], &[4.5, 4.0, 3.5, 3.0, 2.5]);
    assert_eq!(&want[1].to_i64_vec()[..5], &[9, 2, 11, 4, 13]);
}

#[test]
fn sort_to_topk_keeps_tied_values() {
    // Ties: values are the same whatever the order of tied indices, which
    // the contract leaves open (Neuron documents none).
    let m = top_k_module("GT", READ_TOP_K);
    let (neuron, _) = rewritten(&m, &["sort-to-topk"], Target::Neuron).unwrap();
    let (lowered, _) = rewritten(&neuron, &["lower-neuron-calls"], Target::Cpu).unwrap();
    let tied: Vec<f32> = (0..64).map(|k| ((k * 5) % 4) as f32).collect();
    let x = [Literal::from_f32(vec![4, 16], &tied).unwrap()];
    let (want, got) = (run(&m, &x), run(&lowered, &x));
    assert_identical("tied values", &got[..1], &want[..1]);
    assert_eq!(&want[0].to_f64_vec()[..5], &[3.0, 3.0, 3.0, 3.0, 2.0]);
}

#[test]
fn sort_to_topk_leaves_an_ascending_sort_and_one_read_whole_alone() {
    let whole = "ROOT t = (f32[4,5], s32[4,5], f32[4,16]) tuple(vk, ik, v)";
    for (m, why) in [
        (top_k_module("LT", READ_TOP_K), "its comparator is not"),
        (
            top_k_module("GT", whole),
            "'t' reads the sorted values other than as their first k",
        ),
    ] {
        let (out, report) = rewritten(&m, &["sort-to-topk"], Target::Neuron).unwrap();
        assert!(!report.changed());
        assert!(out
            .computations
            .iter()
            .zip(&m.computations)
            .all(|(a, b)| a.structurally_eq(b)));
        let note = report.notes.join("\n");
        assert!(note.contains(why), "{note}");
    }
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
    let bound = hlatc_passes::MAX_BRANCH_INSTRUCTIONS;
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

// ---- integer-dot-to-f32 ----

/// An int32 dot of int8 values (converted up, as quantized matmuls write
/// them) over a contracted extent of `k`, plus an s32 offset that stays an
/// integer add.
fn int8_dot(k: usize) -> String {
    format!(
        "HloModule int8_dot\n\nENTRY e {{\n  a = s8[4,{k}] parameter(0)\n  b = s8[{k},3] parameter(1)\n  a32 = s32[4,{k}] convert(a)\n  b32 = s32[{k},3] convert(b)\n  d = s32[4,3] dot(a32, b32), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  one = s32[] constant(1)\n  ones = s32[4,3] broadcast(one), dimensions={{}}\n  ROOT r = s32[4,3] add(d, ones)\n}}\n"
    )
}

/// s8 values covering the whole type, -128 and 127 included.
fn s8s(dims: &[i64]) -> Literal {
    let n: i64 = dims.iter().product();
    let bytes: Vec<u8> = (0..n).map(|k| (k * 37 + 128) as u8).collect();
    Literal::from_bytes(hlatc_compiler::ElementType::S8, dims.to_vec(), bytes).unwrap()
}

#[test]
fn integer_dot_to_f32_makes_a_provably_small_int_dot_exact_in_f32() {
    // 1024 products of at most 128 * 128 = 2^14: sums within 2^24.
    let k = 1024;
    let m = parse(&int8_dot(k));
    // trn2 refuses an s32 dot under the next SDK; trn1 warns.
    assert_eq!(
        check_module(&m, Chip::Trn2, Sdk::Next)
            .refusals()
            .map(|f| f.rule.id)
            .collect::<Vec<_>>(),
        ["integer-dot-32"]
    );
    let (f32_dot, report) = rewritten(&m, &["integer-dot-to-f32"], Target::Neuron).unwrap();
    assert!(report.changed());
    for chip in [Chip::Trn1, Chip::Trn2] {
        for sdk in [Sdk::V2_32, Sdk::Next] {
            let found = check_module(&f32_dot, chip, sdk).findings;
            assert!(found.is_empty(), "{chip:?} {sdk:?}: {found:?}");
        }
    }
    let inputs = [s8s(&[4, k as i64]), s8s(&[k as i64, 3])];
    let want = run(&m, &inputs);
    let got = run(&f32_dot, &fed_as(&f32_dot, &inputs));
    assert_identical("integer-dot-to-f32", &got, &want);
    // Sums far from zero (up to 2^24), not only small ones, agree.
    assert!(want[0].to_f64_vec().iter().any(|v| v.abs() > 1e5));
}

#[test]
fn integer_dot_to_f32_leaves_a_dot_it_cannot_bound_alone() {
    // 1025 products of up to 2^14 may pass 2^24.
    let too_long = parse(&int8_dot(1025));
    let (same, report) = rewritten(&too_long, &["integer-dot-to-f32"], Target::Neuron).unwrap();
    assert!(!report.changed());
    assert_eq!(
        hlatc_compiler::formats::text::print_module(&same),
        hlatc_compiler::formats::text::print_module(&too_long)
    );
    // s32 parameters: any value, no bound.
    let unknown = parse("HloModule p\n\nENTRY e {\n  a = s32[2,2] parameter(0)\n  b = s32[2,2] parameter(1)\n  ROOT d = s32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
    let (_, report) = rewritten(&unknown, &["integer-dot-to-f32"], Target::Neuron).unwrap();
    assert!(!report.changed());
}

// ---- amp's MX calls (mxfp8 on trn3) ----

/// Three dots in MX blocks: a plain one, a batched one contracted on a
/// dimension `QuantizeMX` cannot take (moved last by a transpose), and
/// one whose rhs is contracted on the dimension before its last.
const MX_DOTS: &str = "HloModule mx_dots\n\nENTRY e {\n  x = f32[4,64] parameter(0)\n  w = f32[64,16] parameter(1)\n  h = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  a = f32[64,2,4] parameter(2)\n  b = f32[2,64,8] parameter(3)\n  g = f32[2,4,8] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n  ROOT t = (f32[4,16], f32[2,4,8]) tuple(h, g)\n}\n";

/// `MX_DOTS` with amp's mxfp8 policy for `target`.
fn mx_amp(target: Target) -> Module {
    let mut m = parse(MX_DOTS);
    let mut ctx = PassContext::new(target);
    ctx.cast = Some(hlatc_passes::CastPolicy::mxfp8());
    pipeline_from_names("amp", &["amp"])
        .unwrap()
        .run_module(&mut m, &mut ctx)
        .unwrap();
    m
}

/// The Neuron form of mxfp8's dots (`QuantizeMX` and
/// `__op$block_scaled_dot`) passes the pre-flight on trn3, and mapped back
/// by `lower-neuron-calls` gives the cpu form's outputs bit for bit: on
/// values spread over many binades, a block of zeros, one holding a NaN
/// and one holding an infinity.
#[test]
fn mx_calls_lowered_compute_the_cpu_blocks_bit_for_bit() {
    let neuron = mx_amp(Target::Neuron);
    let text = hlatc_compiler::formats::text::print_module(&neuron);
    assert_eq!(text.matches("custom_call_target=\"QuantizeMX\"").count(), 4);
    assert_eq!(text.matches("__op$block_scaled_dot").count(), 2, "{text}");
    assert!(text.contains("transpose("), "{text}");
    let found = check_module(&neuron, Chip::Trn3, Sdk::V2_32).findings;
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(refusals(&neuron, Chip::Trn2), ["mx-before-trn3"]);
    let mut lowered = neuron.clone();
    assert!(hlatc_passes::LowerNeuronCalls::lower(&mut lowered).unwrap());
    assert!(!hlatc_compiler::formats::text::print_module(&lowered).contains("custom_call_target"));
    // Magnitudes from 2^-20 to 2^20 across the elements.
    let values = |n: usize, offset: f64| -> Vec<f64> {
        spread(n, offset)
            .iter()
            .enumerate()
            .map(|(k, v)| v * 2f64.powi((k % 41) as i32 - 20))
            .collect()
    };
    let mut x = values(4 * 64, 0.1);
    x[..32].fill(0.0);
    x[64 + 3] = f64::NAN;
    x[128 + 40] = f64::INFINITY;
    let inputs = [
        Literal::from_f64(vec![4, 64], &x).unwrap(),
        Literal::from_f64(vec![64, 16], &values(64 * 16, 0.2)).unwrap(),
        Literal::from_f64(vec![64, 2, 4], &values(64 * 8, 0.3)).unwrap(),
        Literal::from_f64(vec![2, 64, 8], &values(2 * 64 * 8, 0.4)).unwrap(),
    ];
    let inputs: Vec<Literal> = inputs
        .into_iter()
        .map(|l| l.converted(hlatc_compiler::ElementType::F32).unwrap())
        .collect();
    let cpu = mx_amp(Target::Cpu);
    let want = run(&cpu, &inputs);
    let got = run(&lowered, &inputs);
    assert_identical("lowered MX calls", &got, &want);
    let h = want[0].to_f64_vec();
    // Rows 1 and 2 hold the NaN and the infinity: their blocks are NaN.
    for (row, values) in h.chunks(16).enumerate() {
        let nan = row == 1 || row == 2;
        assert!(
            values
                .iter()
                .all(|v| v.is_nan() == nan && (nan || v.is_finite())),
            "row {row}"
        );
    }
}

/// An MX call hlatc cannot compute is refused by name when lowered for XLA
/// CPU: an element type it has no checked reference for, and a scaled dot
/// whose operands' element type nothing says.
#[test]
fn mx_calls_without_a_reference_are_refused_by_name() {
    let e5m2 = parse("HloModule q\n\nENTRY e {\n  x = bf16[4,64] parameter(0)\n  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target=\"QuantizeMX\", backend_config=\"{\\\"dtype\\\": \\\"float8_e5m2\\\", \\\"dim\\\": 1}\"\n}\n");
    let e = hlatc_passes::LowerNeuronCalls::lower(&mut e5m2.clone()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pass 'lower-neuron-calls': computation 'e', custom call 'q': QuantizeMX's backend_config: dtype float8_e5m2: hlatc computes float8_e4m3fn only"
    );
    let unnamed = parse("HloModule d\n\nENTRY e {\n  a = u32[4,16] parameter(0)\n  b = u32[16,16] parameter(1)\n  sa = u8[4,2] parameter(2)\n  sb = u8[2,16] parameter(3)\n  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target=\"__op$block_scaled_dot\", backend_config=\"{\\\"scaled_dot_backend_config\\\": {\\\"lhs_contracting_dimensions\\\": [1], \\\"rhs_contracting_dimensions\\\": [0]}}\"\n}\n");
    let e = hlatc_passes::LowerNeuronCalls::lower(&mut unnamed.clone()).unwrap_err();
    assert!(
        e.to_string().contains(
            "custom call 'd': __op$block_scaled_dot: the lhs operand's element type is unknown"
        ),
        "{e}"
    );
    // Named, it computes.
    let named = hlatc_compiler::formats::text::print_module(&unnamed).replace(
        "[0]}}",
        "[0], \\\"element_dtype\\\": \\\"float8_e4m3fn\\\"}}",
    );
    let mut named = parse(&named);
    assert!(hlatc_passes::LowerNeuronCalls::lower(&mut named).unwrap());
}
