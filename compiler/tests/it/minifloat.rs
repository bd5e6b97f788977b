//! hlatc's narrow float codec (8-bit, `f4e2m1fn`) against `ml_dtypes`, which XLA's literals use:
//! every code's value, and how values between, at and past the codes round
//! (`tests/fixtures/minifloat/ml_dtypes.tsv`, written by
//! `tools/minifloat_table.py`). Then the same types through text and proto
//! literals, and sub-byte integers.

use hlatc_compiler::{ElementType, Literal, Scalar};

fn table() -> Vec<(ElementType, String, String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/minifloat/ml_dtypes.tsv"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let ty = ElementType::from_name(f[0]).unwrap_or_else(|| panic!("type {}", f[0]));
            (ty, f[1].to_string(), f[2].to_string(), f[3].to_string())
        })
        .collect()
}

fn f64_of(hex: &str) -> f64 {
    f64::from_bits(u64::from_str_radix(hex, 16).unwrap())
}

#[test]
fn every_code_decodes_and_every_probe_rounds_as_ml_dtypes_does() {
    let rows = table();
    let mut seen = std::collections::BTreeSet::new();
    let (mut decoded, mut encoded, mut overflows) = (0, 0, 0);
    for (ty, kind, input, output) in &rows {
        seen.insert(*ty);
        let format = ty.minifloat().unwrap();
        match kind.as_str() {
            "decode" => {
                let code = u8::from_str_radix(input, 16).unwrap();
                let v = format.decode(code);
                if output == "nan" {
                    assert!(v.is_nan(), "{ty} code {input}: {v}, ml_dtypes NaN");
                } else {
                    assert_eq!(
                        v.to_bits(),
                        f64_of(output).to_bits(),
                        "{ty} code {input}: {v}"
                    );
                }
                decoded += 1;
            }
            "encode" => {
                let x = f64_of(input);
                let got = format.encode(x);
                if output == "overflow" {
                    assert_eq!(got, None, "{ty} {x}: rounds past the largest finite value");
                    overflows += 1;
                } else {
                    let want = u8::from_str_radix(output, 16).unwrap();
                    assert_eq!(got, Some(want), "{ty} {x}: {got:x?}, ml_dtypes {want:#04x}");
                }
                encoded += 1;
            }
            other => panic!("unknown row kind {other}"),
        }
    }
    let f8: Vec<ElementType> = ElementType::ALL
        .into_iter()
        .filter(|t| t.minifloat().is_some())
        .collect();
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        f8,
        "every format is in the table"
    );
    let codes: usize = f8.iter().map(|t| 1 << t.bit_width()).sum();
    assert_eq!(decoded, codes);
    assert!(
        encoded > 3000 && overflows > 30,
        "{encoded} probes, {overflows} overflows"
    );
}

#[test]
fn largest_finite_values_are_the_known_ones() {
    let max = |t: ElementType| t.minifloat().unwrap().max();
    assert_eq!(max(ElementType::F8E4M3FN), 448.0);
    assert_eq!(max(ElementType::F8E5M2), 57344.0);
    assert_eq!(max(ElementType::F8E4M3FNUZ), 240.0);
    assert_eq!(max(ElementType::F8E5M2FNUZ), 57344.0);
    assert_eq!(max(ElementType::F8E4M3B11FNUZ), 30.0);
    assert_eq!(max(ElementType::F8E4M3), 240.0);
    assert_eq!(max(ElementType::F8E3M4), 15.5);
    assert_eq!(max(ElementType::F4E2M1FN), 6.0);
    assert_eq!(max(ElementType::F8E8M0FNU), 2f64.powi(127));
}

#[test]
fn narrow_literals_hold_their_values_and_refuse_what_does_not_fit() {
    let l = Literal::from_scalars(
        ElementType::F8E4M3FN,
        vec![4],
        &[
            Scalar::Float(0.1),
            Scalar::Float(449.0),
            Scalar::Float(-0.0),
            Scalar::Float(f64::INFINITY),
        ],
    )
    .unwrap();
    assert_eq!(l.bytes(), &[0x1d, 0x7e, 0x80, 0x7f]);
    assert_eq!(l.get(0), Scalar::Float(0.1015625));
    assert_eq!(l.to_string(), "{0.1015625, 448, -0.0, nan}");
    let e = Literal::from_scalars(ElementType::F8E4M3FN, vec![], &[Scalar::Float(470.0)]);
    assert_eq!(
        e.unwrap_err().to_string(),
        "value 470 is not representable as f8e4m3fn"
    );

    let s4 = Literal::from_scalars(
        ElementType::S4,
        vec![3],
        &[Scalar::Int(-8), Scalar::Int(-1), Scalar::Int(7)],
    )
    .unwrap();
    assert_eq!(
        s4.bytes(),
        &[0x08, 0x0f, 0x07],
        "low bits, as ml_dtypes keeps them"
    );
    assert_eq!(s4.to_i64_vec(), vec![-8, -1, 7]);
    assert!(Literal::from_scalars(ElementType::S4, vec![], &[Scalar::Int(8)]).is_err());
    assert!(Literal::from_scalars(ElementType::U2, vec![], &[Scalar::Int(4)]).is_err());
    let e = Literal::from_bytes(ElementType::U4, vec![2], vec![0x0f, 0x1f]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "u4 element 1 is the byte 0x1f; only its low 4 bits may be set"
    );
}

#[test]
fn mx_types_read_literals_as_xlas_text_reader_does() {
    // Measured through jaxlib's HLO parser (the bytes of its literals).
    let e8m0 = ElementType::F8E8M0FNU.minifloat().unwrap();
    let cases: [(f64, Option<u8>); 12] = [
        (2f64.powi(-127), Some(0x00)),
        (5.877472e-39, Some(0x01)),
        (5.8774717e-39, Some(0x00)),
        (1e-40, Some(0x00)),
        (7e-39, Some(0x01)),
        (1.4, Some(0x7f)),
        (1.5, Some(0x80)),
        (3.0, Some(0x81)),
        (1.7e38, Some(0xfe)),
        // "out of range for literal's primitive type F8E8M0FNU"
        (0.0, None),
        (-1.0, None),
        (3e38, None),
    ];
    for (v, want) in cases {
        assert_eq!(e8m0.encode(v), want, "f8e8m0fnu {v:e}");
    }
    assert_eq!(e8m0.encode(f64::NAN), Some(0xff));
    assert_eq!(e8m0.encode(f64::INFINITY), Some(0xff));
    // f4e2m1fn saturates, and a NaN is zero of the other sign.
    let e2m1 = ElementType::F4E2M1FN.minifloat().unwrap();
    let cases = [
        (7.0, 0x7),
        (1e9, 0x7),
        (f64::INFINITY, 0x7),
        (f64::NEG_INFINITY, 0xf),
        (f64::NAN, 0x8),
        (-f64::NAN, 0x0),
        (0.25, 0x0),
        (0.75, 0x2),
    ];
    for (v, want) in cases {
        assert_eq!(e2m1.encode(v), Some(want), "f4e2m1fn {v}");
    }
}
