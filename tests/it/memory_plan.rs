//! The memory plan per rank as `compile_step` fits a step to its devices:
//! its state counted exactly from the inputs by role, the refusal of a
//! layout that does not fit, with the change that does, and what `hlatc
//! compile` prints and records. The plan's working memory against what XLA
//! CPU's buffer assignment plans for the same program is the train
//! crate's (`train/tests/it/memory_plan.rs`).

use crate::support::{hlatc, scratch, stderr, stdout};
use hlatc::compile_step::spellings::CompileOption;
use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
use hlatc::memory_plan::{DeviceMemory, MemoryPlan};
use hlatc::models::Parallelism;
use hlatc::passes::Target;
use hlatc::precision::Precision;
use hlatc::train_step::Role;
use hlatc::Error;

fn options(model: &str, par: Parallelism, batch: i64, precision: Precision) -> CompileOptions {
    CompileOptions {
        model: ModelSource::Preset(model.into()),
        batch_size: Some(batch),
        precision,
        parallel: par,
        ..CompileOptions::default()
    }
}

fn layout(tp: i64, dp: i64, zero1: bool) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel: tp > 1,
        zero1,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

#[test]
fn the_state_is_counted_from_the_inputs_by_role() {
    let mut o = options("tiny", layout(2, 2, true), 2, Precision::Bf16Master);
    o.target = Target::Cpu;
    let c = compile_step(&o).unwrap();
    let p = c.memory;
    let elements = |role: Role| -> u64 {
        c.programs
            .main()
            .inputs
            .iter()
            .filter(|s| s.role == role)
            .map(|s| s.shape.iter().product::<i64>() as u64)
            .sum()
    };
    let local = elements(Role::Parameter);
    assert_eq!(p.parameters, local * 2, "bf16 weights");
    assert_eq!(p.gradients, local * 4, "gradients are summed in f32");
    assert_eq!(p.master_weights, elements(Role::MasterWeight) * 4);
    // ZeRO-1 over 2 replicas: each keeps half (a shard padded up).
    assert!(p.master_weights >= local * 2 && p.master_weights < local * 2 + 4 * 64);
    assert_eq!(p.optimizer_state, 2 * p.master_weights);
    assert!(p.activations > 0);
    assert_eq!(
        p.total(),
        p.parameters
            + p.master_weights
            + p.optimizer_state
            + p.gradient_accumulators
            + p.gradients
            + p.activations
            + p.backward_working
    );
}

/// HLAT's 70B layout: TP 32 x DP 64 with SP and ZeRO-1, `bf16-master`,
/// batch 64, compiled for neuron.
fn hlat_70b_on_2048_ranks() -> hlatc::compile_step::CompiledStep {
    compile_step(&options(
        "hlat-70b",
        layout(32, 64, true),
        64,
        Precision::Bf16Master,
    ))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn refusal(o: &CompileOptions) -> String {
    refused_fit(o).1
}

/// The options the smallest change that fits sets, and the message, of a
/// step refused as over its device's memory.
fn refused_fit(o: &CompileOptions) -> (Vec<CompileOption>, String) {
    let e = match compile_step(o) {
        Err(e) => e,
        Ok(c) => panic!("fits: {}", c.memory),
    };
    match &e {
        Error::DoesNotFit { fix, .. } => {
            let set = fix.iter().flat_map(|f| &f.change.0).map(|s| s.option);
            (set.collect(), e.to_string())
        }
        _ => panic!("refused for another reason: {e}"),
    }
}

/// HLAT's 7B layout with ZeRO-1 and master weights on 32 NeuronCores fits;
/// without ZeRO-1 the same layout is refused, and the advice is ZeRO-1.
#[test]
fn seven_b_at_tp8_with_sequence_parallelism_and_zero1_fits() {
    let c = compile_step(&options(
        "hlat-7b",
        layout(8, 4, true),
        4,
        Precision::Bf16Master,
    ))
    .unwrap();
    assert!(c.memory.total() <= 16 << 30, "{}", c.memory);
    let (fix, refused) = refused_fit(&options(
        "hlat-7b",
        layout(8, 4, false),
        4,
        Precision::Bf16Master,
    ));
    assert_eq!(fix, [CompileOption::Zero1], "{refused}");
    assert!(
        refused.contains("over the 16.00 GiB of device memory"),
        "{refused}"
    );
}

/// 70B at TP 32 with master weights and ZeRO-1 on 4 nodes (DP 4): refused,
/// with every part named and more replicas as the advice; on 64 nodes, as
/// HLAT ran it, it fits.
#[test]
fn seventy_b_at_tp32_is_refused_on_four_nodes_and_fits_on_sixty_four() {
    let o = CompileOptions {
        device_memory: DeviceMemory::TargetDefault,
        ..options("hlat-70b", layout(32, 4, true), 4, Precision::Bf16Master)
    };
    let (fix, refused) = refused_fit(&o);
    for part in [
        "parameters",
        "master weights",
        "optimizer state",
        "gradients",
        "activations",
    ] {
        assert!(refused.contains(part), "{part}: {refused}");
    }
    assert_eq!(
        fix,
        [CompileOption::BatchSize, CompileOption::Dp],
        "{refused}"
    );
    let hlat = hlat_70b_on_2048_ranks();
    assert!(hlat.memory.total() <= 16 << 30, "{}", hlat.memory);
}

/// HLAT's 70B layout (TP 32 x DP 64, SP, ZeRO-1, `bf16-master`): each
/// backward keeps only what it needs. SwiGLU's logistic, SiLU and product,
/// the norms' `[N, D]` broadcasts, normalized inputs and outputs, and the
/// sequence-parallel gathers are recomputed, not kept: no forward value of
/// those kinds is read by the backward, and the activations are at least
/// 3.9 GiB under the 6.71 GiB (7,200,773,126 bytes) the rank kept when the
/// backward read them all.
#[test]
fn seventy_b_keeps_only_what_its_backward_needs() {
    use hlatc::compiler::graph::scope;
    let hlat = hlat_70b_on_2048_ranks();
    let c = hlat.programs.main().module.entry();
    let backward = |id| scope::is_backward(&c.instr(id).metadata.op_name);
    let kept: Vec<_> = c
        .ids()
        .filter(|&id| !backward(id) && c.users(id).into_iter().any(backward))
        .collect();
    for &id in &kept {
        let i = c.instr(id);
        let name = &i.metadata.op_name;
        let recomputed = name.contains(scope::ACT_FN)
            || name.contains(scope::SEQUENCE_GATHER)
            || (name.contains("layernorm") || name.ends_with(scope::FINAL_NORM))
                && matches!(
                    i.op,
                    hlatc::compiler::Op::Broadcast { .. }
                        | hlatc::compiler::Op::Binary(hlatc::compiler::ir::op::BinaryOp::Multiply)
                )
                && i.shape.as_array().is_some_and(|a| a.dims.len() == 2);
        assert!(!recomputed, "kept for the backward: {} ({name})", i.name);
    }
    // The plan walks the 36,000 instructions on every compile: printed
    // here to follow its cost (about 30 ms in the ci profile on a loaded
    // 2-core machine, 7 ms of it the activations' walk).
    let start = std::time::Instant::now();
    let again = MemoryPlan::of(hlat.programs.main());
    let took = start.elapsed();
    println!("70B TP 32 x DP 64: {again}; planned in {took:?}");
    assert_eq!(again, hlat.memory);
    let before: u64 = 7_200_773_126;
    let cut = (3.9 * (1u64 << 30) as f64) as u64;
    assert!(
        hlat.memory.activations <= before - cut,
        "{} bytes of activations",
        hlat.memory.activations
    );
}

#[test]
fn an_explicit_device_memory_checks_a_single_device_step() {
    let tiny = CompileOptions {
        device_memory: DeviceMemory::Bytes(1 << 10),
        ..options("tiny", Parallelism::SINGLE, 1, Precision::Fp32)
    };
    let refused = refusal(&tiny);
    assert!(refused.contains("over the 1.00 KiB"), "{refused}");
    // The default warns about a single-device step rather than refusing it.
    let c = compile_step(&options("hlat-7b", Parallelism::SINGLE, 1, Precision::Fp32)).unwrap();
    assert!(c.memory.total() > 16 << 30);
}

#[test]
fn compile_prints_the_plan_and_the_manifest_records_it() {
    let dir = scratch("memory-plan");
    let out = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--tp",
        "2",
        "--dp",
        "2",
        "--batch-size",
        "2",
        "--zero1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let printed = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(printed.contains("  memory        per rank "), "{printed}");
    assert!(printed.contains("of 16.00 GiB"), "{printed}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let m = &manifest["memory_per_rank"];
    let parts: u64 = [
        "parameters",
        "master_weights",
        "optimizer_state",
        "gradients",
        "activations",
        "backward_working",
    ]
    .iter()
    .map(|k| m[k].as_u64().unwrap())
    .sum();
    assert_eq!(m["total"].as_u64().unwrap(), parts);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_device_memory_is_refused_by_name() {
    let out = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--device-memory",
        "16XB",
        "--out",
        "/nonexistent",
    ]);
    let stderr = stderr(&out);
    crate::support::assert_code(&stderr, "option.device_memory");
}
