//! A rank's state read from a Hugging Face checkpoint by its slices only
//! is, byte for byte, what the whole checkpoint read and divided gives:
//! fused projections gathered from their members, vocabulary padding zero,
//! replicated KV heads, ZeRO-1 master-weight shards; and a checkpoint that
//! lacks a tensor or has one of another shape is refused by name before
//! anything is read.

use crate::configs::{gqa_odd_vocab, step_config};
use crate::scratch;
use hlatc_artifacts::rank_checkpoint::params_from_tensors;
use hlatc_artifacts::rank_checkpoint::{check_checkpoint, rank_state_from_checkpoint};
use hlatc_artifacts::state_error::StateError;
use hlatc_artifacts::state_shards::{params_by_name, shard_state, start_state};
use hlatc_artifacts::Error as ArtifactError;
use hlatc_models::init::init_params;
use hlatc_models::layout::hugging_face_config;
use hlatc_models::layout::LayoutError;
use hlatc_models::Parallelism;
use hlatc_runtime::{read_safetensors, write_safetensors, SafetensorsIndex};
use hlatc_step::precision::Precision;
use hlatc_step::rank_inputs::RankInputs;
use hlatc_step::train_step::build_train_step;

#[test]
fn each_ranks_slices_are_the_whole_checkpoint_divided() {
    slices_are_the_whole_divided(
        "slices",
        gqa_odd_vocab(),
        Parallelism {
            tp: 4,
            dp: 2,
            sequence_parallel: true,
            zero1: true,
            pp: 1,
            ..Parallelism::SINGLE
        },
    );
}

/// A mixture of experts stores each expert as its own tensor: a rank
/// reads its TP columns of each of its EP rank's experts.
#[test]
fn each_ranks_experts_are_their_tensors_columns() {
    let moe = || hlatc_models::ModelConfig::preset("tiny-moe").unwrap();
    let split = |dp, ep, zero1| Parallelism {
        tp: 2,
        dp,
        ep,
        sequence_parallel: true,
        zero1,
        ..Parallelism::SINGLE
    };
    slices_are_the_whole_divided("experts-ep", moe(), split(4, 2, false));
    slices_are_the_whole_divided("experts-zero1", moe(), split(2, 1, true));
    slices_are_the_whole_divided("experts-ep-zero1", moe(), split(4, 2, true));
}

fn slices_are_the_whole_divided(name: &str, model: hlatc_models::ModelConfig, par: Parallelism) {
    let d = scratch(name);
    let cfg = step_config(model, par, Precision::Bf16Master);
    let model = &cfg.model;
    // A bf16 checkpoint, as Hugging Face ships them (experts one tensor
    // each), with a tensor the model does not use.
    let hf_config = hugging_face_config(model);
    let stored = init_params(&hf_config, hlatc_compiler::ElementType::Bf16, 5);
    let mut hf = hlatc_models::layout::split(&hf_config, &stored.into_iter().collect())
        .unwrap_or_else(|e| panic!("{e}"));
    hf.push((
        "model.rotary_emb.inv_freq".into(),
        hlatc_compiler::Literal::from_f32(vec![2], &[1.0, 0.5]).unwrap(),
    ));
    let path = d.join("model.safetensors");
    write_safetensors(&path, &hf).unwrap();

    let step = build_train_step(&cfg).unwrap();
    let ranks = RankInputs::new(&cfg);
    let (params, _) = params_from_tensors(
        model,
        cfg.precision.storage(),
        read_safetensors(&path).unwrap(),
        "ckpt",
    )
    .unwrap();
    let by_name = params_by_name(&step.inputs, params).unwrap();
    let whole = start_state(&ranks, &step.inputs, &by_name, 9).unwrap();
    let want = shard_state(&ranks, &step.inputs, &whole);

    let index = SafetensorsIndex::open(&path).unwrap();
    assert_eq!(
        check_checkpoint(model, &index).unwrap(),
        ["model.rotary_emb.inv_freq"]
    );
    for (rank, want) in want.iter().enumerate() {
        let got = rank_state_from_checkpoint(&ranks, &step.inputs, &index, rank as i64, 9).unwrap();
        assert_eq!(got.len(), want.len());
        for ((name, g), (wname, w)) in got.iter().zip(want) {
            assert_eq!(name, wname);
            assert_eq!(g, w, "rank {rank}: {name}");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_checkpoint_without_a_tensor_or_of_another_shape_is_refused_by_name() {
    let d = scratch("refused");
    let model = gqa_odd_vocab();
    let hf = init_params(
        &hugging_face_config(&model),
        hlatc_compiler::ElementType::F32,
        5,
    );
    let missing: Vec<_> = hf
        .iter()
        .filter(|(n, _)| n != "model.norm.weight")
        .cloned()
        .collect();
    let path = d.join("missing.safetensors");
    write_safetensors(&path, &missing).unwrap();
    let e = check_checkpoint(&model, &SafetensorsIndex::open(&path).unwrap()).unwrap_err();
    assert!(
        matches!(
            &e,
            ArtifactError::State(s) if matches!(
                &**s,
                StateError::Layout {
                    error: LayoutError::Missing { name, dims },
                    ..
                } if name == "model.norm.weight" && dims == &[32]
            )
        ),
        "{e}"
    );

    let wider = hlatc_compiler::Literal::from_f32(vec![33], &[0.0; 33]).unwrap();
    let reshaped: Vec<_> = hf
        .iter()
        .map(|(n, l)| match n.as_str() {
            "model.norm.weight" => (n.clone(), wider.clone()),
            _ => (n.clone(), l.clone()),
        })
        .collect();
    let path = d.join("reshaped.safetensors");
    write_safetensors(&path, &reshaped).unwrap();
    let e = check_checkpoint(&model, &SafetensorsIndex::open(&path).unwrap()).unwrap_err();
    assert!(
        matches!(
            &e,
            ArtifactError::State(s) if matches!(
                &**s,
                StateError::Layout {
                    error: LayoutError::Shape { name, got, want },
                    ..
                } if name == "model.norm.weight" && got == &[33] && want == &[32]
            )
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .ends_with("tensor 'model.norm.weight' has shape [33], the model needs [32]"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
