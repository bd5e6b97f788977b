//! What a check found, and how a finding reads: one line per finding,
//! `FILE:LINE:COL: instruction %name: NCC_CODE what (detail), advice`, as
//! compilers write diagnostics, so editors and CI logs link to the line.

use super::chip::{Chip, IntegerFlags};
use super::rules::{Rule, Severity};
use hlatc_compiler::formats::text::TextPositions;
use std::fmt::Write;

/// One rule matched at one place.
#[derive(Clone, Debug)]
pub struct Finding {
    pub rule: &'static Rule,
    pub severity: Severity,
    /// The computation it is in (the entry's, for the module's own).
    pub computation: String,
    /// The instruction; `None` for a finding about the whole module.
    pub instruction: Option<String>,
    /// What matched: the type, target or size found.
    pub detail: String,
    /// For a finding about the module's memory, its largest inputs and
    /// outputs (instruction name, bytes), largest first: what a user
    /// shards, offloads or drops.
    pub tensors: Vec<(String, u64)>,
}

impl Finding {
    /// The code as neuronx-cc prints it (`NCC_EVRF019`), or the rule's id
    /// in brackets where the SDK documents no code (`[conditional]`).
    pub fn code(&self) -> String {
        self.rule
            .code
            .ncc()
            .unwrap_or_else(|| format!("[{}]", self.rule.id))
    }

    /// The finding as one line, without its location: `instruction %x:
    /// NCC_CODE what (detail), advice`; a warning says so after the code.
    pub fn message(&self) -> String {
        self.message_at(None)
    }

    /// [`Finding::message`], its largest tensors each with its line where
    /// `positions` knows it.
    fn message_at(&self, positions: Option<&TextPositions>) -> String {
        let mut s = match &self.instruction {
            Some(i) => format!("instruction %{i}: "),
            None => "module: ".to_string(),
        };
        s.push_str(&self.code());
        if self.severity == Severity::Warning {
            s.push_str(" (warning)");
        }
        let _ = write!(s, " {}", self.rule.what);
        if !self.detail.is_empty() {
            let _ = write!(s, " ({})", self.detail);
        }
        if !self.tensors.is_empty() {
            let listed: Vec<String> = self
                .tensors
                .iter()
                .map(|(name, bytes)| {
                    let line = positions
                        .and_then(|p| p.instruction(&self.computation, name))
                        .map(|at| format!(", line {}", at.line))
                        .unwrap_or_default();
                    format!("%{name} ({}{line})", super::hbm::size(*bytes))
                })
                .collect();
            let _ = write!(s, "; largest: {}", listed.join(", "));
        }
        let _ = write!(s, ", {}", self.rule.advice);
        s
    }

    /// Where the finding is in a module's text, if `positions` knows the
    /// instruction (or, failing that, its computation).
    pub fn position(&self, positions: &TextPositions) -> Option<(usize, usize)> {
        let at = match &self.instruction {
            Some(i) => positions
                .instruction(&self.computation, i)
                .or_else(|| positions.computation(&self.computation)),
            None => None,
        }?;
        Some((at.line, at.column))
    }

    /// `file:line:col: message`, or `file: message` where the position is
    /// unknown (a finding about the whole module).
    pub fn line(&self, file: &str, positions: Option<&TextPositions>) -> String {
        self.located(file, positions).to_string()
    }

    /// The finding with its place in `file`, as a value callers keep
    /// (an error, Python's `NeuronRefusedError.findings`).
    pub fn located(&self, file: &str, positions: Option<&TextPositions>) -> LocatedFinding {
        let at = positions.and_then(|p| self.position(p));
        LocatedFinding {
            code: self.code(),
            rule: self.rule.id,
            severity: self.severity,
            file: file.to_string(),
            line: at.map(|(l, _)| l),
            column: at.map(|(_, c)| c),
            computation: self.computation.clone(),
            instruction: self.instruction.clone(),
            message: self.message_at(positions),
        }
    }
}

/// A finding and where it is: what a refusal carries to the caller, field
/// by field. It prints as `file:line:col: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatedFinding {
    /// neuronx-cc's code (`NCC_EVRF019`), or the rule's id in brackets.
    pub code: String,
    /// The rule's id in hlatc's table (`f64`).
    pub rule: &'static str,
    pub severity: Severity,
    pub file: String,
    /// 1-based, where the module's text places the instruction.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub computation: String,
    /// `None` for a finding about the whole module.
    pub instruction: Option<String>,
    /// [`Finding::message`].
    pub message: String,
}

impl std::fmt::Display for LocatedFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Everything a check of one module found.
#[derive(Clone, Debug)]
pub struct CheckReport {
    pub chip: Chip,
    /// What neuronx-cc is told about integers.
    pub flags: IntegerFlags,
    /// Refusals first, then warnings; each in the module's order.
    pub findings: Vec<Finding>,
    /// At least this many TensorE instructions (see
    /// [`super::matmul_instructions`]): a lower bound on neuronx-cc's
    /// count.
    pub tensor_instructions: u64,
    /// Instructions read.
    pub instructions: usize,
}

impl CheckReport {
    pub fn refusals(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Refusal)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
    }

    /// Whether neuronx-cc would refuse the module.
    pub fn refused(&self) -> bool {
        self.refusals().next().is_some()
    }

    /// Whether any finding names an instruction (and so needs the text's
    /// positions to be located).
    pub fn names_instructions(&self) -> bool {
        self.findings.iter().any(|f| f.instruction.is_some())
    }

    /// The integer flags as neuronx-cc takes them, for `chip`.
    pub fn flags_shown(&self) -> String {
        self.flags.compile_flags(self.chip).join(" ")
    }

    /// `2 refusals, 1 warning` / `no findings`.
    pub fn tally(&self) -> String {
        let (r, w) = (self.refusals().count(), self.warnings().count());
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        match (r, w) {
            (0, 0) => "no findings".to_string(),
            (r, 0) => plural(r, "refusal"),
            (0, w) => plural(w, "warning"),
            (r, w) => format!("{}, {}", plural(r, "refusal"), plural(w, "warning")),
        }
    }
}
