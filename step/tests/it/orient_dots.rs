//! `orient-dots` on hlatc's own step: after the `cpu` default pipeline no
//! dot of the small model's step (S 512, where a `[b, h, q, k]` score
//! tensor outweighs q and the result) reads a score-shaped operand as an
//! lhs contracted over its query dimension, the form XLA CPU would
//! materialize twice; each layer's key gradient reads the score gradient as
//! an rhs instead, as the value gradient reads the probabilities. A change
//! to autodiff's dot rule or to the pass that made it inert would fail
//! here, not only show in the step time (`step_vs_jax` example). The
//! numbers are checked with every other pass in
//! `train/tests/it/passes_on_xla.rs`.

use hlatc_compiler::Op;
use hlatc_models::{BatchShape, ModelConfig};
use hlatc_passes::{default_pipeline, OrientDots, RematPolicy, Target};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, optimize, StepConfig};

/// (score-shaped lhs contracted over the query dim, score-shaped rhs
/// contracted over the query dim) dots of the optimized step.
fn score_dots(precision: Precision, disabled: &[&str]) -> (usize, usize) {
    let model = ModelConfig {
        fused_projections: true,
        ..ModelConfig::small()
    };
    let batch = BatchShape {
        batch_size: 1,
        seq_len: 512,
    };
    let cfg = StepConfig::new(model, batch).with_precision(precision);
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline(Target::Cpu, disabled).unwrap();
    optimize(&mut step, &pipeline, Target::Cpu, RematPolicy::None).unwrap();
    assert_eq!(
        step.pass_report.fired(OrientDots::NAME),
        disabled.is_empty(),
        "{precision}"
    );
    let c = step.module.entry();
    let scores = |id| {
        c.instr(id)
            .shape
            .as_array()
            .is_some_and(|a| a.dims == [1, 8, 512, 512])
    };
    let (mut as_lhs, mut as_rhs) = (0, 0);
    for id in c.ids() {
        let Op::Dot { dims, .. } = &c.instr(id).op else {
            continue;
        };
        let &[lhs, rhs] = c.operand_ids(id) else {
            continue;
        };
        as_lhs += usize::from(scores(lhs) && dims.lhs_contracting == [2]);
        as_rhs += usize::from(scores(rhs) && dims.rhs_contracting == [2]);
    }
    (as_lhs, as_rhs)
}

#[test]
fn the_key_gradient_reads_the_score_gradient_as_an_rhs() {
    for precision in [Precision::Fp32, Precision::Bf16Mixed] {
        // Without the pass: each of the 4 layers' dK = dS^T Q reads dS as
        // an lhs over its query dimension; dV^T = dO^T P reads P as an rhs.
        assert_eq!(
            score_dots(precision, &[OrientDots::NAME]),
            (4, 4),
            "{precision}"
        );
        // With it: dK^T = Q^T dS joins dV^T.
        assert_eq!(score_dots(precision, &[]), (0, 8), "{precision}");
    }
}
