//! Pipeline stages: each holds its run of layers under the stage model's
//! names, and a split the layers do not divide is refused.

use hlatc_models::parallel::stages::Stages;
use hlatc_models::{param_specs, ModelConfig, ParallelError};

#[test]
fn each_stage_holds_its_run_of_layers_under_the_stage_models_names() {
    let cfg = ModelConfig::tiny();
    let stages = Stages::new(&cfg, 2).unwrap();
    let local = param_specs(&stages.stage_model(&cfg));
    let held = stages.holdings(&cfg, 1);
    assert_eq!(local.len(), held.len());
    for (l, h) in local.iter().zip(&held) {
        assert_eq!(l.dims, h.dims);
        assert_eq!(l.tp, h.tp);
        match (l.layer, h.layer) {
            (Some(j), Some(g)) => {
                assert_eq!(g, stages.layers_per_stage() + j);
                let suffix = |n: &str, i: i64| n.replace(&format!("layers.{i}."), "");
                assert_eq!(suffix(&l.name, j), suffix(&h.name, g));
            }
            (None, None) => assert_eq!(l.name, h.name),
            other => panic!("{} against {}: {other:?}", l.name, h.name),
        }
    }
    let all: usize = (0..2).map(|s| stages.holdings(&cfg, s).len()).sum();
    let outer = local.iter().filter(|p| p.layer.is_none()).count();
    assert_eq!(all - outer, param_specs(&cfg).len());
}

#[test]
fn an_uneven_split_is_refused_naming_the_divisors() {
    let cfg = ModelConfig::tiny();
    let err = Stages::new(&cfg, 3).unwrap_err();
    assert_eq!(
        err,
        ParallelError::UnevenStages {
            pp: 3,
            layers: cfg.num_hidden_layers,
            divisors: "1, 2".into()
        }
    );
}
