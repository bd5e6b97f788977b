//! Kernel requests as `--kernel` and `kernels=` spell them, and which
//! implementation a point takes over a batch: each request read back, each
//! bad one refused by variant, each unmet constraint named.

use hlatc_models::kernels::{
    ImplKind, KernelArg, KernelError, KernelPoint, KernelRequest, KernelRequestError as E,
    StepShape, Unmet,
};
use hlatc_models::{AttentionKernel, BatchShape, Kernels, ModelConfig, SoftmaxKernel};

fn batch(seq_len: i64) -> BatchShape {
    BatchShape {
        batch_size: 1,
        seq_len,
    }
}

#[test]
fn requests_read_back_as_written() {
    for text in [
        "attention=blocked",
        "attention=blocked:128",
        "attention=hlo",
        "rmsnorm=hlo",
    ] {
        assert_eq!(KernelRequest::parse(text).unwrap().to_string(), text);
    }
    let r = KernelRequest::parse("attention=blocked:64").unwrap();
    assert_eq!(
        (r.point, r.kind, r.argument),
        (
            KernelPoint::Attention,
            ImplKind::Blocked,
            Some(KernelArg::Tile(64))
        )
    );
}

#[test]
fn bad_requests_are_refused_by_what_is_wrong() {
    assert_eq!(
        KernelRequest::parse("attention"),
        Err(E::NoEquals("attention".into()))
    );
    assert_eq!(
        KernelRequest::parse("attn=blocked"),
        Err(E::UnknownPoint {
            given: "attn".into()
        })
    );
    assert_eq!(
        KernelRequest::parse("rmsnorm=blocked"),
        Err(E::UnknownImplementation {
            point: KernelPoint::RmsNorm,
            given: "blocked".into()
        })
    );
    for arg in ["0", "-8", "x", ""] {
        let e = KernelRequest::parse(&format!("attention=blocked:{arg}")).unwrap_err();
        assert!(
            matches!(e, E::BadArgument { ref given, .. } if given == arg),
            "{arg}: {e:?}"
        );
    }
    assert!(matches!(
        KernelRequest::parse("attention=hlo:4"),
        Err(E::BadArgument {
            implementation: ImplKind::Hlo,
            ..
        })
    ));
    // The message lists what there is.
    let e = KernelRequest::parse("attention=flash").unwrap_err();
    assert!(
        e.to_string()
            .ends_with("it has: hlo, blocked, looped, imported"),
        "{e}"
    );
}

#[test]
fn blocked_takes_the_tile_asked_for_or_the_largest_that_cuts_twice() {
    let blocked = |arg: Option<i64>| KernelRequest {
        point: KernelPoint::Attention,
        kind: ImplKind::Blocked,
        argument: arg.map(KernelArg::Tile),
    };
    let unmet = |e: KernelError| match e {
        KernelError::Unmet(u) => u,
        KernelError::Imported(e) => panic!("{e}"),
    };
    let step = |s| StepShape::of(&ModelConfig::tiny(), batch(s), false);
    let tile = |k: Kernels| match k.attention {
        AttentionKernel::Blocked { tile } => tile,
        AttentionKernel::Hlo | AttentionKernel::Looped { .. } | AttentionKernel::Imported(_) => 0,
    };
    let with = |arg, s| {
        Kernels::default()
            .with(&blocked(arg), &step(s))
            .map_err(unmet)
    };
    assert_eq!(with(None, 8192).map(tile), Ok(512));
    assert_eq!(with(None, 512).map(tile), Ok(256));
    assert_eq!(with(None, 24).map(tile), Ok(8));
    assert_eq!(
        with(Some(96), 8192),
        Err(Unmet::TileDoesNotDivide {
            tile: 96,
            seq_len: 8192
        })
    );
    assert_eq!(with(Some(24), 24).map(tile), Ok(24));
    assert_eq!(with(None, 1), Err(Unmet::NoTile { seq_len: 1 }));
    assert_eq!(with(None, 7), Err(Unmet::NoTile { seq_len: 7 }));
    // A point with one implementation has no other to take.
    let other = KernelRequest {
        point: KernelPoint::Swiglu,
        kind: ImplKind::Blocked,
        argument: None,
    };
    assert_eq!(
        Kernels::default().with(&other, &step(16)).map_err(unmet),
        Err(Unmet::NotAnImplementation {
            point: KernelPoint::Swiglu,
            kind: ImplKind::Blocked
        })
    );
}

#[test]
fn the_manifest_records_every_point_and_reads_it_back() {
    let k = Kernels {
        attention: AttentionKernel::Blocked { tile: 128 },
        softmax: SoftmaxKernel::Hlo,
    };
    let json = serde_json::to_string(&k).unwrap();
    assert_eq!(
        json,
        r#"{"attention":"blocked:128","softmax":"hlo","rmsnorm":"hlo","swiglu":"hlo","cross-entropy":"hlo"}"#
    );
    assert_eq!(serde_json::from_str::<Kernels>(&json).unwrap(), k);
    // Looped attention reads back too (a bundle of it could not be run).
    let looped = Kernels {
        attention: AttentionKernel::Looped { tile: 512 },
        ..Kernels::default()
    };
    let json = serde_json::to_string(&looped).unwrap();
    assert!(json.contains(r#""attention":"looped:512""#), "{json}");
    assert_eq!(serde_json::from_str::<Kernels>(&json).unwrap(), looped);
    // A manifest from before softmax was a point: fused, as it always was.
    let before =
        r#"{"attention":"blocked:128","rmsnorm":"hlo","swiglu":"hlo","cross-entropy":"hlo"}"#;
    let read = serde_json::from_str::<Kernels>(before).unwrap();
    assert_eq!(read.softmax, SoftmaxKernel::Fused);
    for bad in [
        r#"{"attention":"blocked"}"#,
        r#"{"attention":"looped"}"#,
        r#"{"attention":"fast"}"#,
        r#"{"norm":"hlo"}"#,
    ] {
        assert!(serde_json::from_str::<Kernels>(bad).is_err(), "{bad}");
    }
}

/// Every implementation is some point's, and each point makes each of its
/// implementations: a kind added to `ImplKind` and not to its point could
/// not be asked for, and one its point lists but `Kernels::with` does not
/// make would be refused as no implementation of it.
#[test]
fn every_implementation_is_a_points_and_each_is_made() {
    use strum::IntoEnumIterator;
    for kind in ImplKind::iter() {
        assert!(
            KernelPoint::ALL
                .iter()
                .any(|p| p.implementations().contains(&kind)),
            "{kind:?} is no point's"
        );
    }
    let step = StepShape::of(&ModelConfig::tiny(), batch(256), false);
    for point in KernelPoint::ALL {
        for &kind in point.implementations() {
            let argument = match kind {
                ImplKind::Imported => Some(KernelArg::File("no-such-kernel.json".into())),
                _ => None,
            };
            let request = KernelRequest {
                point,
                kind,
                argument,
            };
            match Kernels::default().with(&request, &step) {
                // The file is read: the kind was made.
                Ok(_) | Err(KernelError::Imported(_)) => {}
                Err(e) => panic!("{request}: {e}"),
            }
        }
    }
}
