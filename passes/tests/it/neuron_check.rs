//! The Neuron pre-flight's tables: instruction counts of a dot by its
//! tiles, and the rules' ids, sources and severities per chip and SDK.

use hlatc_compiler::ir::op::DotDims;
use hlatc_passes::neuron_check::{
    dot_instructions, rule, Chip, Code, Sdk, Severity, NXD_SPMD_RANK, RECOGNIZED_CUSTOM_CALLS,
    RULES, SORT_REPORT,
};

#[test]
fn a_dot_takes_a_tile_per_128_by_128_by_512_block() {
    let linear = DotDims {
        lhs_contracting: vec![1],
        rhs_contracting: vec![1],
        ..Default::default()
    };
    // [4096, 4096] . [4096, 4096]^T: 32 x 32 x 8 either way round.
    assert_eq!(
        dot_instructions(&linear, &[4096, 4096], &[4096, 4096]),
        8192
    );
    // A sliver: one tile.
    assert_eq!(dot_instructions(&linear, &[1, 1], &[1, 1]), 1);
    // [8, 300] . [1000, 300]^T: stationary 8 rows, 1000 moving columns
    // (3 x 1 x 2 = 6) beats stationary 1000 (3 x 8 x 1 = 24).
    assert_eq!(dot_instructions(&linear, &[8, 300], &[1000, 300]), 6);
    let batched = DotDims {
        lhs_batch: vec![0],
        lhs_contracting: vec![2],
        rhs_batch: vec![0],
        rhs_contracting: vec![1],
    };
    assert_eq!(
        dot_instructions(&batched, &[3, 128, 128], &[3, 128, 512]),
        3
    );
}

const ERROR_CODES: &str = "compiler/error-codes/";

#[test]
fn ids_are_unique_and_sources_are_pages_of_the_sdk() {
    for (i, r) in RULES.iter().enumerate() {
        assert!(RULES[..i].iter().all(|o| o.id != r.id), "{} twice", r.id);
        assert!(!r.sources.is_empty(), "{} has no source", r.id);
        assert!(
            r.sources
                .iter()
                .all(|s| s.ends_with(".rst") || [NXD_SPMD_RANK, SORT_REPORT].contains(s)),
            "{}",
            r.id
        );
        if let Code::Ncc(c) = r.code {
            assert!(
                r.sources
                    .iter()
                    .any(|s| *s == format!("{ERROR_CODES}{c}.rst")),
                "{}: the page of NCC_{c} is not among its sources",
                r.id
            );
        }
    }
    assert_eq!(RECOGNIZED_CUSTOM_CALLS.len(), 29);
}

#[test]
fn severities_follow_the_chip_and_the_sdk() {
    let dot32 = rule("integer-dot-32").unwrap();
    assert_eq!(
        dot32.severity(Chip::Trn1, Sdk::Next),
        Some(Severity::Warning)
    );
    assert_eq!(
        dot32.severity(Chip::Trn2, Sdk::Next),
        Some(Severity::Refusal)
    );
    let sort = rule("sort-trn2").unwrap();
    assert_eq!(sort.severity(Chip::Trn1, Sdk::Next), None);
    assert_eq!(
        sort.severity(Chip::Trn2, Sdk::V2_32),
        Some(Severity::Refusal)
    );
    let narrowed = rule("narrowed-64-bit-integer").unwrap();
    assert_eq!(narrowed.severity(Chip::Trn2, Sdk::Next), None);
    assert_eq!(
        narrowed.severity(Chip::Trn1, Sdk::Next),
        Some(Severity::Warning)
    );
}
