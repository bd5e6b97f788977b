//! What a pass knows about the compilation it is part of: the target and
//! the policies. The manager hands it to every pass; passes never consult
//! globals, so the same pass object serves every target.

use crate::infra::report::PassRun;
use std::fmt;

/// Which compiler consumes the module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// AWS Trainium through `neuronx-cc`: Neuron custom calls are allowed.
    Neuron,
    /// XLA's CPU backend (verification): plain HLO only.
    Cpu,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Neuron, Target::Cpu];

    pub fn name(self) -> &'static str {
        match self {
            Target::Neuron => "neuron",
            Target::Cpu => "cpu",
        }
    }

    pub fn from_name(s: &str) -> Option<Target> {
        Self::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which forward activations the `remat` pass recomputes in the backward
/// pass instead of keeping them alive from the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RematPolicy {
    /// Keep every activation the backward rules save.
    #[default]
    None,
    /// Recompute each layer's core attention (scores, mask, softmax): the
    /// `[B, H, S, S]` tensors go, q, k and v stay. HLAT's and NxD's choice.
    CoreAttention,
    /// Recompute each whole decoder layer from its input.
    FullLayer,
    /// Pipeline stages only: keep each stage's input alone and run the
    /// stage's forward again in the backward slot (each layer's core
    /// attention recomputed within it, as under `core-attention`). The
    /// least memory a pipeline can keep, for one more forward per
    /// micro-batch.
    Stage,
}

impl RematPolicy {
    pub const ALL: [RematPolicy; 4] = [
        RematPolicy::None,
        RematPolicy::CoreAttention,
        RematPolicy::FullLayer,
        RematPolicy::Stage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RematPolicy::None => "none",
            RematPolicy::CoreAttention => "core-attention",
            RematPolicy::FullLayer => "full-layer",
            RematPolicy::Stage => "stage",
        }
    }

    /// Whether the policy is a pipeline's alone (a step without stages
    /// has no stage input to keep).
    pub fn needs_stages(self) -> bool {
        self == RematPolicy::Stage
    }

    /// The forward region an instruction of scope `op_name` belongs to
    /// under this policy, if it is recomputed: the region's key (the
    /// scope's prefix that names it) and whether what the region outputs
    /// to the rest of the forward pass is kept (a layer's, core
    /// attention's) or recomputed too (a sequence-parallel gather's). The
    /// `remat` pass and a pipeline's tick programs both choose by it.
    pub fn region(self, op_name: &str) -> Option<RematRegion<'_>> {
        use hlatc_compiler::graph::scope;
        let own = match self {
            RematPolicy::None => return None,
            RematPolicy::CoreAttention | RematPolicy::Stage => {
                scope::prefix_through(op_name, |p| p == scope::CORE_ATTENTION)
            }
            RematPolicy::FullLayer => scope::prefix_through(op_name, |p| {
                p.strip_prefix(scope::LAYER_PREFIX)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }),
        };
        match own {
            Some(key) => Some(RematRegion {
                key,
                keeps_outputs: true,
            }),
            None => scope::prefix_through(op_name, |p| p == scope::SEQUENCE_GATHER).map(|key| {
                RematRegion {
                    key,
                    keeps_outputs: false,
                }
            }),
        }
    }

    pub fn from_name(s: &str) -> Option<RematPolicy> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl fmt::Display for RematPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A forward region a [`RematPolicy`] recomputes ([`RematPolicy::region`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RematRegion<'a> {
    /// The scope prefix every instruction of the region shares.
    pub key: &'a str,
    /// Whether what the region outputs to the rest of the forward pass is
    /// kept for the backward (the next layer reads it anyway) rather than
    /// recomputed.
    pub keeps_outputs: bool,
}

/// An entry parameter a pass appended, and the root tuple element that
/// carries its next value (aliased to it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedState {
    pub name: String,
    pub parameter: usize,
    pub output: usize,
    /// What it is, for a manifest (`rng_state`).
    pub kind: &'static str,
}

/// The target and policies every pass reads, and the notes passes leave for
/// the report (what was folded, bound, or what a rewrite costs).
#[derive(Clone, Debug)]
pub struct PassContext {
    pub target: Target,
    /// Whether a pass may concatenate entry parameters in the graph (the
    /// weights of `coalesce-linear`), which copies them every step. Right
    /// for an imported module, whose weights arrive as separate inputs; a
    /// step hlatc builds turns it off until its weights are stored fused.
    pub concat_entry_parameters: bool,
    /// Whether the entry's parameters and outputs are fixed by a contract
    /// made before the passes (a step hlatc builds: its manifest lists
    /// each input's dtype), so no pass may retype them. Off for a module
    /// read from a file, whose signature a pass may change and say so.
    pub keep_entry_signature: bool,
    /// What `remat` recomputes.
    pub remat: RematPolicy,
    /// What `amp` casts; `None` keeps the program's precision (fp32).
    pub cast: Option<crate::CastPolicy>,
    /// Which converts to the low type `annotate-rounding` rounds
    /// stochastically.
    pub rounding: crate::RoundingPolicy,
    /// Carried state a pass added to the entry signature (the RNG state of
    /// stochastic rounding on cpu): a runtime must feed and keep it.
    pub added_state: Vec<AddedState>,
    notes: Vec<String>,
    /// Every pass run so far, outer before inner.
    pub(crate) runs: Vec<PassRun>,
    /// The pipelines the current pass runs inside, outermost first.
    pub(crate) scope: Vec<String>,
    /// Whether nested pipelines run their checkers after every pass (the
    /// outermost pipeline's [`crate::CheckPolicy`] decides).
    pub(crate) check_each_pass: bool,
    /// The module's names, handed from pass to pass (indexing them cost
    /// each rewriting pass half a millisecond on 7B). Valid because every
    /// pass that lends it adds names only through it; the manager drops it
    /// after a pass that changed the module without it.
    pub(crate) names: Option<crate::infra::names::Names>,
    /// Whether the current pass borrowed [`PassContext::names`].
    pub(crate) names_lent: bool,
}

impl PassContext {
    pub fn new(target: Target) -> Self {
        PassContext {
            target,
            concat_entry_parameters: true,
            keep_entry_signature: false,
            remat: RematPolicy::None,
            cast: None,
            rounding: crate::RoundingPolicy::default(),
            added_state: Vec::new(),
            notes: Vec::new(),
            runs: Vec::new(),
            scope: Vec::new(),
            check_each_pass: true,
            names: None,
            names_lent: false,
        }
    }

    /// Records a line for the pass report, prefixed with the pass's name.
    /// A note repeated word for word (a pass run to a fixpoint says the
    /// same each round) is kept once.
    pub fn note(&mut self, pass: &str, message: impl fmt::Display) {
        let line = format!("{pass}: {message}");
        if !self.notes.contains(&line) {
            self.notes.push(line);
        }
    }

    /// Says the current pass adds no names to the module (it changes
    /// attributes only), so the shared name index stays valid.
    pub(crate) fn names_unchanged(&mut self) {
        self.names_lent = true;
    }

    /// Everything passes have noted so far, in order.
    /// Whether a pass named `pass` already changed the module in this
    /// compilation (an earlier trip of a fixpoint, say).
    pub fn has_changed(&self, pass: &str) -> bool {
        self.runs.iter().any(|r| r.changed && r.leaf() == pass)
    }

    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

/// Byte counts in notes, one way for every pass: `812 B`, `4.1 KB`,
/// `17.9 GB`.
pub(crate) fn human_bytes(n: u64) -> String {
    let x = n as f64;
    match n {
        n if n >= 1_000_000_000 => format!("{:.1} GB", x / 1e9),
        n if n >= 1_000_000 => format!("{:.1} MB", x / 1e6),
        n if n >= 1_000 => format!("{:.1} KB", x / 1e3),
        n => format!("{n} B"),
    }
}
