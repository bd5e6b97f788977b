//! `hlatc compile`: bundles are complete, described, deterministic and
//! verifiable; bad configs are refused with the field named; mxfp8
//! compiles for CPU and trn3 (the same values) and is refused before it;
//! `--module-markers` puts neuronx-cc's module markers around each decoder
//! layer, forward and backward, and they change no value.
//!
//! Bundle manifests are versioned (issue 59): every kind of manifest hlatc
//! writes (one program, sharded, gradient accumulation, pipeline) states
//! format `hlatc-bundle/2` and validates against the JSON Schema shipped
//! in `docs/schema/manifest-v2.json`; `OpenedBundle` lists every tensor
//! flat. The schema is checked by a small validator of the JSON Schema
//! keywords it uses (below): one that meets a keyword it does not know
//! fails, so the schema cannot grow a rule that is silently not checked.

use crate::support::{
    error_code, hlatc, hlatc_with_fusion_emitters, hlatc_within, scratch, stderr, HLAT_7B_LAYOUT,
};
use hlatc::bundle::lower_for_cpu;
use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
use hlatc::compiler::graph::module_markers::ModuleMarker;
use hlatc::initial_inputs::initial_inputs;
use hlatc::passes::RematPolicy;
use hlatc::Module;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-compile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn compiling_twice_gives_byte_identical_bundles() {
    let (a, b) = (tmp("a"), tmp("b"));
    ok(&hlatc(&[
        "compile",
        "--model",
        "hlat-7b",
        "--out",
        a.to_str().unwrap(),
    ]));
    ok(&hlatc(&[
        "compile",
        "--model",
        "hlat-7b",
        "--out",
        b.to_str().unwrap(),
    ]));
    let (fa, fb) = (files(&a), files(&b));
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "compile_flags.json",
            "manifest.json",
            "model.hlo.txt",
            "model.hlo_module.pb",
            "neuronx-cc.sh"
        ]
    );
    assert!(fa == fb, "bundles differ");
}

#[test]
fn the_manifest_describes_every_buffer() {
    let d = tmp("manifest");
    let out = ok(&hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--out",
        d.to_str().unwrap(),
        "--seq-len",
        "8",
        "--batch-size",
        "2",
    ]));
    assert!(out.contains("compiled tiny training step for cpu"), "{out}");
    assert!(
        !d.join("compile_flags.json").exists(),
        "cpu bundles carry no neuron flags"
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
    // Read as every tensor, with the layers' runs read out.
    let inputs = hlatc::bundle::expand_listing(&m["inputs"]).unwrap();
    // Stored fused by default: q/k/v and gate/up are one tensor each.
    let tiny = hlatc::models::ModelConfig {
        fused_projections: true,
        ..hlatc::models::ModelConfig::tiny()
    };
    let n = hlatc::models::param_specs(&tiny).len();
    assert_eq!(inputs.len(), 3 * n + 3);
    assert_eq!(m["config"]["model"]["fused_projections"], true);
    assert_eq!(
        inputs[2]["name"],
        "model.layers.0.self_attn.qkv_proj.weight"
    );
    assert_eq!(
        inputs[2]["hugging_face"],
        serde_json::json!([
            {"name": "model.layers.0.self_attn.q_proj.weight", "rows": [0, 32]},
            {"name": "model.layers.0.self_attn.k_proj.weight", "rows": [32, 48]},
            {"name": "model.layers.0.self_attn.v_proj.weight", "rows": [48, 64]},
        ])
    );
    // The Adam moments of a fused tensor are laid out as it is.
    assert_eq!(inputs[n + 2]["hugging_face"], inputs[2]["hugging_face"]);
    assert_eq!(inputs[0]["name"], "model.embed_tokens.weight");
    assert_eq!(inputs[0]["shape"], serde_json::json!([64, 32]));
    assert_eq!(inputs[0]["dtype"], "f32");
    assert_eq!(inputs[0]["role"], "parameter");
    assert_eq!(inputs[n]["name"], "adam_m.model.embed_tokens.weight");
    assert_eq!(inputs[n]["role"], "adam_m");
    assert_eq!(inputs[2 * n]["role"], "adam_v");
    assert_eq!(inputs[3 * n]["name"], "step");
    assert_eq!(inputs[3 * n]["dtype"], "s32");
    assert_eq!(inputs[3 * n + 1]["role"], "tokens");
    assert_eq!(inputs[3 * n + 1]["shape"], serde_json::json!([2, 8]));
    let outputs = hlatc::bundle::expand_listing(&m["outputs"]).unwrap();
    let roles: Vec<&str> = outputs[..3]
        .iter()
        .map(|o| o["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["loss", "grad_norm", "learning_rate"]);
    // The state and the step counter alias in one run: output 3 + i is
    // input i.
    assert_eq!(
        m["input_output_alias"],
        serde_json::json!([{"output": 3, "input": 0, "count": 3 * n + 1}])
    );
    assert_eq!(m["config"]["optimizer"]["beta2"], 0.95);
    assert_eq!(m["config"]["optimizer"]["weight_decay"], 0.1);
    assert_eq!(m["config"]["model"]["num_key_value_heads"], 2);
    // The module's own aliasing agrees with the manifest.
    let module = hlatc::load_module(&d.join("model.hlo_module.pb")).unwrap();
    assert_eq!(module.input_output_alias.len(), 3 * n + 1);
    assert_eq!(m["module"]["instructions"], module.instruction_count());
}

#[test]
fn neuron_bundles_carry_flags_and_a_ready_command() {
    let d = tmp("neuron");
    ok(&hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--out",
        d.to_str().unwrap(),
    ]));
    let flags: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(d.join("compile_flags.json")).unwrap())
            .unwrap();
    assert_eq!(
        flags,
        [
            "--framework=XLA",
            "--target=trn1",
            // Pinned, so that the bundle compiles the same under the next
            // SDK's defaults; the step holds no op without an integer
            // datapath.
            "--implicit-integer-downcast=none",
            "--model-type=transformer",
            "--distribution-strategy=llm-training",
            "--auto-cast=none"
        ]
    );
    // bf16-mixed by default, recorded with the storage type.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["precision"]["preset"], "bf16-mixed");
    assert_eq!(manifest["precision"]["storage"], "f32");
    assert_eq!(manifest["precision"]["rounding"]["stochastic"], 0);
    let script = std::fs::read_to_string(d.join("neuronx-cc.sh")).unwrap();
    assert!(script.contains("export NEURON_FUSE_SOFTMAX=1"));
    assert!(script.contains("neuronx-cc compile --framework=XLA --target=trn1 --implicit-integer-downcast=none model.hlo_module.pb --output model.neff --model-type=transformer --distribution-strategy=llm-training --auto-cast=none"));
    assert!(!script.contains("NEURON_RT_STOCHASTIC_ROUNDING_EN"));
    assert!(!script.contains("NEURON_LOGICAL_NC_CONFIG"));
    assert_eq!(manifest["neuron"]["chip"], "trn1");
    assert_eq!(manifest["neuron"]["logical_nc_config"], 1);
}

/// `--chip trn3` (issue 90) at the layouts `hlatc plan --instance
/// trn3-server --nodes 1` ranks first for HLAT-7B and Llama 3.1 8B: the
/// flags name trn3, its logical cores and the integer flags the program
/// needs; the manifest its 36 GiB core; `hlatc check DIR` agrees with
/// compile's pre-flight; and the same layouts do not fit trn2's 24 GiB.
#[test]
fn trn3_bundles_name_their_chip_and_are_held_to_its_core() {
    let layouts: [(&str, &[&str], &str); 2] = [
        (
            "hlat-7b",
            &["--tp", "2", "--dp", "32", "--sequence-parallel", "--zero1"],
            "35.36 GiB",
        ),
        (
            "llama3.1-8b",
            &["--tp", "4", "--dp", "16", "--sequence-parallel", "--zero1"],
            "27.51 GiB",
        ),
    ];
    for (model, layout, memory) in layouts {
        let d = tmp(&format!("trn3-{model}"));
        let with = |chip: &str| {
            let mut args = vec![
                "compile",
                "--model",
                model,
                "--batch-size",
                "1024",
                "--seq-len",
                "4096",
                "--precision",
                "bf16-master",
                "--grad-accum",
                "32",
                "--chip",
                chip,
            ];
            args.extend(layout);
            args.extend(["--out", d.to_str().unwrap()]);
            hlatc(&args)
        };
        let out = ok(&with("trn3"));
        assert!(
            out.contains("pre-flight    trn3, --native-int64=enabled --implicit-integer-downcast=none: 1 warning"),
            "{out}"
        );
        for program in ["micro_step", "apply_step"] {
            let flags: Vec<String> = serde_json::from_str(
                &std::fs::read_to_string(d.join(program).join("compile_flags.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(
                flags,
                [
                    "--framework=XLA",
                    "--target=trn3",
                    "--logical-nc-config=2",
                    "--native-int64=enabled",
                    "--implicit-integer-downcast=none",
                    "--model-type=transformer",
                    "--distribution-strategy=llm-training",
                    "--auto-cast=none"
                ]
            );
        }
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(memory_per_rank(&manifest), memory, "{model}");
        let micro: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.join("micro_step/manifest.json")).unwrap(),
        )
        .unwrap();
        let neuron = &micro["neuron"];
        assert_eq!(neuron["chip"], "trn3");
        assert_eq!(neuron["logical_nc_config"], 2);
        assert_eq!(neuron["hbm_per_core"], 36u64 << 30);
        assert_eq!(neuron["env"]["NEURON_LOGICAL_NC_CONFIG"], "2");
        // The check reads the chip and the pinned flags back, and finds
        // what compile found: the per-module instruction limit's warning
        // in the micro-step, nothing in the apply step.
        let check = hlatc(&["check", d.to_str().unwrap()]);
        let said = crate::support::stdout(&check);
        assert!(check.status.success(), "{said}");
        let judged = "trn3 (pinned in compile_flags.json: --native-int64=enabled --implicit-integer-downcast=none)";
        assert!(said.contains(&format!("{judged}: 1 warning in")), "{said}");
        assert!(
            said.contains(&format!("{judged}: no findings in")),
            "{said}"
        );
        assert!(said.contains("NCC_EVRF007 (warning)"), "{said}");
        assert!(
            said.contains(&format!(
                "memory plan per rank {memory} (manifest.json), of trn3's 36.00 GiB per core: fits"
            )),
            "{said}"
        );
        assert_eq!(error_code(&with("trn2")), "does_not_fit", "{model}");
    }
}

/// `--chip trn2` (issue 73): the flags, the script's environment and the
/// manifest name trn2 and its logical-core configuration, the pre-flight
/// runs for trn2, the plan is held to trn2's 24 GiB core by default (the
/// same layout is refused on trn1's 16 GiB), and `hlatc check DIR` reads
/// the chip back from the bundle. A chip for a cpu bundle is refused.
#[test]
fn trn2_bundles_name_their_chip_and_are_held_to_its_core() {
    let d = tmp("trn2");
    let layout = ["compile", "--model", "hlat-7b", "--tp", "8", "--dp", "4"];
    let with = |extra: &[&str]| {
        let mut args = layout.to_vec();
        args.extend(extra);
        args.extend(["--out", d.to_str().unwrap()]);
        hlatc(&args)
    };
    let out = ok(&with(&["--chip", "trn2"]));
    assert!(
        out.contains("pre-flight    trn2, --native-int64=enabled --implicit-integer-downcast=none"),
        "{out}"
    );
    let flags: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(d.join("compile_flags.json")).unwrap())
            .unwrap();
    assert_eq!(
        flags[..5],
        [
            "--framework=XLA",
            "--target=trn2",
            "--logical-nc-config=2",
            "--native-int64=enabled",
            "--implicit-integer-downcast=none"
        ]
    );
    let script = std::fs::read_to_string(d.join("neuronx-cc.sh")).unwrap();
    assert!(
        script.contains("export NEURON_LOGICAL_NC_CONFIG=2\n"),
        "{script}"
    );
    assert!(
        script.contains("neuronx-cc compile --framework=XLA --target=trn2 --logical-nc-config=2 --native-int64=enabled --implicit-integer-downcast=none model.hlo_module.pb"),
        "{script}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
    let neuron = &manifest["neuron"];
    assert_eq!(neuron["chip"], "trn2");
    assert_eq!(neuron["logical_nc_config"], 2);
    assert_eq!(neuron["hbm_per_core"], 24u64 << 30);
    assert_eq!(memory_per_rank(&manifest), "19.88 GiB");
    assert_eq!(neuron["env"]["NEURON_LOGICAL_NC_CONFIG"], "2");
    crate::support::assert_checks_clean_on_trn2(&d);
    // The same layout does not fit trn1's core, the default chip.
    let trn1 = with(&[]);
    assert_eq!(error_code(&trn1), "does_not_fit");
    // A trn1 bundle's flags are what they were before bundles named a
    // chip (`neuron_bundles_carry_flags_and_a_ready_command`).
    let cpu = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--chip",
        "trn2",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert_eq!(error_code(&cpu), "usage.conflict");
}

#[test]
fn verify_runs_the_recipe_on_xla_cpu() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let d = tmp("verify-tiny");
    let out = ok(&hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--out",
        d.to_str().unwrap(),
        "--verify",
    ]));
    assert!(
        out.contains("verified in ") && out.contains("XLA CPU, the bundle's own module, step 2"),
        "{out}"
    );
    // The compile's total leaves the verification out, and the
    // verification states its own time: the stages listed sum to at
    // most the total.
    let number_before = |text: &str, unit: &str| -> Vec<f64> {
        text.split(unit)
            .filter_map(|part| part.rsplit(' ').next()?.parse().ok())
            .collect()
    };
    let time_line = out.lines().find(|l| l.contains("  time ")).unwrap();
    let (stages, total) = time_line.split_once("; compile total ").unwrap();
    let stage_sum: f64 = number_before(stages, " ms").iter().sum();
    let total = number_before(total, " ms")[0];
    let verify_line = out.lines().find(|l| l.starts_with("verified in ")).unwrap();
    let verify_ms = 1e3 * number_before(verify_line, " s")[0];
    assert!(
        stage_sum <= total + 0.5 && total < stage_sum + verify_ms,
        "stages {stage_sum} ms, total {total} ms, verification {verify_ms} ms: {out}"
    );
    let d = tmp("verify-70b");
    let out = ok(&hlatc_with_fusion_emitters(&[
        "compile",
        "--model",
        "hlat-70b",
        "--out",
        d.to_str().unwrap(),
        "--verify",
    ]));
    // Built with fused q/k/v and gate/up weights, then through the neuron
    // pipeline (softmaxes fused, core attention recomputed).
    assert!(
        out.contains("passes        25226 -> 29563 instructions"),
        "{out}"
    );
    // The 70B module itself compiles on XLA CPU, its Neuron custom calls
    // mapped back; running it would need its 828 GB of state, so the
    // miniature runs, through the same passes.
    assert!(
        out.contains(
            "XLA CPU compiles model.hlo_module.pb with its Neuron custom calls mapped to plain HLO"
        ),
        "{out}"
    );
    assert!(
        out.contains("XLA CPU, its miniature (same structure, toy widths), step 2"),
        "{out}"
    );
}

#[test]
fn bad_configs_name_the_field() {
    let d = tmp("bad");
    std::fs::create_dir_all(&d).unwrap();
    let cases = [
        (
            r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 30, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}"#,
            "hidden_size: 30 is not divisible by num_attention_heads = 4",
        ),
        (
            r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3, "num_hidden_layers": 2}"#,
            "num_key_value_heads: 3 does not divide num_attention_heads = 4",
        ),
        (
            r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2}"#,
            "intermediate_size: is missing",
        ),
        (
            r#"{"model_type": "llama", "vocab_size": "many", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}"#,
            "vocab_size: must be an integer, got \"many\"",
        ),
        (
            r#"{"model_type": "gpt2", "vocab_size": 100}"#,
            "model_type: 'gpt2' is not supported (hlatc builds llama, mistral, qwen2, qwen3, mixtral, qwen2_moe and qwen3_moe)",
        ),
        (
            r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "rope_scaling": {"type": "yarn", "factor": 2.0}}"#,
            "rope_scaling: rope_type 'yarn' is not supported (hlatc implements default, linear, dynamic and llama3)",
        ),
        ("{not json", "not valid JSON"),
    ];
    for (json, want) in cases {
        let p = d.join("config.json");
        std::fs::write(&p, json).unwrap();
        let o = hlatc(&[
            "compile",
            "--config",
            p.to_str().unwrap(),
            "--out",
            d.join("o").to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{json}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{}: {want}", p.display())),
            "want {want}\ngot {err}"
        );
    }
    let o = hlatc(&["compile", "--model", "llama-9000", "--out", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(error_code(&o), "option.model");
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--seq-len",
        "4096",
        "--out",
        "x",
    ]);
    assert_eq!(error_code(&o), "option.seq_len");
    let o = hlatc(&["compile", "--model", "tiny", "--beta2", "1.5", "--out", "x"]);
    assert_eq!(error_code(&o), "option.beta2");
}

/// The neuron target's bf16 dots accumulate in f32; at batch 2 some of
/// tiny's reach a kernel XLA CPU lacks ("Unsupported element type for
/// DotThunk::Execute: BF16 x BF16 = F32"), so `--verify` hands XLA CPU
/// them over f32 operands (`widen-mixed-dots`) and the check passes.
#[test]
fn verify_runs_bf16_dots_of_every_shape() {
    let dir = tmp("bf16-dots");
    let out = ok(&hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--batch-size",
        "2",
        "--verify",
        "--out",
        dir.to_str().unwrap(),
    ]));
    assert!(out.contains("step 2: loss"), "{out}");
}

/// HLAT's 7B layout, as the README's first command compiles it: in the
/// Neuron default (replicas) and in the partition form JAX compiles, each
/// with the rank as an input (Neuron's default), fits a trn1 core in the
/// same plan and passes the pre-flight with no finding, and the manifest
/// says which form it holds.
#[test]
fn hlat_7b_in_hlats_layout_fits_and_passes_the_preflight_in_both_forms() {
    for (form, spmd_flags) in [
        ("replicas", &[][..]),
        ("partitions", &["--spmd", "partitions"][..]),
    ] {
        let d = tmp(&format!("hlat-7b-layout-{form}"));
        let mut args = HLAT_7B_LAYOUT.to_vec();
        args.extend(["--target", "neuron", "--out", d.to_str().unwrap()]);
        args.extend(spmd_flags);
        let out = ok(&hlatc(&args));
        assert!(
            out.contains("pre-flight    trn1, --implicit-integer-downcast=none: no findings"),
            "{out}"
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("manifest.json")).unwrap()).unwrap();
        // One sequence per DP replica without --batch-size.
        assert_eq!(manifest["config"]["batch"]["batch_size"], 4, "{form}");
        assert_eq!(memory_per_rank(&manifest), "8.51 GiB", "{form}");
        assert_eq!(manifest["config"]["spmd"]["form"], form);
        assert_eq!(manifest["config"]["spmd"]["rank_source"], "input");
        let last = manifest["inputs"].as_array().unwrap().last().unwrap();
        assert_eq!(
            (&last["name"], &last["role"]),
            (&"rank".into(), &"rank".into())
        );
        let text = std::fs::read_to_string(d.join("model.hlo.txt")).unwrap();
        // The text, like the proto, has no device counts: the manifest
        // says the form, the entry's shardings and channels show it.
        let partitioned = form == "partitions";
        assert_eq!(text.contains("sharding={manual}"), partitioned, "{form}");
        assert_eq!(
            text.contains("use_global_device_ids=true"),
            partitioned,
            "{form}"
        );
        assert!(
            !text.contains("replica-id(") && !text.contains("partition-id("),
            "{form}"
        );
        let check = hlatc(&[
            "check",
            d.join("model.hlo.txt").to_str().unwrap(),
            "--target",
            "trn1",
        ]);
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

#[test]
fn a_form_for_a_step_of_one_device_is_refused() {
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--spmd",
        "partitions",
        "--out",
        "x",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "--spmd chooses how a sharded step is written, and this one runs on one device"
        ),
        "{err}"
    );
    assert!(!std::path::Path::new("x").exists());
}

/// A bundle's memory per rank as its manifest records it, in GiB as the
/// summary prints it.
fn memory_per_rank(manifest: &serde_json::Value) -> String {
    hlatc::memory_plan::gib(manifest["memory_per_rank"]["total"].as_u64().unwrap())
}

/// `--precision mxfp8` compiles for XLA CPU and for trn3: on cpu the
/// linear layers read MX blocks in plain HLO (amp's note counts them, the
/// manifest names the preset, the module holds f8e4m3fn converts); on trn3
/// each of those dots is neuronx-cc's block-scaled dot of two `QuantizeMX`
/// calls, forward and backward, which the pre-flight passes on trn3 and
/// refuses on trn2. Before trn3 it is refused before any work, and so is a
/// plan for a chip without an MX matmul.
#[test]
fn mxfp8_compiles_for_cpu_and_trn3_and_is_refused_before_it() {
    use crate::support::{error_code, hlatc, stderr, stdout};
    let d = std::env::temp_dir().join(format!("hlatc-mxfp8-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let args = |target: &[&str]| {
        let mut a = vec![
            "compile",
            "--model",
            "tiny",
            "--batch-size",
            "4",
            "--seq-len",
            "8",
            "--precision",
            "mxfp8",
            "--pass-report",
            "--out",
        ];
        a.push(d.to_str().unwrap());
        a.extend(target);
        hlatc(&a)
    };
    // Per layer, the 4 linear layers' forward dots and both backward
    // products of each: 24 in the tiny model's 2 layers. Its hidden size
    // (32) and its 32 tokens divide into blocks, so the input and weight
    // gradients are quantized; the forward of down_proj contracts over
    // the intermediate size, 48, which does not, and stays bf16 (2).
    let blocked = "amp: 22 of them with operands in MX blocks (f8e4m3fn in blocks of 32)";
    let unblocked = "2 whose contracting extent is not a whole number of blocks";
    let note =
        format!("{blocked}, 15 kept in bf16 by scope (core_attention, lm_head, gate), {unblocked}");
    let cpu = args(&["--target", "cpu"]);
    assert!(cpu.status.success(), "{}", stderr(&cpu));
    let said = format!("{}{}", stdout(&cpu), stderr(&cpu));
    assert!(said.contains(&note), "{said}");
    let text = std::fs::read_to_string(d.join("model.hlo.txt")).unwrap();
    assert!(text.contains("f8e4m3fn["), "no MX blocks in the module");
    assert!(!text.contains("QuantizeMX"));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["precision"]["preset"], "mxfp8");
    assert_eq!(manifest["precision"]["storage"], "bf16");

    let trn3 = args(&["--target", "neuron", "--chip", "trn3"]);
    assert!(trn3.status.success(), "{}", stderr(&trn3));
    let said = format!("{}{}", stdout(&trn3), stderr(&trn3));
    // The same dots; fewer low dots in the kept scopes (neuron's softmax
    // and attention are written apart before amp).
    assert!(said.contains(blocked) && said.contains(unblocked), "{said}");
    assert!(said.contains("pre-flight    trn3, --native-int64=enabled --implicit-integer-downcast=none: no findings"), "{said}");
    let text = std::fs::read_to_string(d.join("model.hlo.txt")).unwrap();
    let calls = |target: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("custom_call_target=\"{target}\"")))
            .collect::<Vec<_>>()
    };
    let scaled = calls("__op$block_scaled_dot");
    let backward = scaled
        .iter()
        .filter(|l| l.contains("op_name=\"backward/"))
        .count();
    assert_eq!(
        (scaled.len() - backward, backward),
        (6, 16),
        "forward and backward"
    );
    assert_eq!(
        calls("QuantizeMX").len(),
        2 * scaled.len(),
        "one a quantized operand"
    );
    assert!(
        !text.contains("f8e4m3fn["),
        "the blocks are neuronx-cc's own"
    );
    let check = |chip: &str| hlatc(&["check", d.to_str().unwrap(), "--target", chip]);
    assert!(check("trn3").status.success(), "{}", stderr(&check("trn3")));
    let trn2 = check("trn2");
    assert!(!trn2.status.success());
    let refusal = format!("{}{}", stdout(&trn2), stderr(&trn2));
    assert!(
        refusal.contains("NCC_EVRF051 is an MX custom call"),
        "{refusal}"
    );

    for chip in [None, Some("trn2")] {
        let mut target = vec!["--target", "neuron"];
        target.extend(chip.map(|c| ["--chip", c]).into_iter().flatten());
        let before = args(&target);
        assert_eq!(error_code(&before), "option.precision", "{chip:?}");
        assert!(
            stderr(&before).contains("needs --chip trn3 on --target neuron"),
            "{}",
            stderr(&before)
        );
    }
    let plan = hlatc(&["plan", "--model", "tiny", "--precision", "mxfp8"]);
    assert_eq!(error_code(&plan), "plan.option.precision");
    assert!(
        stderr(&plan).contains("which trn1 has not"),
        "{}",
        stderr(&plan)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The trn3 mxfp8 step, its MX calls mapped to their references as
/// `--verify` maps them, computes on XLA CPU what the cpu mxfp8 step
/// computes, bit for bit: the same blocks, scales and f32 products.
#[test]
fn the_trn3_mxfp8_step_computes_the_cpu_steps_values() {
    use hlatc::bundle::lower_for_cpu;
    use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
    use hlatc::initial_inputs::initial_inputs;
    use hlatc::passes::neuron_check::Chip;
    use hlatc::passes::Target;
    use hlatc::precision::Precision;
    let rt = || hlatc::runtime::Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let run = |target: Target, chip: Option<Chip>| {
        let c = compile_step(&CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            batch_size: Some(4),
            seq_len: Some(8),
            precision: Precision::Mxfp8,
            target,
            chip,
            ..CompileOptions::default()
        })
        .unwrap();
        let mut module = c.programs.main().module.clone();
        assert_eq!(
            lower_for_cpu(&mut module).unwrap(),
            target == Target::Neuron
        );
        let inputs = initial_inputs(&c.cfg, &c.programs.main().inputs, 7).unwrap();
        rt().compile(&module).unwrap().run(&inputs[0]).unwrap()
    };
    let cpu = run(Target::Cpu, None);
    let trn3 = run(Target::Neuron, Some(Chip::Trn3));
    assert_eq!(cpu.len(), trn3.len());
    for (i, (a, b)) in cpu.iter().zip(&trn3).enumerate() {
        assert_eq!(a.bytes(), b.bytes(), "output {i}");
    }
}

fn options(model: &str, markers: bool) -> CompileOptions {
    CompileOptions {
        model: ModelSource::Preset(model.into()),
        seq_len: Some(8),
        module_markers: markers,
        ..CompileOptions::default()
    }
}

/// How many markers of each kind the module holds.
fn markers(m: &Module) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for c in &m.computations {
        for id in c.ids() {
            if let Some(marker) = ModuleMarker::of(&c.instr(id).op) {
                *counts.entry(marker.target()).or_default() += 1;
                let operands = c.operands(id);
                assert_eq!(operands.len(), 1);
                assert_eq!(c.instr(operands[0]).shape, c.instr(id).shape);
            }
        }
    }
    counts
}

#[test]
fn each_layer_is_marked_once_forward_and_backward() {
    let want = |n| {
        ModuleMarker::ALL
            .iter()
            .map(|m| (m.target(), n))
            .collect::<BTreeMap<_, _>>()
    };
    let tiny = compile_step(&options("tiny", true)).unwrap();
    assert_eq!(markers(&tiny.programs.main().module), want(2));
    // Recomputing whole layers repeats none of them (they lie outside the
    // layers' scopes), nor does a division over ranks.
    for (remat, tp) in [(RematPolicy::FullLayer, 1), (RematPolicy::CoreAttention, 8)] {
        let mut o = options("hlat-7b", true);
        o.remat = remat;
        o.parallel.tp = tp;
        o.parallel.sequence_parallel = tp > 1;
        let step = compile_step(&o).unwrap();
        assert_eq!(
            markers(&step.programs.main().module),
            want(32),
            "{remat:?}, TP {tp}"
        );
    }
    let plain = compile_step(&options("tiny", false)).unwrap();
    assert!(markers(&plain.programs.main().module).is_empty());
}

/// The marked step computes the unmarked one's values bit for bit on XLA
/// CPU (markers become the tensor they mark), and the manifest says so
/// only when they are on.
#[test]
fn markers_change_no_value() {
    let rt = hlatc::runtime::Runtime::shared().unwrap();
    let run = |markers: bool| {
        let c = compile_step(&options("tiny", markers)).unwrap();
        let mut module = c.programs.main().module.clone();
        lower_for_cpu(&mut module).unwrap();
        assert!(self::markers(&module).is_empty(), "lowered for XLA CPU");
        let inputs = initial_inputs(&c.cfg, &c.programs.main().inputs, 7).unwrap();
        let manifest = hlatc::bundle::manifest_json(c.programs.main(), &c.cfg, c.target, "");
        let out = rt.compile(&module).unwrap().run(&inputs[0]).unwrap();
        (out, manifest)
    };
    let (marked, with) = run(true);
    let (plain, without) = run(false);
    assert_eq!(marked.len(), plain.len());
    for (i, (a, b)) in marked.iter().zip(&plain).enumerate() {
        assert_eq!(a.bytes(), b.bytes(), "output {i}");
    }
    assert!(with.contains("\"module_markers\": true"));
    assert!(!without.contains("module_markers"));
}

const SCHEMA: &str = include_str!("../../docs/schema/manifest-v2.json");

/// `hlatc ARGS...`, which must succeed within a few minutes.
fn hlatc_ok(args: &[&str]) {
    let o = hlatc_within(None, args, Duration::from_secs(300));
    assert!(o.status.success(), "hlatc {args:?} failed: {}", stderr(&o));
}

/// Where `value` breaks `schema` (within `root`, for `$ref`), as JSON
/// pointers with the rule; empty if it validates.
fn violations(schema: &Value, value: &Value, root: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(rules) = schema.as_object() else {
        return vec![format!("{at}: the schema is not an object")];
    };
    for (key, rule) in rules {
        match key.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = rule.as_str().unwrap().trim_start_matches("#/$defs/");
                out.extend(violations(&root["$defs"][name], value, root, at));
            }
            "type" => {
                let ok = match rule.as_str().unwrap() {
                    "object" => value.is_object(),
                    "array" => value.is_array(),
                    "string" => value.is_string(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "number" => value.is_number(),
                    "boolean" => value.is_boolean(),
                    other => panic!("type {other} is not known to this validator"),
                };
                if !ok {
                    out.push(format!("{at}: not of type {rule}"));
                }
            }
            "const" if value != rule => out.push(format!("{at}: {value} is not {rule}")),
            "const" => {}
            "enum" => {
                if !rule.as_array().unwrap().contains(value) {
                    out.push(format!("{at}: {value} is not one of {rule}"));
                }
            }
            "minimum" => {
                if value.as_f64().is_some_and(|v| v < rule.as_f64().unwrap()) {
                    out.push(format!("{at}: {value} is below {rule}"));
                }
            }
            "minItems" | "maxItems" => {
                let n = value.as_array().map_or(0, Vec::len) as u64;
                let bound = rule.as_u64().unwrap();
                if (key == "minItems" && n < bound) || (key == "maxItems" && n > bound) {
                    out.push(format!("{at}: {n} items breaks {key} {bound}"));
                }
            }
            "required" => {
                for name in rule.as_array().unwrap() {
                    let name = name.as_str().unwrap();
                    if value.get(name).is_none() {
                        out.push(format!("{at}: no '{name}'"));
                    }
                }
            }
            "properties" => {
                for (name, sub) in rule.as_object().unwrap() {
                    if let Some(v) = value.get(name) {
                        out.extend(violations(sub, v, root, &format!("{at}/{name}")));
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(rule, &Value::Bool(false), "only `false` is known here");
                let known = rules["properties"].as_object().unwrap();
                for name in value.as_object().into_iter().flat_map(|o| o.keys()) {
                    if !known.contains_key(name) {
                        out.push(format!("{at}: '{name}' is not allowed"));
                    }
                }
            }
            "items" => {
                for (i, v) in value.as_array().into_iter().flatten().enumerate() {
                    out.extend(violations(rule, v, root, &format!("{at}/{i}")));
                }
            }
            "oneOf" => {
                let matching = rule
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| violations(s, value, root, at).is_empty())
                    .count();
                if matching != 1 {
                    out.push(format!(
                        "{at}: matches {matching} of oneOf's schemas, not 1"
                    ));
                }
            }
            other => panic!("schema keyword '{other}' is not known to this validator"),
        }
    }
    out
}

/// Every `manifest.json` under `dir`.
fn manifests(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            found.extend(manifests(&p));
        } else if p.file_name().is_some_and(|n| n == "manifest.json") {
            found.push(p);
        }
    }
    found
}

#[test]
fn every_kind_of_manifest_validates_against_the_v2_schema() {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let d = scratch("manifest-schema");
    let kinds: [(&str, &[&str], &str); 4] = [
        ("single", &[], "hlatc-bundle/2"),
        (
            "sharded",
            &["--tp", "2", "--dp", "2", "--zero1"],
            "hlatc-bundle/2",
        ),
        (
            "accumulation",
            &["--grad-accum", "2", "--batch-size", "2"],
            "hlatc-bundle/2+accumulation",
        ),
        (
            "pipeline",
            &["--pp", "2", "--grad-accum", "2", "--batch-size", "2"],
            "hlatc-bundle/2+pipeline",
        ),
    ];
    for (name, flags, format) in kinds {
        let out = d.join(name);
        let out_s = out.display().to_string();
        let args = [
            &[
                "compile", "--model", "tiny", "--target", "cpu", "--out", &out_s,
            ][..],
            flags,
        ]
        .concat();
        hlatc_ok(&args);
        let top: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(top["format"], format, "{name}");
        for m in manifests(&out) {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
            let bad = violations(&schema, &v, &schema, "");
            assert!(bad.is_empty(), "{}: {bad:#?}", m.display());
        }
    }
    // A v1 manifest (its flat listing) does not pass as v2, and the reader
    // still opens the flat list of every tensor.
    let single = hlatc::bundle::OpenedBundle::open(&d.join("single")).unwrap();
    let flat: Vec<_> = single.tensors().collect();
    assert_eq!(flat.len(), single.inputs.len() + single.outputs.len());
    assert!(flat
        .iter()
        .any(|(input, t)| *input && t.name == "model.layers.1.mlp.down_proj.weight"));
    let mut v1: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("single/manifest.json")).unwrap())
            .unwrap();
    v1["format"] = "hlatc-bundle/1".into();
    assert!(!violations(&schema, &v1, &schema, "").is_empty());
    std::fs::remove_dir_all(&d).unwrap();
}
