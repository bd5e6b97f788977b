//! The text helpers of `util`: lists and numbers written into a string
//! read as their `format!`, and names escaped as XLA's CEscape writes them.

use hlatc_compiler::util::decimal::push_digits_str;
use hlatc_compiler::util::escape::{escape, escape_into, unescape};
use hlatc_compiler::util::join::{join, push_joined};

#[test]
fn pushed_lists_read_as_joined_ones() {
    for v in [vec![], vec![0], vec![7, -3, 10, 2047, i64::MIN, i64::MAX]] {
        let mut out = String::from("x");
        push_joined(&mut out, &v);
        assert_eq!(out, format!("x{}", join(&v)));
    }
}

#[test]
fn digits_read_as_formatted_ones() {
    for n in [0, 7, 10, 2047, u64::MAX] {
        let mut s = String::from("y");
        push_digits_str(&mut s, n);
        assert_eq!(s, format!("y{n}"));
    }
}

#[test]
fn escapes_round_trip() {
    for s in [
        "plain",
        "q\"uote",
        "back\\slash",
        "line\nbreak",
        "tab\t",
        "ünï",
        "\u{1}",
    ] {
        assert_eq!(unescape(&escape(s)).as_deref(), Some(s), "{s:?}");
    }
    assert_eq!(unescape("bad\\q"), None);
}

/// The bytes CEscape writes, runs of plain text copied around them,
/// and what was in `out` before kept.
#[test]
fn escapes_as_xla_prints() {
    for (s, want) in [
        ("", ""),
        ("plain/scope_1", "plain/scope_1"),
        ("a\"b\\c", r#"a\"b\\c"#),
        ("\n\t\r", r"\n\t\r"),
        ("ü", r"\303\274"),
        ("xü", r"x\303\274"),
        ("üx", r"\303\274x"),
        ("\u{1}\u{7f}", r"\001\177"),
    ] {
        assert_eq!(escape(s), want, "{s:?}");
        let mut out = String::from("k=");
        escape_into(&mut out, s);
        assert_eq!(out, format!("k={want}"), "{s:?}");
    }
}
