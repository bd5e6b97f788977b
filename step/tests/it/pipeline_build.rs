//! A pipeline's tick programs as built: the layouts a pipeline refuses,
//! naming the way out, and HLAT's 70B layout through the `neuron`
//! pipeline (its TensorE work per program, its memory plan, its sends).

use crate::configs::{deep, gqa_odd_vocab, layout, pipeline_config as config, FORMS};
use hlatc_models::{ModelConfig, Parallelism};
use hlatc_passes::RematPolicy;
use hlatc_step::pipeline::{build_pipeline_steps, PipelineForm, StageSend};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::StepConfig;

/// With an odd number of stages and of ranks per stage, some rank has no
/// partner in a round of all-gathers: refused, naming the way out.
#[test]
fn an_unpaired_all_gather_send_is_refused() {
    let model = ModelConfig {
        num_hidden_layers: 3,
        ..gqa_odd_vocab()
    };
    let cfg = config(model, layout(3, 1, 1, false, false));
    let e = build_pipeline_steps(&cfg, 1, FORMS[1])
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "--pp-send all-gather pairs every rank with another in each round of sends, but --pp 3 and each stage's 1 (--tp x --dp) are both odd, so one rank is left alone; use an even --pp, an even --tp x --dp, or --pp-send permute"
    );
}

#[test]
fn stages_that_do_not_divide_the_layers_are_refused_naming_the_choices() {
    let cfg = config(deep(gqa_odd_vocab()), layout(3, 1, 1, false, false));
    let e = build_pipeline_steps(&cfg, 1, FORMS[0])
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        e,
        "--pp 3 does not divide the 4 decoder layers: every stage holds the same number of layers (use a --pp among 1, 2, 4)"
    );
}

/// HLAT's 70B layout (TP 32 x PP 8 x DP 8 with sequence parallelism,
/// sequences of 4096, a micro-batch of one sequence: a global batch of
/// 1024, so 128 micro-batches; `bf16-master` and ZeRO-1), its programs
/// through the `neuron` pipeline.
fn hlat_70b_pipeline(form: PipelineForm) -> hlatc_step::pipeline::PipelineSteps {
    use hlatc_models::BatchShape;
    use hlatc_passes::{default_pipeline, Target};
    use hlatc_step::train_step::optimize;
    let cfg = StepConfig {
        parallel: Parallelism {
            tp: 32,
            dp: 8,
            sequence_parallel: true,
            zero1: true,
            pp: 8,
            ..Parallelism::SINGLE
        },
        ..StepConfig::new(
            ModelConfig::hlat_70b(),
            BatchShape {
                batch_size: 1024,
                seq_len: 4096,
            },
        )
        .with_precision(Precision::Bf16Master)
    };
    let mut steps = build_pipeline_steps(&cfg, 128, form).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    for step in steps.programs_mut() {
        optimize(step, &pipeline, Target::Neuron, form.remat).unwrap();
    }
    steps
}

/// HLAT's 70B layout as NxD ran it (core-attention, sends by all-gather):
/// each micro-batch's forward runs once, so the cool-down program (the
/// backward slot) does at most 2.3 times the warm-up's (the forward
/// slot) TensorE work, where `--remat stage` reruns the forward (3.1
/// times); every stage runs the same programs, so one plan is every
/// stage's, and it fits a trn1 NeuronCore's 16 GiB in both forms; each
/// program's dots need fewer than neuronx-cc's 5 M TensorE instructions;
/// no program holds a `collective-permute` in the all-gather form.
#[test]
fn hlats_70b_layout_keeps_its_activations_and_fits_a_neuroncore() {
    use hlatc_passes::neuron_check::matmul_instructions;
    use hlatc_step::memory_plan::{MemoryPlan, TRN1_CORE_BYTES};
    use hlatc_step::pipeline::Phase;
    let forms = [
        (RematPolicy::CoreAttention, StageSend::AllGather, 2.3),
        (RematPolicy::CoreAttention, StageSend::Permute, 2.3),
        (RematPolicy::Stage, StageSend::AllGather, 3.2),
    ];
    for (remat, send, most) in forms {
        let steps = hlat_70b_pipeline(PipelineForm { remat, send });
        let n: Vec<u64> = steps
            .ticks
            .iter()
            .map(|t| matmul_instructions(&t.module))
            .collect();
        for (phase, &n) in Phase::ALL.iter().zip(&n) {
            println!("{remat}, {send}: {phase:?}: at least {n} TensorE instructions");
            assert!(n > 100_000 && n < 5_000_000, "{phase:?}: {n}");
        }
        let ratio = n[2] as f64 / n[0] as f64;
        println!("{remat}, {send}: cool-down / warm-up TensorE {ratio:.2}");
        assert!(ratio <= most && ratio > 1.9, "{remat}: {ratio}");
        let ticks: Vec<_> = steps.ticks.iter().collect();
        let plan = MemoryPlan::of_pipeline(&ticks, &steps.apply);
        println!("{remat}, {send}: every stage: {plan}");
        assert!(plan.total() <= TRN1_CORE_BYTES, "{plan:?}");
        let permutes = steps
            .programs()
            .flat_map(|s| {
                s.module
                    .entry()
                    .ids()
                    .map(move |id| &s.module.entry().instr(id).op)
            })
            .filter(|op| matches!(op, hlatc_compiler::Op::CollectivePermute { .. }))
            .count();
        assert_eq!(
            permutes == 0,
            send == StageSend::AllGather,
            "{send}: {permutes}"
        );
        assert_eq!(steps.stages.layers(7), 70..80);
        assert!((steps.schedule.bubble() - 7.0 / 135.0).abs() < 1e-12);
    }
}
