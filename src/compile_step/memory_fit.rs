//! When a rank's plan does not fit its device: the refusal, with the
//! numbers and the smallest change to the layout that fits.
//!
//! Changes are tried from the cheapest to the dearest, each by building
//! and planning the step it gives (the plan measures what the remat pass
//! keeps, so it cannot be scaled by hand): ZeRO-1 (free: the same
//! communication), the remat policy that keeps least (compute: whole
//! layers recomputed, or under pipeline parallelism each stage's forward
//! run again from its input, `--remat stage`), FSDP in ZeRO-1's place,
//! under FSDP the weights resharded after the forward (`--reshard
//! always`: a second gather of each), more DP replicas with the
//! per-replica batch kept (more devices, same work per device; each
//! doubling first as it is, then with the least-keeping policy, since
//! devices cost more than a third more compute), then more TP. The first
//! that fits is the advice.

use super::{compile_step, CompileOptions, OptionChange};
use hlatc_passes::RematPolicy;
use hlatc_step::memory_plan::{gib, DeviceMemory, MemoryPlan};

/// How many doublings of DP and TP are tried.
const DOUBLINGS: u32 = 6;

/// A change of the options that fits, and a rank's bytes under it.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    pub change: OptionChange,
    pub per_rank: u64,
}

impl Fit {
    /// `--remat full-layer --zero1 (13.91 GiB per rank)`.
    pub fn flags(&self) -> String {
        format!("{} ({} per rank)", self.change.flags(), gib(self.per_rank))
    }

    /// `remat='full-layer', zero1=True (13.91 GiB per rank)`.
    pub fn keywords(&self) -> String {
        format!(
            "{} ({} per rank)",
            self.change.keywords(),
            gib(self.per_rank)
        )
    }
}

/// The first change to `o` whose plan fits `limit` bytes, written from
/// the options the change builds ([`CompileOptions::change_from`]).
pub fn smallest_fit(o: &CompileOptions, batch_size: i64, limit: u64) -> Option<Fit> {
    changes(o, batch_size).into_iter().find_map(|c| {
        let plan = plan_of(&c)?;
        (plan.total() <= limit).then(|| Fit {
            change: c.change_from(o),
            per_rank: plan.total(),
        })
    })
}

/// The plan of the step `o` builds, or `None` when it cannot be built (a
/// degree the model does not divide).
fn plan_of(o: &CompileOptions) -> Option<MemoryPlan> {
    let o = CompileOptions {
        device_memory: DeviceMemory::Unchecked,
        ..o.clone()
    };
    compile_step(&o).ok().map(|c| c.memory)
}

/// The changes worth trying, cheapest first.
fn changes(o: &CompileOptions, batch_size: i64) -> Vec<CompileOptions> {
    let par = o.parallel;
    let mut out = Vec::new();
    let mut push = |f: &dyn Fn(&mut CompileOptions)| {
        let mut options = o.clone();
        f(&mut options);
        out.push(options);
    };
    // ZeRO-1 (and FSDP in its place) only where the replicas do not
    // divide the state already: under FSDP either would be refused or the
    // layout given again.
    let zero1 = par.replicas() > 1 && !par.shards_optimizer_state();
    let least = match par.pp > 1 {
        true => RematPolicy::Stage,
        false => RematPolicy::FullLayer,
    };
    let remat = o.remat != least;
    if zero1 {
        push(&|c| c.parallel.zero1 = true);
    }
    if remat {
        push(&|c| c.remat = least);
    }
    if zero1 && remat {
        push(&|c| {
            c.parallel.zero1 = true;
            c.remat = least;
        });
    }
    // FSDP divides the weights too, for a gather of them every step (every
    // tick under --pp).
    let fsdp = zero1 && par.dp > 1;
    if fsdp {
        push(&|c| c.parallel.fsdp = par.dp);
    }
    if fsdp && remat {
        push(&|c| {
            c.parallel.fsdp = par.dp;
            c.remat = least;
        });
    }
    // Under FSDP without stages, the gathered weights freed after the
    // forward: one unit alive at a time, for a second gather.
    if par.shards_weights() && !par.reshards() && par.pp == 1 {
        push(&|c| c.parallel.reshard = hlatc_models::Reshard::Always);
    }
    for k in 1..=DOUBLINGS {
        for recompute in [false, true] {
            if recompute && !remat {
                continue;
            }
            let (dp, batch) = (par.dp << k, batch_size << k);
            push(&|c| {
                c.parallel.dp = dp;
                // The replicas divide the state as they already do.
                match par.shards_weights() {
                    true => c.parallel.fsdp = dp,
                    false => c.parallel.zero1 = true,
                }
                c.batch_size = Some(batch);
                if recompute {
                    c.remat = least;
                }
            });
        }
    }
    for k in 1..=DOUBLINGS {
        let tp = par.tp << k;
        push(&|c| c.parallel.tp = tp);
    }
    out
}
