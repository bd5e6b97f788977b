//! Context parallelism: each sequence divided over the `cp` ranks of a
//! CP group, which exchange one another's keys and values for attention
//! as [`CpExchange`] says: all-gathered (Llama 3's long-context form, and
//! torchtitan's), or passed round a ring.
//!
//! The sequence is cut into equal chunks and each CP rank holds some of
//! them, in the order [`CpBalance`] deals them. Everything that depends on
//! where a token sits reads its *global* position: rotary embeddings, the
//! causal mask, sliding windows and documents. Labels are shifted before
//! the split (a rank's targets are the next tokens of its own positions),
//! so nothing crosses a chunk's edge but keys and values.
//!
//! A rank's positions differ between ranks, and one program serves them
//! all: the program holds every CP rank's positions as a constant
//! `s32[cp, S / cp]` ([`positions_table`]) and takes its own row by its
//! CP rank, computed from `replica-id`. The gathered keys are every rank's
//! chunks in rank order, so their positions are the same table read
//! whole.

use super::{Fault, Parallelism};
use crate::config::BatchShape;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{BinaryOp, Op};
use hlatc_compiler::{ElementType, InstrId, Literal, Shape};
use serde::{Deserialize, Serialize};

/// Which chunks of a sequence each CP rank holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpBalance {
    /// `2 cp` chunks, rank `c` holding chunks `c` and `2 cp - 1 - c`: under
    /// a causal mask every rank then has the same work (a chunk near the
    /// start, whose queries see few keys, with one near the end, whose
    /// queries see many). Llama 3's and torchtitan's order.
    #[default]
    HeadTail,
    /// `cp` chunks, rank `c` holding chunk `c`: the last rank's queries see
    /// every key and the first rank's the fewest (NxD's order; for
    /// comparison).
    Contiguous,
}

impl CpBalance {
    pub const ALL: [CpBalance; 2] = [CpBalance::HeadTail, CpBalance::Contiguous];

    /// The word `--cp-balance` takes and a manifest writes.
    pub const fn name(self) -> &'static str {
        match self {
            CpBalance::HeadTail => "head-tail",
            CpBalance::Contiguous => "contiguous",
        }
    }

    /// The balance named `word`, if any.
    pub fn from_name(word: &str) -> Option<CpBalance> {
        CpBalance::ALL.into_iter().find(|b| b.name() == word)
    }

    pub(crate) fn is_default(&self) -> bool {
        *self == CpBalance::default()
    }

    /// How many chunks a sequence is cut into over `cp` ranks.
    pub const fn chunks(self, cp: i64) -> i64 {
        match self {
            CpBalance::HeadTail => 2 * cp,
            CpBalance::Contiguous => cp,
        }
    }

    /// The chunks CP rank `c` of `cp` holds, in the order it holds them.
    pub fn chunks_of(self, cp: i64, c: i64) -> Vec<i64> {
        match self {
            CpBalance::HeadTail => vec![c, 2 * cp - 1 - c],
            CpBalance::Contiguous => vec![c],
        }
    }
}

impl std::fmt::Display for CpBalance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the ranks of a CP group see one another's keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpExchange {
    /// Every rank's keys and values gathered on every rank of the group
    /// before attention, and their gradients reduce-scattered back
    /// (Llama 3's form, and torchtitan's): a rank holds the whole
    /// sequence's keys and values for one layer.
    #[default]
    AllGather,
    /// Each rank's keys and values passed round the group's ring, one
    /// `collective-permute` a step, while its queries attend to the block
    /// it holds; their gradients travel the ring after them (ring
    /// attention: PyTorch's older CP form, MaxText's `ring`). A rank
    /// holds two blocks at a time, never the sequence; attention must be
    /// looped.
    Ring,
}

impl CpExchange {
    pub const ALL: [CpExchange; 2] = [CpExchange::AllGather, CpExchange::Ring];

    /// The word `--cp-exchange` takes and a manifest writes.
    pub const fn name(self) -> &'static str {
        match self {
            CpExchange::AllGather => "all-gather",
            CpExchange::Ring => "ring",
        }
    }

    /// The exchange named `word`, if any.
    pub fn from_name(word: &str) -> Option<CpExchange> {
        CpExchange::ALL.into_iter().find(|e| e.name() == word)
    }

    pub(crate) fn is_default(&self) -> bool {
        *self == CpExchange::default()
    }
}

impl std::fmt::Display for CpExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Parallelism {
    /// The token ranges `[start, end)` of a sequence of `seq` tokens that
    /// CP rank `c` holds, in the order it holds them (one range, the whole
    /// sequence, without context parallelism).
    pub fn sequence_ranges(&self, seq: i64, c: i64) -> Vec<[i64; 2]> {
        let len = seq / self.cp_balance.chunks(self.cp);
        self.cp_balance
            .chunks_of(self.cp, c)
            .into_iter()
            .map(|k| [k * len, (k + 1) * len])
            .collect()
    }

    /// Whether the sequence of `batch` cuts into the chunks `cp` deals.
    pub fn divides_sequence(&self, batch: BatchShape) -> bool {
        batch.seq_len % self.cp_balance.chunks(self.cp) == 0
    }
}

/// Every CP rank's global positions, row `c` rank `c`'s (`[cp, S / cp]`,
/// `S` the sequence): read whole, the positions of the gathered keys.
pub fn positions_table(par: &Parallelism, seq: i64, fault: Option<Fault>) -> Literal {
    let holder = |c: i64| match (fault, c) {
        (Some(Fault::ChunkPositionsSwapped), 0 | 1) => 1 - c,
        _ => c,
    };
    let ranks = rank_positions(par, seq);
    let rows: Vec<i32> = (0..par.cp)
        .flat_map(|c| &ranks[holder(c) as usize])
        .map(|&p| i32::try_from(p).expect("a sequence's positions fit in i32"))
        .collect();
    Literal::from_s32(vec![par.cp, seq / par.cp], &rows).expect("cp rows of S / cp positions")
}

/// Every CP rank's global positions, one list a rank: what
/// [`positions_table`] holds.
pub fn rank_positions(par: &Parallelism, seq: i64) -> Vec<Vec<i64>> {
    (0..par.cp)
        .map(|c| {
            par.sequence_ranges(seq, c)
                .into_iter()
                .flat_map(|[a, b]| a..b)
                .collect()
        })
        .collect()
}

/// A rank's place in its CP group, in the graph: its CP rank and the
/// positions of its tokens and of the keys it gathers.
#[derive(Clone, Copy, Debug)]
pub struct CpPositions {
    /// The global positions of this rank's tokens (`s32[S / cp]`).
    pub local: InstrId,
    /// The global positions of the gathered keys (`s32[S]`), every rank's
    /// chunks in rank order.
    pub gathered: InstrId,
    /// This rank's CP rank (`s32[]`).
    pub rank: InstrId,
}

impl CpPositions {
    /// Built from `replica-id` for a sequence of `seq` tokens.
    pub fn new(
        b: &mut Builder,
        par: &Parallelism,
        seq: i64,
        fault: Option<Fault>,
    ) -> Result<Self, BuildError> {
        b.push_scope("cp_positions");
        let table = b.constant(positions_table(par, seq, fault));
        let gathered = b.reshape(table, &[seq])?;
        let c = cp_rank_index(b, par)?;
        let zero = b.scalar(ElementType::S32, 0.0);
        let row = b.add(
            Op::DynamicSlice {
                sizes: vec![1, seq / par.cp],
            },
            &[table, c, zero],
            Some(Shape::array(ElementType::S32, vec![1, seq / par.cp])),
        )?;
        let local = b.reshape(row, &[seq / par.cp])?;
        b.pop_scope();
        Ok(CpPositions {
            local,
            gathered,
            rank: c,
        })
    }
}

/// This rank's CP rank (`s32[]`), from its `replica-id`: rank `r` is CP
/// rank `(r / tp) % cp`.
pub fn cp_rank_index(b: &mut Builder, par: &Parallelism) -> Result<InstrId, BuildError> {
    let id = b.add(Op::ReplicaId, &[], None)?;
    let id = b.convert(id, ElementType::S32)?;
    let tp = b.scalar(ElementType::S32, par.tp as f64);
    let replica = b.binary(BinaryOp::Divide, id, tp)?;
    let cp = b.scalar(ElementType::S32, par.cp as f64);
    b.binary(BinaryOp::Remainder, replica, cp)
}
