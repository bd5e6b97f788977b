//! The Neuron pre-flight: what `neuronx-cc` would refuse (or warn about)
//! in a module, found from the HLO in milliseconds rather than at the end
//! of an hour's compile. It lives with the passes because it is about a
//! target, as they are, and reads only the IR (`compiler`); `compile`
//! runs it on every Neuron bundle (through `train`'s bundle writer) and
//! `hlatc check` on any module.
//!
//! - `chip`: which chip a check is for, and under which integer flags (a
//!   bundle's, or an SDK release's defaults);
//! - `rules`: the rule table (data, with its sources in the Neuron SDK);
//! - `matcher`: how a rule's matcher is evaluated on an instruction;
//! - `trip_count`: whether a while loop's trip count is static;
//! - `index_bounds`: gathers and scatters at iota indices past their
//!   operand;
//! - `instructions`: a lower bound on neuronx-cc's instruction count;
//! - `hbm`: a module's device memory from its inputs and outputs;
//! - `report`: findings and how they read.
//!
//! The check never changes the module.

mod chip;
mod hbm;
mod index_bounds;
mod instructions;
mod matcher;
mod mx_contract;
mod report;
mod rules;
mod trip_count;
pub use trip_count::trip_count;

pub use chip::{Chip, DowncastOp, Downcasts, FlagValueError, IntegerFlags, PinnedFlags, Sdk};
pub use instructions::{
    dot_instructions, dot_operands, matmul_instructions, MOVING_COLUMNS, PARTITIONS,
};
pub use mx_contract::{MxCheck, BLOCK_SCALED_DOT, MX_CUSTOM_CALLS, QUANTIZE_MX};
pub use report::{CheckReport, Finding, LocatedFinding};
// Public for the crate's tests (tests/it/neuron_check.rs).
pub use rules::{
    markdown_table, rule, Code, Matcher, Rule, Severity, TypedOp, Under, When, INSTRUCTION_LIMIT,
    RECOGNIZED_CUSTOM_CALLS, RULES, SDK_COMMIT,
};
#[doc(hidden)]
pub use rules::{NXD_SPMD_RANK, SORT_REPORT};

use hlatc_compiler::util::fx::FxHashSet;
use hlatc_compiler::{Module, Opcode};
use matcher::{matches, needs, Site, Types};

/// Checks `m` against every rule that applies on `chip` under `flags`
/// (an [`Sdk`] for its defaults).
pub fn check_module(m: &Module, chip: Chip, flags: impl Into<IntegerFlags>) -> CheckReport {
    check(m, chip, flags.into(), Memory::FromBoundary)
}

/// [`check_module`] for a training step hlatc built, whose memory plan
/// (which counts its activations, and follows `--device-memory`) decides
/// whether it fits a core: the module-level memory rules, an estimate
/// from the boundary alone, are left to it.
pub fn check_planned_step(m: &Module, chip: Chip, flags: impl Into<IntegerFlags>) -> CheckReport {
    check(m, chip, flags.into(), Memory::Planned)
}

/// The integer flags a bundle of `m` for `chip` pins, so that it compiles
/// the same under any SDK's defaults: 64-bit integers native where the
/// chip runs them (exact, where narrowing is not), and a lossy downcast
/// permitted for exactly the ops without an integer datapath that `m`
/// holds, each of which the check still reports as a warning; `none`
/// where it holds no such op.
pub fn pinned_flags(m: &Module, chip: Chip) -> IntegerFlags {
    let open = IntegerFlags {
        native_int64: chip.has_native_int64(),
        downcast: Downcasts::ALL,
    };
    let report = check_rules(m, chip, open, Memory::Planned, |r| {
        r.downcast_op().is_some()
    });
    let downcast = report
        .findings
        .iter()
        .filter_map(|f| f.rule.downcast_op())
        .fold(Downcasts::NONE, Downcasts::with);
    IntegerFlags { downcast, ..open }
}

/// Who judges a module's device memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// The rules, from its inputs and outputs ([`hbm`]).
    FromBoundary,
    /// The step's memory plan, outside the check.
    Planned,
}

fn check(m: &Module, chip: Chip, flags: IntegerFlags, memory: Memory) -> CheckReport {
    check_rules(m, chip, flags, memory, |_| true)
}

/// [`check`] of the rules `asked` keeps.
fn check_rules(
    m: &Module,
    chip: Chip,
    flags: IntegerFlags,
    memory: Memory,
    asked: impl Fn(&Rule) -> bool,
) -> CheckReport {
    let held = Types::of_module(m);
    let opcodes: FxHashSet<Opcode> = m
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| Opcode::of(&c.instr(id).op)))
        .collect();
    let rules: Vec<(&'static Rule, Severity)> = RULES
        .iter()
        .filter(|r| asked(r))
        .filter(|r| {
            let (ops, tys) = needs(&r.matcher);
            ops.is_none_or(|ops| ops.iter().any(|o| opcodes.contains(o)))
                && tys.is_none_or(|tys| held.first_of(tys).is_some())
        })
        .filter(|r| {
            memory == Memory::FromBoundary
                || !matches!(r.matcher, Matcher::IoOverHbm | Matcher::IoAndScratchOverHbm)
        })
        .filter_map(|r| r.severity(chip, flags).map(|s| (r, s)))
        .collect();
    // The module's own rules are judged once, after the walk.
    let (module_rules, rules): (Vec<_>, Vec<_>) = rules
        .into_iter()
        .partition(|(r, _)| r.matcher.is_module_level());
    // A rule about certain ops is asked only at those ops: the walk costs a
    // few rules per instruction however many ops the table knows.
    let rules: Vec<(&'static Rule, Severity, Option<&'static [Opcode]>)> = rules
        .into_iter()
        .map(|(r, s)| (r, s, needs(&r.matcher).0))
        .collect();
    let mut findings = Vec::new();
    let mut instructions = 0;
    for c in &m.computations {
        for id in c.ids() {
            instructions += 1;
            let opcode = Opcode::of(&c.instr(id).op);
            let site = Site {
                m,
                c,
                id,
                types: Types::of(&c.instr(id).shape),
            };
            for &(rule, severity, ops) in &rules {
                if ops.is_some_and(|ops| !ops.contains(&opcode)) {
                    continue;
                }
                if let Some(detail) = matches(&rule.matcher, &site) {
                    findings.push(Finding {
                        rule,
                        severity,
                        computation: c.name.clone(),
                        instruction: Some(c.instr(id).name.clone()),
                        detail,
                        tensors: Vec::new(),
                    });
                }
            }
        }
    }
    let tensor_instructions = matmul_instructions(m);
    let io = hbm::io_bytes(m);
    /// How many of a module's largest inputs and outputs a memory finding
    /// names.
    const LARGEST_LISTED: usize = 5;
    let core = chip.hbm_per_core();
    for &(rule, severity) in &module_rules {
        let detail = match rule.matcher {
            Matcher::InstructionLimit(limit) => (tensor_instructions > limit).then(|| {
                format!(
                    "at least {tensor_instructions} TensorE instructions, of a limit of {limit}"
                )
            }),
            Matcher::IoOverHbm => (io > core).then(|| {
                format!(
                    "inputs and outputs {}, of {chip}'s {} per core",
                    hbm::gib(io),
                    hbm::gib(core)
                )
            }),
            // Beyond the core already, the refusal above says it.
            Matcher::IoAndScratchOverHbm => {
                (io <= core && io.saturating_mul(2) > core).then(|| {
                    format!(
                        "inputs and outputs {}, twice that {}, of {chip}'s {} per core",
                        hbm::gib(io),
                        hbm::gib(io.saturating_mul(2)),
                        hbm::gib(core)
                    )
                })
            }
            _ => None,
        };
        if let Some(detail) = detail {
            let tensors = match rule.matcher {
                Matcher::IoOverHbm | Matcher::IoAndScratchOverHbm => {
                    hbm::largest_io(m, LARGEST_LISTED)
                }
                _ => Vec::new(),
            };
            findings.push(Finding {
                rule,
                severity,
                computation: m.entry().name.clone(),
                instruction: None,
                detail,
                tensors,
            });
        }
    }
    // Stable: within a severity, findings keep the module's order.
    findings.sort_by_key(|f| f.severity);
    CheckReport {
        chip,
        flags,
        findings,
        tensor_instructions,
        instructions,
    }
}
