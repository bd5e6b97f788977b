//! Kernel points (issue 70) on XLA CPU: blocked and looped attention
//! compute the step the plain graph computes. Three steps of each, on XLA
//! CPU in f64, agree to the sharded tests' 1e-10 norm-relative tolerance
//! (`sharded.rs` says why by norm, and why f64): loss, grad norm, every
//! parameter and Adam moment. An imported kernel (an f32 module) compares
//! in f32, within the bound f32's rounding gives. Causal, sliding-window,
//! packed rows and GQA; single device, DP, TP with SP, and pipeline
//! stages. NKI's flash attention (the fixture of
//! `tools/nki_flash_fixture.py`) is the neuron step's attention, and on
//! XLA CPU, with hlatc's references of its two kernels in their place,
//! the step is the plain graph's within f32's rounding bound. The steps as
//! built are the step crate's (`step/tests/it/kernels.rs`); `--kernel`
//! through the CLI is the root crate's (`tests/it/kernels.rs`).

use crate::configs::{blocked, kernel_config as config, layout, looped, windowed};
use crate::runs::{
    assert_same_in, differences, f32_rounding_bound, gqa_odd_vocab, mha_tied, native_kernels, run,
    run_packed, run_with, step_config, Run, EQUAL_IN,
};
use hlatc_artifacts::bundle::lower_for_cpu;
use hlatc_compiler::Op;
use hlatc_models::imported_kernel::ImportedKernel;
use hlatc_models::{AttentionKernel, BatchShape, Kernels, ModelConfig, Parallelism};
use hlatc_passes::neuron_check::{check_module, Chip, Sdk};
use hlatc_passes::{default_pipeline, RematPolicy, Target};
use hlatc_runtime::Runtime;
use hlatc_step::pipeline::{build_pipeline_steps, PipelineForm, StageSend};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, optimize, StepConfig};
use hlatc_train::trainer::Trainer;
use std::path::{Path, PathBuf};

fn check(model: ModelConfig, par: Parallelism) {
    check_kernels(model, par, blocked());
}

/// Three steps of `model` over `par` with `kernels` compute one device's
/// plain graph.
fn check_kernels(model: ModelConfig, par: Parallelism, kernels: Kernels) {
    let plain = run(&config(
        model.clone(),
        Parallelism::SINGLE,
        Kernels::default(),
    ));
    let tiled = run(&config(model, par, kernels));
    assert_same_in(EQUAL_IN, &par.to_string(), &plain, &tiled);
}

#[test]
fn looped_equals_the_plain_graph_and_the_unrolled_form() {
    for model in [gqa_odd_vocab(), mha_tied(), windowed()] {
        check_kernels(model.clone(), Parallelism::SINGLE, looped());
        let unrolled = run(&config(model.clone(), Parallelism::SINGLE, blocked()));
        let tiled = run(&config(model, Parallelism::SINGLE, looped()));
        assert_same_in(EQUAL_IN, "looped against unrolled", &unrolled, &tiled);
    }
    check_kernels(windowed(), layout(1, 2, 2, true, false), looped());
}

#[test]
fn looped_packed_documents_equal_the_plain_graph() {
    for model in [gqa_odd_vocab(), windowed()] {
        let packed = |kernels| StepConfig {
            packed: true,
            ..config(model.clone(), Parallelism::SINGLE, kernels)
        };
        let plain = run_packed(&packed(Kernels::default()));
        let tiled = run_packed(&packed(looped()));
        assert_same_in(EQUAL_IN, "packed", &plain, &tiled);
    }
}

#[test]
fn blocked_gqa_equals_the_plain_graph() {
    check(gqa_odd_vocab(), Parallelism::SINGLE);
}

#[test]
fn blocked_mha_equals_the_plain_graph() {
    check(mha_tied(), Parallelism::SINGLE);
}

#[test]
fn blocked_sliding_window_equals_the_plain_graph() {
    check(windowed(), Parallelism::SINGLE);
}

#[test]
fn blocked_under_dp_and_tp_with_sp_equals_the_plain_graph() {
    check(gqa_odd_vocab(), layout(1, 1, 2, false, false));
    check(windowed(), layout(1, 2, 2, true, false));
}

#[test]
fn blocked_pipeline_stages_equal_the_plain_graph() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let model = ModelConfig {
        num_hidden_layers: 4,
        ..gqa_odd_vocab()
    };
    let plain = run(&config(
        model.clone(),
        Parallelism::SINGLE,
        Kernels::default(),
    ));
    let par = Parallelism {
        pp: 2,
        ..layout(1, 2, 1, false, false)
    };
    for remat in [RematPolicy::None, RematPolicy::CoreAttention] {
        let form = PipelineForm {
            remat,
            send: StageSend::Permute,
        };
        let staged = run_with(&config(model.clone(), par, blocked()), |rt, cfg, params| {
            let steps = build_pipeline_steps(cfg, 2, form)?;
            crate::cpu_trainers::pipelined_steps(rt, cfg, steps, form.remat, params)
        });
        assert_same_in(EQUAL_IN, &format!("{par}, {remat}"), &plain, &staged);
    }
}

#[test]
fn blocked_packed_documents_equal_the_plain_graph() {
    for model in [gqa_odd_vocab(), windowed()] {
        let packed = |kernels| StepConfig {
            packed: true,
            ..config(model.clone(), Parallelism::SINGLE, kernels)
        };
        let plain = run_packed(&packed(Kernels::default()));
        let tiled = run_packed(&packed(blocked()));
        assert_same_in(EQUAL_IN, "packed", &plain, &tiled);
    }
}

/// The root crate's fixture `name` (a path from the repository's root).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// The JAX-lowered kernel's convention (`tools/jax_blocked_attention.py`).
const IMPORTED: &str = "tests/fixtures/kernels/blocked_attention.json";

fn imported() -> Kernels {
    let kernel = ImportedKernel::load(&fixture(IMPORTED)).unwrap();
    Kernels {
        attention: AttentionKernel::Imported(std::sync::Arc::new(kernel)),
        ..Kernels::default()
    }
}

/// `model`'s single-device f32 step over `batch_size` sequences of
/// `seq_len`, with `kernels`: an imported kernel's shapes.
fn f32_step(model: ModelConfig, [batch_size, seq_len]: [i64; 2], kernels: Kernels) -> StepConfig {
    let mut cfg = step_config(model, Parallelism::SINGLE, Precision::Fp32);
    cfg.batch = BatchShape {
        batch_size,
        seq_len,
    };
    cfg.kernels = kernels;
    cfg
}

/// Tiny's step over the fixture's shapes: 4 sequences of 16.
fn tiny_at_16(model: ModelConfig, kernels: Kernels) -> StepConfig {
    f32_step(model, [4, 16], kernels)
}

#[test]
fn an_imported_jax_kernel_computes_the_plain_graphs_step() {
    for model in [gqa_odd_vocab(), mha_tied()] {
        let plain = run(&tiny_at_16(model.clone(), Kernels::default()));
        let kernel = run(&tiny_at_16(model, imported()));
        assert_same_in(Precision::Fp32, "imported", &plain, &kernel);
    }
}

/// NKI's flash attention: the fixture's convention.
const NKI: &str = "tests/fixtures/kernels/nki_flash_attention.json";

fn nki() -> Kernels {
    let kernel = ImportedKernel::load(&fixture(NKI)).unwrap();
    Kernels {
        attention: AttentionKernel::Imported(std::sync::Arc::new(kernel)),
        ..Kernels::default()
    }
}

/// Tiny GQA over the fixture's shapes: one sequence of 512, the shortest
/// `flash_fwd` tiles.
fn at_512(kernels: Kernels) -> StepConfig {
    let model = ModelConfig {
        max_position_embeddings: 512,
        ..gqa_odd_vocab()
    };
    f32_step(model, [1, 512], kernels)
}

#[test]
fn nki_flash_attention_is_the_neuron_steps_attention_and_runs_on_xla_cpu_by_reference() {
    let cfg = at_512(nki());
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    optimize(&mut step, &pipeline, Target::Neuron, RematPolicy::None).unwrap();
    // One kernel of each, called by every layer.
    let mut calls = native_kernels(&step.module);
    calls.sort();
    assert_eq!(calls, ["flash_attn_bwd", "flash_fwd"]);
    for chip in [Chip::Trn1, Chip::Trn2] {
        let report = check_module(&step.module, chip, Sdk::V2_32);
        let found: Vec<String> = report.findings.iter().map(|f| f.rule.id.into()).collect();
        assert!(found.is_empty(), "{chip:?}: {found:?}");
    }
    // XLA CPU runs hlatc's references in the kernels' place.
    let mut module = step.module.clone();
    assert!(lower_for_cpu(&mut module).unwrap());
    assert!(native_kernels(&module).is_empty());
    let no_custom_calls = module.computations.iter().all(|c| {
        c.ids()
            .all(|id| !matches!(c.instr(id).op, Op::CustomCall(_)))
    });
    assert!(no_custom_calls);
    let rt = Runtime::shared().unwrap();
    let program = rt.compile(&module).unwrap();
    let kernel = run_with(&cfg, |_, cfg, params| {
        Trainer::with_program(program, cfg, &step, params)
    });
    let plain = run(&at_512(Kernels::default()));
    assert_same(&plain, &kernel);
}

fn assert_same(plain: &Run, kernel: &Run) {
    let diffs = differences(plain, kernel, f32_rounding_bound());
    assert!(diffs.is_empty(), "{}", diffs.join("; "));
    assert!(plain.stats[2].loss < plain.stats[0].loss);
}

/// On `cpu` the kernels are replaced by their references when the step is
/// built: the same numbers as the plain graph.
#[test]
fn on_cpu_an_nki_kernel_computes_by_its_reference() {
    let choice = hlatc_step::kernel_choice::KernelChoice::choose(
        &[hlatc_models::kernels::KernelRequest::parse(&format!(
            "attention=imported:{}",
            fixture(NKI).display()
        ))
        .unwrap()],
        Target::Cpu,
        &hlatc_step::kernel_choice::step_shape(
            &at_512(Kernels::default()).model,
            at_512(Kernels::default()).batch,
            false,
            Parallelism::SINGLE,
            1,
            hlatc_compiler::ElementType::F32,
        ),
    )
    .unwrap();
    let AttentionKernel::Imported(kernel) = &choice.kernels.attention else {
        panic!("{:?}", choice.kernels.chosen());
    };
    assert!(native_kernels(&kernel.forward.callable).is_empty());
    assert!(native_kernels(&kernel.backward.callable).is_empty());
    let plain = run(&at_512(Kernels::default()));
    let referenced = run(&at_512(choice.kernels.clone()));
    assert_same(&plain, &referenced);
}
