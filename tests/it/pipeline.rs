//! Pipeline parallelism: the layers over P stages, M micro-batches per
//! optimizer step on the 1F1B-ordered schedule of `hlatc::step::pipeline`.
//! Over three steps on XLA CPU, in f64, the loss, the grad norm and every
//! parameter, master weight and Adam moment (gathered from the stages
//! under the whole model's names) agree with the single-device step on
//! the whole batch, to the sharded checks' 1e-10 (by each tensor's norm;
//! `train/tests/it/sharded.rs` says why), in both send forms and under every remat
//! policy. A stage gradient never sent is caught.

use crate::configs::{deep, layout, pipeline_config as config, FORMS};
use crate::sharded::{assert_caught, differences, gqa_odd_vocab, mha_tied, Run};
use crate::sharded::{run_with, F64_RTOL};
use hlatc::data::Batch;
use hlatc::models::parallel::Fault;
use hlatc::models::{ModelConfig, Parallelism};
use hlatc::passes::RematPolicy;
use hlatc::pipeline::{build_pipeline_steps, Phase, PipelineForm, StageSend};
use hlatc::pipeline::{TickInput, TickOutput, TickPlan};
use hlatc::train_step::{Role, StepConfig, TensorSpec};
use hlatc::trainer::Trainer;
use hlatc::Literal;

fn pipelined(cfg: &StepConfig, m: i64) -> Run {
    run_with(cfg, |rt, cfg, params| {
        crate::cpu_trainers::pipelined(rt, cfg, m, RematPolicy::None, params)
    })
}

/// The programs in `form`, through the `cpu` pipeline with its policy.
fn pipelined_in(cfg: &StepConfig, m: i64, form: PipelineForm) -> Run {
    run_with(cfg, |rt, cfg, params| {
        let steps = build_pipeline_steps(cfg, m, form)?;
        crate::cpu_trainers::pipelined_steps(rt, cfg, steps, form.remat, params)
    })
}

fn single(model: ModelConfig) -> Run {
    run_with(
        &config(model, Parallelism::SINGLE),
        crate::cpu_trainers::unoptimized,
    )
}

fn check_forms(model: ModelConfig, par: Parallelism, m: i64, forms: &[PipelineForm]) {
    let whole = single(model.clone());
    assert!(whole.stats[2].loss < whole.stats[0].loss);
    for &form in forms {
        let staged = pipelined_in(&config(model.clone(), par), m, form);
        let diffs = differences(&whole, &staged, F64_RTOL);
        assert!(
            diffs.is_empty(),
            "{par}, M {m}, {form:?}: {}",
            diffs.join("; ")
        );
    }
}

fn check(model: ModelConfig, par: Parallelism, m: i64) {
    check_forms(deep(model), par, m, &FORMS);
}

macro_rules! pipelined_equals_single {
    ($($name:ident: $model:expr, $pp:expr, $tp:expr, $dp:expr, $sp:expr, $zero1:expr, $m:expr;)*) => {$(
        #[test]
        fn $name() {
            check($model, layout($pp, $tp, $dp, $sp, $zero1), $m);
        }
    )*};
}

pipelined_equals_single! {
    pp2_m1: gqa_odd_vocab(), 2, 1, 1, false, false, 1;
    pp2_m4: gqa_odd_vocab(), 2, 1, 1, false, false, 4;
    pp4_m1: gqa_odd_vocab(), 4, 1, 1, false, false, 1;
    pp4_m4: gqa_odd_vocab(), 4, 1, 1, false, false, 4;
    pp2_tp2_m1: gqa_odd_vocab(), 2, 2, 1, false, false, 1;
    pp2_tp2_m4: gqa_odd_vocab(), 2, 2, 1, false, false, 4;
    pp2_dp2_zero1_m1: gqa_odd_vocab(), 2, 1, 2, false, true, 1;
    pp2_dp2_zero1_m4: gqa_odd_vocab(), 2, 1, 2, false, true, 4;
    pp2_tp2_dp2_sp_m1: gqa_odd_vocab(), 2, 2, 2, true, false, 1;
    pp2_tp2_dp2_sp_m4: gqa_odd_vocab(), 2, 2, 2, true, false, 4;
    tied_pp2_tp2_m4: mha_tied(), 2, 2, 1, false, false, 4;
}

/// FSDP over each stage's DP replicas: the tick programs gather the
/// stage's weights from its shards, the apply step reduce-scatters the
/// accumulated gradients and updates the shards. HSDP likewise.
#[test]
fn fsdp_stages_equal_one_device() {
    let fsdp = |tp, dp, n, sp| Parallelism {
        fsdp: n,
        ..layout(2, tp, dp, sp, false)
    };
    for (par, m) in [
        (fsdp(1, 2, 2, false), 1),
        (fsdp(1, 2, 2, false), 4),
        (fsdp(2, 2, 2, true), 4),
        (fsdp(1, 4, 2, false), 2),
    ] {
        check(gqa_odd_vocab(), par, m);
    }
}

/// Every remat policy keeps what it keeps and computes the same step:
/// `full-layer` keeps each layer's output, `stage` the stage's input alone.
#[test]
fn every_remat_policy_computes_the_same_step() {
    let forms = [RematPolicy::FullLayer, RematPolicy::Stage].map(|remat| PipelineForm {
        remat,
        send: StageSend::AllGather,
    });
    check_forms(
        deep(gqa_odd_vocab()),
        layout(2, 2, 1, false, false),
        4,
        &forms,
    );
}

/// An odd number of stages sends in two rounds with a stage sitting out
/// each, its ranks paired among themselves.
#[test]
fn three_stages_send_by_all_gather() {
    let model = ModelConfig {
        num_hidden_layers: 3,
        ..gqa_odd_vocab()
    };
    check_forms(model, layout(3, 2, 1, false, false), 4, &FORMS[1..]);
}

#[test]
fn a_stage_gradient_never_sent_is_caught() {
    let model = deep(gqa_odd_vocab());
    let whole = single(model.clone());
    let cfg = StepConfig {
        fault: Some(Fault::StageGradientDropped),
        ..config(model, layout(2, 1, 1, false, false))
    };
    let diffs = differences(&whole, &pipelined(&cfg, 2), F64_RTOL);
    assert_caught(&diffs, "step 0 grad norm");
    assert_caught(&diffs, "model.layers.0.input_layernorm.weight");
}

/// The whole state a pipelined trainer gathers names the whole model's
/// layers: the single-device trainer's names, and another pipelined
/// trainer resumes from it exactly.
#[test]
fn a_pipelined_state_is_the_whole_models_and_resumes() {
    let model = deep(gqa_odd_vocab());
    let whole = single(model.clone());
    let cfg = config(model, layout(2, 1, 2, false, true));
    let staged = pipelined(&cfg, 2);
    let state = staged.trainer.training_state();
    let names = |s: &[(String, hlatc::compiler::Literal)]| {
        let mut n: Vec<String> = s.iter().map(|(n, _)| n.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&state), names(&whole.trainer.training_state()));
    // Parameters come in the whole model's order, as a program over the
    // whole model (an evaluation's) takes them.
    let order = |t: &Trainer| -> Vec<String> { t.params().into_iter().map(|(n, _)| n).collect() };
    assert_eq!(order(&staged.trainer), order(&whole.trainer));
    let mut resumed = pipelined(&cfg, 2).trainer;
    resumed
        .resume(state.iter().cloned().collect(), "test")
        .unwrap();
    let again = resumed.training_state();
    assert_eq!(names(&again), names(&state));
    for ((name, a), (_, b)) in state.iter().zip(&again) {
        assert_eq!(a.bytes(), b.bytes(), "{name}");
    }
}

/// `hlatc train --pp 2 --tp 2 --grad-accum 2` gives the single-device
/// run's losses and grad norms at each of its 50 steps.
#[test]
fn train_with_stages_follows_the_single_device_run() {
    if crate::support::skip_slow_tests() {
        return;
    }
    crate::sharded::train_follows_the_single_device_run(&[
        "--pp",
        "2",
        "--tp",
        "2",
        "--grad-accum",
        "2",
    ]);
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `compile --pp` writes the four programs, each a complete bundle, and a
/// manifest over them that names each stage's layers and ranks and the
/// schedule; `--verify` reads all four back and runs them as optimizer
/// steps on XLA CPU.
#[test]
fn compile_writes_the_four_programs_and_verifies_them() {
    use crate::support::{hlatc, scratch, stderr, stdout};
    let d = scratch("pipeline-tiny");
    let args = [
        "compile",
        "--out",
        d.to_str().unwrap(),
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--pp",
        "2",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
        "--batch-size",
        "4",
        "--grad-accum",
        "2",
        "--verify",
    ];
    let out = hlatc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    assert!(
        printed.contains("  pipeline      2 stages of 1 layer (0-0, 1-1); 2 micro-batches on a 1F1B-ordered schedule of 5 ticks, bubble 33.3%"),
        "{printed}"
    );
    assert!(
        printed.contains("per rank, each of the 2 stages,"),
        "{printed}"
    );
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(
            printed.contains(&format!("{program}/model.hlo_module.pb decodes")),
            "{printed}"
        );
        assert!(d.join(program).join("model.hlo_module.pb").is_file());
    }
    assert!(
        printed.contains("XLA CPU, the bundle's own module, step 2"),
        "{printed}"
    );
    let m = json(&d.join("manifest.json"));
    assert_eq!(m["format"], "hlatc-bundle/2+pipeline");
    assert_eq!(m["schedule"]["ticks"], 5);
    assert_eq!(m["stages"][1]["layers"], serde_json::json!([1, 2]));
    assert_eq!(m["stages"][1]["ranks"], serde_json::json!([4, 8]));
    assert_eq!(m["config"]["parallel"]["pp"], 2);
    // `check` of the whole checks every program, each under its name.
    let out = hlatc(&["check", d.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checked = stdout(&out);
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(checked.contains(&format!("{program}:\n")), "{checked}");
        let text = d.join(program).join("model.hlo.txt");
        assert!(
            checked.contains(&format!("{}: trn1", text.display())),
            "{checked}"
        );
    }
    assert!(
        checked.contains(": 4 programs, no program refused"),
        "{checked}"
    );
    // A program missing is an incomplete bundle, said of its directory.
    let copy = scratch("pipeline-check-incomplete");
    for program in ["warm_up", "steady", "apply_step"] {
        std::fs::create_dir_all(copy.join(program)).unwrap();
        for f in ["model.hlo_module.pb", "model.hlo.txt"] {
            std::fs::copy(d.join(program).join(f), copy.join(program).join(f)).unwrap();
        }
    }
    let out = hlatc(&["check", copy.to_str().unwrap()]);
    assert_eq!(crate::support::error_code(&out), "artifact.file");
    let _ = std::fs::remove_dir_all(copy);
}

/// `hlatc shard --pp` divides a whole state, or Hugging Face weights,
/// over the stages' ranks, and `unshard` joins them back to the same bytes
/// (from weights, the single-device layout's); a layout that is not the
/// files' is refused.
#[test]
fn shard_and_unshard_round_trip_over_stages() {
    use crate::support::{hlatc, scratch, stderr};
    let d = scratch("pipeline-shard");
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = hlatc(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    let whole = p("state.safetensors");
    run(&[
        "train",
        "--model",
        "tiny",
        "--steps",
        "2",
        "--precision",
        "fp32",
        "--pp",
        "2",
        "--save-state",
        &whole,
    ]);
    let layout = [
        "--model",
        "tiny",
        "--precision",
        "fp32",
        "--target",
        "cpu",
        "--pp",
        "2",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
    ];
    let ranks = p("ranks");
    let mut shard = vec!["shard"];
    shard.extend_from_slice(&layout);
    shard.extend_from_slice(&[&whole, "--out", &ranks]);
    run(&shard);
    assert!(d.join("ranks/rank-00007.safetensors").is_file());
    let back = p("back.safetensors");
    let mut unshard = vec!["unshard"];
    unshard.extend_from_slice(&layout);
    unshard.extend_from_slice(&[&ranks, "--out", &back]);
    run(&unshard);
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&back).unwrap()
    );
    // Hugging Face weights start a run: over the stages as on one device.
    let weights = p("weights.safetensors");
    run(&[
        "train",
        "--model",
        "tiny",
        "--steps",
        "1",
        "--precision",
        "fp32",
        "--save",
        &weights,
    ]);
    let start = |layout: &[&str], name: &str| {
        let (dir, file) = (p(name), p(&format!("{name}.safetensors")));
        let mut shard = vec!["shard"];
        shard.extend_from_slice(layout);
        shard.extend_from_slice(&[&weights, "--out", &dir]);
        run(&shard);
        let mut unshard = vec!["unshard"];
        unshard.extend_from_slice(layout);
        unshard.extend_from_slice(&[&dir, "--out", &file]);
        run(&unshard);
        std::fs::read(&file).unwrap()
    };
    let single = ["--model", "tiny", "--precision", "fp32", "--target", "cpu"];
    assert_eq!(start(&layout, "staged"), start(&single, "one"));
    let out = hlatc(&[
        "unshard",
        "--model",
        "tiny",
        "--precision",
        "fp32",
        "--target",
        "cpu",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
        &ranks,
        "--out",
        &back,
    ]);
    assert_eq!(crate::support::error_code(&out), "usage.conflict");
}

/// HLAT's 70B layout compiled for neuron in its default form: the
/// manifest records the form, no program holds a `collective-permute`,
/// and `check` of the directory passes every program, naming all four.
#[test]
fn hlats_70b_bundle_sends_by_all_gather_and_checks_whole() {
    use crate::support::{hlatc, scratch, stderr, stdout};
    let d = scratch("pipeline-70b-neuron");
    let out = hlatc(&[
        "compile",
        "--model",
        "hlat-70b",
        "--tp",
        "32",
        "--pp",
        "8",
        "--dp",
        "8",
        "--sequence-parallel",
        "--zero1",
        "--precision",
        "bf16-master",
        "--batch-size",
        "1024",
        "--grad-accum",
        "128",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let m = json(&d.join("manifest.json"));
    assert_eq!(
        m["form"],
        serde_json::json!({"remat": "core-attention", "send": "all-gather"})
    );
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        let text = std::fs::read_to_string(d.join(program).join("model.hlo.txt")).unwrap();
        assert!(!text.contains("collective-permute"), "{program}");
    }
    let steady = std::fs::read_to_string(d.join("steady").join("model.hlo.txt")).unwrap();
    assert!(steady.contains("all-gather("), "the sends");
    assert!(steady.contains("pipeline.kept.0"), "the kept activations");
    let out = hlatc(&["check", d.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checked = stdout(&out);
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(checked.contains(&format!("{program}:\n")), "{checked}");
    }
    assert!(
        checked.contains(": 4 programs, no program refused"),
        "{checked}"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// A choice only a pipeline has is refused without stages, by every
/// command that takes it.
#[test]
fn pipeline_choices_without_stages_are_refused() {
    use crate::support::{hlatc, stderr};
    let cases: [(&[&str], &str); 4] = [
        (
            &["compile", "--model", "tiny", "--pp-send", "permute", "--out", "x"],
            "--pp-send permute chooses how pipeline stages send to each other; it needs --pp 2 or more",
        ),
        (
            &["train", "--model", "tiny", "--pp-send", "all-gather"],
            "--pp-send all-gather chooses how pipeline stages send to each other; it needs --pp 2 or more",
        ),
        (
            &["compile", "--model", "tiny", "--remat", "stage", "--out", "x"],
            "--remat stage keeps only each pipeline stage's input; it needs --pp 2 or more (without stages, --remat full-layer keeps the least)",
        ),
        (
            &["opt", "--remat", "stage", "x.hlo"],
            "--remat stage keeps a pipeline stage's input, which only hlatc's own tick programs have",
        ),
    ];
    for (args, said) in cases {
        let out = hlatc(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
    let out = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--pp",
        "2",
        "--pp-send",
        "ring",
        "--out",
        "x",
    ]);
    assert_eq!(crate::support::error_code(&out), "option.pp_send");
}

/// The tick plan routes each program's inputs and outputs by role, and
/// gives each rank its DP replica's rows of the micro-batch each batch
/// input holds: `tokens` micro-batch t, `targets` t - P, `backward_tokens`
/// t - (2P - 1), zeros where none.
#[test]
fn the_tick_plan_routes_by_role_and_feeds_each_rank_its_rows() {
    let cfg = config(mha_tied(), layout(2, 1, 2, false, false));
    let steps = build_pipeline_steps(&cfg, 2, FORMS[0]).unwrap();
    let plan = TickPlan::new(&steps.view()).unwrap();
    assert_eq!(plan.ticks(), 5);
    let names = |specs: Vec<&TensorSpec>| -> Vec<String> {
        specs.into_iter().map(|s| s.name.clone()).collect()
    };
    let buffers = names(plan.buffers().iter().collect());
    assert!(plan.buffers().iter().all(|s| s.role == Role::StageBuffer));
    assert!(buffers.iter().any(|n| n == hlatc::pipeline::ACTIVATION));
    for phase in Phase::ALL {
        let r = plan.routing(phase);
        assert_eq!(
            names(r.inputs_from(TickInput::Batch).collect()),
            [
                "token_count",
                "tick",
                "tokens",
                "backward_tokens",
                "targets"
            ]
        );
        assert_eq!(names(r.inputs_from(TickInput::Buffer).collect()), buffers);
        assert!(r
            .inputs_from(TickInput::State)
            .all(|s| matches!(s.role, Role::Parameter | Role::GradAccumulator)));
        assert!(r
            .outputs_to(TickOutput::State)
            .all(|s| s.role == Role::GradAccumulator));
        assert!(r.outputs_to(TickOutput::Buffer).count() > 0);
        assert_eq!(r.loss().role, Role::Loss);
    }
    // Row `i` of the global batch holds `i` in every column, its target
    // `i + 8`.
    let seq = cfg.batch.seq_len;
    let rows = |first: i32| -> Vec<i32> {
        (first..first + 8)
            .flat_map(|i| std::iter::repeat_n(i, seq as usize))
            .collect()
    };
    let batch = Batch {
        tokens: Literal::from_s32(vec![8, seq], &rows(0)).unwrap(),
        targets: Literal::from_s32(vec![8, seq], &rows(8)).unwrap(),
        segment_ids: None,
    };
    // Rank 3 is stage 1's rank of DP replica 1: rows 4-7, two a
    // micro-batch.
    for tick in plan.batches(&batch) {
        let t = tick.tick;
        assert_eq!(tick.phase, plan.phase(t));
        for (spec, value) in plan.rank_inputs(&tick, 3) {
            let got: Vec<i64> = value.to_i64_vec();
            let micro = |m: i64, offset: i64| match (0..2).contains(&m) {
                true => [4 + 2 * m, 5 + 2 * m]
                    .iter()
                    .flat_map(|&i| std::iter::repeat_n(i + offset, seq as usize))
                    .collect(),
                false => vec![0; 2 * seq as usize],
            };
            let want: Vec<i64> = match spec.role {
                Role::Tick => vec![t],
                Role::TokenCount => vec![8 * seq],
                Role::Tokens => micro(t, 0),
                Role::Targets => micro(t - 2, 8),
                Role::BackwardTokens => micro(t - 3, 0),
                role => panic!("{role:?} is no batch input"),
            };
            assert_eq!(got, want, "tick {t}, {}", spec.name);
        }
    }
}
