//! `hlatc shard` and `hlatc unshard`: a training state as one file per
//! rank, and back.

use super::console::note;
use super::option_args::{OptionArgs, StateOptions};
use hlatc::compile_step::compile_step;
use hlatc::compile_step::CompiledStep;
use hlatc::memory_plan::DeviceMemory;
use hlatc::rank_checkpoint::params_from_tensors;
use hlatc::runtime::{
    read_safetensors, read_safetensors_metadata, write_safetensors_with_metadata,
};
use hlatc::state_metadata::{check_rank_files, StateMetadata};
use hlatc::state_shards::rank_file_name;
use hlatc::train_step::Role;
use hlatc::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The step whose state is divided: the flags `compile` takes to build it.
#[derive(clap::Args)]
pub struct StepArgs {
    /// The step's options, from the option table (as `hlatc compile`'s).
    #[command(flatten)]
    options: OptionArgs<StateOptions>,
}

/// Divide a training state into one safetensors file per rank.
///
/// The input is a `train --save-state` file (the whole state, by the step's
/// input names) or Hugging Face weights (safetensors; the run then starts
/// there: master weights the weights widened, Adam moments and the step
/// counter zero). DIR/rank-00000.safetensors ... hold each rank's share of
/// every state input, under the input's name and at the shape the rank's
/// program takes (a ZeRO-1 shard as the shard): what a runtime feeds the
/// step compiled with the same flags. `hlatc unshard` joins them back.
#[derive(clap::Args)]
pub struct ShardArgs {
    #[command(flatten)]
    step: StepArgs,
    /// The whole state (`train --save-state`) or Hugging Face weights
    #[arg(value_name = "FILE")]
    input: PathBuf,
    /// Folder for the rank files (created if needed)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Join per-rank state files (`hlatc shard`'s) back into the whole state.
///
/// Every rank file must hold exactly the state inputs of the step the flags
/// build, at its rank's shape; the output is the whole state by input name,
/// which `train --resume` reads and `hlatc shard` divides again for another
/// layout (give the other layout's flags).
#[derive(clap::Args)]
pub struct UnshardArgs {
    #[command(flatten)]
    step: StepArgs,
    /// The folder `hlatc shard` wrote
    #[arg(value_name = "DIR")]
    input: PathBuf,
    /// The whole state (safetensors)
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

impl StepArgs {
    /// The step as `compile` builds it (its signature is what matters).
    fn compiled(&self) -> Result<CompiledStep, Error> {
        let mut o = self.options.options().clone();
        // The batch does not change the state; one sequence per replica
        // keeps any --dp valid.
        o.batch_size = Some(o.batch_size.unwrap_or(o.parallel.dp));
        o.device_memory = DeviceMemory::Unchecked;
        compile_step(&o)
    }
}

/// The file of rank `r` in `dir`.
fn rank_file(dir: &Path, r: usize) -> PathBuf {
    dir.join(rank_file_name(r))
}

/// What a state file's metadata says (nothing for a file without it).
fn metadata_of(path: &Path) -> Result<Option<StateMetadata>, Error> {
    let source = path.display().to_string();
    Ok(match read_safetensors_metadata(path)? {
        Some(text) => Some(StateMetadata::from_json(&text, &source)?),
        None => None,
    })
}

/// Refuses an output folder that is a file, before any work.
fn check_out_dir(out: &Path) -> Result<(), Error> {
    if out.exists() && !out.is_dir() {
        return Err(Error::invalid(format!(
            "--out {}: is a file, not a directory (shard writes one file per rank into a folder)",
            out.display()
        )));
    }
    Ok(())
}

pub fn shard(a: ShardArgs) -> Result<ExitCode, Error> {
    check_out_dir(&a.out)?;
    let compiled = a.step.compiled()?;
    let division = compiled.state_of()?;
    let source = a.input.display().to_string();
    let input_meta = metadata_of(&a.input)?.unwrap_or_default();
    if input_meta.rank.is_some() {
        return Err(Error::invalid(format!(
            "{source}: holds one rank's state, not the whole state: join the ranks with `hlatc unshard` first"
        )));
    }
    let precision = a.step.options.options().precision.name();
    if let Some(holds) = input_meta.precision().filter(|&p| p != precision) {
        return Err(hlatc::state_metadata::StateMetadataError::OtherPrecision {
            path: source,
            holds: holds.to_string(),
            expected: precision.to_string(),
        }
        .into());
    }
    let tensors = read_safetensors(&a.input)?;
    let has_state = division
        .inputs()
        .iter()
        .any(|s| s.role == Role::Step && tensors.contains_key(&s.name));
    let per_rank = match has_state {
        true => division.shard_every_rank(tensors, &source)?,
        false => {
            let o = a.step.options.options();
            let (model, _) = o.model_config()?;
            let storage = o.precision.storage();
            let (params, unused) = params_from_tensors(&model, storage, tensors, &source)?;
            if let Some(u) = unused.first() {
                return Err(Error::invalid(format!(
                    "{source}: tensor '{u}' is neither a parameter of this model nor training state"
                )));
            }
            division.start_every_rank(params)?
        }
    };
    std::fs::create_dir_all(&a.out).map_err(|e| Error::io(&a.out, e))?;
    // Each file says whose it is, so a swapped or foreign file is refused.
    let (world, layout) = division.world();
    for (r, tensors) in per_rank.iter().enumerate() {
        let meta = StateMetadata {
            rank: Some(r),
            ranks: Some(world),
            layout: Some(layout.clone()),
            step: Some(input_meta.step.unwrap_or(0)),
            precision: Some(precision.to_string()),
            run_identity: input_meta.run_identity.clone(),
        };
        write_safetensors_with_metadata(&rank_file(&a.out, r), tensors, Some(&meta.to_json()))?;
    }
    note!(
        "wrote {} ranks' state ({} tensors each, {}) to {}",
        per_rank.len(),
        per_rank.first().map_or(0, Vec::len),
        division.world().1,
        a.out.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

pub fn unshard(a: UnshardArgs) -> Result<ExitCode, Error> {
    if a.input.exists() && !a.input.is_dir() {
        return Err(Error::invalid(format!(
            "{}: is a file, not a directory of rank files (`hlatc shard --out DIR` writes one)",
            a.input.display()
        )));
    }
    let compiled = a.step.compiled()?;
    let division = compiled.state_of()?;
    let (world, layout) = division.world();
    let source = |r: usize| rank_file(&a.input, r).display().to_string();
    // Whose each file is, checked before any tensor is read: a file of
    // another rank or layout is refused by name, not joined.
    let metadata = (0..world)
        .map(|r| match rank_file(&a.input, r) {
            f if f.is_file() => metadata_of(&f),
            // Missing: said when its tensors are read, after the layout.
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(recorded) = metadata.iter().flatten().find_map(|m| m.ranks) {
        if recorded != world {
            let m = metadata
                .iter()
                .flatten()
                .next()
                .cloned()
                .unwrap_or_default();
            return Err(Error::conflict(format!(
                "{}: holds the {recorded} rank files of {}, not the {world} of {layout}: give \
                 unshard the flags of the layout it was written with",
                a.input.display(),
                m.layout.as_deref().unwrap_or("another layout"),
            )));
        }
    }
    check_rank_files(
        &metadata,
        &layout,
        a.step.options.options().precision.name(),
        source,
    )?;
    let per_rank = (0..world)
        .map(|r| read_safetensors(&rank_file(&a.input, r)))
        .collect::<Result<Vec<_>, _>>()?;
    if rank_file(&a.input, world).exists() {
        return Err(Error::conflict(format!(
            "{}: holds more than the {world} ranks' files of {layout}",
            a.input.display(),
        )));
    }
    let whole = division.gather_state(per_rank, source)?;
    let first = metadata.iter().flatten().next();
    let meta = first.map(|m| StateMetadata::whole(m.step.unwrap_or(0), m.run_identity.clone()));
    write_safetensors_with_metadata(&a.out, &whole, meta.map(|m| m.to_json()).as_deref())?;
    note!(
        "joined {world} ranks' state into {} ({} tensors)",
        a.out.display(),
        whole.len()
    )?;
    Ok(ExitCode::SUCCESS)
}
