//! `--replica-groups iota` and the manifest's holdings rule (issue 48):
//! `hlatc compile` writes explicit groups unless asked for the iota form;
//! a manifest's rule (`parallel.tp_split`) gives every rank the holdings
//! the step divides its inputs by, which are what the per-rank lists of
//! older manifests (`parallel.tp_ranks`) say, and an older manifest is
//! still read. That the iota form runs on XLA CPU exactly as the explicit
//! form does is the train crate's (`train/tests/it/spmd_forms.rs`).

use super::support::{hlatc, scratch, stderr};
use hlatc::bundle::holdings::{ManifestHoldings, ParameterHolding};
use hlatc::bundle::OpenedBundle;
use hlatc::models::Parallelism;
use hlatc::rank_inputs::{RankHolding, RankInputs};
use hlatc::train_step::{Role, StepConfig, TensorSpec};

fn layout(tp: i64, dp: i64, sequence_parallel: bool, zero1: bool, pp: i64) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1,
        pp,
        ..Parallelism::SINGLE
    }
}

#[test]
fn compile_writes_explicit_groups_unless_asked_for_iota() {
    let common = [
        "compile",
        "--model",
        "tiny",
        "--target",
        "neuron",
        "--tp",
        "2",
        "--dp",
        "2",
        "--batch-size",
        "2",
        "--zero1",
    ];
    let explicit = scratch("replica-groups-explicit");
    let iota = scratch("replica-groups-iota");
    for (dir, extra) in [(&explicit, None), (&iota, Some("iota"))] {
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--out", dir.to_str().unwrap()]);
        if let Some(form) = extra {
            args.extend(["--replica-groups", form]);
        }
        let out = hlatc(&args);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let text = |d: &std::path::Path| std::fs::read_to_string(d.join("model.hlo.txt")).unwrap();
    let (e, i) = (text(&explicit), text(&iota));
    assert!(
        e.contains("replica_groups={{0,1},{2,3}}"),
        "explicit TP groups"
    );
    assert!(!e.contains("<=["), "no iota in the default form");
    assert!(i.contains("replica_groups=[2,2]<=[4]") && !i.contains("replica_groups={{"));
    // The manifests are the same but for the module's hash: the form is
    // the module's alone.
    let manifest = |d: &std::path::Path| {
        let text = std::fs::read_to_string(d.join("manifest.json")).unwrap();
        let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
        m.as_object_mut().unwrap().remove("module");
        m
    };
    assert_eq!(manifest(&explicit), manifest(&iota));
}

/// What `RankInputs` (which shards and gathers a step's inputs) gives rank
/// `rank` of every parameter it holds a share of: what the per-rank lists
/// of the manifests before the rule were written from.
fn divided(cfg: &StepConfig, inputs: &[TensorSpec], rank: i64) -> Vec<ParameterHolding> {
    let ranks = RankInputs::new(cfg);
    inputs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.role == Role::Parameter)
        .filter_map(|(index, s)| match ranks.holding(s, rank) {
            RankHolding::HuggingFace(holds) => Some(ParameterHolding {
                index,
                name: s.name.clone(),
                holds,
            }),
            _ => None,
        })
        .collect()
}

#[test]
fn the_manifest_rule_gives_every_rank_its_holdings() {
    for (name, model, par, sub) in [
        ("tp2", "tiny", layout(2, 1, false, false, 1), ""),
        ("tp4-dp2-sp-zero1", "tiny", layout(4, 2, true, true, 1), ""),
        ("tp2-dp2-zero1", "tiny", layout(2, 2, false, true, 1), ""),
        ("tp4-pp2", "tiny", layout(4, 1, false, false, 2), "steady"),
        // Each expert's columns, as a range of its own tensor.
        (
            "moe-tp2-dp2-sp",
            "tiny-moe",
            layout(2, 2, true, false, 1),
            "",
        ),
    ] {
        let dir = scratch(&format!("holdings-{name}"));
        let (tp, dp, pp) = (par.tp.to_string(), par.dp.to_string(), par.pp.to_string());
        let batch = (par.dp * par.pp * 2).to_string();
        let mut args = vec![
            "compile",
            "--model",
            model,
            "--target",
            "cpu",
            "--tp",
            &tp,
            "--dp",
            &dp,
            "--pp",
            &pp,
            "--batch-size",
            &batch,
            "--out",
            dir.to_str().unwrap(),
        ];
        if par.sequence_parallel {
            args.push("--sequence-parallel");
        }
        if par.zero1 {
            args.push("--zero1");
        }
        if par.pp > 1 {
            args.extend(["--grad-accum", "2"]);
        }
        let out = hlatc(&args);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let bundle = OpenedBundle::open(&dir.join(sub)).unwrap();
        let holdings = bundle.holdings().unwrap().expect("a sharded bundle");
        assert!(holdings.is_rule(), "{name}");
        let text = std::fs::read_to_string(dir.join(sub).join("manifest.json")).unwrap();
        assert!(!text.contains("tp_ranks"), "{name}: no per-rank lists");
        for rank in 0..bundle.world() {
            let want = divided(&bundle.config, &bundle.inputs, rank);
            assert!(!want.is_empty(), "{name}");
            assert_eq!(holdings.of_rank(rank), want, "{name}, rank {rank}");
        }
    }
}

/// A manifest written before the rule, by the commit before it
/// (`hlatc compile --model tiny --target cpu --tp 4 --dp 2 --batch-size 2
/// --sequence-parallel --zero1`): its per-TP-rank lists are read, and say
/// what the rule says.
/// A `--target cpu` bundle of tiny at TP 4 x DP 2 with SP and ZeRO-1,
/// compiled by the CLI into a scratch folder `name`: the layout the
/// manifest fixture of per-rank lists was written for.
fn tiny_tp4_dp2_bundle(name: &str) -> std::path::PathBuf {
    let dir = scratch(name);
    let out = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--tp",
        "4",
        "--dp",
        "2",
        "--batch-size",
        "2",
        "--sequence-parallel",
        "--zero1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

#[test]
fn a_manifest_with_per_rank_lists_is_still_read() {
    let old: serde_json::Value = serde_json::from_str(include_str!(
        "../fixtures/bundles/manifest-tp-ranks-tp4-dp2.json"
    ))
    .unwrap();
    let listed = ManifestHoldings::from_manifest(&old).unwrap().unwrap();
    assert!(!listed.is_rule());
    let dir = tiny_tp4_dp2_bundle("holdings-old-layout");
    let bundle = OpenedBundle::open(&dir).unwrap();
    let rule = bundle.holdings().unwrap().unwrap();
    for rank in 0..8 {
        assert_eq!(listed.of_rank(rank), rule.of_rank(rank), "rank {rank}");
        assert_eq!(
            listed.of_rank(rank),
            divided(&bundle.config, &bundle.inputs, rank)
        );
    }
    // Single-device manifests have no holdings to read.
    let single = serde_json::json!({ "format": "hlatc-bundle/1" });
    assert!(ManifestHoldings::from_manifest(&single).unwrap().is_none());
}

/// A manifest states each run of layers once (`{"layers": [a, b],
/// "index_stride": s, "each": [...]}`) and its aliasing in runs; read out,
/// its listing is what a manifest from before runs lists entry by entry
/// (the fixture above, written by an older commit for the same layout),
/// and both open to the same signature.
#[test]
fn a_listing_states_each_run_of_layers_once_and_reads_as_every_entry() {
    let old: serde_json::Value = serde_json::from_str(include_str!(
        "../fixtures/bundles/manifest-tp-ranks-tp4-dp2.json"
    ))
    .unwrap();
    let dir = tiny_tp4_dp2_bundle("listing-runs");
    let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let new: serde_json::Value = serde_json::from_str(&text).unwrap();
    // tiny: 2 layers of 6 tensors under 3 roles, besides 3 other
    // parameters each and step, tokens, targets.
    let inputs = new["inputs"].as_array().unwrap();
    let runs: Vec<&serde_json::Value> = inputs.iter().filter(|e| e["layers"].is_array()).collect();
    assert_eq!((inputs.len(), runs.len()), (3 * 4 + 3, 3));
    assert_eq!(runs[0]["layers"], serde_json::json!([0, 2]));
    assert_eq!(runs[0]["index_stride"], 6);
    assert_eq!(
        runs[0]["each"][1]["name"],
        "model.layers.{layer}.self_attn.qkv_proj.weight"
    );
    assert_eq!(
        runs[0]["each"][1]["hugging_face"][0]["name"],
        "model.layers.{layer}.self_attn.q_proj.weight"
    );
    assert_eq!(
        new["input_output_alias"],
        serde_json::json!([{"output": 3, "input": 0, "count": 46}])
    );
    // Read out, every listing is the older manifest's, entry for entry,
    // but for what it states that the older one left to the names: each
    // per-parameter tensor's parameter, and the layer of each in one.
    for key in ["inputs", "outputs"] {
        let mut stated = hlatc::bundle::expand_listing(&new[key]).unwrap();
        for e in &mut stated {
            let name = e["name"].as_str().unwrap().to_string();
            let e = e.as_object_mut().unwrap();
            let parameter = e.remove("parameter");
            let layer = e.remove("layer");
            let per_parameter =
                ["parameter", "adam_m", "adam_v"].contains(&e["role"].as_str().unwrap());
            assert_eq!(parameter.is_some(), per_parameter, "{key}: {name}");
            if let Some(p) = parameter {
                assert!(name.ends_with(p.as_str().unwrap()), "{key}: {name} of {p}");
                let in_layer = p.as_str().unwrap().starts_with("model.layers.");
                assert_eq!(layer.is_some(), in_layer, "{key}: {name}");
            }
        }
        assert_eq!(stated, *old[key].as_array().unwrap(), "{key}");
    }
    let split = &new["parallel"]["tp_split"];
    assert!(split
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["layers"].is_array()));
    let split = hlatc::bundle::expand_listing(split).unwrap();
    // The embedding, qkv, o, gate_up and down of each layer, the LM head.
    assert_eq!(split.len(), 1 + 2 * 4 + 1);
    assert_eq!(split[9]["name"], "lm_head.weight");
    assert_eq!(split[6]["index"], 9);
    assert_eq!(split[6]["name"], "model.layers.1.self_attn.o_proj.weight");
    assert_eq!(split[6]["layer"], 1);
    // Both open to the same signature, the older one's parameters and
    // layers found as the step names them.
    let old_dir = scratch("listing-old");
    std::fs::write(old_dir.join("manifest.json"), old.to_string()).unwrap();
    let (a, b) = (
        OpenedBundle::open(&old_dir).unwrap(),
        OpenedBundle::open(&dir).unwrap(),
    );
    assert_eq!((&a.inputs, &a.outputs), (&b.inputs, &b.outputs));
    // The DP replicas' batch rows by rule, as the older manifest listed
    // them and as every rank is fed.
    let rows = new["parallel"]["dp_rows"]["rows"].as_i64().unwrap();
    assert_eq!(rows, 1);
    let listed = old["parallel"]["dp_ranks"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for (d, l) in listed.iter().enumerate() {
        let d = d as i64;
        assert_eq!(
            l["batch_rows"],
            serde_json::json!([d * rows, (d + 1) * rows])
        );
    }
    let ranks = RankInputs::new(&b.config);
    let tokens = b.inputs.iter().find(|s| s.role == Role::Tokens).unwrap();
    for r in 0..b.world() {
        let d = r / 4;
        assert_eq!(
            ranks.holding(tokens, r),
            RankHolding::BatchRows([d * rows, (d + 1) * rows]),
            "rank {r}"
        );
    }
}

/// HLAT's 70B layout for 2,048 ranks: a manifest under 1 MB, which grows
/// with neither the world nor the layers.
#[test]
fn the_manifest_of_2048_ranks_of_70b_is_under_a_megabyte() {
    let dir = scratch("manifest-70b-2048");
    let out = hlatc(&[
        "compile",
        "--model",
        "hlat-70b",
        "--target",
        "neuron",
        "--tp",
        "32",
        "--dp",
        "64",
        "--batch-size",
        "64",
        "--sequence-parallel",
        "--zero1",
        "--precision",
        "bf16-master",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::metadata(dir.join("manifest.json")).unwrap().len();
    assert!(bytes < 1 << 20, "{bytes} bytes");
    let bundle = OpenedBundle::open(&dir).unwrap();
    // 80 layers of 6 tensors under 4 roles, 3 more parameters each, and
    // step, tokens, targets and rank.
    assert_eq!(bundle.inputs.len(), 4 * (80 * 6 + 3) + 4);
    assert_eq!(bundle.world(), 2048);
}
