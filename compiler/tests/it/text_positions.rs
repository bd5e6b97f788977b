//! Where the text reader places computations and instructions, and how
//! deep it lets brackets nest before refusing the text.

use hlatc_compiler::formats::text::{
    check_nesting, instruction_positions, TextPosition, MAX_NESTING,
};

#[test]
fn an_instruction_is_found_at_its_name() {
    let text = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  %p = f32[2] parameter(0)\n  ROOT %n = f32[2] negate(%p)\n}\n";
    let p = instruction_positions(text).unwrap();
    assert_eq!(
        p.instruction("add", "s"),
        Some(TextPosition { line: 6, column: 8 })
    );
    assert_eq!(
        p.instruction("e", "p"),
        Some(TextPosition {
            line: 10,
            column: 3
        })
    );
    assert_eq!(
        p.instruction("e", "n"),
        Some(TextPosition {
            line: 11,
            column: 8
        })
    );
    assert_eq!(p.computation("e").map(|t| t.line), Some(9));
    assert_eq!(p.instruction("e", "s"), None);
}

#[test]
fn deep_nesting_is_refused_where_it_happens() {
    let deep = format!("HloModule m\n  {}", "(".repeat(MAX_NESTING + 1));
    let e = check_nesting(&deep).unwrap_err();
    assert_eq!((e.line, e.column), (2, MAX_NESTING + 3), "{e}");
    assert!(check_nesting(&"(".repeat(MAX_NESTING)).is_ok());
}

#[test]
fn strings_and_comments_do_not_count() {
    let s = format!(
        "\"{}\" /* {} */ // {}\n",
        "(".repeat(1000),
        "{".repeat(1000),
        "[".repeat(1000)
    );
    assert!(check_nesting(&s).is_ok());
}
