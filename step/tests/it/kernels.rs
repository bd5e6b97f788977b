//! Kernel points (issue 70) in the step as built: the blocked and looped
//! steps build no value with two sequence-long dimensions, the looped one
//! does not grow with the sequence, and `amp` casts the dots in the loop's
//! bodies. That they compute the plain graph's step on XLA CPU is the
//! train crate's (`train/tests/it/kernels.rs`); `--kernel` through the CLI
//! is the root crate's (`tests/it/kernels.rs`).

use crate::configs::{blocked, gqa_odd_vocab, kernel_config as config, looped, windowed, SEQ};
use hlatc_compiler::Shape;
use hlatc_models::{Kernels, Parallelism};
use hlatc_passes::RematPolicy;
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, StepConfig};

/// The instructions of every computation of `step`'s module.
fn instructions(step: &hlatc_step::train_step::TrainStep) -> usize {
    step.module
        .computations
        .iter()
        .map(|c| c.ids().count())
        .sum()
}

#[test]
fn the_looped_step_does_not_grow_with_the_sequence_and_keeps_no_square() {
    let count = |seq: i64, kernels: Kernels| {
        let mut cfg = config(gqa_odd_vocab(), Parallelism::SINGLE, kernels);
        cfg.model.max_position_embeddings = seq;
        cfg.batch.seq_len = seq;
        let step = build_train_step(&cfg).unwrap();
        assert_eq!(has_square(&step), None, "seq {seq}");
        instructions(&step)
    };
    let (short, long) = (count(64, looped()), count(512, looped()));
    assert_eq!(
        short, long,
        "the loop's instructions do not depend on the sequence"
    );
    // The unrolled form's pairs grow as the square of the tiles.
    assert!(count(512, blocked()) > 10 * long);
}

/// Whether some value has two dimensions as long as the sequence.
fn has_square(step: &hlatc_step::train_step::TrainStep) -> Option<String> {
    let m = &step.module;
    m.computations.iter().find_map(|c| {
        c.ids().find_map(|id| {
            let i = c.instr(id);
            let Shape::Array(a) = &i.shape else {
                return None;
            };
            (a.dims.iter().filter(|&&d| d == SEQ).count() >= 2)
                .then(|| format!("{} {}", i.name, i.shape))
        })
    })
}

#[test]
fn blocked_attention_builds_no_sequence_square() {
    for packed in [false, true] {
        let cfg = |kernels| StepConfig {
            packed,
            ..config(windowed(), Parallelism::SINGLE, kernels)
        };
        let plain = build_train_step(&cfg(Kernels::default())).unwrap();
        let tiled = build_train_step(&cfg(blocked())).unwrap();
        // The plain graph has them, so the search can find them.
        assert!(has_square(&plain).is_some());
        assert_eq!(has_square(&tiled), None, "packed: {packed}");
    }
}

/// Under `bf16-mixed`, `amp` reaches into the loop's bodies: every dot of
/// looped attention takes bf16 operands on neuron, as the unrolled form's
/// do, and accumulates in f32 (a loop left in f32 would run its matmuls at
/// a quarter of TensorE's bf16 rate).
#[test]
fn amp_casts_the_dots_in_the_loops_bodies() {
    use hlatc_compiler::{ElementType, Op};
    use hlatc_passes::{default_pipeline, Target};
    let mut cfg = config(gqa_odd_vocab(), Parallelism::SINGLE, looped());
    cfg = cfg.with_precision(Precision::Bf16Mixed);
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    hlatc_step::train_step::optimize(&mut step, &pipeline, Target::Neuron, RematPolicy::None)
        .unwrap();
    let m = &step.module;
    let mut dots = 0;
    for c in m.computations.iter().filter(|c| c.name.ends_with(".body")) {
        for id in c
            .ids()
            .filter(|&id| matches!(c.instr(id).op, Op::Dot { .. }))
        {
            dots += 1;
            for &o in c.operand_ids(id) {
                let ty = c.instr(o).shape.as_array().map(|a| a.ty);
                assert_eq!(
                    ty,
                    Some(ElementType::Bf16),
                    "{}: {}",
                    c.name,
                    c.instr(id).name
                );
            }
            let out = c.instr(id).shape.as_array().map(|a| a.ty);
            assert_eq!(out, Some(ElementType::F32), "{}", c.instr(id).name);
        }
    }
    // Two layers, a forward loop of 2 dots and a backward loop of 4 each.
    assert_eq!(dots, 2 * (2 + 4));
}
