//! The compiled artifact on disk: the HLO proto `neuronx-cc` compiles, its
//! text, the compile flags, and a manifest that tells a training stack what
//! every buffer is.

use crate::train_step::{StepConfig, TensorSpec, TrainStep};
use crate::Error;
use hlatc_models::param_specs;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// AWS Trainium through `neuronx-cc`.
    Neuron,
    /// XLA's CPU backend (verification).
    Cpu,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Neuron => "neuron",
            Target::Cpu => "cpu",
        }
    }
}

pub const PROTO_FILE: &str = "model.hlo_module.pb";
pub const TEXT_FILE: &str = "model.hlo.txt";
pub const MANIFEST_FILE: &str = "manifest.json";
pub const FLAGS_FILE: &str = "compile_flags.json";
pub const NEURON_SCRIPT: &str = "neuronx-cc.sh";

/// The lowercase hex SHA-256 of `bytes`: the module hash in the manifest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Flags for `neuronx-cc compile`, as the Neuron compile cache stores them.
pub fn neuron_flags() -> Vec<&'static str> {
    vec![
        "--framework=XLA",
        "--target=trn1",
        "--model-type=transformer",
        "--distribution-strategy=llm-training",
    ]
}

/// Environment HLAT compiled with.
pub fn neuron_env() -> Vec<(&'static str, &'static str)> {
    vec![("NEURON_FUSE_SOFTMAX", "1")]
}

pub fn neuron_command() -> String {
    format!(
        "neuronx-cc compile --framework=XLA --target=trn1 {PROTO_FILE} --output model.neff {}",
        neuron_flags()[2..].join(" ")
    )
}

#[derive(Serialize)]
struct ModuleInfo<'a> {
    name: &'a str,
    proto: &'static str,
    text: &'static str,
    sha256: String,
    instructions: usize,
    computations: usize,
}

#[derive(Serialize)]
struct IndexedTensor<'a> {
    index: usize,
    #[serde(flatten)]
    spec: &'a TensorSpec,
}

#[derive(Serialize)]
struct Alias {
    output: usize,
    input: usize,
}

#[derive(Serialize)]
struct NeuronInfo {
    command: String,
    flags: Vec<&'static str>,
    env: std::collections::BTreeMap<&'static str, &'static str>,
}

#[derive(Serialize)]
struct InitPolicy {
    std: f64,
    output_projection_std: f64,
    norms: &'static str,
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: &'static str,
    hlatc_version: &'static str,
    target: Target,
    module: ModuleInfo<'a>,
    parameter_count: i64,
    parameter_tensors: usize,
    inputs: Vec<IndexedTensor<'a>>,
    outputs: Vec<IndexedTensor<'a>>,
    input_output_alias: Vec<Alias>,
    config: &'a StepConfig,
    init: InitPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    neuron: Option<NeuronInfo>,
}

fn indexed(v: &[TensorSpec]) -> Vec<IndexedTensor<'_>> {
    v.iter()
        .enumerate()
        .map(|(index, spec)| IndexedTensor { index, spec })
        .collect()
}

/// What `write_bundle` wrote and how long it took.
pub struct BundleReport {
    pub files: Vec<PathBuf>,
    pub sha256: String,
    pub proto_bytes: usize,
    pub emit_time: Duration,
    pub write_time: Duration,
}

fn write(path: PathBuf, bytes: &[u8], files: &mut Vec<PathBuf>) -> Result<(), Error> {
    std::fs::write(&path, bytes).map_err(|e| Error::Io {
        path: path.clone(),
        message: e.to_string(),
    })?;
    files.push(path);
    Ok(())
}

/// Writes the bundle into `dir` (created if needed). Deterministic: the same
/// step and config always give byte-identical files.
pub fn write_bundle(
    step: &TrainStep,
    cfg: &StepConfig,
    target: Target,
    dir: &Path,
) -> Result<BundleReport, Error> {
    let t0 = Instant::now();
    let proto = hlatc_compiler::proto::encode_module(&step.module);
    let text = hlatc_compiler::text::print_module(&step.module);
    let emit_time = t0.elapsed();
    let t1 = Instant::now();
    let sha256 = sha256_hex(&proto);
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut files = Vec::new();
    write(dir.join(PROTO_FILE), &proto, &mut files)?;
    write(dir.join(TEXT_FILE), text.as_bytes(), &mut files)?;
    let neuron = (target == Target::Neuron).then(|| NeuronInfo {
        command: neuron_command(),
        flags: neuron_flags(),
        env: neuron_env().into_iter().collect(),
    });
    if target == Target::Neuron {
        let flags = serde_json::to_string_pretty(&neuron_flags()).expect("strings serialize");
        write(
            dir.join(FLAGS_FILE),
            format!("{flags}\n").as_bytes(),
            &mut files,
        )?;
        let env: String = neuron_env()
            .iter()
            .map(|(k, v)| format!("export {k}={v}\n"))
            .collect();
        let script = format!(
            "#!/usr/bin/env bash\n# Compiles this bundle for Trainium. Generated by hlatc.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n{env}exec {} \"$@\"\n",
            neuron_command()
        );
        write(dir.join(NEURON_SCRIPT), script.as_bytes(), &mut files)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(
                dir.join(NEURON_SCRIPT),
                std::fs::Permissions::from_mode(0o755),
            );
        }
    }
    let out_std = 0.02 / (2.0 * cfg.model.num_hidden_layers as f64).sqrt();
    let manifest = Manifest {
        format: "hlatc-bundle/1",
        hlatc_version: env!("CARGO_PKG_VERSION"),
        target,
        module: ModuleInfo {
            name: &step.module.name,
            proto: PROTO_FILE,
            text: TEXT_FILE,
            sha256: sha256.clone(),
            instructions: step.module.instruction_count(),
            computations: step.module.computations.len(),
        },
        parameter_count: cfg.model.parameter_count(),
        parameter_tensors: param_specs(&cfg.model).len(),
        inputs: indexed(&step.inputs),
        outputs: indexed(&step.outputs),
        input_output_alias: step
            .module
            .input_output_alias
            .iter()
            .map(|a| Alias {
                output: a.output_index[0] as usize,
                input: a.parameter as usize,
            })
            .collect(),
        config: cfg,
        init: InitPolicy {
            std: 0.02,
            output_projection_std: out_std,
            norms: "ones",
        },
        neuron,
    };
    let json = serde_json::to_string_pretty(&manifest).expect("the manifest serializes");
    write(
        dir.join(MANIFEST_FILE),
        format!("{json}\n").as_bytes(),
        &mut files,
    )?;
    Ok(BundleReport {
        files,
        sha256,
        proto_bytes: proto.len(),
        emit_time,
        write_time: t1.elapsed(),
    })
}
