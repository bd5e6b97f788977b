//! Which precision each op computes in under mixed precision: the policy
//! the `amp` pass applies, in the manner of RAF's AutoCast and torch's
//! autocast lists, but kept as data a user can read and change per op kind.

use crate::infra::mx_blocks::MxFormat;
use hlatc_compiler::graph::scope;
use hlatc_compiler::{ElementType, Instruction, Opcode};
use std::collections::BTreeMap;
use std::fmt;

/// What an op does with the low precision type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CastRule {
    /// Compute in the low type. For a dot: low operands, accumulation and
    /// result in the original (f32) type, as Trainium's matmult engine
    /// accumulates in f32; consumers that compute low read it rounded once.
    Low,
    /// Compute in the widest type among the operands, constants and values
    /// computed only from constants not counting (they take the type they
    /// meet, as a scalar does in torch and a weak type in JAX).
    Follow,
    /// Compute exactly as the original program does: every operand in its
    /// original type.
    Never,
}

impl CastRule {
    pub const ALL: [CastRule; 3] = [CastRule::Low, CastRule::Follow, CastRule::Never];

    pub fn name(self) -> &'static str {
        match self {
            CastRule::Low => "low",
            CastRule::Follow => "follow",
            CastRule::Never => "never",
        }
    }

    pub fn from_name(s: &str) -> Option<CastRule> {
        Self::ALL.into_iter().find(|r| r.name() == s)
    }
}

impl fmt::Display for CastRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Opcodes that compute in the low type.
const LOW: &[Opcode] = &[Opcode::new("dot")];

/// Opcodes that follow their operands: layout and data movement, and
/// elementwise math whose error does not grow with the input's size.
/// Everything else (exp, log, reductions, scatter-adds, calls, custom
/// calls, ops this list does not know) keeps its original precision.
const FOLLOW: &[Opcode] = &[
    Opcode::new("abs"),
    Opcode::new("negate"),
    Opcode::new("sqrt"),
    Opcode::new("rsqrt"),
    Opcode::new("sine"),
    Opcode::new("cosine"),
    Opcode::new("tanh"),
    Opcode::new("logistic"),
    Opcode::new("floor"),
    Opcode::new("ceil"),
    Opcode::new("round-nearest-even"),
    Opcode::new("sign"),
    Opcode::new("copy"),
    Opcode::new("is-finite"),
    Opcode::new("add"),
    Opcode::new("subtract"),
    Opcode::new("multiply"),
    Opcode::new("divide"),
    Opcode::new("maximum"),
    Opcode::new("minimum"),
    Opcode::new("compare"),
    Opcode::new("select"),
    Opcode::new("clamp"),
    Opcode::new("broadcast"),
    Opcode::new("reshape"),
    Opcode::new("transpose"),
    Opcode::new("reverse"),
    Opcode::new("slice"),
    Opcode::new("dynamic-slice"),
    Opcode::new("dynamic-update-slice"),
    Opcode::new("concatenate"),
    Opcode::new("pad"),
    Opcode::new("gather"),
];

/// Provenance scopes (a component of an instruction's `metadata.op_name`)
/// that stay in the original precision whatever their ops: RMSNorm
/// statistics, the loss, rotary tables and the optimizer, forward and
/// backward. Imported modules have no scopes; only the op rules apply.
/// The builders write the same constants.
const F32_SCOPES: &[&str] = &[
    scope::INPUT_LAYERNORM,
    scope::POST_ATTENTION_LAYERNORM,
    scope::FINAL_NORM,
    scope::LOSS,
    scope::ROTARY_EMB,
    scope::OPTIMIZER,
];

/// The low type and a rule per opcode; what the `amp` pass applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CastPolicy {
    /// The low precision type (bf16 on Trainium).
    pub low: ElementType,
    /// Rule per opcode (`dot`, `exp`, ...); an opcode not listed is
    /// [`CastRule::Never`].
    pub rules: BTreeMap<Opcode, CastRule>,
    /// Scope components whose instructions are all [`CastRule::Never`].
    pub keep_scopes: Vec<String>,
    /// Microscaled dots: the low dots whose operands are quantized in MX
    /// blocks along their contracting dimension. `None`: every low dot
    /// multiplies its low operands as they are.
    pub mx: Option<MxPolicy>,
}

/// Which of the low dots an MX precision quantizes, and to what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MxPolicy {
    pub format: MxFormat,
    /// Scope components whose dots stay in the low type: attention's own
    /// products, the head and a mixture's router (see
    /// [`MX_KEPT_SCOPES`]).
    pub keep_scopes: Vec<String>,
}

/// The dots an MX precision leaves in bf16, as torchtitan's MXFP8 recipe
/// and the OCP MX paper's training runs leave them: attention's scores and
/// its weighted sum (`core_attention`, a kernel's business, not a linear
/// layer's), the output head (`lm_head`, whose logits feed the loss) and
/// a mixture's router (`gate`, whose top-k a rounding can flip).
pub const MX_KEPT_SCOPES: &[&str] = &[scope::CORE_ATTENTION, "lm_head", "gate"];

impl MxPolicy {
    /// Asks whether a dot's scope keeps it out of MX blocks.
    pub fn scope_matcher(&self) -> ScopeMatcher<'_> {
        ScopeMatcher::of(&self.keep_scopes)
    }

    /// MXFP8 (E4M3 elements, blocks of 32) on every linear layer's dots.
    pub fn mxfp8() -> MxPolicy {
        MxPolicy {
            format: MxFormat::E4M3,
            keep_scopes: MX_KEPT_SCOPES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl CastPolicy {
    /// bf16 compute with f32 accumulation, softmax, exp and log,
    /// reductions, norms, loss and optimizer in f32.
    pub fn bf16() -> Self {
        Self::with_low(ElementType::Bf16)
    }

    /// The default rules with `low` as the low type.
    pub fn with_low(low: ElementType) -> Self {
        let mut rules = BTreeMap::new();
        for &op in LOW {
            rules.insert(op, CastRule::Low);
        }
        for &op in FOLLOW {
            rules.insert(op, CastRule::Follow);
        }
        CastPolicy {
            low,
            rules,
            keep_scopes: F32_SCOPES.iter().map(|s| s.to_string()).collect(),
            mx: None,
        }
    }

    /// [`CastPolicy::bf16`] with the linear layers' dots, forward and
    /// backward, quantized to MXFP8 ([`MxPolicy::mxfp8`]).
    pub fn mxfp8() -> Self {
        CastPolicy {
            mx: Some(MxPolicy::mxfp8()),
            ..Self::bf16()
        }
    }

    /// Overrides the rule of one opcode.
    pub fn set(&mut self, opcode: Opcode, rule: CastRule) -> &mut Self {
        self.rules.insert(opcode, rule);
        self
    }

    /// The rule for one instruction: its scope first, then its opcode.
    pub fn rule_for(&self, instr: &Instruction) -> CastRule {
        if self.keeps_scope_of(instr) {
            return CastRule::Never;
        }
        self.rule_of(Opcode::of(&instr.op))
    }

    /// The rule for an opcode, scopes aside.
    pub fn rule_of(&self, opcode: Opcode) -> CastRule {
        self.rules.get(&opcode).copied().unwrap_or(CastRule::Never)
    }

    /// Whether `instr` lies in a scope kept in its original precision.
    pub fn keeps_scope_of(&self, instr: &Instruction) -> bool {
        self.keeps_scope(&instr.metadata.op_name)
    }

    /// Whether a provenance scope (`metadata.op_name`, components joined
    /// by `/`) lies in a scope kept in its original precision.
    pub fn keeps_scope(&self, scope: &str) -> bool {
        self.scope_matcher().keeps(scope)
    }

    /// [`CastPolicy::keeps_scope`] for asking many times: `amp` asks of
    /// every op it would move to the low type.
    pub fn scope_matcher(&self) -> ScopeMatcher<'_> {
        ScopeMatcher::of(&self.keep_scopes)
    }

    /// One line per rule, for `--help`-style listings and reports.
    pub fn describe(&self) -> String {
        let mut by_rule: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (op, rule) in &self.rules {
            by_rule.entry(rule.name()).or_default().push(op.as_str());
        }
        let mut out = format!("low type {}", self.low);
        for (rule, ops) in by_rule {
            out.push_str(&format!("; {rule}: {}", ops.join(" ")));
        }
        out.push_str(&format!(
            "; never (by scope): {}; never: every other op",
            self.keep_scopes.join(" ")
        ));
        if let Some(mx) = &self.mx {
            out.push_str(&format!(
                "; low dots quantized to MX ({} in blocks of {} along the contracting dimension) but in: {}",
                mx.format.element,
                mx.format.block,
                mx.keep_scopes.join(" ")
            ));
        }
        out
    }
}

/// The kept scopes, with the lengths they come in: a path component of
/// another length is passed over without comparing any text.
pub struct ScopeMatcher<'p> {
    keep: &'p [String],
    /// Bit `n` set when some kept scope is `n` bytes long (below 64).
    lengths: u64,
    any_long: bool,
}

impl ScopeMatcher<'_> {
    /// A matcher of the scopes `keep`.
    pub fn of(keep: &[String]) -> ScopeMatcher<'_> {
        let lengths = keep
            .iter()
            .filter(|k| k.len() < 64)
            .fold(0u64, |m, k| m | 1 << k.len());
        ScopeMatcher {
            keep,
            lengths,
            any_long: keep.iter().any(|k| k.len() >= 64),
        }
    }

    /// Whether some `/`-separated component of `scope` is a kept scope.
    pub fn keeps(&self, scope: &str) -> bool {
        // Split as bytes: `str::split` cost twice as much per call here.
        scope.as_bytes().split(|&b| b == b'/').any(|part| {
            let n = part.len();
            let maybe = if n < 64 {
                self.lengths & (1 << n) != 0
            } else {
                self.any_long
            };
            maybe && self.keep.iter().any(|k| k.as_bytes() == part)
        })
    }
}
