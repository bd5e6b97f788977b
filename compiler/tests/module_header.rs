//! Module header attributes: what hlatc keeps (the schedule, a layout equal
//! to the entry's) round-trips through text and proto; what it does not
//! model is refused by name, never dropped.

use hlatc_compiler::{proto, text};

const SCHEDULED: &str =
    "HloModule s, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

ENTRY e {
  p = f32[2]{0} parameter(0)
  b = f32[2]{0} negate(p)
  a = f32[2]{0} abs(p)
  ROOT r = f32[2]{0} add(a, b)
}
";

fn order(printed: &str) -> Vec<&str> {
    printed
        .lines()
        .filter_map(|l| l.trim().trim_start_matches("ROOT ").split(" = ").next())
        .filter(|n| ["p", "a", "b", "r"].contains(n))
        .collect()
}

#[test]
fn a_schedule_is_kept_in_text_and_proto() {
    let m = text::parse_module(SCHEDULED).unwrap();
    assert!(m.is_scheduled);
    let printed = text::print_module(&m);
    assert!(
        printed.starts_with("HloModule s, is_scheduled=true"),
        "{printed}"
    );
    // The written order (negate before abs) is the schedule, not the
    // post-order hlatc prints otherwise.
    assert_eq!(order(&printed), ["p", "b", "a", "r"]);
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert!(back.is_scheduled, "the proto carries the schedule");
    assert_eq!(text::print_module(&back), printed);

    let unscheduled = text::parse_module(&SCHEDULED.replace("is_scheduled=true, ", "")).unwrap();
    assert!(!unscheduled.is_scheduled);
    assert_eq!(
        order(&text::print_module(&unscheduled)),
        ["p", "a", "b", "r"]
    );
}

#[test]
fn a_schedule_must_put_operands_first() {
    let bad = SCHEDULED.replace(
        "  b = f32[2]{0} negate(p)\n  a = f32[2]{0} abs(p)\n  ROOT r = f32[2]{0} add(a, b)",
        "  ROOT r = f32[2]{0} add(a, b)\n  b = f32[2]{0} negate(p)\n  a = f32[2]{0} abs(p)",
    );
    let e = text::parse_module(&bad).unwrap_err();
    assert!(
        e.message
            .contains("instruction 'r' comes before its operand"),
        "{}",
        e.message
    );
}

#[test]
fn header_settings_hlatc_does_not_model_are_refused_by_name() {
    for (attr, line_col) in [
        ("replica_count=2", (1, 14)),
        ("num_partitions=8", (1, 14)),
        ("allow_spmd_sharding_propagation_to_output={true}", (1, 14)),
    ] {
        let src = SCHEDULED.replace("is_scheduled=true", attr);
        let e = text::parse_module(&src).unwrap_err();
        let key = attr.split('=').next().unwrap();
        assert_eq!((e.line, e.column), line_col, "{attr}");
        assert!(
            e.message.contains(&format!("module attribute '{key}'"))
                && e.message.contains("would be lost"),
            "{attr}: {}",
            e.message
        );
    }
    // Their default values say nothing and are accepted.
    let defaults = SCHEDULED.replace("is_scheduled=true", "replica_count=1, num_partitions=1");
    assert!(text::parse_module(&defaults).is_ok());
}

#[test]
fn an_entry_layout_of_other_layouts_is_kept_and_of_other_shapes_refused() {
    // torch-xla writes row-major boundary layouts over a root it transposed.
    let src = "HloModule t, entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{1,0}}

ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT t = f32[3,2]{0,1} transpose(p), dimensions={1,0}
}
";
    let m = text::parse_module(src).unwrap();
    let l = m
        .entry_layout
        .as_ref()
        .expect("the boundary layout is kept");
    assert_eq!(l.result.to_string(), "f32[3,2]{1,0}");
    let printed = text::print_module(&m);
    assert!(
        printed.contains("entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{1,0}}"),
        "{printed}"
    );
    assert!(printed.contains("f32[3,2]{0,1} transpose"), "{printed}");
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(
        back.entry_layout, m.entry_layout,
        "host_program_shape carries it"
    );
    assert_eq!(text::print_module(&back), printed);
    // Equal to the entry's own: nothing to keep.
    let own = text::parse_module(&src.replace("->f32[3,2]{1,0}}", "->f32[3,2]{0,1}}")).unwrap();
    assert_eq!(own.entry_layout, None);

    let e = text::parse_module(&src.replace("->f32[3,2]{1,0}}", "->f32[3,3]{1,0}}")).unwrap_err();
    assert_eq!(
        e.message,
        "entry_computation_layout gives the result as f32[3,3]{1,0}, the entry computation as f32[3,2]{0,1}"
    );
}
