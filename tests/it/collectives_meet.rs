//! Sharded runs whose dots XLA CPU splits over its threads meet at every
//! collective, however few cores the machine has.
//!
//! XLA CPU sizes its thread pools by its device count. On a 2-core
//! machine a client of two devices had two threads, and `hlatc train
//! --dp 2` of this 4-layer, 256-wide model aborted in its first step:
//! one device waited in an all-reduce on one thread while the other's
//! parallel dot needed a free thread to finish (XLA's "Termination timeout
//! for all reduce ... only 1 of them arrived on time", SIGABRT after
//! 40 s). The tests' tiny model never met it: its dots are too small to
//! split. The runtime now makes the client with a thread for every device
//! that can wait and the cores besides (`pjrt::with_thread_reserve`).

use crate::sharded::rel;
use crate::support::{hlatc_within, scratch};
use std::path::Path;
use std::time::Duration;

/// The model of the report: 4 layers, hidden 256, intermediate 688, 8
/// heads over 4 KV heads, a 1,024-token vocabulary.
fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("config.json");
    let config = r#"{
  "model_type": "llama",
  "architectures": ["LlamaForCausalLM"],
  "vocab_size": 1024,
  "hidden_size": 256,
  "intermediate_size": 688,
  "num_attention_heads": 8,
  "num_key_value_heads": 4,
  "num_hidden_layers": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "max_position_embeddings": 128
}"#;
    std::fs::write(&path, config).unwrap();
    path
}

/// Every step's loss and grad norm of `hlatc train` of the model with
/// `layout`'s flags, bounded well past a step's time: a run stuck in a
/// collective fails here (XLA would abort it at 40 s) instead of hanging.
fn losses(dir: &Path, config: &Path, layout: &[&str]) -> Vec<(f64, f64)> {
    let metrics = dir.join(format!("metrics{}.csv", layout.join("")));
    let (config, metrics_arg) = (config.to_str().unwrap(), metrics.to_str().unwrap());
    let mut args = vec![
        "train",
        "--config",
        config,
        "--seq-len",
        "32",
        "--batch-size",
        "8",
        "--precision",
        crate::sharded::EQUAL_IN.name(),
        "--steps",
        "3",
        // HLAT's schedule: the CPU default's 1e-2 makes this model's loss
        // jump from step to step, which carries the sums' rounding (DP adds
        // the gradients in another order) far within a few steps.
        "--lr-max",
        "3e-4",
        "--lr-min",
        "3e-5",
        "--metrics",
        metrics_arg,
    ];
    args.extend_from_slice(layout);
    let out = hlatc_within(None, &args, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "{layout:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&metrics)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn data_and_tensor_parallel_runs_of_a_wider_model_meet_and_follow_one_device() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let dir = scratch("collectives-meet");
    let config = write_config(&dir);
    let single = losses(&dir, &config, &[]);
    assert_eq!(single.len(), 3);
    for layout in [
        &["--dp", "2"][..],
        &["--dp", "4"],
        &["--tp", "2", "--dp", "2"],
    ] {
        let sharded = losses(&dir, &config, layout);
        assert_eq!(sharded.len(), 3, "{layout:?}");
        for (k, (s, p)) in single.iter().zip(&sharded).enumerate() {
            assert!(
                rel(p.0, s.0) <= crate::sharded::F64_RTOL,
                "{layout:?} step {k}: loss {} vs {}",
                p.0,
                s.0
            );
            assert!(
                rel(p.1, s.1) <= crate::sharded::F64_RTOL,
                "{layout:?} step {k}: grad norm {} vs {}",
                p.1,
                s.1
            );
        }
    }
}
