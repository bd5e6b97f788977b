//! Pipeline parallelism: the layers over P stages, M micro-batches per
//! optimizer step on the 1F1B-ordered schedule of `hlatc_step::pipeline`.
//! Over three steps on XLA CPU, in f64, the loss, the grad norm and every
//! parameter, master weight and Adam moment (gathered from the stages
//! under the whole model's names) agree with the single-device step on
//! the whole batch, to the sharded checks' 1e-10 (by each tensor's norm;
//! `sharded.rs` says why), in both send forms and under every remat
//! policy. A stage gradient never sent is caught. Pipelines through the
//! CLI are the root crate's (`tests/it/pipeline.rs`).

use crate::configs::{deep, layout, pipeline_config as config, FORMS};
use crate::runs::{assert_caught, differences, gqa_odd_vocab, mha_tied, run_with, Run, F64_RTOL};
use hlatc_compiler::Literal;
use hlatc_models::parallel::Fault;
use hlatc_models::{ModelConfig, Parallelism};
use hlatc_passes::RematPolicy;
use hlatc_step::data::Batch;
use hlatc_step::pipeline::{build_pipeline_steps, Phase, PipelineForm, StageSend};
use hlatc_step::train_step::{Role, StepConfig, TensorSpec};
use hlatc_train::pipeline::{TickInput, TickOutput, TickPlan};
use hlatc_train::trainer::Trainer;

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
    let names = |s: &[(String, hlatc_compiler::Literal)]| {
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
    assert!(buffers
        .iter()
        .any(|n| n == hlatc_step::pipeline::ACTIVATION));
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
