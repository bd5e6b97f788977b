//! What each rank holds of the parameters, read from a sharded bundle's
//! manifest: from the rule it states (`parallel.tp_split`: each divided
//! parameter's split, applied to a TP rank as `hlatc_models::parallel`
//! divides it), or from the per-TP-rank lists (`parallel.tp_ranks`) that
//! manifests written before the rule hold. Both read to the same
//! holdings; a reader need not know which it was given. The rule's runs
//! of layers ([`super::listing`]) are read out layer by layer.

use super::listing::{self, expand, AtLayer, ListedView, ListingError};
use hlatc_models::{Parallelism, TpSplit};
use hlatc_step::rank_inputs::{expert_slice, hf_slice_named, HfSlice};
use serde::Deserialize;

/// One parameter a TP rank holds a share of: its input's index and name,
/// and the Hugging Face ranges it holds, in the order they lie in its
/// tensor.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct ParameterHolding {
    pub index: usize,
    pub name: String,
    pub holds: Vec<HfSlice>,
}

/// The holdings a manifest states.
#[derive(Clone, Debug)]
pub struct ManifestHoldings {
    tp: i64,
    source: Source,
}

#[derive(Clone, Debug)]
enum Source {
    /// The rule: each divided parameter's split.
    Rule(Vec<SplitView>),
    /// Every TP rank's holdings, listed (manifests before the rule).
    Listed(Vec<Vec<ParameterHolding>>),
}

#[derive(Clone, Debug, Deserialize)]
struct SplitView {
    index: usize,
    name: String,
    dims: Vec<i64>,
    split: TpSplit,
    #[serde(default)]
    parts: Vec<PartView>,
}

#[derive(Clone, Debug, Deserialize)]
struct PartView {
    name: String,
    rows: [i64; 2],
    /// One expert of a stack (its row `rows[0]`), not rows of a fused
    /// tensor.
    #[serde(default)]
    stacked: bool,
}

impl SplitView {
    /// What TP rank `t` holds of the parameter: of a stack of experts, its
    /// range of each expert's tensor; else its pieces, each a range of the
    /// tensor (or fused tensor's member) it lies in.
    fn holds(&self, t: i64, par: &Parallelism) -> Vec<HfSlice> {
        let pieces = self.split.pieces(&self.dims, t, par);
        if self.parts.iter().any(|p| p.stacked) {
            return self
                .parts
                .iter()
                .flat_map(|p| {
                    pieces
                        .iter()
                        .map(|piece| expert_slice(&p.name, p.rows[0], piece))
                })
                .collect();
        }
        pieces
            .iter()
            .map(|piece| {
                let part = self
                    .parts
                    .get(piece.block)
                    .map(|p| (p.name.as_str(), p.rows[0]));
                hf_slice_named(&self.name, part, piece)
            })
            .collect()
    }
}

/// A run's split at a layer: its names and its index.
impl AtLayer for SplitView {
    fn at_layer(&self, layer: i64, shift: usize) -> Result<Self, ListingError> {
        Ok(SplitView {
            index: listing::shifted(self.index, shift)?,
            name: listing::at_layer(&self.name, layer),
            dims: self.dims.clone(),
            split: self.split.clone(),
            parts: self
                .parts
                .iter()
                .map(|p| PartView {
                    name: listing::at_layer(&p.name, layer),
                    rows: p.rows,
                    stacked: p.stacked,
                })
                .collect(),
        })
    }
}

#[derive(Deserialize)]
struct ParallelView {
    tp: i64,
    /// Runs of layers, or (manifests before runs) every split.
    #[serde(default)]
    tp_split: Option<Vec<ListedView<SplitView>>>,
    #[serde(default)]
    tp_ranks: Option<Vec<TpRankView>>,
}

/// Why a manifest's `parallel` block states no holdings hlatc can read.
#[derive(Debug, thiserror::Error)]
pub enum HoldingsError {
    #[error("parallel: not a layout hlatc can read: {0}")]
    Layout(#[source] serde_json::Error),
    #[error("parallel.tp is {0}")]
    Tp(i64),
    #[error("parallel.tp_split: {0}")]
    Split(#[source] ListingError),
    #[error("parallel.tp_ranks names TP rank {tp_rank} of {tp}")]
    TpRank { tp_rank: i64, tp: i64 },
    #[error("parallel holds neither tp_split nor tp_ranks")]
    Neither,
}

#[derive(Deserialize)]
struct TpRankView {
    tp_rank: i64,
    parameters: Vec<ParameterHolding>,
}

impl ManifestHoldings {
    /// The holdings of the manifest `manifest` (its whole JSON): `None`
    /// for a single-device bundle (no `parallel` block); an error names
    /// what is missing or malformed.
    pub fn from_manifest(manifest: &serde_json::Value) -> Result<Option<Self>, HoldingsError> {
        let Some(parallel) = manifest.get("parallel") else {
            return Ok(None);
        };
        let view = ParallelView::deserialize(parallel).map_err(HoldingsError::Layout)?;
        if view.tp < 1 {
            return Err(HoldingsError::Tp(view.tp));
        }
        let source = match (view.tp_split, view.tp_ranks) {
            (Some(split), _) => Source::Rule(expand(split).map_err(HoldingsError::Split)?),
            (None, Some(ranks)) => {
                let mut listed = vec![Vec::new(); view.tp as usize];
                for r in ranks {
                    let slot = usize::try_from(r.tp_rank)
                        .ok()
                        .and_then(|t| listed.get_mut(t))
                        .ok_or(HoldingsError::TpRank {
                            tp_rank: r.tp_rank,
                            tp: view.tp,
                        })?;
                    *slot = r.parameters;
                }
                Source::Listed(listed)
            }
            (None, None) => return Err(HoldingsError::Neither),
        };
        Ok(Some(ManifestHoldings {
            tp: view.tp,
            source,
        }))
    }

    /// Whether the manifest states the rule (not per-rank lists).
    pub fn is_rule(&self) -> bool {
        matches!(self.source, Source::Rule(_))
    }

    /// What global rank `rank` holds of every parameter it holds a share
    /// of, in input order: its TP rank's (`rank % tp`).
    pub fn of_rank(&self, rank: i64) -> Vec<ParameterHolding> {
        let t = rank.rem_euclid(self.tp);
        match &self.source {
            Source::Listed(listed) => listed[t as usize].clone(),
            Source::Rule(splits) => {
                let par = Parallelism {
                    tp: self.tp,
                    ..Parallelism::default()
                };
                splits
                    .iter()
                    .map(|s| ParameterHolding {
                        index: s.index,
                        name: s.name.clone(),
                        holds: s.holds(t, &par),
                    })
                    .collect()
            }
        }
    }
}
