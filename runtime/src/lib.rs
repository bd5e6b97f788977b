//! Runs hlatc modules on XLA's CPU backend through the PJRT C API, and the
//! harness that compares what they compute.
//!
//! ```no_run
//! use hlatc_compiler::{formats::text, Literal};
//! let m = text::parse_module("HloModule m\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }").unwrap();
//! let rt = hlatc_runtime::Runtime::shared().unwrap();
//! let out = rt.compile(&m).unwrap().run(&[Literal::from_f32(vec![2], &[1.0, -2.0]).unwrap()]).unwrap();
//! assert_eq!(out[0].to_f32_vec(), vec![-1.0, 2.0]);
//! ```
//!
//! A module of N replicas (`replica_count=N`) runs on N devices, one input
//! list per replica, its collectives computed across them:
//!
//! ```no_run
//! use hlatc_compiler::{formats::text, Literal};
//! let m = text::parse_module("HloModule m, replica_count=2\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\nENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] all-reduce(p), replica_groups={}, to_apply=add }").unwrap();
//! let program = hlatc_runtime::Runtime::shared().unwrap().compile(&m).unwrap();
//! let x = |v: f32| vec![Literal::from_f32(vec![2], &[v, v]).unwrap()];
//! let out = program.run_replicas(&[x(1.0), x(2.0)]).unwrap();
//! assert_eq!(out[1][0].to_f32_vec(), vec![3.0, 3.0]);
//! ```

pub mod atomic_file;
pub mod compare;
pub mod compile_options;
pub mod executable_cache;
/// The host-memory check, the compiler's own (the step refuses a module too
/// large to build as the runtime refuses one too large to run).
pub use hlatc_compiler::util::host_memory;
pub mod inputs;
mod pjrt;
pub mod plugin;
mod plugin_digest;
pub mod plugin_flags;
pub mod tensors;

pub use compare::{assert_close, max_abs, ErrorStats, Mismatch};
pub use executable_cache::{CacheOutcome, CacheStats, ExecutableCache};
pub use pjrt::{CompiledMemoryStats, PjrtError};
pub use tensors::{
    read_safetensors, read_safetensors_metadata, safetensors_bytes,
    safetensors_bytes_with_metadata, safetensors_from_bytes, safetensors_metadata_from_bytes,
    write_safetensors, write_safetensors_with_metadata, SafetensorsIndex, TensorFileError,
    HLATC_METADATA_KEY,
};
pub use xla_cpu_flags::Emitters;

// What XLA CPU needs of a module, rewritten or refused before it compiles
// one, is the CPU target's (`hlatc_passes::targets::cpu`): its lowering, its
// pre-flight and the flags they read, re-exported here by their old names.
use hlatc_passes::targets::cpu::lower;
pub use hlatc_passes::targets::cpu::preflight as cpu_preflight;
pub use hlatc_passes::targets::cpu::xla_cpu_flags;
pub use hlatc_passes::targets::cpu::Rewrite;

use hlatc_compiler::{formats::proto, verify, ArrayShape, Literal, Module, Shape, VerifyError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

#[derive(Debug, Clone, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum RuntimeError {
    #[error("XLA CPU PJRT plugin not found (looked in {}); {}", .searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), plugin::FETCH_HINT)]
    PluginNotFound { searched: Vec<PathBuf> },
    #[error(transparent)]
    Pjrt(#[from] PjrtError),
    #[error("module does not verify: {0}")]
    Verify(#[from] VerifyError),
    #[error("XLA CPU cannot run module '{module}': {source}")]
    Preflight {
        module: String,
        #[source]
        source: cpu_preflight::PreflightError,
    },
    #[error("XLA CPU rejected module '{module}'{}: {message}", .instruction.as_ref().map(|i| format!(" (its message names instruction '{i}')")).unwrap_or_default())]
    Rejected {
        module: String,
        instruction: Option<String>,
        message: String,
    },
    #[error("module '{module}' is for {replica_count} replica(s) x {num_partitions} partition(s); the XLA CPU runtime runs replicas of one partition, or partitions of one replica whose entry parameters and root are all sharding={{manual}} (partitioned already, as hlatc's --spmd partitions writes them), not programs XLA would partition itself (`hlatc run --one-device` runs one that is not yet partitioned as one device's program)")]
    MultiDevice {
        module: String,
        replica_count: i64,
        num_partitions: i64,
    },
    #[error("module '{module}' has a device assignment of {assignment}; the XLA CPU runtime runs {replica_count} replica(s) of one computation, each on a device of its own (`hlatc run --one-device` runs it as one device's program)")]
    MultiDeviceAssignment {
        module: String,
        assignment: String,
        replica_count: i64,
    },
    #[error("module '{module}' is for {replicas} replicas, but this runtime has {devices} device(s); a runtime made with as many (`Runtime::with_devices`) runs it, as `hlatc run` does")]
    TooManyReplicas {
        module: String,
        replicas: i64,
        devices: usize,
    },
    #[error("a runtime has 1 to {max} devices; {requested} were asked for")]
    DeviceCount { requested: usize, max: usize },
    #[error("cannot prepare module '{module}' for XLA CPU: {source}")]
    Lowering {
        module: String,
        /// Shared: a runtime error is cloned and a pass error is not
        /// (nor should a runtime result be the size of its largest).
        source: std::sync::Arc<hlatc_passes::PassError>,
    },
    #[error("the module returns {0}; only arrays, and tuples of them, can be read back")]
    UnsupportedResult(String),
    #[error("parameter '{name}' is {shape}; only arrays, and tuples of them, can be passed in")]
    UnsupportedParameter { name: String, shape: String },
    #[error("the module takes {expected} parameter(s), {got} input(s) were given")]
    InputCount { expected: usize, got: usize },
    #[error("program '{module}' runs on {replicas} replicas; run it with one input list per replica (`Program::run_replicas`)")]
    ReplicatedRun { module: String, replicas: usize },
    #[error("program '{module}' runs on {replicas} replica(s); {got} input list(s) were given, one per replica is needed")]
    ReplicaListCount {
        module: String,
        replicas: usize,
        got: usize,
    },
    #[error(
        "replica {replica}: the module takes {expected} parameter(s), {got} input(s) were given"
    )]
    ReplicaInputCount {
        replica: usize,
        expected: usize,
        got: usize,
    },
    #[error("replica {replica}: input {index} ('{name}') is {got}, parameter expects {expected}")]
    ReplicaInputMismatch {
        replica: usize,
        index: usize,
        name: String,
        expected: String,
        got: String,
    },
    #[error("input {index} ('{name}') is {got}, parameter expects {expected}")]
    InputMismatch {
        index: usize,
        name: String,
        expected: String,
        got: String,
    },
    #[error(transparent)]
    HostMemory(#[from] host_memory::TooLarge),
    #[error(
        "replica {replica}: input {index} ('{name}') lives on device {device}, not the replica's"
    )]
    ArgumentDevice {
        replica: usize,
        index: usize,
        name: String,
        device: usize,
    },
    #[error("replica {replica}: input {index} ('{name}') is a buffer of another runtime than the program's")]
    ArgumentRuntime {
        replica: usize,
        index: usize,
        name: String,
    },
    #[error("the plugin returned {got} output(s), the module declares {expected}")]
    OutputCount { expected: usize, got: usize },
}

/// A PJRT client on XLA CPU, with its devices.
#[derive(Clone)]
pub struct Runtime {
    client: pjrt::Client,
    /// Where compiled executables are kept between processes, if anywhere
    /// ([`ExecutableCache::from_env`] unless set).
    cache: Option<Arc<ExecutableCache>>,
    /// The emitters every compile states and the preflight checks for
    /// ([`Emitters::of_process`] unless set).
    emitters: Emitters,
}

static SHARED: OnceLock<Result<Runtime, RuntimeError>> = OnceLock::new();

/// How many devices [`Runtime::shared`] has: the most replicas the
/// sharding tests run (world sizes 2, 4 and 8).
///
/// One client of eight serves every program of a process, single-device
/// ones included, rather than a client per device count: measured on the
/// 2-core VM (`--xla_backend_optimization_level=0`, alternating runs of
/// the plugin's default four devices and of eight, five each), eight
/// devices cost no time anyone can see. Loading the plugin and creating
/// the client took 14-40 ms either way; compiling two 256x256 dots 34-102
/// ms (best of 8); running them 0.6-1.1 ms, and a 16-element negate 27-50
/// us. The spread is the machine's load, not the count. What eight add is
/// eight idle threads (17 against 9).
pub const SHARED_DEVICES: usize = 8;

/// The most devices a runtime may have. The CPU plugin makes every device
/// it is asked for, each with threads of its own, and a replica's
/// collectives wait on all of them: counts beyond a few per core buy
/// nothing but waiting.
pub const MAX_DEVICES: usize = 64;

impl Runtime {
    /// Loads the plugin found by [`plugin::find_plugin`], with the devices
    /// the plugin makes by default (four, for the CPU plugin 0.0.1).
    pub fn new() -> Result<Runtime, RuntimeError> {
        Self::load(None)
    }

    /// Loads the plugin found by [`plugin::find_plugin`], with `devices`
    /// devices (1 to [`MAX_DEVICES`]). The plugin says so on stderr
    /// (an absl INFO line) unless `TF_CPP_MIN_LOG_LEVEL` is 1 or more.
    pub fn with_devices(devices: usize) -> Result<Runtime, RuntimeError> {
        check_device_count(devices)?;
        Self::load(Some(devices))
    }

    /// A runtime with a device for each of `ranks` ranks: the plugin's
    /// default client for one (what every single-device run has always
    /// had), and a client of `ranks` devices for more.
    pub fn for_ranks(ranks: usize) -> Result<Runtime, RuntimeError> {
        match ranks {
            1 => Self::new(),
            n => Self::with_devices(n),
        }
    }

    fn load(devices: Option<usize>) -> Result<Runtime, RuntimeError> {
        let path =
            plugin::find_plugin().map_err(|searched| RuntimeError::PluginNotFound { searched })?;
        Ok(Runtime::from_client(pjrt::Client::load(&path, devices)?))
    }

    /// Loads the plugin at `path`, with the devices it makes by default.
    pub fn with_plugin(path: &Path) -> Result<Runtime, RuntimeError> {
        Ok(Runtime::from_client(pjrt::Client::load(path, None)?))
    }

    /// Loads the plugin at `path`, with `devices` devices (1 to
    /// [`MAX_DEVICES`]).
    pub fn with_plugin_and_devices(path: &Path, devices: usize) -> Result<Runtime, RuntimeError> {
        check_device_count(devices)?;
        Ok(Runtime::from_client(pjrt::Client::load(
            path,
            Some(devices),
        )?))
    }

    fn from_client(client: pjrt::Client) -> Runtime {
        let emitters = Emitters::of_process();
        Runtime {
            cache: ExecutableCache::from_env(),
            emitters: Self::emitters_of(&client, emitters),
            client,
        }
    }

    /// The emitters `client`'s plugin compiles with when asked for
    /// `wanted`: a plugin without the flag that picks them has the fusion
    /// emitters alone (XLA removed the legacy ones with the flag).
    fn emitters_of(client: &pjrt::Client, wanted: Emitters) -> Emitters {
        match client
            .options_left_out()
            .contains(&xla_cpu_flags::FUSION_EMITTERS_FLAG)
        {
            true => Emitters::Fusion,
            false => wanted,
        }
    }

    /// This runtime with `cache` for the executables it compiles (`None`:
    /// none), in place of the one `HLATC_XLA_CACHE_DIR` names.
    pub fn with_executable_cache(mut self, cache: Option<Arc<ExecutableCache>>) -> Runtime {
        self.cache = cache;
        self
    }

    /// This runtime compiling with `emitters`, whichever `XLA_FLAGS` picks:
    /// each compile states them, and the preflight checks for them.
    pub fn with_emitters(mut self, emitters: Emitters) -> Runtime {
        self.emitters = Self::emitters_of(&self.client, emitters);
        self
    }

    /// The emitters this runtime compiles with, and its preflight checks
    /// for.
    pub fn emitters(&self) -> Emitters {
        self.emitters
    }

    /// The debug options hlatc sets that this plugin does not define, left
    /// out of its compiles (`compile_options::OVERRIDES`): each says what
    /// the runtime could not ask of it.
    pub fn options_left_out(&self) -> &[&'static str] {
        self.client.options_left_out()
    }

    /// The cache the executables it compiles go through, if any.
    pub fn executable_cache(&self) -> Option<&Arc<ExecutableCache>> {
        self.cache.as_ref()
    }

    /// One runtime per process, with [`SHARED_DEVICES`] devices: loading
    /// the 260 MB plugin once is what makes many small runs (tests) cheap.
    pub fn shared() -> Result<Runtime, RuntimeError> {
        SHARED
            .get_or_init(|| Runtime::with_devices(SHARED_DEVICES))
            .clone()
    }

    pub fn platform_name(&self) -> &str {
        self.client.platform_name()
    }

    pub fn plugin_path(&self) -> &Path {
        self.client.plugin_path()
    }

    /// How many devices the runtime has: the most replicas a program it
    /// compiles may run on.
    pub fn device_count(&self) -> usize {
        self.client.device_ids().len()
    }

    /// Verifies `module` and compiles it, for `replica_count` replicas of
    /// one partition (replica i on device i). Everything that could make
    /// the plugin abort instead of returning an error is checked here
    /// first, the replica groups of every collective against the replica
    /// count among it.
    pub fn compile(&self, module: &Module) -> Result<Program, RuntimeError> {
        verify(module)?;
        let (replicas, partitioned) = self.ranks_for(module)?;
        let lowered = lower(module).map_err(|e| RuntimeError::Lowering {
            module: module.name.clone(),
            source: std::sync::Arc::new(e),
        })?;
        let compiled = lowered.module.as_ref().unwrap_or(module);
        let result = compiled
            .entry_result_shape()
            .expect("a verified module has a root");
        let outputs = match &result {
            Shape::Array(_) => vec![result.clone()],
            Shape::Tuple(elems) if elems.iter().all(|e| e.as_array().is_some()) => elems.clone(),
            // Named as the module writes it, not as flattened.
            _ => {
                let written = module.entry_result_shape().unwrap_or(result);
                return Err(RuntimeError::UnsupportedResult(written.to_string()));
            }
        };
        let e = compiled.entry();
        let params = e
            .parameters()
            .into_iter()
            .map(|p| (e.instr(p).name.clone(), e.instr(p).shape.clone()))
            .collect::<Vec<_>>();
        if let Some((name, s)) = params.iter().find(|(_, s)| s.as_array().is_none()) {
            return Err(RuntimeError::UnsupportedParameter {
                name: name.clone(),
                shape: s.to_string(),
            });
        }
        cpu_preflight::check(compiled, self.emitters).map_err(|source| {
            RuntimeError::Preflight {
                module: module.name.clone(),
                source,
            }
        })?;
        // XLA CPU schedules a module itself, and a schedule handed to it
        // aborts the process (a check on instruction ids while it copies
        // the module), so the proto goes without one; the schedule does
        // not change what the module computes.
        let mut unscheduled = proto::module_to_proto(compiled);
        unscheduled.schedule = None;
        // Compiled for the devices PJRT is given (replica i on device i),
        // whichever devices the dump ran on (`replicas_for` checked that
        // its assignment is for as many replicas of one computation).
        unscheduled.device_assignment = None;
        fusions_as_calls(&mut unscheduled);
        let bytes = prost::Message::encode_to_vec(&unscheduled);
        let devices = &self.client.device_ids()[..replicas];
        let overrides = compile_options::Overrides {
            emitters: self.emitters,
            left_out: self.client.options_left_out(),
        };
        let options = match (replicas, partitioned) {
            (1, _) => compile_options::single_device(overrides),
            (_, false) => compile_options::replicas(devices, overrides),
            (_, true) => compile_options::partitions(devices, overrides),
        };
        let (exe, cache) = match &self.cache {
            Some(c) => c.get_or_compile(&self.client, &bytes, &options),
            None => self
                .client
                .compile(&bytes, &options)
                .map(|exe| (exe, CacheOutcome::Off)),
        }
        .map_err(|e| rejected(compiled, e))?;
        let aliases = top_level_aliases(compiled, outputs.len());
        let got = exe.num_outputs()?;
        if got != outputs.len() {
            return Err(RuntimeError::OutputCount {
                expected: outputs.len(),
                got,
            });
        }
        Ok(Program {
            exe,
            params,
            outputs,
            replicas,
            fits: OnceLock::new(),
            name: module.name.clone(),
            host_bytes: host_memory::module_bytes(module).saturating_mul(replicas as u64),
            rewrites: lowered.rewrites,
            cache,
            aliases,
        })
    }

    /// How many ranks `module` runs on here, and whether they are
    /// partitions: its `replica_count` when it has one partition, or its
    /// `num_partitions` when it has one replica and its entry is
    /// partitioned by hand already; when this runtime has that many
    /// devices, and any device assignment it carries is for that many
    /// ranks, each a device of its own.
    fn ranks_for(&self, module: &Module) -> Result<(usize, bool), RuntimeError> {
        let counts = module.devices;
        let partitioned = counts.replica_count == 1 && counts.num_partitions > 1;
        let fits = match partitioned {
            true => entry_is_manual(module),
            false => counts.num_partitions == 1 && counts.replica_count >= 1,
        };
        if !fits {
            return Err(RuntimeError::MultiDevice {
                module: module.name.clone(),
                replica_count: counts.replica_count,
                num_partitions: counts.num_partitions,
            });
        }
        let ranks = counts.replica_count * counts.num_partitions;
        let devices = self.device_count();
        let replicas = usize::try_from(ranks)
            .ok()
            .filter(|&n| n <= devices)
            .ok_or_else(|| RuntimeError::TooManyReplicas {
                module: module.name.clone(),
                replicas: ranks,
                devices,
            })?;
        if let Some(d) = module.device_assignment.as_ref().filter(|d| {
            i64::from(d.computation_count) != counts.num_partitions
                || i64::from(d.replica_count) != counts.replica_count
        }) {
            return Err(RuntimeError::MultiDeviceAssignment {
                module: module.name.clone(),
                assignment: d.to_string(),
                replica_count: counts.replica_count,
            });
        }
        Ok((replicas, partitioned))
    }
}

/// `(parameter, output)` for each `input_output_alias` entry of `module`
/// that pairs a whole parameter with a whole output (of `outputs`, the
/// root's leaves): the buffers a run may write in place.
fn top_level_aliases(module: &Module, outputs: usize) -> Vec<(usize, usize)> {
    module
        .input_output_alias
        .iter()
        .filter(|a| a.parameter_index.is_empty())
        .filter_map(|a| {
            let output = match a.output_index.as_slice() {
                [] => 0,
                [o] => usize::try_from(*o).ok()?,
                _ => return None,
            };
            Some((usize::try_from(a.parameter).ok()?, output)).filter(|_| output < outputs)
        })
        .collect()
}

/// Whether every entry parameter and every leaf of the entry's root is
/// `sharding={manual}`: a program XLA's SPMD partitioner leaves as written.
fn entry_is_manual(module: &Module) -> bool {
    use hlatc_compiler::ir::sharding::{ShardingKind, SingleSharding};
    use hlatc_compiler::Sharding;
    let manual = |s: &SingleSharding| s.kind == ShardingKind::Manual;
    let is_manual = |s: &Option<Sharding>| match s {
        Some(Sharding::Single(s)) => manual(s),
        Some(Sharding::Tuple(leaves)) => !leaves.is_empty() && leaves.iter().all(manual),
        None => false,
    };
    let e = module.entry();
    e.parameters()
        .into_iter()
        .all(|p| is_manual(&e.instr(p).sharding))
        && e.root().is_some_and(|r| is_manual(&e.instr(r).sharding))
}

fn check_device_count(requested: usize) -> Result<(), RuntimeError> {
    if (1..=MAX_DEVICES).contains(&requested) {
        Ok(())
    } else {
        Err(RuntimeError::DeviceCount {
            requested,
            max: MAX_DEVICES,
        })
    }
}

/// A fusion computes what a call of its computation computes, and XLA CPU
/// fuses for itself; handed a fusion that returns a tuple (a multi-output
/// fusion, what its own passes make) it aborts the whole process
/// ("Check failed: has_layout()", measured with XLA's test 01869). So it
/// gets every fusion as a call; the in-place aliasing a fusion may carry is
/// a hint about buffers, not about values.
fn fusions_as_calls(p: &mut proto::messages::HloModuleProto) {
    for i in p
        .computations
        .iter_mut()
        .flat_map(|c| c.instructions.iter_mut())
        .filter(|i| i.opcode == "fusion")
    {
        i.opcode = "call".to_string();
        i.fusion_kind.clear();
        i.output_operand_aliasing.clear();
    }
}

/// Fails when one run of `module` (its inputs and outputs) could not fit in
/// the host's available memory. Known from the signature alone, so callers
/// can refuse a run before XLA spends seconds compiling it.
/// A module of several replicas holds every replica's inputs and outputs.
pub fn ensure_fits(module: &Module) -> Result<(), RuntimeError> {
    // A dynamic boundary (an unbounded `?` above all) has no size to
    // count: say that it cannot run, not that it is huge.
    cpu_preflight::static_at_the_boundary(module).map_err(|source| RuntimeError::Preflight {
        module: module.name.clone(),
        source,
    })?;
    let replicas = module.devices.replica_count.max(1) as u64;
    fits(
        &module.name,
        host_memory::module_bytes(module).saturating_mul(replicas),
    )
}

fn fits(name: &str, bytes: u64) -> Result<(), RuntimeError> {
    host_memory::ensure_fits(&format!("running '{name}' (its inputs and outputs)"), bytes)
        .map_err(RuntimeError::HostMemory)
}

/// XLA's compile errors name neither the module nor, always, the
/// instruction: say which module, and the instruction its message names.
fn rejected(module: &Module, e: PjrtError) -> RuntimeError {
    let PjrtError::Call { message, .. } = &e else {
        return RuntimeError::Pjrt(e);
    };
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    let words: std::collections::BTreeSet<&str> = message
        .split(|c: char| !is_name_char(c))
        .filter(|w| !w.is_empty())
        .collect();
    // The longest named instruction, so `add.12` wins over `add`.
    let instruction = module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| c.instr(id).name.as_str()))
        .filter(|n| words.contains(n))
        .max_by_key(|n| n.len())
        .map(str::to_string);
    RuntimeError::Rejected {
        module: module.name.clone(),
        instruction,
        message: message.clone(),
    }
}

/// A compiled module with its entry signature.
pub struct Program {
    exe: pjrt::LoadedExecutable,
    params: Vec<(String, Shape)>,
    outputs: Vec<Shape>,
    /// Devices one run takes, a replica on each.
    replicas: usize,
    /// Whether a run fits in host memory, decided at the first run: the
    /// training loop calls `run` every step and need not re-read
    /// `/proc/meminfo` each time.
    fits: OnceLock<Result<(), RuntimeError>>,
    name: String,
    /// Host bytes one run holds at least: every replica's inputs and
    /// outputs.
    host_bytes: u64,
    rewrites: Vec<Rewrite>,
    cache: CacheOutcome,
    /// `(parameter, output)`: the outputs a run may write over a donated
    /// parameter's buffer.
    aliases: Vec<(usize, usize)>,
}

impl Program {
    /// Parameter names and shapes, by parameter number.
    pub fn parameters(&self) -> &[(String, Shape)] {
        &self.params
    }

    /// One shape per output (the elements of a tuple result).
    pub fn outputs(&self) -> &[Shape] {
        &self.outputs
    }

    /// How the module XLA CPU compiled differs from the one given.
    pub fn rewrites(&self) -> &[Rewrite] {
        &self.rewrites
    }

    /// Whether the executable was compiled or loaded from the runtime's
    /// [`ExecutableCache`].
    pub fn cache_outcome(&self) -> &CacheOutcome {
        &self.cache
    }

    /// Fails, before anything is allocated, when a run could not fit in the
    /// host's available memory: its inputs, its outputs and the scratch
    /// XLA's buffer assignment planned (XLA CPU aborts the process when
    /// that allocation fails). Checked once per program.
    pub fn ensure_fits(&self) -> Result<(), RuntimeError> {
        self.fits
            .get_or_init(|| {
                let scratch = self.memory_stats().map_or(0, |m| m.temp.max(0) as u64);
                let bytes = self
                    .host_bytes
                    .saturating_add(scratch.saturating_mul(self.replicas as u64));
                host_memory::ensure_fits(
                    &format!("running '{}' (its inputs, outputs and scratch)", self.name),
                    bytes,
                )
                .map_err(RuntimeError::HostMemory)
            })
            .clone()
    }

    /// The memory XLA CPU's buffer assignment planned for this program.
    pub fn memory_stats(&self) -> Result<CompiledMemoryStats, RuntimeError> {
        Ok(self.exe.memory_stats()?)
    }

    /// How many replicas a run takes: the module's `replica_count`.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// `(parameter, output)` for each parameter whose buffer, donated
    /// ([`Arg::Donated`]), the run may reuse for that output.
    pub fn aliases(&self) -> &[(usize, usize)] {
        &self.aliases
    }

    /// Copies `lit` to the runtime's device `replica`, where this program
    /// runs its replica `replica`: an argument for [`Program::execute`]
    /// (and for any program of the same runtime) that stays there until
    /// dropped or donated.
    pub fn to_device(&self, lit: &Literal, replica: usize) -> Result<DeviceBuffer, RuntimeError> {
        Ok(DeviceBuffer {
            buffer: self.exe.client().buffer_from_literal(lit, replica)?,
            shape: lit.shape.clone(),
        })
    }

    /// Runs once; inputs must match the parameters exactly (type and dims).
    /// A program of several replicas takes an input list per replica
    /// ([`Program::run_replicas`]).
    pub fn run(&self, inputs: &[Literal]) -> Result<Vec<Literal>, RuntimeError> {
        if self.replicas != 1 {
            return Err(RuntimeError::ReplicatedRun {
                module: self.name.clone(),
                replicas: self.replicas,
            });
        }
        let mut outputs = self.run_replicas(&[inputs.to_vec()])?;
        Ok(outputs.pop().unwrap_or_default())
    }

    /// Runs once on every replica, `inputs[r]` on replica `r` (each list
    /// matching the parameters exactly), and gives each replica's outputs
    /// in the same order. A program of one replica takes one list.
    pub fn run_replicas(&self, inputs: &[Vec<Literal>]) -> Result<Vec<Vec<Literal>>, RuntimeError> {
        self.check_lists(
            inputs.iter().map(|l| l.iter().map(|l| &l.shape)),
            inputs.len(),
        )?;
        // Copies made for this run alone: the run may have them.
        let args = inputs
            .iter()
            .enumerate()
            .map(|(replica, list)| {
                list.iter()
                    .map(|l| Ok(Arg::Donated(self.to_device(l, replica)?)))
                    .collect::<Result<Vec<_>, RuntimeError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = self.execute(args).map_err(ExecuteError::into_error)?;
        outputs
            .iter()
            .map(|list| list.iter().map(DeviceBuffer::to_literal).collect())
            .collect()
    }

    /// Runs once on every replica, `args[r]` on replica `r` (each list
    /// matching the parameters exactly, every buffer on its replica's
    /// device), and gives each replica's outputs, left on its device.
    /// A donated argument is the run's, whatever happens: the program may
    /// write the output aliasing it over it ([`Program::aliases`]); a lent
    /// one is left as it was. Arguments refused before the run began come
    /// back whole in [`ExecuteError::Refused`].
    pub fn execute<'a>(
        &self,
        args: Vec<Vec<Arg<'a>>>,
    ) -> Result<Vec<Vec<DeviceBuffer>>, ExecuteError<'a>> {
        let shapes = args.iter().map(|l| l.iter().map(|a| &a.buffer().shape));
        let checked = self
            .check_lists(shapes, args.len())
            .and_then(|()| self.check_devices(&args))
            .and_then(|()| self.ensure_fits());
        if let Err(error) = checked {
            return Err(ExecuteError::Refused { error, args });
        }
        let lists = args
            .into_iter()
            .map(|list| list.into_iter().map(Arg::into_pjrt).collect())
            .collect();
        let outputs = self
            .exe
            .execute(lists)
            .map_err(|e| ExecuteError::Failed(e.into()))?;
        outputs
            .into_iter()
            .map(|list| {
                if list.len() != self.outputs.len() {
                    return Err(ExecuteError::Failed(RuntimeError::OutputCount {
                        expected: self.outputs.len(),
                        got: list.len(),
                    }));
                }
                Ok(list
                    .into_iter()
                    .zip(&self.outputs)
                    .map(|(buffer, shape)| DeviceBuffer {
                        buffer,
                        shape: shape.as_array().expect("outputs are arrays").clone(),
                    })
                    .collect())
            })
            .collect()
    }

    /// Fails unless every argument lies on its list's device, of the
    /// client this program runs on.
    fn check_devices(&self, args: &[Vec<Arg<'_>>]) -> Result<(), RuntimeError> {
        for (replica, list) in args.iter().enumerate() {
            if let Some(index) = list
                .iter()
                .position(|a| !a.buffer().buffer.is_of(&self.exe))
            {
                return Err(RuntimeError::ArgumentRuntime {
                    replica,
                    index,
                    name: self.params[index].0.clone(),
                });
            }
            if let Some((index, a)) = list
                .iter()
                .enumerate()
                .find(|(_, a)| a.buffer().replica() != replica)
            {
                return Err(RuntimeError::ArgumentDevice {
                    replica,
                    index,
                    name: self.params[index].0.clone(),
                    device: a.buffer().replica(),
                });
            }
        }
        Ok(())
    }

    /// Fails, naming the replica where there are several, unless there is
    /// one list (of `count`) per replica and each matches the parameters.
    fn check_lists<'s, L>(
        &self,
        mut lists: impl Iterator<Item = L>,
        count: usize,
    ) -> Result<(), RuntimeError>
    where
        L: ExactSizeIterator<Item = &'s ArrayShape>,
    {
        if self.replicas == 1 && count == 1 {
            // One device's run is named as `run` names its inputs.
            return lists.try_for_each(|l| self.check_one(l, None));
        }
        if count != self.replicas {
            return Err(RuntimeError::ReplicaListCount {
                module: self.name.clone(),
                replicas: self.replicas,
                got: count,
            });
        }
        lists
            .enumerate()
            .try_for_each(|(replica, l)| self.check_one(l, Some(replica)))
    }

    /// The first way one input list (of `replica`, if several) does not
    /// match the parameters.
    fn check_one<'s>(
        &self,
        list: impl ExactSizeIterator<Item = &'s ArrayShape>,
        replica: Option<usize>,
    ) -> Result<(), RuntimeError> {
        let got = list.len();
        if got != self.params.len() {
            let expected = self.params.len();
            return Err(match replica {
                Some(replica) => RuntimeError::ReplicaInputCount {
                    replica,
                    expected,
                    got,
                },
                None => RuntimeError::InputCount { expected, got },
            });
        }
        for (index, (given, (name, shape))) in list.zip(&self.params).enumerate() {
            if shape
                .as_array()
                .is_some_and(|a| a.same_dims_and_type(given))
            {
                continue;
            }
            let (name, expected, got) = (name.clone(), shape.to_string(), given.to_string());
            return Err(match replica {
                Some(replica) => RuntimeError::ReplicaInputMismatch {
                    replica,
                    index,
                    name,
                    expected,
                    got,
                },
                None => RuntimeError::InputMismatch {
                    index,
                    name,
                    expected,
                    got,
                },
            });
        }
        Ok(())
    }
}

/// An array on one of a runtime's devices, owned: it stays there, across
/// runs, until it is dropped or donated to a run ([`Arg::Donated`], which
/// takes it by value, so nothing reads it after).
pub struct DeviceBuffer {
    buffer: pjrt::Buffer,
    shape: ArrayShape,
}

impl DeviceBuffer {
    /// Its element type and dimensions.
    pub fn shape(&self) -> &ArrayShape {
        &self.shape
    }

    /// The device it lives on, as a replica index: a program runs its
    /// replica `r` on device `r`.
    pub fn replica(&self) -> usize {
        self.buffer.device()
    }

    /// A copy of it on the host.
    pub fn to_literal(&self) -> Result<Literal, RuntimeError> {
        Ok(self.buffer.to_literal()?)
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({} on device {})",
            self.shape,
            self.replica()
        )
    }
}

/// One argument of [`Program::execute`].
pub enum Arg<'a> {
    /// Read by the run and left as it was; an output aliasing it gets a
    /// buffer of its own.
    Lent(&'a DeviceBuffer),
    /// Given up to the run, which may write the output aliasing it over it.
    Donated(DeviceBuffer),
}

impl<'a> Arg<'a> {
    fn buffer(&self) -> &DeviceBuffer {
        match self {
            Arg::Lent(b) => b,
            Arg::Donated(b) => b,
        }
    }

    fn into_pjrt(self) -> pjrt::BufferArg<'a> {
        match self {
            Arg::Lent(b) => pjrt::BufferArg::Borrowed(&b.buffer),
            Arg::Donated(b) => pjrt::BufferArg::Donated(b.buffer),
        }
    }
}

/// Why [`Program::execute`] gave no outputs, and what became of its
/// donated arguments.
pub enum ExecuteError<'a> {
    /// Refused before the run began: every argument comes back as given.
    Refused {
        error: RuntimeError,
        args: Vec<Vec<Arg<'a>>>,
    },
    /// The run failed: the donated arguments are gone with it.
    Failed(RuntimeError),
}

impl ExecuteError<'_> {
    pub fn error(&self) -> &RuntimeError {
        match self {
            ExecuteError::Refused { error, .. } | ExecuteError::Failed(error) => error,
        }
    }

    pub fn into_error(self) -> RuntimeError {
        match self {
            ExecuteError::Refused { error, .. } | ExecuteError::Failed(error) => error,
        }
    }
}

impl std::fmt::Debug for ExecuteError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecuteError::Refused { error, .. } => write!(f, "Refused({error:?})"),
            ExecuteError::Failed(error) => write!(f, "Failed({error:?})"),
        }
    }
}
