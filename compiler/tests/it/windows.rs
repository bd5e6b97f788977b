//! Windows and convolution dim_labels: a malformed one is refused with the
//! sentence the filetests, the conformance list and the docs compare.

use hlatc_compiler::ir::window::{ConvDims, Window, WindowDim};

/// The messages are compared as text by the filetests, the conformance
/// list and the docs: each variant must read as the sentence it
/// replaced, byte for byte.
#[test]
fn window_errors_read_as_before() {
    let cases = [
        ("size=3 stride", "window item 'stride' is not key=value"),
        ("size=3 size=3", "window gives 'size' twice"),
        ("stride=2", "window needs 'size='"),
        (
            "size=3x3 stride=2",
            "window 'stride' has 1 entries, 'size' has 2",
        ),
        ("size=a", "window size 'a' is not an integer"),
        ("size=3 pad=1_y", "window pad 'y' is not an integer"),
        (
            "size=3 rhs_reversal=2",
            "window rhs_reversal '2' must be 0 or 1",
        ),
        ("size=3 pad=1", "window pad '1' is not low_high"),
        (
            "size=3 shift=1",
            "unknown window item 'shift' (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal)",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(
            Window::parse(text).map_err(|e| e.to_string()),
            Err(message.into()),
            "{text}"
        );
    }
    let size = |d: WindowDim, base| d.output_size(base).map_err(|e| e.to_string());
    let of = WindowDim::of_size;
    assert_eq!(
        size(WindowDim { stride: 0, ..of(3) }, 5),
        Err("window size 3 and stride 0 must be positive".into())
    );
    assert_eq!(
        size(
            WindowDim {
                base_dilation: 0,
                ..of(3)
            },
            5
        ),
        Err("window dilations must be at least 1, got lhs_dilate 0 and rhs_dilate 1".into())
    );
    assert_eq!(
        size(
            WindowDim {
                padding_low: i64::MAX,
                ..of(3)
            },
            5
        ),
        Err("window over 5 elements is too large".into())
    );
    assert_eq!(
        size(
            WindowDim {
                padding_low: -4,
                padding_high: -2,
                ..of(3)
            },
            5
        ),
        Err("padding -4_-2 leaves fewer than no elements of 5".into())
    );
    assert_eq!(size(of(3), 5), Ok(3));
}

#[test]
fn dim_labels_errors_read_as_before() {
    let cases = [
        ("b01f_01io", "dim_labels 'b01f_01io' needs '->'"),
        ("b01f01io->b01f", "dim_labels 'b01f01io->b01f' needs '_' between input and kernel"),
        (
            "b01f_01io->b0f",
            "dim_labels 'b01f_01io->b0f' give input, kernel and output different numbers of spatial dimensions",
        ),
        ("b?_01io->b01f", "input labels 'b?' need at least the two roles ['b', 'f']"),
        (
            "b01f_01ix->b01f",
            "kernel labels '01ix': 'x' is neither i nor o nor a spatial dimension below 2",
        ),
        ("b00f_01io->b01f", "input labels 'b00f' name '0' twice"),
    ];
    for (text, message) in cases {
        assert_eq!(
            ConvDims::parse(text).map_err(|e| e.to_string()),
            Err(message.into()),
            "{text}"
        );
    }
    let dims = ConvDims {
        input_spatial: (2..13).collect(),
        ..ConvDims::default()
    };
    assert_eq!(
        dims.check_writable([None; 3]).map_err(|e| e.to_string()),
        Err("input has 11 spatial dimensions; dim_labels spells at most 10".into())
    );
    let dims = ConvDims {
        input_feature: 1,
        input_spatial: vec![1],
        ..ConvDims::default()
    };
    assert_eq!(
        dims.check_writable([Some(3), None, None])
            .map_err(|e| e.to_string()),
        Err("input dimension 1 is out of range for rank 3 or named twice".into())
    );
}
