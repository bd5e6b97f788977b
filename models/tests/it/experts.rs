//! Mixture-of-experts configs: each family's keys read into one
//! [`MoeConfig`], the layers it makes sparse, its parameters stacked over
//! the experts and named as its checkpoints name them, and every bad key
//! or value refused by name.

use hlatc_models::parallel::Parallelism;
use hlatc_models::weights::Mlp;
use hlatc_models::EpExchange;
use hlatc_models::{param_specs, weight_specs, BatchShape, ModelConfig, ModelType, ParallelError};

/// A minimal config of `model_type` with `extra` keys.
fn config(model_type: &str, extra: &str) -> String {
    format!(
        r#"{{"model_type": "{model_type}", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2{extra}}}"#
    )
}

const QWEN3_MOE: &str =
    r#", "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 6"#;
const MIXTRAL: &str = r#", "num_local_experts": 4, "num_experts_per_tok": 2"#;

fn read(json: &str) -> Result<ModelConfig, String> {
    ModelConfig::from_hf_json(json, "c.json").map_err(|e| e.to_string())
}

#[test]
fn each_family_reads_its_experts() {
    let m = read(&config("mixtral", MIXTRAL)).unwrap();
    let moe = m.moe.clone().unwrap();
    // Mixtral's experts are as wide as its intermediate_size, renormalize
    // always and fill every layer; the aux loss is off unless asked.
    assert_eq!((moe.num_experts, moe.expert_intermediate_size), (4, 16));
    assert!(moe.norm_topk_prob && moe.is_sparse(0) && moe.is_sparse(1) && !moe.aux_loss());
    let q = read(&config(
        "qwen2_moe",
        &format!(
            r#"{QWEN3_MOE}, "shared_expert_intermediate_size": 12, "decoder_sparse_step": 2, "output_router_logits": true"#
        ),
    ))
    .unwrap();
    let moe = q.moe.clone().unwrap();
    assert_eq!(moe.shared_expert_intermediate_size, Some(12));
    assert!(
        !moe.is_sparse(0) && moe.is_sparse(1),
        "decoder_sparse_step 2"
    );
    assert!(moe.aux_loss() && moe.router_aux_loss_coef == 0.001);
    assert!(
        q.qkv_bias && !q.o_proj_bias,
        "Qwen2-MoE's qkv_bias defaults on"
    );
    let w = weight_specs(&q);
    assert!(matches!(w.layers[0].mlp, Mlp::Dense(_)));
    assert!(matches!(&w.layers[1].mlp, Mlp::Sparse(s) if s.shared.is_some()));
    let q3 = read(&config("qwen3_moe", QWEN3_MOE)).unwrap();
    assert!(q3.qk_norm && q3.model_type == ModelType::Qwen3Moe);
    // transformers writes Qwen3-MoE's count as num_local_experts.
    let alias = QWEN3_MOE.replace("num_experts\"", "num_local_experts\"");
    assert_eq!(read(&config("qwen3_moe", &alias)).unwrap(), q3);
}

#[test]
fn experts_are_stacked_and_named_as_their_checkpoints_name_them() {
    let m = read(&config("mixtral", MIXTRAL)).unwrap();
    let specs = param_specs(&m);
    let gate = specs
        .iter()
        .find(|p| p.name == "model.layers.1.mlp.experts.gate_proj.weight")
        .unwrap();
    assert_eq!(gate.dims, vec![4, 16, 8]);
    let names: Vec<&str> = gate.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        (0..4)
            .map(|e| format!("model.layers.1.block_sparse_moe.experts.{e}.w1.weight"))
            .collect::<Vec<_>>()
    );
    assert_eq!(gate.parts[2].dims(&gate.dims), vec![16, 8]);
    let router = specs
        .iter()
        .find(|p| p.name == "model.layers.0.mlp.gate.weight")
        .unwrap();
    assert_eq!(
        router.parts[0].name,
        "model.layers.0.block_sparse_moe.gate.weight"
    );
    let q = read(&config("qwen3_moe", QWEN3_MOE)).unwrap();
    let down = param_specs(&q)
        .into_iter()
        .find(|p| p.name == "model.layers.0.mlp.experts.down_proj.weight")
        .unwrap();
    assert_eq!(down.dims, vec![4, 8, 6]);
    assert_eq!(
        down.parts[3].name,
        "model.layers.0.mlp.experts.3.down_proj.weight"
    );
    // Counted from the specs, sparse and dense layers alike.
    let counted: i64 = param_specs(&q)
        .iter()
        .map(|p| p.dims.iter().product::<i64>())
        .sum();
    assert_eq!(q.parameter_count(), counted);
}

#[test]
fn moe_presets_match_their_published_parameter_counts() {
    for (name, params) in [
        ("mixtral-8x7b", 46_702_792_704),
        ("qwen3-30b-a3b", 30_532_122_624),
    ] {
        let c = ModelConfig::preset(name).unwrap();
        c.validate(name).unwrap();
        assert_eq!(c.parameter_count(), params, "{name}");
    }
    // What a token reads: Mistral's "12.9B active", Qwen's "3.3B
    // activated" (3.35 B counted; both figures are rounded).
    for (name, active) in [("mixtral-8x7b", 12.9e9), ("qwen3-30b-a3b", 3.3e9)] {
        let c = ModelConfig::preset(name).unwrap();
        let got = c.active_parameter_count() as f64;
        assert!((got / active - 1.0).abs() < 0.02, "{name}: {got}");
        assert!(c.expert_parameter_count() < c.parameter_count());
    }
    let dense = ModelConfig::preset("tiny").unwrap();
    assert_eq!(dense.active_parameter_count(), dense.parameter_count());
    assert_eq!(dense.expert_parameter_count(), 0);
}

#[test]
fn bad_expert_keys_are_refused_by_name() {
    for (json, want) in [
        (
            config("mixtral", r#", "num_local_experts": 4, "num_experts_per_tok": 5"#),
            "c.json: num_experts_per_tok: 5 is more than the 4 experts a token can be routed to",
        ),
        (
            config("mixtral", r#", "num_local_experts": 0, "num_experts_per_tok": 1"#),
            "c.json: num_local_experts: must be positive, got 0",
        ),
        (
            config("qwen3_moe", &QWEN3_MOE.replace("\"num_experts\": 4", "\"num_experts\": -2")),
            "c.json: num_experts: must be positive, got -2",
        ),
        (
            config("mixtral", &format!(r#"{MIXTRAL}, "router_z_loss_coef": 0.001"#)),
            "c.json: router_z_loss_coef: is not a key hlatc knows",
        ),
        (
            config("mixtral", &format!(r#"{MIXTRAL}, "router_jitter_noise": 0.1"#)),
            "c.json: router_jitter_noise: 0.1 is not supported (multiplicative router noise is not modelled; hlatc implements 0.0)",
        ),
        (
            config("mixtral", r#", "num_experts_per_tok": 2"#),
            "c.json: num_local_experts: is missing",
        ),
        (
            config("qwen3_moe", &format!(r#"{QWEN3_MOE}, "mlp_only_layers": [2]"#)),
            "c.json: mlp_only_layers: names layer 2; the model has layers 0 to 1",
        ),
        (
            config("qwen3_moe", &format!(r#"{QWEN3_MOE}, "mlp_only_layers": "all""#)),
            "c.json: mlp_only_layers: must be a list of layer numbers, got \"all\"",
        ),
        (
            config("qwen3_moe", &format!(r#"{QWEN3_MOE}, "num_local_experts": 8"#)),
            "c.json: num_local_experts: 8 disagrees with num_experts = 4; they name the same count",
        ),
        (
            config("qwen3_moe", &format!(r#"{QWEN3_MOE}, "router_aux_loss_coef": -1"#)),
            "c.json: router_aux_loss_coef: must be 0 or more, got -1",
        ),
        (
            config("qwen2_moe", QWEN3_MOE),
            "c.json: shared_expert_intermediate_size: is missing",
        ),
        (
            config(
                "qwen2_moe",
                &format!(r#"{QWEN3_MOE}, "shared_expert_intermediate_size": 4, "attention_bias": true"#),
            ),
            "c.json: attention_bias: Qwen2-MoE's q/k/v biases are set by qkv_bias",
        ),
        (
            // A dense family does not read expert keys.
            config("llama", r#", "num_experts": 4"#),
            "c.json: num_experts: is not a key hlatc knows",
        ),
    ] {
        let got = read(&json).unwrap_err();
        assert!(got.starts_with(want), "want {want}\ngot  {got}");
    }
}

#[test]
fn experts_divide_over_dp_and_ep_and_refuse_the_rest_by_name() {
    let m = ModelConfig::preset("tiny-moe").unwrap();
    let batch = BatchShape {
        batch_size: 4,
        seq_len: 8,
    };
    let with = |tp, dp, ep| Parallelism {
        tp,
        dp,
        ep,
        ..Parallelism::SINGLE
    };
    for ok in [
        with(1, 1, 1),
        with(1, 4, 1),
        with(1, 4, 2),
        with(1, 4, 4),
        with(2, 1, 1),
        with(4, 1, 1),
        with(2, 2, 2),
    ] {
        ok.validate(&m, batch).unwrap();
    }
    // Stages: without the load-balancing loss, and with every stage's
    // layers sparse where stage 0's are.
    let staged = |pp, dp, ep| Parallelism {
        pp,
        ..with(1, dp, ep)
    };
    let err = staged(2, 1, 1).validate(&m, batch).unwrap_err();
    assert_eq!(
        err,
        ParallelError::RouterLossInStages {
            pp: 2,
            model_type: "mixtral"
        }
    );
    let mut quiet = m.clone();
    quiet.moe.as_mut().unwrap().output_router_logits = false;
    quiet.num_hidden_layers = 4;
    staged(2, 2, 2).validate(&quiet, batch).unwrap();
    staged(4, 1, 1).validate(&quiet, batch).unwrap();
    let mixed = |step, dense: Vec<i64>| {
        let mut c = quiet.clone();
        let moe = c.moe.as_mut().unwrap();
        (moe.decoder_sparse_step, moe.mlp_only_layers) = (step, dense);
        c
    };
    // Every second layer sparse: stages of 2 layers repeat it, of 1 not.
    staged(2, 1, 1).validate(&mixed(2, vec![]), batch).unwrap();
    let err = staged(4, 1, 1).validate(&mixed(2, vec![]), batch);
    assert!(
        matches!(
            err,
            Err(ParallelError::MixedStages {
                layer: 1,
                twin: 0,
                is: "sparse",
                ..
            })
        ),
        "{err:?}"
    );
    // A dense layer listed on stage 1 alone, and on every stage.
    let err = staged(2, 1, 1).validate(&mixed(1, vec![3]), batch);
    assert!(
        matches!(
            err,
            Err(ParallelError::MixedStages {
                layer: 3,
                twin: 1,
                is: "dense",
                ..
            })
        ),
        "{err:?}"
    );
    staged(2, 1, 1)
        .validate(&mixed(1, vec![1, 3]), batch)
        .unwrap();
    let err = staged(2, 1, 1).validate(&mixed(1, vec![0]), batch);
    assert!(
        matches!(
            err,
            Err(ParallelError::MixedStages {
                layer: 2,
                twin: 0,
                is: "sparse",
                ..
            })
        ),
        "{err:?}"
    );
    // TP splits each expert's columns as the dense MLP's: 4 ranks do not
    // divide 42 of them.
    let mut wide = m.clone();
    wide.moe.as_mut().unwrap().expert_intermediate_size = 42;
    let err = with(4, 1, 1).validate(&wide, batch).unwrap_err();
    assert_eq!(
        err,
        ParallelError::Indivisible {
            tp: 4,
            what: "experts' MLP width (moe_intermediate_size)",
            count: 42
        }
    );
    let err = with(1, 4, 3).validate(&m, batch).unwrap_err();
    assert_eq!(err, ParallelError::EpIndivisibleDp { ep: 3, dp: 4 });
    assert!(
        err.to_string().contains("--ep 3 does not divide --dp 4"),
        "{err}"
    );
    let err = with(1, 8, 8)
        .validate(
            &m,
            BatchShape {
                batch_size: 8,
                ..batch
            },
        )
        .unwrap_err();
    assert!(
        matches!(&err, ParallelError::EpIndivisibleExperts { ep: 8, experts: 4, divisors } if divisors == "1, 2, 4"),
        "{err}"
    );
    let err = with(1, 2, 0).validate(&m, batch).unwrap_err();
    assert_eq!(
        err,
        ParallelError::Degree {
            degree: hlatc_models::parallel::Degree::Ep,
            got: 0
        }
    );
    let gathered = Parallelism {
        ep_exchange: EpExchange::AllGather,
        ..with(1, 2, 1)
    };
    let err = gathered.validate(&m, batch).unwrap_err();
    assert!(
        err.to_string()
            .contains("--ep-exchange all-gather needs --ep above 1"),
        "{err}"
    );
    // ZeRO-1 divides the experts' state over the replicas holding them.
    let zero1 = Parallelism {
        zero1: true,
        ..with(1, 4, 2)
    };
    zero1.validate(&m, batch).unwrap();
    let specs = hlatc_models::param_specs(&m);
    let experts = specs.iter().find(|p| p.holds_experts()).unwrap();
    let router = specs.iter().find(|p| p.name.contains("mlp.gate.")).unwrap();
    assert_eq!(
        (zero1.zero1_degree(experts), zero1.zero1_degree(router)),
        (2, 4)
    );
    // Rank 3 is DP replica 3: EP rank 1, the second replica of its experts.
    assert_eq!(
        (zero1.zero1_index(experts, 3), zero1.zero1_index(router, 3)),
        (1, 3)
    );
    let dense = ModelConfig::tiny();
    let err = with(1, 2, 2).validate(&dense, batch).unwrap_err();
    assert!(
        err.to_string().contains("--ep 2: llama is a dense model"),
        "{err}"
    );
}

#[test]
fn ep_groups_are_consecutive_replicas_and_holders_share_an_ep_rank() {
    // TP 2 x DP 4, EP 2: replicas {0,1} and {2,3} exchange tokens.
    let par = Parallelism {
        tp: 2,
        dp: 4,
        ep: 2,
        ..Parallelism::SINGLE
    };
    assert_eq!(
        par.ep_groups(),
        vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]
    );
    assert_eq!(par.expert_replicas(), vec![vec![0, 2], vec![1, 3]]);
    assert_eq!(
        (0..8).map(|r| par.ep_rank(r)).collect::<Vec<_>>(),
        [0, 0, 1, 1, 0, 0, 1, 1]
    );
    use hlatc_models::parallel::split::holder_groups;
    assert_eq!(
        holder_groups(1, true, &par),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    assert_eq!(
        holder_groups(1, false, &par),
        vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]
    );
}

#[test]
fn capacity_is_per_sequence_and_a_factor_must_be_positive() {
    let mut m = ModelConfig::preset("tiny-moe").unwrap();
    let moe = m.moe.as_mut().unwrap();
    // 4 experts, 2 per token.
    assert_eq!(moe.capacity(8), 8);
    moe.capacity_factor = Some(1.0);
    assert_eq!(moe.capacity(8), 4);
    moe.capacity_factor = Some(1.3);
    assert_eq!(moe.capacity(8), 6);
    moe.capacity_factor = Some(4.0);
    assert_eq!(moe.capacity(8), 8);
    for bad in [0.0, -1.0, f64::NAN] {
        m.moe.as_mut().unwrap().capacity_factor = Some(bad);
        let err = m.validate("tiny-moe").unwrap_err().to_string();
        assert!(err.contains("capacity_factor"), "{err}");
    }
}
