//! Bundle manifests are versioned (issue 59): every kind of manifest hlatc
//! writes (one program, sharded, gradient accumulation, pipeline) states
//! format `hlatc-bundle/2` and validates against the JSON Schema shipped
//! in `docs/schema/manifest-v2.json`; `OpenedBundle` lists every tensor
//! flat.
//!
//! The schema is checked by a small validator of the JSON Schema keywords
//! it uses (below): one that meets a keyword it does not know fails, so the
//! schema cannot grow a rule that is silently not checked.

use crate::support::{hlatc_within, scratch, stderr};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

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
