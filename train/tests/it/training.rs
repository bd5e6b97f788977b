//! The training step cannot cheat through the causal mask, sees exactly
//! its sliding window, checks token ids against the vocabulary, and starts
//! from the scaled initialization; the trainer refuses segment ids that
//! are not a packing before running. Training through the CLI is the root
//! crate's (`tests/it/training.rs`).

use hlatc_compiler::ElementType;
use hlatc_models::{init::init_params, BatchShape, ModelConfig};
use hlatc_runtime::Runtime;
use hlatc_step::data::SyntheticData;
use hlatc_step::train_step::{build_logits, StepConfig};

fn rt() -> Runtime {
    Runtime::shared().unwrap_or_else(|e| panic!("{e}"))
}

fn logits_at(tokens: &[i32], cfg: &ModelConfig, batch: BatchShape) -> Vec<f64> {
    let module = build_logits(cfg, batch, ElementType::F32).unwrap();
    let mut inputs: Vec<_> = init_params(cfg, ElementType::F32, 3)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    inputs.push(hlatc_compiler::Literal::from_s32(vec![1, batch.seq_len], tokens).unwrap());
    inputs.push(
        hlatc_compiler::Literal::from_s32(vec![1, batch.seq_len], &vec![0; tokens.len()]).unwrap(),
    );
    rt().compile(&module).unwrap().run(&inputs).unwrap()[0].to_f64_vec()
}

#[test]
fn changing_token_t_plus_1_does_not_change_logits_at_t() {
    let cfg = ModelConfig::tiny();
    let batch = BatchShape {
        batch_size: 1,
        seq_len: 8,
    };
    let v = cfg.vocab_size as usize;
    let a = [5, 9, 13, 2, 40, 7, 1, 33];
    let base = logits_at(&a, &cfg, batch);
    for t in 0..7 {
        let mut b = a;
        b[t + 1] = (b[t + 1] + 17) % 64;
        let changed = logits_at(&b, &cfg, batch);
        // Positions up to t see exactly the same prefix: bit-identical.
        assert_eq!(
            &base[..(t + 1) * v],
            &changed[..(t + 1) * v],
            "position {t} saw token {}",
            t + 1
        );
        // Position t+1 reads the new token itself, so its logits move.
        assert_ne!(
            &base[(t + 1) * v..(t + 2) * v],
            &changed[(t + 1) * v..(t + 2) * v]
        );
    }
}

/// On independent uniform tokens nothing can be learned: the loss stays at
/// ln(vocab). A model that could see position t+1 (the target of position t)
/// would drive it toward zero, so this fails on any leak in the mask.
#[test]
fn the_loss_cannot_fall_by_cheating() {
    let cfg = ModelConfig::tiny();
    let step_cfg = StepConfig {
        model: cfg.clone(),
        batch: BatchShape {
            batch_size: 8,
            seq_len: 16,
        },
        optimizer: hlatc_step::optimizer::AdamWConfig {
            max_lr: 1e-2,
            min_lr: 1e-3,
            warmup_steps: 10,
            total_steps: 100,
            ..Default::default()
        },
        precision: hlatc_step::precision::Precision::Fp32,
        packed: false,
        parallel: hlatc_models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    let params = init_params(&cfg, ElementType::F32, 0)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = crate::cpu_trainers::unoptimized(&rt(), &step_cfg, params).unwrap();
    let data = SyntheticData::uniform(cfg.vocab_size, 1);
    let mut tail = Vec::new();
    for k in 0..100 {
        let s = trainer.step(&data.batch(k, 8, 16)).unwrap();
        if k >= 90 {
            tail.push(s.loss);
        }
    }
    let mean = tail.iter().sum::<f64>() / tail.len() as f64;
    let uniform = (cfg.vocab_size as f64).ln();
    assert!(mean > 0.9 * uniform, "loss fell to {mean} on unpredictable data (ln vocab = {uniform}): the model sees the future");
    // The same model on learnable data does learn, so the floor above is
    // the data's, not a broken optimizer's.
    let params = init_params(&cfg, ElementType::F32, 0)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = crate::cpu_trainers::unoptimized(&rt(), &step_cfg, params).unwrap();
    let data = SyntheticData::permutation(cfg.vocab_size, 1);
    let last = (0..100)
        .map(|k| trainer.step(&data.batch(k, 8, 16)).unwrap().loss)
        .last()
        .unwrap();
    assert!(last < 0.5 * uniform, "learnable data: {last}");
}

#[test]
fn initialization_is_scaled_and_deterministic() {
    let cfg = ModelConfig::tiny();
    let a = init_params(&cfg, ElementType::F32, 42);
    assert_eq!(a, init_params(&cfg, ElementType::F32, 42));
    assert_ne!(a, init_params(&cfg, ElementType::F32, 43));
    let std_of = |name: &str| {
        let v = a.iter().find(|(n, _)| n == name).unwrap().1.to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
    };
    // 0.02 for inputs to the residual stream's readers; 0.02 / sqrt(2 * layers)
    // for the projections that write into it.
    let out_std = 0.02 / (2.0 * cfg.num_hidden_layers as f64).sqrt();
    for (name, want) in [
        ("model.embed_tokens.weight", 0.02),
        ("model.layers.0.self_attn.q_proj.weight", 0.02),
        ("model.layers.1.mlp.up_proj.weight", 0.02),
        ("model.layers.0.self_attn.o_proj.weight", out_std),
        ("model.layers.1.mlp.down_proj.weight", out_std),
    ] {
        let s = std_of(name);
        assert!(
            (s - want).abs() < 0.15 * want,
            "{name}: std {s}, want {want}"
        );
    }
    let norm = &a.iter().find(|(n, _)| n == "model.norm.weight").unwrap().1;
    assert!(norm.to_f64_vec().iter().all(|&x| x == 1.0));
}

/// Mistral's sliding window, one layer deep so the receptive field is the
/// window itself: a token is seen by its own position and the `window - 1`
/// after it, bit for bit nobody else.
#[test]
fn a_sliding_window_sees_exactly_its_window() {
    let window = 3;
    let cfg = ModelConfig {
        model_type: hlatc_models::ModelType::Mistral,
        sliding_window: Some(window),
        num_hidden_layers: 1,
        ..ModelConfig::tiny()
    };
    let batch = BatchShape {
        batch_size: 1,
        seq_len: 8,
    };
    let v = cfg.vocab_size as usize;
    let a = [5, 9, 13, 2, 40, 7, 1, 33];
    let base = logits_at(&a, &cfg, batch);
    for j in 0..8 {
        let mut b = a;
        b[j] = (b[j] + 17) % 64;
        let changed = logits_at(&b, &cfg, batch);
        for t in 0..8 {
            let sees = t >= j && t - j < window as usize;
            let same = base[t * v..(t + 1) * v] == changed[t * v..(t + 1) * v];
            assert_eq!(
                same, !sees,
                "position {t}, changed token {j}: sees it = {}",
                !same
            );
        }
    }
}

/// Ids outside the vocabulary are refused by name before XLA would clamp
/// them; the ignore index is a valid target.
#[test]
fn token_ids_are_checked_against_the_vocabulary() {
    let cfg = ModelConfig::tiny();
    let step_cfg = StepConfig {
        model: cfg.clone(),
        batch: BatchShape {
            batch_size: 1,
            seq_len: 4,
        },
        optimizer: Default::default(),
        precision: hlatc_step::precision::Precision::Fp32,
        packed: false,
        parallel: hlatc_models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    let params = init_params(&cfg, ElementType::F32, 0)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = crate::cpu_trainers::unoptimized(&rt(), &step_cfg, params).unwrap();
    let ids = |v: &[i32]| hlatc_compiler::Literal::from_s32(vec![1, 4], v).unwrap();
    let batch = |t: &[i32], y: &[i32]| hlatc_step::data::Batch {
        tokens: ids(t),
        targets: ids(y),
        segment_ids: None,
    };
    let e = trainer
        .step(&batch(&[1, 2, 64, 3], &[1, 2, 3, 4]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tokens[0, 2] is 64, outside the vocabulary 0..64"
    );
    let e = trainer
        .step(&batch(&[1, 2, 3, 4], &[1, -1, 3, 4]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "targets[0, 1] is -1, outside the vocabulary 0..64 (and not the ignore index -100)"
    );
    assert!(trainer
        .step(&batch(&[1, 2, 3, 4], &[1, -100, 3, 4]))
        .is_ok());
}

/// The trainer refuses segment ids that are not a packing before running
/// (`hlatc run` and `train` refuse the same: the root crate's
/// `tests/it/inputs_checked.rs`).
#[test]
fn the_trainer_refuses_segment_ids_that_are_not_a_packing() {
    use hlatc_models::{BatchShape, ModelConfig};
    use hlatc_step::train_step::StepConfig;
    let model = ModelConfig::preset("tiny").unwrap();
    let mut cfg = StepConfig::new(
        model.clone(),
        BatchShape {
            batch_size: 1,
            seq_len: 4,
        },
    )
    .with_precision(hlatc_step::precision::Precision::Fp32);
    cfg.packed = true;
    let params = hlatc_models::init::init_params(&model, ElementType::F32, 0)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let rt = hlatc_runtime::Runtime::shared().unwrap();
    let mut t = crate::cpu_trainers::unoptimized(&rt, &cfg, params).unwrap();
    let s32 = |v: &[i32]| hlatc_compiler::Literal::from_s32(vec![1, 4], v).unwrap();
    let batch = hlatc_step::data::Batch {
        tokens: s32(&[1, 2, 3, 4]),
        targets: s32(&[2, 3, 4, 5]),
        segment_ids: Some(s32(&[0, 1, 0, 0])),
    };
    let e = t.step(&batch).unwrap_err().to_string();
    assert_eq!(
        e,
        "segment_ids[0, 2] is 0, but document 0 ended at column 0 of row 0: a document's tokens must be contiguous"
    );
    assert_eq!(t.steps_done(), 0, "nothing ran");
}
