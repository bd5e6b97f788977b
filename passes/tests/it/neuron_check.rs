//! The Neuron pre-flight's tables: instruction counts of a dot by its
//! tiles, the rules' ids, sources and severities per chip and SDK, and
//! the integer flags a bundle pins.

use hlatc_compiler::ir::op::DotDims;
use hlatc_passes::neuron_check::{
    check_module, dot_instructions, pinned_flags, rule, Chip, Code, DowncastOp, Downcasts,
    IntegerFlags, Sdk, Severity, NXD_SPMD_RANK, RECOGNIZED_CUSTOM_CALLS, RULES, SORT_REPORT,
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
    // trn3 shares trn2's integers and sort, and has f8e4m3fn.
    for sdk in Sdk::ALL {
        for id in [
            "integer-dot-32",
            "sort-trn2",
            "narrowed-64-bit-integer",
            "f64",
        ] {
            let r = rule(id).unwrap();
            assert_eq!(
                r.severity(Chip::Trn3, sdk),
                r.severity(Chip::Trn2, sdk),
                "{id} {sdk}"
            );
        }
        let fn8 = rule("f8e4m3fn").unwrap();
        assert_eq!(fn8.severity(Chip::Trn2, sdk), Some(Severity::Refusal));
        assert_eq!(fn8.severity(Chip::Trn3, sdk), None);
    }
}

/// A module with an integer all-reduce: the flags a bundle pins permit
/// exactly that downcast (a warning, as under 2.32), run int64 natively
/// where the chip can, and so judge it the same under either SDK.
#[test]
fn pinned_flags_permit_exactly_the_downcasts_a_module_holds() {
    let m = hlatc_compiler::formats::text::parse_module(
        "HloModule m\n\nadd {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n\nENTRY e {\n  p = s32[4] parameter(0)\n  ROOT r = s32[4] all-reduce(p), replica_groups={}, to_apply=add\n}\n",
    )
    .unwrap();
    let all_reduce = rule("integer-all-reduce").unwrap();
    for chip in Chip::ALL {
        let pinned = pinned_flags(&m, chip);
        assert_eq!(pinned.downcast, Downcasts::NONE.with(DowncastOp::AllReduce));
        assert_eq!(pinned.native_int64, chip != Chip::Trn1);
        let mut expected = vec!["--implicit-integer-downcast=all_reduce".to_string()];
        if chip != Chip::Trn1 {
            expected.insert(0, "--native-int64=enabled".to_string());
        }
        assert_eq!(pinned.compile_flags(chip), expected);
        assert_eq!(all_reduce.severity(chip, pinned), Some(Severity::Warning));
        assert_eq!(
            all_reduce.severity(chip, Sdk::Next),
            Some(Severity::Refusal)
        );
        let report = check_module(&m, chip, pinned);
        assert!(!report.refused(), "{chip}");
        assert_eq!(report.warnings().count(), 1, "{chip}");
        // What a bundle's flags say is read back, and the rest defaulted.
        let read = IntegerFlags::from_compile_flags(&expected, Sdk::V2_32.into()).unwrap();
        assert_eq!(read.flags, pinned);
        assert_eq!(read.pinned, expected.len());
    }
    let clean = hlatc_compiler::formats::text::parse_module(
        "HloModule m\n\nENTRY e {\n  ROOT p = f32[4] parameter(0)\n}\n",
    )
    .unwrap();
    assert_eq!(pinned_flags(&clean, Chip::Trn1).downcast, Downcasts::NONE);
    assert_eq!(
        IntegerFlags::from_compile_flags(
            &["--implicit-integer-downcast=dot,sort".to_string()],
            Sdk::V2_32.into()
        )
        .unwrap_err()
        .to_string(),
        "--implicit-integer-downcast=dot,sort: not a value neuronx-cc takes"
    );
    for value in [
        "none",
        "all",
        "dot,pow",
        "scatter,all_reduce,reduce_scatter",
    ] {
        assert_eq!(Downcasts::parse(value).unwrap().flag_value(), value);
    }
}
