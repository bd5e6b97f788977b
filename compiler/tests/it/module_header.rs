//! Module header attributes: what hlatc keeps (the schedule, a layout equal
//! to the entry's) round-trips through text and proto; what it does not
//! model is refused by name, never dropped (the refusals of text are golden
//! files in `compiler/tests/filetests/parse/`, but for the stack-frame
//! tables: their reader needs the header on the text's first line).

use hlatc_compiler::{formats::proto, formats::text};

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
fn device_counts_and_spmd_flags_are_kept() {
    let src = SCHEDULED.replace("is_scheduled=true", "replica_count=2, num_partitions=8");
    let m = text::parse_module(&src).unwrap();
    assert_eq!((m.devices.replica_count, m.devices.num_partitions), (2, 8));
    let printed = text::print_module(&m);
    assert!(
        printed.starts_with("HloModule s, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, replica_count=2, num_partitions=8\n"),
        "{printed}"
    );
    assert_eq!(
        text::print_module(&text::parse_module(&printed).unwrap()),
        printed
    );
    // JAX's SPMD propagation flags are kept through text.
    let spmd = SCHEDULED.replace(
        "is_scheduled=true",
        "allow_spmd_sharding_propagation_to_output={true}",
    );
    let m = text::parse_module(&spmd).unwrap();
    assert_eq!(m.allow_spmd_sharding_propagation.to_output, vec![true]);
    assert!(text::print_module(&m).contains("allow_spmd_sharding_propagation_to_output={true}"));
    // So is alias_passthrough_params, printed where XLA prints it.
    let passthrough = SCHEDULED.replace("is_scheduled=true", "alias_passthrough_params=true");
    let m = text::parse_module(&passthrough).unwrap();
    assert!(m.alias_passthrough_params);
    assert!(text::print_module(&m)
        .starts_with("HloModule s, alias_passthrough_params=true, entry_computation_layout="));
    let off = SCHEDULED.replace("is_scheduled=true", "alias_passthrough_params=false");
    assert!(!text::parse_module(&off).unwrap().alias_passthrough_params);
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

    // A layout of other shapes is refused (the text's refusals are golden
    // files: `filetests/parse/entry_layout_*.hlo`); a proto says the same
    // under its own field's name.
    let mut p = proto::module_to_proto(&m);
    if let Some(ps) = p.host_program_shape.as_mut() {
        ps.parameters.clear();
    }
    assert_eq!(
        proto::module_from_proto(&p).unwrap_err().to_string(),
        "computation 't': host_program_shape lists 0 parameters, the entry computation has 1"
    );
}

const WITH_FRAMES: &str = "HloModule f

FileNames
1 \"model.py\"

FunctionNames
1 \"<module>\"
2 \"loss\"

FileLocations
1 {file_name_id=1 function_name_id=1 line=9 end_line=9 column=1 end_column=20}
2 {file_name_id=1 function_name_id=2 line=3 end_line=3 column=5 end_column=12}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}

ENTRY e {
  p = f32[2]{0} parameter(0)
  ROOT n = f32[2]{0} negate(p), metadata={op_name=\"jit(loss)/neg\" stack_frame_id=2 source_end_line=4 scheduling_name=\"n\"}
}
";

#[test]
fn stack_frame_tables_are_read_kept_and_resolved() {
    let m = text::parse_module(WITH_FRAMES).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    let n = m.entry().root().unwrap();
    let md = &m.entry().instr(n).metadata;
    assert_eq!((md.stack_frame_id, md.source_end_line), (2, 4));
    assert_eq!(md.scheduling_name, "n");
    // Frame 2's parent is written as 2 (XLA prints parent + 1): frame 1.
    assert_eq!(
        m.stack_frames.chain(2),
        vec![
            ("model.py".to_string(), "loss".to_string(), 3, 5, 3, 12),
            ("model.py".to_string(), "<module>".to_string(), 9, 1, 9, 20),
        ]
    );
    let printed = text::print_module(&m);
    assert!(printed.contains("StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=2 parent_frame_id=2}\n"), "{printed}");
    assert_eq!(
        text::print_module(&text::parse_module(&printed).unwrap()),
        printed
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(back, m, "the proto carries the tables and the metadata");
}

/// Comments and blank lines before the header (a golden test's `// RUN:`
/// line) leave the tables readable, and where they are.
#[test]
fn stack_frame_tables_after_leading_comments_are_read() {
    let commented = format!("// RUN: verify\n// frames\n\n{WITH_FRAMES}");
    let m = text::parse_module(&commented).unwrap();
    assert_eq!(
        m.stack_frames,
        text::parse_module(WITH_FRAMES).unwrap().stack_frames
    );
    let bad = commented.replace("2 \"loss\"", "2 loss");
    let e = text::parse_module(&bad).unwrap_err();
    assert_eq!((e.line, e.column), (11, 3), "{}", e.message);
    let at = text::instruction_positions(&commented).unwrap();
    assert_eq!(at.instruction("e", "n").map(|p| p.line), Some(23));
}

// Tables wrong in one place each are golden tests:
// compiler/tests/filetests/{parse,verify}/{stack_frame_*,file_location_*,function_name_*,metadata_profile_kind}.hlo

#[test]
fn names_repeated_across_computations_are_renamed_with_a_note() {
    let src = "HloModule r

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  x = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
";
    let (m, notes) = text::parse_module_noted(src).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    let names: Vec<String> = m
        .entry()
        .ids()
        .map(|id| m.entry().instr(id).name.clone())
        .collect();
    assert_eq!(names, ["x.1", "z", "s.1"]);
    assert_eq!(
        notes,
        [
            "instruction 'x' in computation 'e' renamed to 'x.1': 'x' is taken in computation 'add', and XLA needs module-wide unique names",
            "instruction 's' in computation 'e' renamed to 's.1': 's' is taken in computation 'add', and XLA needs module-wide unique names",
        ]
    );
}
