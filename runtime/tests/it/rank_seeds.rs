//! Generated inputs: each rank draws from a seed of its own, rank 0 from
//! the one given.

use hlatc_runtime::inputs::{rank_seed, SplitMix64};

#[test]
fn rank_zero_keeps_the_seed_and_other_ranks_differ() {
    assert_eq!(rank_seed(7, 0), 7);
    let seeds: std::collections::BTreeSet<u64> = (0..64).map(|r| rank_seed(7, r)).collect();
    assert_eq!(seeds.len(), 64);
    let first = |r| SplitMix64::new(rank_seed(7, r)).next_u64();
    assert_ne!(first(1), SplitMix64::new(7).clone().next_u64());
    // Not rank 0's stream one step on.
    let mut zero = SplitMix64::new(7);
    zero.next_u64();
    assert_ne!(first(1), zero.next_u64());
}
