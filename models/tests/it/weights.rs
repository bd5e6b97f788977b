//! The parameters by role: every structure a config can ask for declares
//! each parameter once, in its place, and the forward pass refuses
//! parameters that are not one per spec.

use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::{ElementType, Shape};
use hlatc_models::parallel::Parallelism;
use hlatc_models::weights::{GateUp, LmHead, Mlp, Qkv};
use hlatc_models::{
    param_specs, weight_specs, BatchShape, ForwardParts, ModelConfig, ParamRole, ParamSpec,
    PartsContext, Projection, Weights, WeightsError, FUSED_PROJECTIONS,
};

/// Every combination of the choices that change which parameters a model
/// has (sizes do not), at one and at three layers.
fn structures() -> Vec<ModelConfig> {
    let mut out = Vec::new();
    for bits in 0..64u32 {
        let on = |i: u32| bits >> i & 1 == 1;
        for layers in [1, 3] {
            out.push(ModelConfig {
                fused_projections: on(0),
                qkv_bias: on(1),
                o_proj_bias: on(2),
                mlp_bias: on(3),
                tie_word_embeddings: on(4),
                num_hidden_layers: layers,
                num_key_value_heads: if on(5) { 4 } else { 2 },
                ..ModelConfig::tiny()
            });
        }
    }
    out
}

#[test]
fn every_structure_declares_each_parameter_once_in_its_place() {
    for cfg in structures() {
        let declared = weight_specs(&cfg);
        let specs = param_specs(&cfg);
        assert_eq!(declared.clone().into_vec(), specs);
        // The role and layer a spec carries are the field that holds it,
        // and spell its name.
        declared.clone().map(|role, layer, spec| {
            assert_eq!((spec.role, spec.layer), (role, layer), "{}", spec.name);
            assert_eq!(role.in_layer(), layer.is_some(), "{}", spec.name);
            assert_eq!(role.hf_name(layer.unwrap_or(0)), spec.name);
        });
        // Placed by role alone, the specs make the same weights.
        let placed = Weights::from_specs(specs.iter().map(|s| (s, s.clone()))).unwrap();
        assert_eq!(placed, declared, "{cfg:?}");
        // What the config asks for is what the structure holds.
        assert_eq!(declared.layers.len() as i64, cfg.num_hidden_layers);
        assert_eq!(
            matches!(declared.lm_head, LmHead::Tied),
            cfg.tie_word_embeddings
        );
        for (i, layer) in declared.layers.iter().enumerate() {
            assert_eq!(layer.layer, i as i64);
            let Mlp::Dense(mlp) = &layer.mlp else {
                panic!("a dense config's layers are dense: {cfg:?}");
            };
            let (qkv_bias, mlp_bias) = match (&layer.qkv, &mlp.gate_up) {
                (Qkv::Fused(qkv), GateUp::Fused(gate_up)) => {
                    assert!(cfg.fused_projections);
                    (qkv.bias.is_some(), gate_up.bias.is_some())
                }
                (Qkv::Separate { q, k, v }, GateUp::Separate { gate, up }) => {
                    assert!(!cfg.fused_projections);
                    assert!([k, v].iter().all(|p| p.bias.is_some() == q.bias.is_some()));
                    assert_eq!(gate.bias.is_some(), up.bias.is_some());
                    (q.bias.is_some(), gate.bias.is_some())
                }
                _ => panic!("q/k/v and gate/up stored alike: {cfg:?}"),
            };
            assert_eq!(qkv_bias, cfg.qkv_bias);
            assert_eq!(layer.o_proj.bias.is_some(), cfg.o_proj_bias);
            assert_eq!(mlp_bias, cfg.mlp_bias);
            assert_eq!(mlp.down_proj.bias.is_some(), cfg.mlp_bias);
        }
        let roles: Vec<ParamRole> = specs.iter().map(|s| s.role).collect();
        assert_eq!(roles.first(), Some(&ParamRole::Embedding));
    }
}

#[test]
fn the_forward_pass_refuses_parameters_that_are_not_one_per_spec() {
    let cfg = ModelConfig::tiny();
    let batch = BatchShape {
        batch_size: 1,
        seq_len: 4,
    };
    let context = PartsContext {
        batch,
        par: Parallelism::SINGLE,
        fault: None,
        module_markers: false,
        kernels: Default::default(),
        micro_batch: None,
    };
    let specs = param_specs(&cfg);
    for count in [0, specs.len() - 1, specs.len() + 1] {
        let mut b = Builder::new("step");
        let params: Vec<_> = (0..count)
            .map(|i| b.parameter(&format!("p{i}"), Shape::array(ElementType::F32, vec![1])))
            .collect();
        let err = match ForwardParts::new(&mut b, &cfg, &params, context.clone(), None) {
            Ok(_) => panic!("{count} parameters accepted"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            err,
            format!(
                "building 'step': forward (the parameters, in param_specs order): expects {} operand(s), got {count}",
                specs.len()
            )
        );
    }
}

fn biased() -> ModelConfig {
    ModelConfig {
        qkv_bias: true,
        mlp_bias: true,
        fused_projections: true,
        ..ModelConfig::tiny()
    }
}

fn place(specs: &[ParamSpec]) -> Result<Weights<String>, WeightsError> {
    Weights::from_specs(specs.iter().map(|s| (s, s.name.clone())))
}

#[test]
fn the_declarations_order_is_hugging_faces() {
    let cfg = ModelConfig {
        num_hidden_layers: 1,
        ..biased()
    };
    let names: Vec<String> = param_specs(&cfg).into_iter().map(|p| p.name).collect();
    let l = "model.layers.0.";
    let layer = [
        "input_layernorm.weight",
        "self_attn.qkv_proj.weight",
        "self_attn.qkv_proj.bias",
        "self_attn.o_proj.weight",
        "post_attention_layernorm.weight",
        "mlp.gate_up_proj.weight",
        "mlp.gate_up_proj.bias",
        "mlp.down_proj.weight",
        "mlp.down_proj.bias",
    ]
    .map(|n| format!("{l}{n}"));
    let mut want = vec!["model.embed_tokens.weight".to_string()];
    want.extend(layer);
    want.extend(["model.norm.weight".into(), "lm_head.weight".into()]);
    assert_eq!(names, want);
}

#[test]
fn specs_are_placed_by_role_wherever_they_stand() {
    let cfg = biased();
    let mut specs = param_specs(&cfg);
    specs.reverse();
    let placed = place(&specs).unwrap();
    let by_name = weight_specs(&cfg).map(|_, _, p| p.name);
    assert_eq!(placed, by_name);
}

#[test]
fn a_spec_that_does_not_fit_is_named() {
    let specs = param_specs(&biased());
    let without = |name: &str| -> Vec<ParamSpec> {
        specs.iter().filter(|p| p.name != name).cloned().collect()
    };
    let o = "model.layers.1.self_attn.o_proj.weight";
    assert_eq!(
        place(&without(o)),
        Err(WeightsError::Missing { name: o.into() })
    );
    let norm = "model.norm.weight";
    assert_eq!(
        place(&without(norm)),
        Err(WeightsError::Missing { name: norm.into() })
    );
    let mut twice = specs.clone();
    twice.push(specs[3].clone());
    assert_eq!(
        place(&twice),
        Err(WeightsError::Repeated {
            name: specs[3].name.clone()
        })
    );
    // A separate q beside the fused qkv.
    let separate = param_specs(&ModelConfig {
        fused_projections: false,
        ..biased()
    });
    let mut both = specs.clone();
    both.extend(
        separate
            .iter()
            .filter(|p| p.name == "model.layers.0.self_attn.q_proj.weight")
            .cloned(),
    );
    assert_eq!(
        place(&both),
        Err(WeightsError::Unplaced {
            name: "model.layers.0.self_attn.q_proj.weight".into()
        })
    );
    // A bias without its weight.
    let down = "model.layers.0.mlp.down_proj.weight";
    assert_eq!(
        place(&without(down)),
        Err(WeightsError::Missing { name: down.into() })
    );
    // A fused bias beside separate projections: a bias without its
    // weight.
    let mut orphan = separate.clone();
    orphan.push(ParamSpec {
        name: "stray".into(),
        role: ParamRole::Bias(Projection::Qkv),
        ..separate[2].clone()
    });
    assert_eq!(
        place(&orphan),
        Err(WeightsError::Unplaced {
            name: "model.layers.0.self_attn.qkv_proj.bias".into()
        })
    );
    // A layer's role outside any layer.
    let mut stray = specs.clone();
    stray[1].layer = None;
    assert!(matches!(
        place(&stray),
        Err(WeightsError::Misplaced {
            role: ParamRole::InputNorm,
            layer: None,
            ..
        })
    ));
}

#[test]
fn values_are_zipped_one_per_parameter() {
    let w = weight_specs(&ModelConfig::tiny());
    let n = w.clone().into_vec().len();
    assert!(w.clone().zip(0..n).is_some());
    assert!(w.clone().zip(0..n - 1).is_none());
    assert!(w.zip(0..n + 1).is_none());
}

#[test]
fn the_fused_table_is_the_roles() {
    for (fused, members) in FUSED_PROJECTIONS {
        let p = [Projection::Qkv, Projection::GateUp]
            .into_iter()
            .find(|p| p.name() == fused)
            .unwrap();
        let names: Vec<&str> = p.members().iter().map(|m| m.name()).collect();
        assert_eq!(names, members);
    }
    for p in [
        Projection::Q,
        Projection::Qkv,
        Projection::GateUp,
        Projection::Down,
    ] {
        assert_eq!(p.name().rsplit('.').next(), Some(p.scope()));
    }
}
