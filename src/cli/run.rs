//! `hlatc run`: execute a module on XLA CPU.

use super::console::{note, out};
use hlatc::runtime::{assert_close, inputs, max_abs, read_safetensors, write_safetensors, Runtime};
use hlatc::{Error, Literal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Run a module on XLA's CPU backend through PJRT.
///
/// Inputs are taken from --inputs by parameter name, or by position as
/// arg0, arg1, ... . Without --inputs, every parameter gets deterministic
/// pseudo-random values from --seed: floats uniform in [-1, 1), integers in
/// [0, 16), random booleans. Each output's shape, dtype and a summary are
/// printed; outputs are named out0, out1, ... (the elements of a tuple
/// result, in order).
#[derive(clap::Args)]
pub struct Args {
    /// Module to run (HLO text or HloModuleProto)
    module: PathBuf,
    /// Safetensors file with the inputs
    #[arg(long, value_name = "FILE")]
    inputs: Option<PathBuf>,
    /// Write every output to this safetensors file
    #[arg(long, value_name = "FILE")]
    outputs: Option<PathBuf>,
    /// Seed for generated inputs (ignored with --inputs)
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Compare the outputs with the tensors out0, out1, ... in this
    /// safetensors file; exit with status 1 on a mismatch
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// Relative tolerance for --expect
    #[arg(long, default_value_t = 1e-5)]
    rtol: f64,
    /// Absolute tolerance for --expect [default: rtol times the largest
    /// magnitude in that expected output]
    #[arg(long)]
    atol: Option<f64>,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
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
    let module = hlatc::load_module(&a.module)?;
    let rt = Runtime::new()?;
    let t0 = Instant::now();
    let in_file = |source| Error::RunModule {
        path: a.module.clone(),
        source,
    };
    hlatc::runtime::host_memory::ensure_fits(
        &format!("running '{}' (its inputs and outputs)", module.name),
        hlatc::runtime::host_memory::module_bytes(&module),
    )
    .map_err(|m| in_file(hlatc::runtime::RuntimeError::HostMemory(m)))?;
    let program = rt.compile(&module).map_err(in_file)?;
    let compile_time = t0.elapsed();
    let args = match &a.inputs {
        Some(path) => inputs_from_file(path, program.parameters())?,
        None => {
            let mut rng = inputs::SplitMix64::new(a.seed);
            program
                .parameters()
                .iter()
                .map(|(_, s)| {
                    inputs::random_literal(
                        s.as_array().expect("compile rejects tuple parameters"),
                        &mut rng,
                    )
                })
                .collect()
        }
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
    for (i, o) in outputs.iter().enumerate() {
        out!("out{i}  {}", summarize(o))?;
    }
    if let Some(path) = &a.outputs {
        let named: Vec<(String, Literal)> = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| (format!("out{i}"), o.clone()))
            .collect();
        write_safetensors(path, &named)?;
        note!("wrote {} output(s) to {}", named.len(), path.display())?;
    }
    if let Some(path) = &a.expect {
        return compare(path, &outputs, a.rtol, a.atol);
    }
    Ok(ExitCode::SUCCESS)
}

fn inputs_from_file(
    path: &Path,
    params: &[(String, hlatc::compiler::Shape)],
) -> Result<Vec<Literal>, Error> {
    let mut tensors = read_safetensors(path)?;
    let mut out = Vec::with_capacity(params.len());
    let mut missing = Vec::new();
    for (i, (name, _)) in params.iter().enumerate() {
        match tensors
            .remove(name)
            .or_else(|| tensors.remove(&format!("arg{i}")))
        {
            Some(t) => out.push(t),
            None => missing.push(format!("'{name}' (or 'arg{i}')")),
        }
    }
    if !missing.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no tensor for parameter {}",
            path.display(),
            missing.join(", ")
        )));
    }
    for unused in tensors.keys() {
        note!(
            "warning: {}: tensor '{unused}' matches no parameter and is ignored",
            path.display()
        )?;
    }
    Ok(out)
}

fn compare(
    path: &Path,
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
    for (i, got) in outputs.iter().enumerate() {
        let name = format!("out{i}");
        let Some(e) = expected.get(&name) else {
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
fn summarize(l: &Literal) -> String {
    let v = l.to_f64_vec();
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
        "{shape:<16} mean {mean:.6} min {min:.6} max {max:.6}{} [{}{}]",
        if non_finite > 0 {
            format!(" ({non_finite} non-finite)")
        } else {
            String::new()
        },
        head.join(", "),
        if v.len() > 4 { ", ..." } else { "" }
    )
}
