//! FSDP's reshard policy: whether the weights a rank gathers from its
//! shards for the forward are kept until the backward reads them, or freed
//! and gathered again there (torchtitan's `reshard_after_forward`).

use serde::{Deserialize, Serialize};

/// When FSDP frees the weights it gathered for the forward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reshard {
    /// Kept from the forward to the backward: each weight gathered once a
    /// step, the rank's whole share of the weights alive at the peak
    /// (Llama 3's "not resharded after forward", and torchtitan's policy
    /// under pipeline parallelism).
    #[default]
    Never,
    /// Freed after the forward and gathered again in the backward, unit by
    /// unit (the embedding, each decoder layer, the final norm with the
    /// LM head), as the backward reaches it: one unit alive at a time, for
    /// a second gather of every weight (torchtitan's policy without
    /// pipeline parallelism).
    Always,
    /// torchtitan's `default` policy: [`Reshard::Always`] without
    /// pipeline parallelism and [`Reshard::Never`] with it, where each
    /// stage's tick programs keep the stage's weights to the backward slot.
    UnlessPp,
}

impl Reshard {
    pub const ALL: [Reshard; 3] = [Reshard::Never, Reshard::Always, Reshard::UnlessPp];

    /// The word `--reshard` takes and a manifest writes.
    pub const fn name(self) -> &'static str {
        match self {
            Reshard::Never => "never",
            Reshard::Always => "always",
            Reshard::UnlessPp => "unless-pp",
        }
    }

    /// Whether the weights are freed after the forward and gathered again
    /// in the backward, on a step of `pp` stages.
    pub const fn frees_after_forward(self, pp: i64) -> bool {
        match self {
            Reshard::Never => false,
            Reshard::Always => true,
            Reshard::UnlessPp => pp == 1,
        }
    }

    /// The policy named `word`, if any.
    pub fn from_name(word: &str) -> Option<Reshard> {
        Reshard::ALL.into_iter().find(|r| r.name() == word)
    }

    pub(crate) fn is_default(&self) -> bool {
        *self == Reshard::default()
    }
}

impl std::fmt::Display for Reshard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
