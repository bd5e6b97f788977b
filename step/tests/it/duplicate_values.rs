//! A built step holds no duplicate values: the builder numbers values as
//! it goes, so `cse` (and `dce` after it) finds nothing to change, for the
//! tiny model and HLAT's 7B.

#[test]
fn built_steps_hold_no_duplicate_values() {
    use hlatc_models::{BatchShape, ModelConfig};
    use hlatc_step::optimizer::AdamWConfig;
    use hlatc_step::train_step::{build_train_step, StepConfig};
    // The builder numbers values as it goes, so cse finds nothing to merge.
    for model in [ModelConfig::tiny(), ModelConfig::hlat_7b()] {
        let cfg = StepConfig {
            model,
            batch: BatchShape {
                batch_size: 1,
                seq_len: 16,
            },
            optimizer: AdamWConfig::default(),
            precision: hlatc_step::precision::Precision::Fp32,
            packed: false,
            parallel: hlatc_models::Parallelism::SINGLE,
            spmd: Default::default(),
            fault: None,
            module_markers: false,
            kernels: Default::default(),
        };
        let mut m = build_train_step(&cfg).unwrap().module;
        let report = hlatc_passes::pipeline_from_names("t", &["cse", "dce"])
            .unwrap()
            .run_module(
                &mut m,
                &mut hlatc_passes::PassContext::new(hlatc_passes::Target::Cpu),
            )
            .unwrap();
        assert!(!report.changed(), "{:?}", report.runs);
    }
}
