//! `hlatc opt`: run passes by name over a module, like XLA's `hlo-opt`.

use super::console::note;
use hlatc::compile_step::parse_name;
use hlatc::passes::{default_pipeline, pipeline_from_names, PassContext, RoundingPolicy};
use hlatc::precision::Precision;
use hlatc::{Error, Format};
use std::path::PathBuf;
use std::process::ExitCode;

/// Run optimization passes over a module and print the result.
///
/// Without --passes the target's default pipeline runs (see `hlatc
/// passes`); with it, exactly the passes named, in that order. The module
/// is verified before the first pass and after every pass, and the first
/// broken invariant stops the pipeline with the pass's name. A per-pass
/// summary (changed or not, instruction counts, time) and what the passes
/// noted go to standard error.
///
/// On --target neuron the default pipeline also rewrites what neuronx-cc
/// refuses where a faithful form exists: f64 computed in f32
/// (narrow-f64, which makes f64 parameters and outputs f32 and says so in
/// its note), small conditionals as selects (conditional-to-select) and
/// top-k sorts as AwsNeuronTopK (sort-to-topk).
///
/// The remat pass finds its regions by hlatc's provenance scopes
/// (metadata.op_name); on a module without them (a JAX or torch-xla dump)
/// it notes that nothing matched and leaves the module alone.
///
/// `amp` casts by --precision (fp32 here, so nothing unless asked):
/// `hlatc opt --passes amp --precision bf16-mixed m.hlo` puts the dots in
/// bf16 with f32 accumulation. In a module without provenance scopes only
/// the per-opcode rules apply (see `hlatc passes`). On --target cpu,
/// annotate-rounding lowers stochastic converts and adds an RNG-state
/// parameter and output.
///
/// --bind NAME=FILE.safetensors turns the entry parameter NAME into the
/// constant the file holds (the tensor named NAME, or the file's only
/// tensor), checked against the parameter's shape and type, before the
/// passes run: a causal mask that arrives as a parameter can then be
/// folded. The parameter stays in the signature, unread, unless
/// --drop-unused-parameters removes it (the new signature is printed).
#[derive(clap::Args)]
pub struct Args {
    /// Module to optimize (HLO text or HloModuleProto)
    #[arg(required_unless_present = "list_passes")]
    file: Option<PathBuf>,
    /// Comma-separated pass names, e.g. --passes=cse,dce (default: the
    /// target's default pipeline)
    #[arg(long, value_delimiter = ',')]
    passes: Vec<String>,
    /// Leave this pass out of the default pipeline (repeatable)
    #[arg(long, value_name = "NAME", conflicts_with = "passes")]
    disable_pass: Vec<String>,
    /// Which compiler the output is for: neuron allows Neuron custom calls
    #[arg(long, value_enum, default_value = "cpu")]
    target: super::compile::TargetArg,
    /// Bind an entry parameter to a tensor: NAME=FILE.safetensors
    #[arg(long, value_name = "NAME=FILE")]
    bind: Vec<String>,
    /// Remove entry parameters nothing reads, renumbering the rest
    #[arg(long)]
    drop_unused_parameters: bool,
    /// Write here (format by extension) instead of text to standard output
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Dump the module before and after every pass into this directory
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// List the available passes and exit (same as `hlatc passes`)
    #[arg(long)]
    list_passes: bool,
    #[command(flatten)]
    remat: super::compile::RematArg,
    /// Precision the `amp` pass casts to: fp32 (the default here: an
    /// imported module keeps its precision unless asked), bf16-mixed,
    /// bf16-pure or bf16-master (the same cast policy; they differ only in
    /// how a step hlatc builds stores its state), or mxfp8 (that policy with
    /// every dot's operands in MXFP8 blocks along its contracting dimension,
    /// where it divides into blocks of 32: plain HLO on cpu, neuronx-cc's
    /// QuantizeMX and block-scaled dot on neuron, which trn3 alone takes)
    #[arg(long, value_name = "PRESET", default_value = "fp32", value_parser = parse_name::<Precision>)]
    precision: hlatc::precision::Precision,
    /// Which converts to bf16 `annotate-rounding` rounds stochastically:
    /// state-updates (converts that write an aliased output; the default),
    /// sr (all) or rne (none)
    #[arg(long, value_name = "POLICY", default_value = "state-updates", value_parser = parse_name::<RoundingPolicy>)]
    rounding: hlatc::passes::RoundingPolicy,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    if a.list_passes {
        return super::passes::list();
    }
    if a.remat.policy.needs_stages() {
        return Err(Error::unsupported(format!(
            "--remat {} keeps a pipeline stage's input, which only hlatc's own tick programs have \
             (compile or train with --pp); the remat pass over a module takes none, core-attention or full-layer",
            a.remat.policy
        )));
    }
    let file = a.file.expect("clap requires FILE without --list-passes");
    let mut module = super::load(&file)?;
    for b in &a.bind {
        let (name, path) = b
            .split_once('=')
            .ok_or_else(|| Error::invalid(format!("--bind {b}: expected NAME=FILE.safetensors")))?;
        let lit = hlatc::read_bound_tensor(std::path::Path::new(path), name)?;
        hlatc::passes::bind::bind_parameter(&mut module, name, lit).map_err(|source| {
            Error::Bind {
                path: file.clone(),
                source,
            }
        })?;
        note!("bound parameter '{name}' to {path}")?;
    }
    let target = a.target.into();
    let mut pipeline = if a.passes.is_empty() {
        default_pipeline(target, &a.disable_pass)?
    } else {
        pipeline_from_names("opt", &a.passes)?
    };
    if let Some(d) = a.dump_dir {
        pipeline.dump_to(d);
    }
    let mut ctx = PassContext::new(target);
    ctx.remat = a.remat.policy;
    ctx.cast = a.precision.cast_policy();
    ctx.rounding = a.rounding;
    let report = pipeline
        .run_module(&mut module, &mut ctx)
        .map_err(|source| Error::PassOn {
            path: file.clone(),
            source,
        })?;
    super::pass_report::print_report(&report)?;
    if a.drop_unused_parameters {
        let dropped = hlatc::passes::bind::drop_unused_parameters(&mut module);
        for d in &dropped {
            note!("dropped unused parameter '{d}'")?;
        }
        note!(
            "signature: ({})",
            module
                .entry()
                .parameters()
                .iter()
                .map(|&p| format!(
                    "{}: {}",
                    module.entry().instr(p).name,
                    module.entry().instr(p).shape
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    let format = a.output.as_deref().map_or(Format::Text, Format::from_path);
    super::write_module(a.output.as_ref(), &module, format)?;
    Ok(ExitCode::SUCCESS)
}
