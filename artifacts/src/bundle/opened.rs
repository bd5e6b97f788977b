//! A bundle read back from disk: the step config and signature its
//! manifest records, and its module ready to run. What a runtime needs to
//! feed a bundle by role without rebuilding the step.

use super::files::{BUNDLE_FORMAT, MANIFEST_FILE, PROTO_FILE};
use super::listing::{self, expand, AtLayer, ListedView, ListingError};
use super::programs::ProgramName;
use crate::Error;
use hlatc_compiler::util::input_file;
use hlatc_compiler::{Literal, Module};
use hlatc_step::batch_check::check_batch_inputs;
use hlatc_step::train_step::{state_name, Role, StepConfig, TensorSpec};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The formats of one program's manifest this reader takes (the
/// manifest's `format`): the current one, and version 1 (flat listings,
/// or runs of layers written before the version was bumped for them).
pub const PROGRAM_FORMATS: [&str; 2] = [BUNDLE_FORMAT, "hlatc-bundle/1"];

pub struct OpenedBundle {
    pub dir: PathBuf,
    /// The step the bundle was compiled from (model, batch, optimizer,
    /// precision, division over ranks).
    pub config: StepConfig,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
}

/// The parts of the manifest a reader needs; the rest describes the
/// bundle for people and tools.
#[derive(Deserialize)]
struct ManifestView {
    format: String,
    config: StepConfig,
    /// Runs of layers, or (manifests before runs) every tensor.
    inputs: Vec<ListedView<TensorSpec>>,
    outputs: Vec<ListedView<TensorSpec>>,
    init: InitView,
}

/// A run's tensor at a layer: its names and its layer. Its place is its
/// order in the listing, so its index is not needed.
impl AtLayer for TensorSpec {
    fn at_layer(&self, layer: i64, _shift: usize) -> Result<Self, ListingError> {
        Ok(TensorSpec {
            name: listing::at_layer(&self.name, layer),
            parameter: self.parameter.as_ref().map(|p| listing::at_layer(p, layer)),
            layer: Some(layer),
            ..self.clone()
        })
    }
}

/// Gives each per-parameter tensor of a manifest written before tensors
/// stated their parameter (`parameter`, `layer`) the model's parameter
/// whose tensor of that role has its name, made as a step makes it.
fn name_parameters(specs: &mut [TensorSpec], model: &hlatc_models::ModelConfig) {
    if specs
        .iter()
        .all(|s| s.parameter.is_some() || !s.role.is_per_parameter())
    {
        return;
    }
    let params = hlatc_models::param_specs(model);
    let mut by_name = std::collections::HashMap::new();
    for role in Role::PER_PARAMETER {
        for p in &params {
            by_name.insert((role, state_name(role, &p.name)), p);
        }
    }
    for s in specs.iter_mut().filter(|s| s.parameter.is_none()) {
        if let Some(p) = by_name.get(&(s.role, s.name.clone())) {
            s.parameter = Some(p.name.clone());
            s.layer = p.layer;
        }
    }
}

/// The model's config leaves `initializer_range` out (it records the
/// config as Hugging Face's keys); the manifest's `init.std` holds it.
#[derive(Deserialize)]
struct InitView {
    std: f64,
}

impl OpenedBundle {
    /// Reads the manifest of the bundle in `dir`.
    pub fn open(dir: &Path) -> Result<OpenedBundle, Error> {
        let path = dir.join(MANIFEST_FILE);
        let bad = |message: String| Error::File {
            path: path.clone(),
            message,
        };
        let text = input_file::read_to_string(&path, |e| {
            bad(format!(
                "{e} (a bundle directory holds the {MANIFEST_FILE} `hlatc compile` writes)"
            ))
        })?;
        let format = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["format"].as_str().map(str::to_string));
        let of_kind = |kind: &str| format.as_deref().is_some_and(|f| f.ends_with(kind));
        let folders = |names: &[ProgramName]| {
            let dirs: Vec<String> = names.iter().map(|n| format!("{n}/")).collect();
            dirs.join(", ")
        };
        if of_kind("+accumulation") {
            return Err(bad(format!(
                "the bundle of gradient accumulation's two programs: open one of {} in it",
                folders(&ProgramName::ACCUMULATION)
            )));
        }
        if of_kind("+pipeline") {
            return Err(bad(format!(
                "the bundle of a pipeline-parallel step's four programs: open one of {} in it",
                folders(&ProgramName::PIPELINE)
            )));
        }
        let view: ManifestView = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a manifest hlatc can read: {e}")))?;
        if !PROGRAM_FORMATS.contains(&view.format.as_str()) {
            return Err(bad(format!(
                "format '{}', but this hlatc reads '{}'",
                view.format,
                PROGRAM_FORMATS.join("' and '")
            )));
        }
        let listing = |what: &str, e: ListingError| bad(format!("{what}: {e}"));
        let mut inputs = expand(view.inputs).map_err(|e| listing("inputs", e))?;
        let mut outputs = expand(view.outputs).map_err(|e| listing("outputs", e))?;
        let mut config = view.config;
        config.model.initializer_range = view.init.std;
        config
            .model
            .validate(&path.display().to_string())
            .map_err(Error::Config)?;
        config
            .batch
            .validate(&config.model)
            .map_err(Error::Config)?;
        name_parameters(&mut inputs, &config.model);
        name_parameters(&mut outputs, &config.model);
        Ok(OpenedBundle {
            dir: dir.to_path_buf(),
            config,
            inputs,
            outputs,
        })
    }

    /// Every tensor of the step's signature, flat (each run of layers the
    /// manifest states once read out to its layers): the inputs in their
    /// order, then the outputs, each with whether it is an input.
    pub fn tensors(&self) -> impl Iterator<Item = (bool, &TensorSpec)> {
        let inputs = self.inputs.iter().map(|t| (true, t));
        inputs.chain(self.outputs.iter().map(|t| (false, t)))
    }

    /// What each rank holds of the parameters, as the manifest states it
    /// (the rule, or the per-rank lists of a manifest from before it);
    /// `None` for a single-device bundle.
    pub fn holdings(&self) -> Result<Option<super::holdings::ManifestHoldings>, Error> {
        let path = self.dir.join(MANIFEST_FILE);
        let bad = |message: String| Error::File {
            path: path.clone(),
            message,
        };
        let text = input_file::read_to_string(&path, |e| bad(e.to_string()))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a manifest hlatc can read: {e}")))?;
        super::holdings::ManifestHoldings::from_manifest(&json).map_err(|e| bad(e.to_string()))
    }

    /// The path of the bundle's module.
    pub fn module_path(&self) -> PathBuf {
        self.dir.join(PROTO_FILE)
    }

    /// The module, read and verified, with the replica count of the
    /// manifest's division (an `HloModuleProto` does not carry it).
    pub fn module(&self) -> Result<Module, Error> {
        let mut module = read_module(&self.module_path())?;
        self.config
            .spmd_in_effect()
            .set_devices(&mut module, self.config.parallel);
        Ok(module)
    }

    /// [`OpenedBundle::module`] as XLA CPU runs it, and whether its Neuron
    /// custom calls were mapped to plain HLO for that.
    pub fn cpu_module(&self) -> Result<(Module, bool), Error> {
        for_cpu(self.module()?, &self.config)
    }

    /// How many ranks run the step.
    pub fn world(&self) -> i64 {
        self.config.parallel.world()
    }

    /// Every rank's inputs for a first step, each from its role (see
    /// [`crate::initial_inputs`]).
    pub fn initial_inputs(&self, seed: u64) -> Result<Vec<Vec<Literal>>, Error> {
        crate::initial_inputs::initial_inputs(&self.config, &self.inputs, seed)
    }

    /// Checks the batch inputs among one rank's `inputs` (in signature
    /// order): ids within the vocabulary, segment ids a packing.
    pub fn check_batch(&self, inputs: &[Literal]) -> Result<(), Error> {
        Ok(check_batch_inputs(
            &self.inputs,
            inputs,
            self.config.model.vocab_size,
        )?)
    }
}

/// The `module` of a step built for `cfg` as XLA CPU runs it: on as many
/// devices as `cfg` has ranks, as replicas or partitions by its SPMD form
/// (an `HloModuleProto` has neither count: XLA keeps them in the module's
/// config, and neuronx-cc reads the world from the replica groups), its
/// Neuron custom calls as the same math in plain HLO. Also whether there
/// were any.
pub fn for_cpu(mut module: Module, cfg: &StepConfig) -> Result<(Module, bool), Error> {
    cfg.spmd_in_effect().set_devices(&mut module, cfg.parallel);
    let lowered = lower_for_cpu(&mut module)?;
    Ok((module, lowered))
}

/// Maps a Neuron step's custom calls (XLA CPU has none of them) to the same
/// math in plain HLO; whether there were any.
pub fn lower_for_cpu(module: &mut Module) -> Result<bool, Error> {
    Ok(hlatc_passes::LowerNeuronCalls::lower(module)?)
}

/// A bundle's module file, read, decoded and verified: what the bundle's
/// readers (opening it, `--verify`) take from disk before anything runs.
pub fn read_module(path: &Path) -> Result<Module, Error> {
    let bytes = input_file::read(path, |source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    module_from_bytes(path, &bytes)
}

/// The module file `path` holds, from its bytes already read (a reader
/// that also hashes them reads the file once).
pub fn module_from_bytes(path: &Path, bytes: &[u8]) -> Result<Module, Error> {
    let module =
        hlatc_compiler::formats::proto::decode_module(bytes).map_err(|source| Error::Proto {
            path: path.to_path_buf(),
            source,
        })?;
    hlatc_compiler::verify(&module).map_err(|source| Error::Verify {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(module)
}
