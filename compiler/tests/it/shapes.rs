//! Shapes and element types: printed as XLA prints them, and each element
//! type's proto number, name and range agree with the table.

use hlatc_compiler::{ElementType, Shape};

#[test]
fn shapes_print_like_xla() {
    assert_eq!(
        Shape::array(ElementType::F32, [2, 3]).to_string(),
        "f32[2,3]{1,0}"
    );
    assert_eq!(Shape::scalar(ElementType::Bf16).to_string(), "bf16[]");
    let t = Shape::Tuple(vec![
        Shape::scalar(ElementType::F32),
        Shape::array(ElementType::S32, [4]),
    ]);
    assert_eq!(t.to_string(), "(f32[], s32[4]{0})");
    let sent = Shape::Tuple(vec![
        t.clone(),
        Shape::scalar(ElementType::U32),
        Shape::Token,
    ]);
    assert_eq!(sent.to_string(), "((f32[], s32[4]{0}), u32[], token[])");
    assert_eq!(sent.leaf_count(), 4);
    assert!(Shape::Token.compatible(&Shape::Token));
    assert!(!Shape::Token.compatible(&Shape::Tuple(vec![])));
    assert_eq!(t.subshape(&[1]), Some(&Shape::array(ElementType::S32, [4])));
    assert_eq!(t.subshape(&[2]), None);
}

#[test]
fn primitive_types_round_trip() {
    for t in ElementType::ALL {
        assert_eq!(
            ElementType::from_primitive_type(t.primitive_type()),
            Some(t)
        );
        assert_eq!(ElementType::from_name(t.name()), Some(t));
    }
    assert_eq!(ElementType::Bf16.primitive_type(), 16);
    assert_eq!(ElementType::from_primitive_type(13), None);
    for (i, t) in ElementType::ALL.into_iter().enumerate() {
        assert_eq!(
            t as usize, i,
            "{t}: the table follows the declaration order"
        );
    }
    assert_eq!(ElementType::S4.integer_range(), Some((-8, 7)));
    assert_eq!(ElementType::U2.integer_range(), Some((0, 3)));
    assert_eq!(
        (ElementType::S4.byte_size(), ElementType::S4.bit_width()),
        (1, 4)
    );
    for t in ElementType::ALL {
        let known = t.minifloat().is_some()
            || matches!(
                t,
                ElementType::F16 | ElementType::Bf16 | ElementType::F32 | ElementType::F64
            );
        assert_eq!(t.is_float(), known, "{t}");
    }
}
