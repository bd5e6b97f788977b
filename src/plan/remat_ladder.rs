//! The search's remat ladders: the layouts that differ in their remat
//! policy alone, evaluated in an order that leaves out the ones the others
//! decide.
//!
//! Two orders hold between a layout's remat twins under `none`,
//! `core-attention` and `full-layer`, and the search uses both
//! (`tests/it/plan.rs` holds them against a search compiled whole):
//!
//! - **Memory falls with remat:** each keeps a subset of what the one
//!   before keeps, so a twin that does not fit with more remat does not
//!   fit with less.
//! - **Time rises with remat** without pipeline stages: each recomputes
//!   what the one before kept (dots, elementwise work and, under sequence
//!   parallelism, the gathers), and nothing else changes. So a twin that
//!   fits with less remat is at least as fast as one with more. A
//!   pipeline's tick programs copy what they keep into rings, so there
//!   keeping less also moves fewer bytes, and every twin that fits is
//!   evaluated.
//!
//! `stage` is on no ladder: it keeps a stage's input alone, which with one
//! layer a stage can be more than `full-layer` keeps, and its priced time
//! can beat `full-layer`'s. It is always evaluated.
//!
//! So the most-remat twin of each ladder is evaluated first. Where it
//! does not fit, none of its twins would. Where it does, the others are
//! tried from the least remat up, and without stages the first that fits
//! settles the rest, which would only compute more.

use super::layout::Layout;
use hlatc_passes::RematPolicy;
use std::collections::HashMap;

/// Why a layout was left uncompiled, and the twin that decided it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Pruned {
    /// Its twin with more remat (less memory) does not fit.
    MoreRematDoesNotFit { twin: String },
    /// Its twin with less remat (less compute) fits.
    LessRematFits { twin: String },
    /// A twin that holds less by one choice (a smaller micro-batch,
    /// sequence parallelism, ZeRO-1, FSDP over every replica rather than
    /// HSDP, `bf16-pure`: `lighter_twins`) does not fit.
    LighterTwinDoesNotFit { twin: String },
    /// Its twin that keeps FSDP's gathered weights to the backward (no
    /// second gathers) fits, or a twin of that with less remat does.
    KeepingTwinFits { twin: String },
}

impl std::fmt::Display for Pruned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pruned::MoreRematDoesNotFit { twin } => {
                write!(f, "{twin} keeps less and does not fit")
            }
            Pruned::LessRematFits { twin } => write!(f, "{twin} recomputes less and fits"),
            Pruned::LighterTwinDoesNotFit { twin } => {
                write!(f, "{twin} holds less and does not fit")
            }
            Pruned::KeepingTwinFits { twin } => write!(
                f,
                "{twin} keeps its gathered weights to the backward, gathers less, and fits"
            ),
        }
    }
}

/// Evaluates `layouts` ladder by ladder: `evaluate` takes a round of
/// layouts (one from each ladder still open) and says, for each, whether
/// it fits. Returns the layouts left out, with why, in the order given.
pub fn climb(
    layouts: Vec<Layout>,
    mut evaluate: impl FnMut(&[Layout]) -> Vec<bool>,
) -> Vec<(Layout, Pruned)> {
    let mut ladders = ladders(layouts);
    let mut pruned = Vec::new();
    // The floors: each ladder's most-remat twin.
    let floors: Vec<Layout> = ladders.iter_mut().filter_map(|rungs| rungs.pop()).collect();
    let fits = evaluate(&floors);
    let mut open: Vec<Vec<Layout>> = Vec::new();
    for ((floor, fits), rungs) in floors.iter().zip(fits).zip(ladders) {
        match fits {
            false => pruned.extend(rungs.into_iter().map(|l| {
                let twin = floor.to_string();
                (l, Pruned::MoreRematDoesNotFit { twin })
            })),
            // Least remat first, from the back.
            true if !rungs.is_empty() => open.push(rungs.into_iter().rev().collect()),
            true => {}
        }
    }
    while !open.is_empty() {
        // Every ladder still open has a rung left.
        let round: Vec<Layout> = open.iter_mut().filter_map(|r| r.pop()).collect();
        let fits = evaluate(&round);
        let mut still = Vec::new();
        for ((tried, fits), rest) in round.iter().zip(fits).zip(open) {
            match fits && computes_less_with_less_remat(tried) {
                true => pruned.extend(rest.into_iter().map(|l| {
                    let twin = tried.to_string();
                    (l, Pruned::LessRematFits { twin })
                })),
                false if !rest.is_empty() => still.push(rest),
                false => {}
            }
        }
        open = still;
    }
    pruned
}

/// Whether `l`'s twins with more remat take at least its time. Not in a
/// pipeline: its tick programs copy what the policy keeps into the rings
/// of micro-batches in flight, so keeping less also moves fewer bytes, and
/// `core-attention` can be priced faster than `none`.
fn computes_less_with_less_remat(l: &Layout) -> bool {
    l.parallel.pp == 1
}

/// The layouts grouped by everything but their remat policy (`stage`
/// alone on its own), in the order first met, each ladder from the least
/// remat to the most.
fn ladders(layouts: Vec<Layout>) -> Vec<Vec<Layout>> {
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Vec<Layout>> = Vec::new();
    for l in layouts {
        let remat = match l.remat {
            RematPolicy::Stage => RematPolicy::Stage,
            _ => RematPolicy::None,
        };
        let key = Layout { remat, ..l.clone() }.to_string();
        let k = *at.entry(key).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[k].push(l);
    }
    for rungs in &mut out {
        rungs.sort_by_key(|l| rung(l.remat));
    }
    out
}

/// A policy's place on a ladder: by what it keeps, most first.
fn rung(p: RematPolicy) -> usize {
    RematPolicy::ALL
        .iter()
        .position(|&q| q == p)
        .unwrap_or(RematPolicy::ALL.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hlatc_models::kernels::{KernelPoint, KernelRequest};
    use hlatc_passes::neuron_check::Chip;
    use hlatc_step::precision::Precision;

    fn layout(spec: &str) -> Layout {
        let attention = KernelRequest::plain(KernelPoint::Attention);
        Layout::parse(spec, 8, Chip::Trn1, Precision::Bf16Master, attention).unwrap()
    }

    /// Climbs the ladders of `specs`, a layout fitting where `fits` says;
    /// the rounds evaluated and what was left out.
    fn climb_over(specs: &[&str], fits: &[&str]) -> (Vec<Vec<String>>, Vec<(String, Pruned)>) {
        let mut rounds = Vec::new();
        let pruned = climb(specs.iter().map(|s| layout(s)).collect(), |round| {
            rounds.push(round.iter().map(|l| l.to_string()).collect());
            round
                .iter()
                .map(|l| fits.contains(&l.to_string().as_str()))
                .collect()
        });
        let pruned = pruned
            .into_iter()
            .map(|(l, why)| (l.to_string(), why))
            .collect();
        (rounds, pruned)
    }

    const NONE: &str = "tp=2,pp=1,dp=4,remat=none,micro_batch=1,precision=bf16-master";
    const CORE: &str = "tp=2,pp=1,dp=4,remat=core-attention,micro_batch=1,precision=bf16-master";
    const FULL: &str = "tp=2,pp=1,dp=4,remat=full-layer,micro_batch=1,precision=bf16-master";

    #[test]
    fn a_floor_that_does_not_fit_leaves_its_twins_out() {
        let (rounds, pruned) = climb_over(&[NONE, CORE, FULL], &[]);
        assert_eq!(rounds, vec![vec![FULL.to_string()]]);
        let twin = FULL.to_string();
        let why = Pruned::MoreRematDoesNotFit { twin };
        assert_eq!(pruned, vec![(NONE.into(), why.clone()), (CORE.into(), why)]);
    }

    #[test]
    fn the_least_remat_that_fits_settles_the_twins_above_it() {
        let (rounds, pruned) = climb_over(&[FULL, NONE, CORE], &[FULL, CORE]);
        let [full, none, core] = [FULL, NONE, CORE].map(String::from);
        assert_eq!(rounds, vec![vec![full], vec![none], vec![core]]);
        assert!(pruned.is_empty());
        let (_, pruned) = climb_over(&[NONE, CORE, FULL], &[FULL, NONE]);
        let twin = NONE.to_string();
        assert_eq!(pruned, vec![(CORE.into(), Pruned::LessRematFits { twin })]);
    }

    #[test]
    fn a_pipeline_s_fitting_twins_are_all_evaluated_and_stage_is_on_no_ladder() {
        let staged = |remat: &str| {
            format!("tp=2,pp=2,dp=2,remat={remat},micro_batch=1,precision=bf16-master")
        };
        let specs = ["none", "core-attention", "full-layer", "stage"].map(staged);
        let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
        let (rounds, pruned) = climb_over(&specs, &specs);
        assert!(pruned.is_empty());
        assert_eq!(rounds.concat().len(), 4);
        assert_eq!(rounds[0], vec![specs[2].to_string(), specs[3].to_string()]);
    }
}
