//! Each rule that keeps XLA from aborting is a verifier rule, shown by a
//! module that breaks it (and, where the line is fine, one that keeps it):
//! those modules are golden files, `compiler/tests/filetests/verify/`. Every
//! one passed hlatc's verifier before its rule existed and took the XLA CPU
//! plugin (and the process) down with it. What stays here reads the
//! verifier's typed problems, or changes a module in code.

use hlatc_compiler::{formats::text, verify, Module};

fn module(body: &str) -> Module {
    module_with(body, "")
}

fn module_with(body: &str, header: &str) -> Module {
    let src = format!("HloModule m{header}\n\nadd {{\n  ax = f32[] parameter(0)\n  ay = f32[] parameter(1)\n  ROOT as = f32[] add(ax, ay)\n}}\n\nENTRY e {{\n{body}\n}}\n");
    text::parse_module(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

#[test]
fn buffer_donors_read_verify_and_print_back() {
    // torch-xla's way of donating inputs (what the verifier refuses of a
    // donor: `filetests/verify/buffer_donor_*.hlo`).
    let body = "  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n  ROOT a = f32[4] add(p, q)";
    let m = module_with(body, ", buffer_donor={ (0, {}), (1, {}) }");
    verify(&m).unwrap();
    assert!(text::print_module(&m).contains("buffer_donor={ (0, {}), (1, {}) }"));
}

/// What the verifier finds is a value a caller can match, with what it was
/// found on, and the message is made from it.
#[test]
fn problems_are_typed_and_name_where_they_are() {
    use hlatc_compiler::analysis::verifier::{AliasProblem, DonorProblem, Problem};
    let e = verify(&module_with(
        "  p = f32[4] parameter(0)\n  a = f32[4] negate(p)\n  ROOT t = (f32[4], f32[4]) tuple(a, a)",
        ", input_output_alias={ {0}: (0, {}, may-alias), {1}: (0, {}, may-alias) }",
    ))
    .unwrap_err();
    assert_eq!(
        (e.computation.as_str(), e.instruction.as_deref()),
        ("e", None)
    );
    assert_eq!(
        *e.problem,
        Problem::Alias(AliasProblem::ParameterTwice {
            parameter: 0,
            index: vec![],
            first: vec![0],
            second: vec![1],
        })
    );
    let body = "  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n  ROOT a = f32[4] add(p, q)";
    let e = verify(&module_with(body, ", buffer_donor={ (2, {}) }")).unwrap_err();
    assert_eq!(*e.problem, Problem::Donor(DonorProblem::NoParameter(2)));
    let e = verify(&module(&body.replace("a = f32[4]", "a = f32[5]"))).unwrap_err();
    assert_eq!(e.instruction.as_deref(), Some("a"));
    assert!(
        matches!(&*e.problem, Problem::ShapeDiffers { opcode: "add", inferred, declared }
            if inferred.to_string() == "f32[4]{0}" && declared.to_string() == "f32[5]{0}"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'a': add produces f32[4]{0} but the instruction declares f32[5]{0}"
    );
}

/// A scatter of several inputs (one update each, one reducer over all of
/// them) gives a tuple, as XLA's variadic scatter does, through text and
/// proto (what it refuses: `filetests/verify/variadic_scatter_*.hlo`).
#[test]
fn a_variadic_scatter_gives_one_result_per_input() {
    let src = "HloModule m\n\nboth {\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  c = f32[] parameter(2)\n  d = s32[] parameter(3)\n  x = f32[] add(a, c)\n  y = s32[] maximum(b, d)\n  ROOT t = (f32[], s32[]) tuple(x, y)\n}\n\nENTRY e {\n  t = f32[8,4] parameter(0)\n  v = s32[8,4] parameter(1)\n  i = s32[3,1] parameter(2)\n  u = f32[3,4] parameter(3)\n  w = s32[3,4] parameter(4)\n  ROOT s = (f32[8,4], s32[8,4]) scatter(t, v, i, u, w), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=both\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let printed = text::print_module(&m);
    assert_eq!(
        text::print_module(
            &hlatc_compiler::formats::proto::decode_module(
                &hlatc_compiler::formats::proto::encode_module(&m)
            )
            .unwrap()
        ),
        printed
    );
}

#[test]
fn a_custom_calls_dim_labels_must_be_spellable() {
    use hlatc_compiler::analysis::verifier::Problem;
    use hlatc_compiler::ir::window::DimLabelsError;
    use hlatc_compiler::ShapeError;
    let src = "HloModule m\n\nENTRY e {\n  x = f32[2,4,1] parameter(0)\n  k = f32[3,1,1] parameter(1)\n  ROOT c = f32[2,4,1] custom-call(x, k), dim_labels=b0f_0io->b0f, custom_call_target=\"conv\"\n}\n";
    let mut m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let e = m.entry_mut();
    let root = e.root().unwrap();
    if let hlatc_compiler::Op::CustomCall(cc) = &mut e.instr_mut(root).op {
        cc.convolution
            .as_mut()
            .unwrap()
            .dims
            .as_mut()
            .unwrap()
            .kernel_spatial = vec![5];
    }
    let err = verify(&m).unwrap_err();
    assert!(
        matches!(
            &*err.problem,
            Problem::Shape { opcode: "custom-call", source: ShapeError::DimLabels(e) }
                if **e == DimLabelsError::Misplaced { operand: "kernel", dim: 5, rank: 3 }
        ),
        "{err}"
    );
}
