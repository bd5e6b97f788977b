//! Tensor-parallel splits of a parameter: rows keep whole heads, columns
//! split the input dimension, the vocabulary pads its last rank, each
//! gathered back whole; and the groups of ranks that hold a range or its
//! copies.

use hlatc_compiler::{ElementType, Literal};
use hlatc_models::parallel::split::{copy_groups, holder_groups, Units};
use hlatc_models::{Parallelism, TpSplit};

fn par(tp: i64, dp: i64) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel: false,
        zero1: false,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

fn counting(dims: &[i64]) -> Literal {
    let n: i64 = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Literal::from_f32(dims.to_vec(), &v).unwrap()
}

#[test]
fn rows_keep_whole_heads_of_each_block_and_replicate_scarce_kv_heads() {
    // q: 4 heads of 2 rows, k: 2 heads of 2 rows, over TP 4: rank 3
    // holds q head 3 and k head 1 (shared with rank 2).
    let split = TpSplit::Rows(vec![
        Units { count: 4, size: 2 },
        Units { count: 2, size: 2 },
    ]);
    let p = split.pieces(&[12, 3], 3, &par(4, 1));
    assert_eq!(p[0].global, [6, 8]);
    assert_eq!((p[1].global, p[1].local, p[1].copies), ([10, 12], 2, 2));
    let full = counting(&[12, 3]);
    let local = split.shard(&full, 3, &par(4, 1));
    assert_eq!(local.dims(), &[4, 3]);
    assert_eq!(
        local.to_f32_vec(),
        vec![18., 19., 20., 21., 22., 23., 30., 31., 32., 33., 34., 35.]
    );
    let all: Vec<Literal> = (0..4).map(|t| split.shard(&full, t, &par(4, 1))).collect();
    assert_eq!(
        split.gather(&all.iter().collect::<Vec<_>>(), &[12, 3], &par(4, 1)),
        full
    );
}

#[test]
fn columns_split_the_input_dimension() {
    let split = TpSplit::Columns(Units { count: 4, size: 1 });
    let full = counting(&[2, 4]);
    let local = split.shard(&full, 1, &par(2, 1));
    assert_eq!(local.to_f32_vec(), vec![2., 3., 6., 7.]);
    let all: Vec<Literal> = (0..2).map(|t| split.shard(&full, t, &par(2, 1))).collect();
    assert_eq!(
        split.gather(&all.iter().collect::<Vec<_>>(), &[2, 4], &par(2, 1)),
        full
    );
}

#[test]
fn vocabulary_pads_the_last_rank_with_zero_rows() {
    let full = counting(&[5, 2]);
    let last = TpSplit::Vocab.shard(&full, 2, &par(3, 1));
    assert_eq!(last.dims(), &[2, 2]);
    assert_eq!(last.to_f32_vec(), vec![8., 9., 0., 0.]);
    let all: Vec<Literal> = (0..3)
        .map(|t| TpSplit::Vocab.shard(&full, t, &par(3, 1)))
        .collect();
    assert_eq!(
        TpSplit::Vocab.gather(&all.iter().collect::<Vec<_>>(), &[5, 2], &par(3, 1)),
        full
    );
    assert_eq!(full.ty(), ElementType::F32);
}

#[test]
fn holders_of_a_range_span_dp_replicas() {
    let p = par(4, 2);
    assert_eq!(
        holder_groups(1, false, &p),
        vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
    );
    assert_eq!(
        holder_groups(2, false, &p),
        vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]
    );
    assert_eq!(
        holder_groups(4, false, &p),
        vec![(0..8).collect::<Vec<_>>()]
    );
}

#[test]
fn copies_of_a_range_stay_within_their_dp_replica() {
    let p = par(4, 2);
    assert_eq!(copy_groups(1, &p).len(), 8);
    assert_eq!(
        copy_groups(2, &p),
        vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
    );
    assert_eq!(copy_groups(4, &p), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
}
