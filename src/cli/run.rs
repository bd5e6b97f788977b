//! `hlatc run`: execute a module on XLA CPU.

use super::console::{note, out};
use hlatc::runtime::{assert_close, inputs, max_abs, read_safetensors, write_safetensors, Runtime};
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
/// Without --inputs, every parameter gets deterministic pseudo-random values
/// from --seed: floats (and both parts of a complex value) uniform in
/// [-1, 1), integers in [0, 16) and within their type (s4 in [0, 8)),
/// random booleans. Each output's shape, dtype and a summary are printed
/// (a complex output's by its elements' magnitudes).
///
/// Outputs are named out0, out1, ... (the elements of a tuple result, in
/// order). For a bundle directory they carry the manifest's names instead
/// (loss, grad_norm, learning_rate, then each parameter, moment and the step
/// by the name of the input it updates), so `--outputs` of one step is the
/// state `--inputs` of the next.
#[derive(clap::Args)]
pub struct Args {
    /// Module to run (HLO text or HloModuleProto), or a bundle directory
    /// from `hlatc compile`
    module: PathBuf,
    /// Safetensors file with inputs; repeat it to take them from several
    /// files (state and batch, say)
    #[arg(long, value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Write every output to this safetensors file
    #[arg(long, value_name = "FILE")]
    outputs: Option<PathBuf>,
    /// Seed for generated inputs (ignored with --inputs)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compare the outputs with the tensors of the same names (out0, out1,
    /// ..., or a bundle's output names) in this safetensors file; exit with
    /// status 1 on a mismatch
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
    #[arg(long)]
    one_device: bool,
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
    let (module_path, output_names) = resolve_module(&a.module)?;
    let mut module = super::load(&module_path)?;
    adjust_module(&a, &mut module)?;
    let outputs = execute(&a, &module, &module_path)?;
    report_outputs(&a, output_names, &outputs)
}

/// Tolerances and the output path, refused before anything runs.
fn check_flags(a: &Args) -> Result<(), Error> {
    if !(a.rtol.is_finite() && a.rtol >= 0.0) {
        return Err(Error::Usage(format!(
            "--rtol must be a finite number >= 0, got {}",
            a.rtol
        )));
    }
    if let Some(atol) = a.atol.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        return Err(Error::Usage(format!(
            "--atol must be a finite number >= 0, got {atol}"
        )));
    }
    if let Some(path) = &a.outputs {
        hlatc::runtime::atomic_file::check_writable(path)
            .map_err(|m| Error::Usage(format!("--outputs {}: {m}", path.display())))?;
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
/// inputs drawn from `--seed`.
fn execute(a: &Args, module: &Module, module_path: &Path) -> Result<Vec<Literal>, Error> {
    let rt = Runtime::new()?;
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
    let args = match a.inputs.as_slice() {
        [] => {
            let mut rng = inputs::SplitMix64::new(a.seed);
            program
                .parameters()
                .iter()
                .map(|(_, s)| {
                    inputs::random_literal(
                        s.as_array().expect("compile takes only array parameters"),
                        &mut rng,
                    )
                })
                .collect()
        }
        files => inputs_from_files(files, program.parameters())?,
    };
    let t1 = Instant::now();
    let outputs = program.run(&args).map_err(in_file)?;
    let run_time = t1.elapsed();
    note!(
        "ran {} on {} ({}): compile {:.1} ms, execute {:.1} ms",
        module.name,
        rt.platform_name(),
        rt.plugin_path().display(),
        compile_time.as_secs_f64() * 1e3,
        run_time.as_secs_f64() * 1e3
    )?;
    Ok(outputs)
}

/// Prints each output, writes `--outputs` and compares with `--expect`.
fn report_outputs(
    a: &Args,
    output_names: Option<Vec<String>>,
    outputs: &[Literal],
) -> Result<ExitCode, Error> {
    // A bundle's names line up in a column; out0, out1, ... need none.
    let (names, width): (Vec<String>, usize) = match output_names {
        Some(names) if names.len() == outputs.len() => {
            let width = names.iter().map(String::len).max().unwrap_or(0);
            (names, width)
        }
        _ => ((0..outputs.len()).map(|i| format!("out{i}")).collect(), 0),
    };
    for (name, o) in names.iter().zip(outputs) {
        out!("{name:<width$}  {}", summarize(o))?;
    }
    if let Some(path) = &a.outputs {
        let named: Vec<(String, Literal)> =
            names.iter().cloned().zip(outputs.iter().cloned()).collect();
        write_safetensors(path, &named)?;
        note!("wrote {} output(s) to {}", named.len(), path.display())?;
    }
    if let Some(path) = &a.expect {
        return compare(path, &names, outputs, a.rtol, a.atol);
    }
    Ok(ExitCode::SUCCESS)
}

/// The module file of `path` and, for a bundle directory, its output names
/// from the manifest.
fn resolve_module(path: &Path) -> Result<(PathBuf, Option<Vec<String>>), Error> {
    if !path.is_dir() {
        return Ok((path.to_path_buf(), None));
    }
    let manifest_path = path.join(hlatc::bundle::MANIFEST_FILE);
    let manifest: serde_json::Value = std::fs::read_to_string(&manifest_path)
        .map_err(|e| Error::Io {
            path: manifest_path.clone(),
            message: format!("{e} (a directory to run must be a bundle from `hlatc compile`)"),
        })
        .and_then(|t| {
            serde_json::from_str(&t).map_err(|e| Error::Io {
                path: manifest_path.clone(),
                message: format!("not valid JSON: {e}"),
            })
        })?;
    let names = manifest["outputs"].as_array().map(|outs| {
        outs.iter()
            .filter_map(|o| o["name"].as_str().map(str::to_string))
            .collect()
    });
    Ok((path.join(hlatc::bundle::PROTO_FILE), names))
}

/// Each parameter's tensor, by name (or `argN`) from any of `files`.
fn inputs_from_files(
    files: &[PathBuf],
    params: &[(String, hlatc::compiler::Shape)],
) -> Result<Vec<Literal>, Error> {
    let mut tensors: BTreeMap<String, (Literal, &Path)> = BTreeMap::new();
    for path in files {
        for (name, t) in read_safetensors(path)? {
            if let Some((_, first)) = tensors.insert(name.clone(), (t, path)) {
                return Err(Error::Usage(format!(
                    "tensor '{name}' is in both {} and {}",
                    first.display(),
                    path.display()
                )));
            }
        }
    }
    let mut out = Vec::with_capacity(params.len());
    let mut missing = Vec::new();
    for (i, (name, shape)) in params.iter().enumerate() {
        match tensors
            .remove(name)
            .or_else(|| tensors.remove(&format!("arg{i}")))
        {
            Some((t, path)) => out.push(convert_integers(t, shape, name, path)?),
            None => missing.push(format!("'{name}' (or 'arg{i}')")),
        }
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "no tensor for parameter {} in {}",
            missing.join(", "),
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for (unused, (_, path)) in &tensors {
        note!(
            "warning: {}: tensor '{unused}' matches no parameter and is ignored",
            path.display()
        )?;
    }
    Ok(out)
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
            return Err(Error::Usage(format!(
                "{}: tensor '{name}' element {i} is {x}, which does not fit the parameter's {}",
                path.display(),
                want.ty
            )));
        }
    }
    Literal::from_scalars(want.ty, t.dims().to_vec(), &values)
        .map_err(|e| Error::Usage(format!("{}: tensor '{name}': {e}", path.display())))
}

fn compare(
    path: &Path,
    names: &[String],
    outputs: &[Literal],
    rtol: f64,
    atol: Option<f64>,
) -> Result<ExitCode, Error> {
    let expected: BTreeMap<String, Literal> = read_safetensors(path)?;
    if expected.len() != outputs.len() {
        note!(
            "mismatch: {} holds {} tensors, the module returned {} outputs",
            path.display(),
            expected.len(),
            outputs.len()
        )?;
        return Ok(ExitCode::FAILURE);
    }
    let mut failed = 0;
    let mut worst_rel: f64 = 0.0;
    for (name, got) in names.iter().zip(outputs) {
        let Some(e) = expected.get(name) else {
            note!("mismatch: {} has no tensor '{name}'", path.display())?;
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
                note!("mismatch in {name}: {m}")?;
                failed += 1;
            }
        }
    }
    if failed > 0 {
        note!(
            "{failed} of {} outputs differ from {}",
            outputs.len(),
            path.display()
        )?;
        return Ok(ExitCode::FAILURE);
    }
    out!(
        "all {} outputs match {} (worst error {:.2e} of the output's largest magnitude)",
        outputs.len(),
        path.display(),
        worst_rel
    )?;
    Ok(ExitCode::SUCCESS)
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
