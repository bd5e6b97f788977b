//! Pipelines are passes, so they nest. Each runs its passes in order, runs
//! its invariant checkers after every one, and records what each did in the
//! context. [`Fixpoint`] repeats a pass until it stops changing the module,
//! with an iteration cap, like XLA's `HloPassFix`.

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use crate::infra::report::{PassRun, PipelineReport};
use hlatc_compiler::{formats::text, verify, Module, VerifyError};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A property every module between passes must have. A failure says where
/// in the module and what, as the verifier's do.
#[derive(Clone, Copy)]
pub struct Checker {
    pub name: &'static str,
    pub check: fn(&Module) -> Result<(), VerifyError>,
}

impl Checker {
    /// The verifier: shapes, operands, names, callees, aliasing.
    pub const VERIFIER: Checker = Checker {
        name: "verifier",
        check: verify,
    };
}

/// The first checker `m` fails, by name, with what it found.
/// Boxed, as the [`PassError`] it goes into holds it: that error travels
/// on every path.
fn first_failure(checkers: &[Checker], m: &Module) -> Result<(), (&'static str, Box<VerifyError>)> {
    checkers
        .iter()
        .try_for_each(|c| (c.check)(m).map_err(|e| (c.name, Box::new(e))))
}

/// `checkers` when the outermost pipeline checks after every pass, else none.
fn per_pass<'a>(ctx: &PassContext, checkers: &'a [Checker]) -> &'a [Checker] {
    if ctx.check_each_pass {
        checkers
    } else {
        &[]
    }
}

/// Runs `f` with `name` pushed on the context's scope, so the runs inside
/// are reported under it; the scope is restored on error too.
fn in_scope<T>(ctx: &mut PassContext, name: &str, f: impl FnOnce(&mut PassContext) -> T) -> T {
    ctx.scope.push(name.to_string());
    let result = f(ctx);
    ctx.scope.pop();
    result
}

/// Runs `pass`, then every checker, and records the run in `ctx`, reserving
/// its place first so a pipeline is listed before what runs inside it.
fn run_checked(
    pass: &dyn Pass,
    checkers: &[Checker],
    module: &mut Module,
    ctx: &mut PassContext,
) -> Result<bool, PassError> {
    let slot = ctx.runs.len();
    let mut path = ctx.scope.clone();
    path.push(pass.name().to_string());
    ctx.runs.push(PassRun {
        pass: path.join("/"),
        depth: ctx.scope.len(),
        changed: false,
        instructions_before: module.instruction_count(),
        instructions_after: 0,
        time: Duration::ZERO,
    });
    let t = Instant::now();
    let outer_lent = std::mem::replace(&mut ctx.names_lent, false);
    let result = pass.run(module, ctx);
    let time = t.elapsed();
    // A pass that changed the module without the shared name index may
    // have added names it does not hold.
    if !matches!(result, Ok(false)) && !ctx.names_lent {
        ctx.names = None;
    }
    ctx.names_lent |= outer_lent;
    let changed = result?;
    if changed && module.is_scheduled {
        // The rewriter appends what it adds, so the order is no schedule.
        module.is_scheduled = false;
        ctx.note(
            pass.name(),
            "changed a scheduled module; its schedule is dropped (is_scheduled=false)",
        );
    }
    // A pass that changed nothing leaves the module the checkers passed
    // last: checking it again is most of a planner search's time (60%, a
    // thousand compiles). A pass that changes the module but says it did
    // not is still caught, by the next check or the pipeline's last.
    if changed {
        first_failure(checkers, module).map_err(|(checker, source)| PassError::BrokeModule {
            pass: pass.name().to_string(),
            checker,
            source,
        })?;
    }
    let run = &mut ctx.runs[slot];
    run.changed = changed;
    run.instructions_after = module.instruction_count();
    run.time = time;
    Ok(changed)
}

/// When a pipeline runs its checkers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckPolicy {
    /// After every pass (and every fixpoint round): a broken invariant is
    /// blamed on the pass that broke it.
    EachPass,
    /// Once, after the last pass: what a release `compile` does, since the
    /// verifier costs about as much as a pass. Like XLA's
    /// `AddInvariantCheckerDebug`, the per-pass checks are for debug builds
    /// and for asking.
    End,
}

impl CheckPolicy {
    /// Each pass in debug builds (tests), the end in release builds.
    pub fn for_build() -> CheckPolicy {
        if cfg!(debug_assertions) {
            CheckPolicy::EachPass
        } else {
            CheckPolicy::End
        }
    }
}

/// Passes in order, with checkers after each.
pub struct Pipeline {
    name: String,
    passes: Vec<Box<dyn Pass>>,
    checkers: Vec<Checker>,
    policy: CheckPolicy,
    dump_dir: Option<PathBuf>,
}

impl Pipeline {
    /// An empty pipeline that runs the verifier after every pass.
    pub fn new(name: impl Into<String>) -> Self {
        Pipeline {
            name: name.into(),
            passes: Vec::new(),
            checkers: vec![Checker::VERIFIER],
            policy: CheckPolicy::EachPass,
            dump_dir: None,
        }
    }

    /// When the checkers run; [`CheckPolicy::EachPass`] unless set.
    pub fn check_policy(&mut self, policy: CheckPolicy) -> &mut Self {
        self.policy = policy;
        self
    }

    pub fn add(&mut self, pass: Box<dyn Pass>) -> &mut Self {
        self.passes.push(pass);
        self
    }

    pub fn with(mut self, pass: Box<dyn Pass>) -> Self {
        self.passes.push(pass);
        self
    }

    pub fn add_checker(&mut self, c: Checker) -> &mut Self {
        self.checkers.push(c);
        self
    }

    /// Writes `NN-<pass>.before.hlo` / `.after.hlo` into `dir` for every
    /// pass directly inside.
    pub fn dump_to(&mut self, dir: PathBuf) -> &mut Self {
        self.dump_dir = Some(dir);
        self
    }

    /// This pipeline as a pass, to nest in another.
    pub fn into_boxed(self) -> Box<dyn Pass> {
        Box::new(self)
    }

    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// The names of the passes directly inside, in order.
    pub fn pass_names(&self) -> Vec<&str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// The registry names of the passes directly inside, in order: what
    /// [`crate::pipeline_from_names`] takes to build this pipeline again.
    pub fn registered_names(&self) -> Vec<&str> {
        self.passes.iter().map(|p| p.registered_name()).collect()
    }

    /// Runs the pipeline as the outermost one: checks the input first, and
    /// returns the runs of the passes inside (not the pipeline itself) and
    /// what they noted.
    pub fn run_module(
        &self,
        module: &mut Module,
        ctx: &mut PassContext,
    ) -> Result<PipelineReport, PassError> {
        if !self.keeps_dynamic_dimensions() {
            refuse_dynamic_dimensions(module)?;
        }
        // Checked after every pass, a broken input must not be blamed on
        // the first pass. Checked once at the end (release `compile`, whose
        // input the builder checked as it went), the end check covers it.
        if self.policy == CheckPolicy::EachPass {
            first_failure(&self.checkers, module).map_err(|(checker, source)| {
                PassError::InvalidInput {
                    entry: module.entry().name.clone(),
                    checker,
                    source,
                }
            })?;
        }
        let (runs0, notes0) = (ctx.runs.len(), ctx.notes().len());
        let saved = std::mem::replace(
            &mut ctx.check_each_pass,
            self.policy == CheckPolicy::EachPass,
        );
        let result = self.run_passes(module, ctx);
        ctx.check_each_pass = saved;
        result?;
        // The last check: under `End` the only one; under `EachPass` it
        // catches a pass that changed the module but said it did not (a
        // pass that says so is not checked after).
        let last = self
            .pass_names()
            .last()
            .map_or("(none)".to_string(), |s| s.to_string());
        first_failure(&self.checkers, module).map_err(|(checker, source)| {
            PassError::BrokeModule {
                pass: format!("{} (checked after the last pass, {last})", self.name),
                checker,
                source,
            }
        })?;
        Ok(PipelineReport {
            runs: ctx.runs[runs0..].to_vec(),
            notes: ctx.notes()[notes0..].to_vec(),
        })
    }

    fn run_passes(&self, module: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for (i, pass) in self.passes.iter().enumerate() {
            self.dump(i, pass.name(), "before", module)?;
            let checkers = per_pass(ctx, &self.checkers);
            changed |= run_checked(pass.as_ref(), checkers, module, ctx)?;
            self.dump(i, pass.name(), "after", module)?;
        }
        Ok(changed)
    }

    fn dump(&self, index: usize, pass: &str, when: &str, m: &Module) -> Result<(), PassError> {
        let Some(dir) = &self.dump_dir else {
            return Ok(());
        };
        let path = dir.join(format!("{:02}-{pass}.{when}.hlo", index + 1));
        std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&path, text::print_module(m)))
            .map_err(|source| PassError::Dump {
                pass: pass.to_string(),
                path,
                source,
            })
    }
}

impl Pass for Pipeline {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, module: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        in_scope(ctx, &self.name, |ctx| self.run_passes(module, ctx))
    }

    fn keeps_dynamic_dimensions(&self) -> bool {
        self.passes.iter().all(|p| p.keeps_dynamic_dimensions())
    }
}

/// Runs a pass until it reports no change, at most `max_iterations` times;
/// a pass still changing the module then is an error, not a silent stop.
pub struct Fixpoint {
    name: String,
    pass: Box<dyn Pass>,
    max_iterations: usize,
}

impl Fixpoint {
    pub const DEFAULT_ITERATIONS: usize = 8;

    pub fn new(pass: Box<dyn Pass>, max_iterations: usize) -> Self {
        Fixpoint {
            name: format!("fixpoint({})", pass.name()),
            pass,
            max_iterations,
        }
    }
}

impl Pass for Fixpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn registered_name(&self) -> &str {
        self.pass.registered_name()
    }

    fn keeps_dynamic_dimensions(&self) -> bool {
        self.pass.keeps_dynamic_dimensions()
    }

    fn run(&self, module: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        in_scope(ctx, &self.name, |ctx| {
            for i in 0..self.max_iterations {
                let checkers = per_pass(ctx, &[Checker::VERIFIER]);
                if !run_checked(self.pass.as_ref(), checkers, module, ctx)? {
                    return Ok(i > 0);
                }
            }
            Err(PassError::NoFixpoint {
                pass: self.pass.name().to_string(),
                iterations: self.max_iterations,
            })
        })
    }
}

/// Most passes build instructions from shape inference, which gives bounds
/// and not which dimensions are dynamic, so a rewritten module could lose
/// them. Until they track them, such a module is refused whole by any
/// pipeline with one of them in it.
fn refuse_dynamic_dimensions(module: &Module) -> Result<(), PassError> {
    for c in &module.computations {
        for id in c.ids() {
            let i = c.instr(id);
            if !i.shape.is_static() {
                return Err(PassError::DynamicDimensions {
                    computation: c.name.clone(),
                    instruction: i.name.clone(),
                    shape: i.shape.to_string(),
                });
            }
        }
    }
    Ok(())
}
