//! `hlatc run`: execute a module on XLA CPU.

use super::console::{millis, note, out};
use hlatc::bundle::OpenedBundle;
use hlatc::runtime::{
    assert_close, inputs, max_abs, read_safetensors, write_safetensors, MAX_DEVICES,
};
use hlatc::{Error, Literal, Module};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Run a module, or a bundle hlatc compiled, on XLA's CPU backend through PJRT.
///
/// Inputs are taken from the --inputs files by parameter name, or by
/// position as arg0, arg1, ... . Integer tensors of another integer type
/// (torch writes token ids as int64) are converted when every value fits.
/// Without --inputs, every parameter of a module gets deterministic
/// pseudo-random values from --seed: floats (and both parts of a complex
/// value) uniform in [-1, 1), integers in [0, 16) and within their type
/// (s4 in [0, 8)), random booleans. Each output's shape, dtype and a
/// summary are printed (a complex output's by its elements' magnitudes).
///
/// A bundle directory's inputs that the --inputs files do not hold (all of
/// them without --inputs) are made from their roles in the manifest, and
/// named: parameters initialized as the model is (from --seed), Adam
/// moments and the step counter zero, tokens and targets a batch of a
/// synthetic language within the vocabulary, segment ids a valid packing.
/// Its token, target and segment ids are checked before it runs: ids
/// within the vocabulary (a target may also be the ignore index -100),
/// each document's segment contiguous and the ids not decreasing along a
/// row. Its Neuron custom calls run as the same math in plain HLO.
///
/// Outputs are named out0, out1, ... (the elements of a tuple result, in
/// order). For a bundle directory they carry the manifest's names instead
/// (loss, grad_norm, learning_rate, then each parameter, moment and the step
/// by the name of the input it updates), so `--outputs` of one step is the
/// state `--inputs` of the next.
///
/// A module of N replicas (replica_count=N) runs on N devices, one replica
/// each, its collectives computed across them (--devices N says so
/// explicitly); so does one of N partitions of one replica whose entry is
/// partitioned by hand (num_partitions=N, every entry parameter and the
/// root sharding={manual}, as `compile --spmd partitions` writes it). A
/// bundle's form is read from its manifest. Each rank takes its own
/// inputs (a bundle's `rank` input is its number): a path with
/// {rank} in it is read once per rank, with the rank's number in its place;
/// one without is every rank's alike (the example below gives every rank
/// the same state and each its own batch). Without --inputs, rank 0 draws
/// what a one-device run would from --seed and each other rank its own
/// values. Each rank's outputs are printed under its number; --outputs and
/// --expect take {rank} alike (an --expect path without it is every rank's
/// reference).
#[derive(clap::Args)]
#[command(after_long_help = "Examples:
  hlatc run step.hlo --inputs in.safetensors --expect ref.safetensors
  hlatc run build/tiny --inputs state.safetensors --inputs batch.safetensors --outputs next.safetensors
  hlatc run dp.hlo --devices 4 --inputs state.safetensors --inputs batch.{rank}.safetensors --outputs out.{rank}.safetensors")]
pub struct Args {
    /// Module to run (HLO text or HloModuleProto), or a bundle directory
    /// from `hlatc compile`
    module: PathBuf,
    /// Safetensors file with inputs; repeat it to take them from several
    /// files (state and batch, say). With {rank} in the path, each rank
    /// reads its own file
    #[arg(long, value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Write every output to this safetensors file (one per rank, with
    /// {rank} in the path, for a module of several replicas)
    #[arg(long, value_name = "FILE")]
    outputs: Option<PathBuf>,
    /// Seed for generated inputs, and for a bundle's inputs made from
    /// their roles
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compare the outputs with the tensors of the same names (out0, out1,
    /// ..., or a bundle's output names) in this safetensors file; exit with
    /// status 1 on a mismatch. With {rank} in the path, each rank's own
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// Relative tolerance for --expect
    #[arg(long, default_value_t = 1e-5)]
    rtol: f64,
    /// Absolute tolerance for --expect [default: rtol times the largest
    /// magnitude in that expected output]
    #[arg(long)]
    atol: Option<f64>,
    /// Run a module written for several devices (num_partitions or
    /// replica_count above 1) as one device's program. Right for a module
    /// not yet partitioned, whose shardings annotate one global program
    /// (JAX's `before_optimizations` dumps): it computes the same values.
    /// Wrong for a partitioned one, whose collectives need every device.
    #[arg(long, conflicts_with = "devices")]
    one_device: bool,
    /// Run the module's N replicas on N devices, one each; N must be its
    /// replica_count (a module of several replicas runs on that many
    /// without this flag too)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_DEVICES as i64))]
    devices: Option<u32>,
    /// Stop every while loop after N trips. For a module run on inputs it
    /// was not written for (the generated ones, say), whose loops may never
    /// end: a run cannot be cut short once XLA starts it. A loop stopped
    /// early gives its state after N trips, not the program's value; one
    /// that ends sooner is unchanged
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_trips: Option<u32>,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    check_flags(&a)?;
    let bundle = a
        .module
        .is_dir()
        .then(|| OpenedBundle::open(&a.module))
        .transpose()?;
    let (module_path, mut module) = match &bundle {
        // A bundle's module carries the manifest's world size.
        Some(b) => {
            let (module, lowered) = b.cpu_module()?;
            if lowered {
                note!(
                    "running the bundle's Neuron custom calls as the same math in plain HLO (XLA CPU has none of them)"
                )?;
            }
            (b.module_path(), module)
        }
        None => (a.module.clone(), super::load(&a.module)?),
    };
    adjust_module(&a, &mut module)?;
    let ranks = ranks(&a, &module)?;
    check_rank_paths(&a, ranks)?;
    let outputs = execute(&a, &module, &module_path, bundle.as_ref(), ranks)?;
    let output_names = bundle.map(|b| b.outputs.into_iter().map(|o| o.name).collect());
    report_outputs(&a, output_names, &outputs)
}

/// Tolerances, refused before anything runs.
fn check_flags(a: &Args) -> Result<(), Error> {
    if !(a.rtol.is_finite() && a.rtol >= 0.0) {
        return Err(Error::out_of_range(format!(
            "--rtol must be a finite number >= 0, got {}",
            a.rtol
        )));
    }
    if let Some(atol) = a.atol.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        return Err(Error::out_of_range(format!(
            "--atol must be a finite number >= 0, got {atol}"
        )));
    }
    Ok(())
}

/// What stands for the rank's number in a per-rank path.
const RANK: &str = "{rank}";

/// `path` with `{rank}` replaced by `rank`; unchanged without it.
fn for_rank(path: &Path, rank: usize) -> PathBuf {
    match path.to_str() {
        Some(p) if p.contains(RANK) => PathBuf::from(p.replace(RANK, &rank.to_string())),
        _ => path.to_path_buf(),
    }
}

fn per_rank(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.contains(RANK))
}

/// How many devices the module runs on, one rank each: its
/// `replica_count` times its `num_partitions` (one of them is 1 where the
/// runtime runs it), which `--devices` must match.
fn ranks(a: &Args, module: &Module) -> Result<usize, Error> {
    let counts = module.devices;
    let replicas = counts.replica_count.saturating_mul(counts.num_partitions);
    if let Some(n) = a.devices.filter(|&n| i64::from(n) != replicas) {
        return Err(Error::conflict(format!(
            "--devices {n}: module '{}' is for {replicas} rank(s) (replica_count={}, num_partitions={}), one per device; run it with --devices {replicas}",
            module.name, counts.replica_count, counts.num_partitions
        )));
    }
    let ranks = usize::try_from(replicas).unwrap_or(1).max(1);
    if ranks > MAX_DEVICES {
        return Err(Error::unsupported(format!(
            "module '{}' is for {replicas} replicas; hlatc runs at most {MAX_DEVICES} devices",
            module.name
        )));
    }
    if ranks > 1 && a.devices.is_none() {
        let per = match counts.num_partitions {
            1 => "one per replica (its replica_count)",
            _ => "one per partition (its num_partitions)",
        };
        note!("running '{}' on {ranks} devices, {per}", module.name)?;
    }
    Ok(ranks)
}

/// Every rank's `--outputs` file must be writable, and several ranks need
/// `{rank}` in its path to write one each.
fn check_rank_paths(a: &Args, ranks: usize) -> Result<(), Error> {
    if let Some(path) = &a.outputs {
        if ranks > 1 && !per_rank(path) {
            return Err(Error::conflict(format!(
                "--outputs {}: the module runs on {ranks} ranks, so its path needs {RANK} (out.{RANK}.safetensors, say) to write one file per rank",
                path.display()
            )));
        }
        for rank in 0..ranks {
            let path = for_rank(path, rank);
            hlatc::runtime::atomic_file::check_writable(&path)
                .map_err(|m| Error::invalid(format!("--outputs {}: {m}", path.display())))?;
        }
    }
    Ok(())
}

/// What `--one-device` and `--max-trips` change about the module, each
/// said in a note.
fn adjust_module(a: &Args, module: &mut Module) -> Result<(), Error> {
    if a.one_device && module.devices != Default::default() {
        note!(
            "--one-device: running '{}' (written for {} replica(s) x {} partition(s)) as one device's program; its shardings do not apply",
            module.name,
            module.devices.replica_count,
            module.devices.num_partitions
        )?;
        module.devices = Default::default();
    }
    if let Some(d) = module
        .device_assignment
        .take_if(|d| a.one_device && d.single_device().is_none())
    {
        note!(
            "--one-device: running '{}' (assigned to {d}) on one device",
            module.name
        )?;
    }
    if let Some(n) = a.max_trips {
        let bounded = hlatc::passes::bound_loops(module, n)
            .map_err(hlatc::passes::PassError::rewrite("--max-trips"))?;
        if bounded > 0 {
            note!(
                "--max-trips {n}: running '{}' with its {bounded} while loop(s) stopped after at most {n} trips",
                module.name
            )?;
        }
    }
    Ok(())
}

/// Compiles the module on XLA CPU and runs it on the given inputs, or on
/// inputs drawn from `--seed`: one list of outputs per rank.
fn execute(
    a: &Args,
    module: &Module,
    module_path: &Path,
    bundle: Option<&OpenedBundle>,
    ranks: usize,
) -> Result<Vec<Vec<Literal>>, Error> {
    let rt = hlatc::runtime::Runtime::for_ranks(ranks)?;
    let t0 = Instant::now();
    let in_file = |source| Error::RunModule {
        path: module_path.to_path_buf(),
        source,
    };
    hlatc::runtime::ensure_fits(module).map_err(in_file)?;
    let program = rt.compile(module).map_err(in_file)?;
    let compile_time = t0.elapsed();
    for rewrite in program.rewrites() {
        note!("running '{}' with {rewrite}", module.name)?;
    }
    let args = match bundle {
        Some(b) => bundle_inputs(a, b, program.parameters(), ranks)?,
        None if a.inputs.is_empty() => (0..ranks)
            .map(|rank| generated_inputs(program.parameters(), a.seed, rank))
            .collect(),
        None => inputs_from_files(&a.inputs, program.parameters(), ranks)?.all_given()?,
    };
    let t1 = Instant::now();
    let outputs = match args.as_slice() {
        [one] => vec![program.run(one).map_err(in_file)?],
        _ => program.run_replicas(&args).map_err(in_file)?,
    };
    let run_time = t1.elapsed();
    note!(
        "ran {}{} on {} ({}): compile {:.1} ms, execute {:.1} ms",
        module.name,
        if ranks > 1 {
            format!(" ({ranks} replicas)")
        } else {
            String::new()
        },
        rt.platform_name(),
        rt.plugin_path().display(),
        millis(compile_time),
        millis(run_time)
    )?;
    Ok(outputs)
}

/// Rank `rank`'s inputs drawn from `seed`: rank 0's are a one-device run's.
fn generated_inputs(
    params: &[(String, hlatc::compiler::Shape)],
    seed: u64,
    rank: usize,
) -> Vec<Literal> {
    let mut rng = inputs::SplitMix64::new(inputs::rank_seed(seed, rank as u64));
    params
        .iter()
        .map(|(_, s)| {
            inputs::random_literal(
                s.as_array().expect("compile takes only array parameters"),
                &mut rng,
            )
        })
        .collect()
}

/// Prints each rank's outputs, writes `--outputs` and compares with
/// `--expect`.
fn report_outputs(
    a: &Args,
    output_names: Option<Vec<String>>,
    outputs: &[Vec<Literal>],
) -> Result<ExitCode, Error> {
    let count = outputs.first().map_or(0, Vec::len);
    // A bundle's names line up in a column; out0, out1, ... need none.
    let (names, width): (Vec<String>, usize) = match output_names {
        Some(names) if names.len() == count => {
            let width = names.iter().map(String::len).max().unwrap_or(0);
            (names, width)
        }
        _ => ((0..count).map(|i| format!("out{i}")).collect(), 0),
    };
    let ranks = outputs.len();
    for (rank, outs) in outputs.iter().enumerate() {
        let indent = if ranks > 1 {
            out!("rank {rank}")?;
            "  "
        } else {
            ""
        };
        for (name, o) in names.iter().zip(outs) {
            out!("{indent}{name:<width$}  {}", summarize(o))?;
        }
    }
    if let Some(pattern) = &a.outputs {
        for (rank, outs) in outputs.iter().enumerate() {
            let path = for_rank(pattern, rank);
            let named: Vec<(String, Literal)> =
                names.iter().cloned().zip(outs.iter().cloned()).collect();
            write_safetensors(&path, &named)?;
            note!("wrote {} output(s) to {}", named.len(), path.display())?;
        }
    }
    let Some(pattern) = &a.expect else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut worst: f64 = 0.0;
    let mut failed = false;
    for (rank, outs) in outputs.iter().enumerate() {
        let prefix = if ranks > 1 {
            format!("rank {rank}: ")
        } else {
            String::new()
        };
        let path = for_rank(pattern, rank);
        match compare(&path, &names, outs, a.rtol, a.atol, &prefix)? {
            Some(w) => worst = worst.max(w),
            None => failed = true,
        }
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    let of_ranks = if ranks > 1 {
        format!(" of each of {ranks} ranks")
    } else {
        String::new()
    };
    out!(
        "all {count} outputs{of_ranks} match {} (worst error {:.2e} of the output's largest magnitude)",
        pattern.display(),
        worst
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Tensors by name, with the file each came from.
type Tensors = BTreeMap<String, (Literal, PathBuf)>;

/// The tensors of `paths`; a name in two of them, or in one of them and
/// in `shared`, is an error naming both files.
fn read_tensor_files(paths: &[PathBuf], shared: &Tensors) -> Result<Tensors, Error> {
    let mut tensors = Tensors::new();
    for path in paths {
        for (name, t) in read_safetensors(path)? {
            if let Some((_, first)) = tensors.get(&name).or_else(|| shared.get(&name)) {
                return Err(Error::conflict(format!(
                    "tensor '{name}' is in both {} and {}",
                    first.display(),
                    path.display()
                )));
            }
            tensors.insert(name, (t, path.clone()));
        }
    }
    Ok(tensors)
}

/// What the `--inputs` files hold for each rank's parameters: a tensor
/// for each that one of them names, `None` for the others.
struct FileInputs {
    ranks: Vec<Vec<Option<Literal>>>,
    /// The files read, for an error that names them.
    read: Vec<String>,
    /// The parameters' names.
    names: Vec<String>,
}

impl FileInputs {
    /// Every rank's inputs, or an error naming the first rank's missing
    /// ones (and the files looked in).
    fn all_given(self) -> Result<Vec<Vec<Literal>>, Error> {
        let several = self.ranks.len() > 1;
        self.ranks
            .into_iter()
            .enumerate()
            .map(|(rank, list)| {
                let missing: Vec<String> = list
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.is_none())
                    .map(|(i, _)| format!("'{}' (or 'arg{i}')", self.names[i]))
                    .collect();
                if missing.is_empty() {
                    return Ok(list.into_iter().flatten().collect());
                }
                Err(Error::not_found(format!(
                    "{}no tensor for parameter {} in {}",
                    if several {
                        format!("rank {rank}: ")
                    } else {
                        String::new()
                    },
                    missing.join(", "),
                    self.read.join(", ")
                )))
            })
            .collect()
    }
}

/// Each rank's tensor for each parameter, by name (or `argN`) from any of
/// `files`: a path with `{rank}` is each rank's own file, one without it
/// every rank's.
fn inputs_from_files(
    files: &[PathBuf],
    params: &[(String, hlatc::compiler::Shape)],
    ranks: usize,
) -> Result<FileInputs, Error> {
    let (own_files, shared_files): (Vec<PathBuf>, Vec<PathBuf>) =
        files.iter().cloned().partition(|p| per_rank(p));
    let mut shared = read_tensor_files(&shared_files, &Tensors::new())?;
    let mut lists = Vec::with_capacity(ranks);
    let mut read: Vec<String> = shared_files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    for rank in 0..ranks {
        let own_paths: Vec<PathBuf> = own_files.iter().map(|p| for_rank(p, rank)).collect();
        read.extend(own_paths.iter().map(|f| f.display().to_string()));
        let mut own = read_tensor_files(&own_paths, &shared)?;
        // The last rank takes the shared tensors; the others copy them.
        let last = rank + 1 == ranks;
        let mut list = Vec::with_capacity(params.len());
        for (i, (name, shape)) in params.iter().enumerate() {
            let key = [name.clone(), format!("arg{i}")]
                .into_iter()
                .find(|k| own.contains_key(k) || shared.contains_key(k));
            let Some(key) = key else {
                list.push(None);
                continue;
            };
            let (t, path) = match own.remove(&key) {
                Some(found) => found,
                None if last => shared.remove(&key).expect("found above"),
                None => shared[&key].clone(),
            };
            list.push(Some(convert_integers(t, shape, name, &path)?));
        }
        for (unused, (_, path)) in &own {
            note!(
                "warning: {}: tensor '{unused}' matches no parameter and is ignored",
                path.display()
            )?;
        }
        lists.push(list);
    }
    for (unused, (_, path)) in &shared {
        note!(
            "warning: {}: tensor '{unused}' matches no parameter and is ignored",
            path.display()
        )?;
    }
    Ok(FileInputs {
        ranks: lists,
        read,
        names: params.iter().map(|(n, _)| n.clone()).collect(),
    })
}

/// A bundle's inputs: those the `--inputs` files hold, the others from
/// their roles (the model's initialization from `--seed`, zero optimizer
/// state, a synthetic batch), each rank's batch checked before it runs.
fn bundle_inputs(
    a: &Args,
    bundle: &OpenedBundle,
    params: &[(String, hlatc::compiler::Shape)],
    ranks: usize,
) -> Result<Vec<Vec<Literal>>, Error> {
    let given = inputs_from_files(&a.inputs, params, ranks)?;
    let made_up: Vec<&str> = bundle
        .inputs
        .iter()
        .zip(&given.ranks[0])
        .filter(|(_, t)| t.is_none())
        .map(|(s, _)| s.name.as_str())
        .collect();
    let lists = if made_up.is_empty() {
        given.all_given()?
    } else {
        if a.inputs.is_empty() {
            note!(
                "no --inputs: every input from its role (parameters initialized as the model's init policy says, from seed {}; Adam moments, gradient accumulators and the step counter zero; batch 0 of the synthetic language, and its count of targets as token_count)",
                a.seed
            )?;
        } else {
            note!(
                "{} input(s) the --inputs files do not hold, made up from their roles (seed {}): {}",
                made_up.len(),
                a.seed,
                abbreviated(&made_up)
            )?;
        }
        let initial = bundle.initial_inputs(a.seed)?;
        given
            .ranks
            .into_iter()
            .zip(initial)
            .map(|(list, init)| {
                list.into_iter()
                    .zip(init)
                    .map(|(t, i)| t.unwrap_or(i))
                    .collect()
            })
            .collect()
    };
    for (rank, list) in lists.iter().enumerate() {
        bundle.check_batch(list).map_err(|source| match ranks {
            1 => Error::from(source),
            _ => Error::RankInputs {
                rank,
                source: Box::new(source),
            },
        })?;
    }
    Ok(lists)
}

/// `names`, the first few of a long list and how many more.
fn abbreviated(names: &[&str]) -> String {
    const SHOWN: usize = 6;
    match names.len() {
        n if n <= SHOWN => names.join(", "),
        n => format!("{}, and {} more", names[..SHOWN].join(", "), n - SHOWN),
    }
}

/// An integer tensor of another integer type than the parameter's (torch
/// writes token ids as int64) becomes the parameter's type when every value
/// fits; the first that does not is named.
fn convert_integers(
    t: Literal,
    shape: &hlatc::compiler::Shape,
    name: &str,
    path: &Path,
) -> Result<Literal, Error> {
    let Some(want) = shape.as_array() else {
        return Ok(t);
    };
    if t.ty() == want.ty || !t.ty().is_integer() || !want.ty.is_integer() {
        return Ok(t);
    }
    let (lo, hi) = want.ty.integer_range().expect("an integer type");
    let values: Vec<hlatc::compiler::Scalar> = (0..t.element_count()).map(|i| t.get(i)).collect();
    for (i, v) in values.iter().enumerate() {
        let x: i128 = match *v {
            hlatc::compiler::Scalar::UInt(u) => u.into(),
            hlatc::compiler::Scalar::Int(s) => s.into(),
            _ => unreachable!("integers"),
        };
        if x < lo || x > hi {
            return Err(Error::out_of_range(format!(
                "{}: tensor '{name}' element {i} is {x}, which does not fit the parameter's {}",
                path.display(),
                want.ty
            )));
        }
    }
    Literal::from_scalars(want.ty, t.dims().to_vec(), &values).map_err(|source| Error::Tensor {
        what: format!("{}: tensor '{name}'", path.display()),
        source,
    })
}

/// Compares one rank's outputs with `path`, each mismatch noted after
/// `prefix`: the worst error relative to each output's largest magnitude,
/// or `None` when any differs.
fn compare(
    path: &Path,
    names: &[String],
    outputs: &[Literal],
    rtol: f64,
    atol: Option<f64>,
    prefix: &str,
) -> Result<Option<f64>, Error> {
    let expected: BTreeMap<String, Literal> = read_safetensors(path)?;
    if expected.len() != outputs.len() {
        note!(
            "{prefix}mismatch: {} holds {} tensors, the module returned {} outputs",
            path.display(),
            expected.len(),
            outputs.len()
        )?;
        return Ok(None);
    }
    let mut failed = 0;
    let mut worst_rel: f64 = 0.0;
    for (name, got) in names.iter().zip(outputs) {
        let Some(e) = expected.get(name) else {
            note!(
                "{prefix}mismatch: {} has no tensor '{name}'",
                path.display()
            )?;
            failed += 1;
            continue;
        };
        let scale = max_abs(e);
        match assert_close(e, got, rtol, atol.unwrap_or(rtol * scale)) {
            Ok(stats) => {
                worst_rel = worst_rel.max(if scale > 0.0 {
                    stats.max_abs / scale
                } else {
                    0.0
                })
            }
            Err(m) => {
                note!("{prefix}mismatch in {name}: {m}")?;
                failed += 1;
            }
        }
    }
    if failed > 0 {
        note!(
            "{prefix}{failed} of {} outputs differ from {}",
            outputs.len(),
            path.display()
        )?;
        return Ok(None);
    }
    Ok(Some(worst_rel))
}

/// `f32[2,3] mean 0.1 min -1 max 2 [0.5, 1, ...]`, or the value of a scalar.
/// A complex tensor is summarized by its elements' magnitudes.
fn summarize(l: &Literal) -> String {
    let parts = l.to_f64_vec();
    let (v, of): (Vec<f64>, &str) = if l.ty().is_complex() {
        let magnitudes = parts.chunks_exact(2).map(|z| z[0].hypot(z[1]));
        (magnitudes.collect(), " |z|")
    } else {
        (parts, "")
    };
    let shape = format!(
        "{}[{}]",
        l.ty(),
        l.dims()
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    if v.len() == 1 {
        return format!("{shape:<16} = {}", l.element_string(0));
    }
    if v.is_empty() {
        return format!("{shape:<16} (empty)");
    }
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let head: Vec<String> = (0..v.len().min(4)).map(|i| l.element_string(i)).collect();
    let non_finite = v.len() - finite.len();
    format!(
        "{shape:<16}{of} mean {mean:.6} min {min:.6} max {max:.6}{} [{}{}]",
        if non_finite > 0 {
            format!(" ({non_finite} non-finite)")
        } else {
            String::new()
        },
        head.join(", "),
        if v.len() > 4 { ", ..." } else { "" }
    )
}
