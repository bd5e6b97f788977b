//! Each rule that keeps XLA from aborting is a verifier rule, shown here by
//! a module that breaks it (and, where the line is fine, one that keeps it).
//! Every module below passed hlatc's verifier before the rule existed and
//! took the XLA CPU plugin (and the process) down with it.

use hlatc_compiler::{formats::text, verify, Module};

fn module(body: &str) -> Module {
    module_with(body, "")
}

fn module_with(body: &str, header: &str) -> Module {
    let src = format!("HloModule m{header}\n\nadd {{\n  ax = f32[] parameter(0)\n  ay = f32[] parameter(1)\n  ROOT as = f32[] add(ax, ay)\n}}\n\nENTRY e {{\n{body}\n}}\n");
    text::parse_module(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn refused(body: &str) -> String {
    refused_with(body, "")
}

fn refused_with(body: &str, header: &str) -> String {
    verify(&module_with(body, header))
        .expect_err("the verifier must refuse this module")
        .to_string()
}

fn accepted(body: &str) {
    let m = module(body);
    verify(&m).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn comparison_type_must_fit_the_element_type() {
    let e = refused(
        "  p = s32[4] parameter(0)\n  ROOT c = pred[4] compare(p, p), direction=LT, type=FLOAT",
    );
    assert!(
        e.ends_with("compare: comparison type FLOAT does not apply to s32"),
        "{e}"
    );
    let e = refused(
        "  p = f32[4] parameter(0)\n  ROOT c = pred[4] compare(p, p), direction=LT, type=UNSIGNED",
    );
    assert!(e.contains("UNSIGNED does not apply to f32"), "{e}");
    accepted("  p = f32[4] parameter(0)\n  ROOT c = pred[4] compare(p, p), direction=LT, type=TOTALORDER");
    accepted(
        "  p = u8[4] parameter(0)\n  ROOT c = pred[4] compare(p, p), direction=LT, type=UNSIGNED",
    );
    accepted(
        "  p = pred[4] parameter(0)\n  ROOT c = pred[4] compare(p, p), direction=EQ, type=UNSIGNED",
    );
}

#[test]
fn abs_and_sign_need_a_signed_type() {
    for op in ["abs", "sign"] {
        let e = refused(&format!(
            "  p = u32[4] parameter(0)\n  ROOT r = u32[4] {op}(p)"
        ));
        assert!(e.ends_with(&format!("{op} does not accept u32")), "{e}");
        accepted(&format!(
            "  p = s32[4] parameter(0)\n  ROOT r = s32[4] {op}(p)"
        ));
    }
}

#[test]
fn gather_dimension_numbers_must_be_consistent() {
    let gather = |attrs: &str| {
        format!("  t = f32[8,4] parameter(0)\n  i = s32[3] parameter(1)\n  ROOT g = f32[3,4] gather(t, i), {attrs}")
    };
    accepted(&gather("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}"));
    let e = refused(&gather("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,4}"));
    assert!(
        e.contains("start_index_map has 2 entries but the index vector has 1"),
        "{e}"
    );
    let e = refused(&gather("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={8,4}"));
    assert!(e.contains("slice size must be 0 or 1, got 8"), "{e}");
    let e = refused(&gather("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,4}"));
    assert!(
        e.contains("dimension 0 is in both collapsed_slice_dims and operand_batching_dims"),
        "{e}"
    );
}

#[test]
fn scatter_dimension_numbers_must_be_consistent() {
    let scatter = |attrs: &str, updates: &str| {
        format!("  t = f32[8,4] parameter(0)\n  i = s32[3,1] parameter(1)\n  u = {updates} parameter(2)\n  ROOT s = f32[8,4] scatter(t, i, u), {attrs}, to_apply=add")
    };
    let good = "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1";
    accepted(&scatter(good, "f32[3,4]"));
    let e = refused(&scatter(good, "f32[2,4]"));
    assert!(
        e.contains("scatter dimensions of updates f32[2,4]{1,0} do not match indices"),
        "{e}"
    );
    let e = refused(&scatter(good, "f32[3,9]"));
    assert!(
        e.contains("update window dimension 1 (9) is larger than operand dimension 1 (4)"),
        "{e}"
    );
    let e = refused(&scatter("update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,0}, index_vector_dim=1", "f32[3,4]"));
    assert!(
        e.contains("scatter_dims_to_operand dimension 0 repeated"),
        "{e}"
    );
    let e = refused(&scatter("update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=3", "f32[3,4]"));
    assert!(e.contains("index_vector_dim 3 out of range"), "{e}");
}

#[test]
fn dynamic_slice_indices_share_one_type() {
    let e = refused("  p = f32[4,4] parameter(0)\n  a = s32[] parameter(1)\n  b = s64[] parameter(2)\n  ROOT d = f32[2,2] dynamic-slice(p, a, b), dynamic_slice_sizes={2,2}");
    assert!(
        e.contains("start indices must all have one type: index 0 is s32, index 1 is s64"),
        "{e}"
    );
    accepted("  p = f32[4,4] parameter(0)\n  a = s64[] parameter(1)\n  b = s64[] parameter(2)\n  ROOT d = f32[2,2] dynamic-slice(p, a, b), dynamic_slice_sizes={2,2}");
}

#[test]
fn rng_bit_generator_state_and_output_types() {
    let rng = |state: &str, bits: &str, algorithm: &str| {
        format!("  s = {state} parameter(0)\n  ROOT r = ({state}, {bits}) rng-bit-generator(s), algorithm={algorithm}")
    };
    let e = refused(&rng("u32[2]", "u32[4]", "rng_default"));
    assert!(
        e.contains("state for rng_default must be u64[2] or u64[3], got u32[2]{0}"),
        "{e}"
    );
    let e = refused(&rng("u64[3]", "u32[4]", "rng_three_fry"));
    assert!(
        e.contains("state for rng_three_fry must be u64[2], got u64[3]{0}"),
        "{e}"
    );
    let e = refused(&rng("u64[4]", "u32[4]", "rng_philox"));
    assert!(
        e.contains("state for rng_philox must be u64[2] or u64[3], got u64[4]{0}"),
        "{e}"
    );
    let e = refused(&rng("u64[2]", "s32[4]", "rng_default"));
    assert!(e.contains("output must be a u32 or u64 array"), "{e}");
    accepted(&rng("u64[3]", "u64[4]", "rng_philox"));
    accepted(&rng("u64[3]", "u32[4]", "rng_default"));
}

#[test]
fn slice_strides_cannot_overflow() {
    let e = refused(
        "  p = f32[4] parameter(0)\n  ROOT s = f32[1] slice(p), slice={[1:4:9223372036854775807]}",
    );
    assert!(
        e.contains("slice stride 9223372036854775807 of dimension 0 is too large"),
        "{e}"
    );
    accepted("  p = f32[4] parameter(0)\n  ROOT s = f32[1] slice(p), slice={[1:4:1000]}");
}

#[test]
fn one_parameter_cannot_alias_two_outputs() {
    let e = refused_with(
        "  p = f32[4] parameter(0)\n  a = f32[4] negate(p)\n  ROOT t = (f32[4], f32[4]) tuple(a, a)",
        ", input_output_alias={ {0}: (0, {}, may-alias), {1}: (0, {}, may-alias) }",
    );
    assert!(
        e.contains("parameter 0 [] is aliased by outputs [0] and [1]"),
        "{e}"
    );
}

#[test]
fn buffer_donors_must_exist_once_and_not_be_aliased_too() {
    let body = "  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n  ROOT a = f32[4] add(p, q)";
    // torch-xla's way of donating inputs reads, verifies and prints back.
    let m = module_with(body, ", buffer_donor={ (0, {}), (1, {}) }");
    verify(&m).unwrap();
    assert!(text::print_module(&m).contains("buffer_donor={ (0, {}), (1, {}) }"));
    let e = refused_with(body, ", buffer_donor={ (2, {}) }");
    assert!(
        e.contains("buffer_donor: parameter 2 does not exist"),
        "{e}"
    );
    let e = refused_with(body, ", buffer_donor={ (0, {}), (0, {}) }");
    assert!(
        e.contains("buffer_donor: parameter 0 [] is listed twice"),
        "{e}"
    );
    let e = refused_with(body, ", buffer_donor={ (0, {1}) }");
    assert!(
        e.contains("buffer_donor: parameter 0 has no index [1]"),
        "{e}"
    );
    let e = refused_with(
        body,
        ", input_output_alias={ {}: (0, {}, may-alias) }, buffer_donor={ (0, {}) }",
    );
    assert!(
        e.contains("parameter 0 [] is both a buffer donor and aliased to an output"),
        "{e}"
    );
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

#[test]
fn huge_ranks_are_refused() {
    let dims = vec!["1"; 65].join(",");
    let e = refused(&format!("  ROOT p = f32[{dims}] parameter(0)"));
    assert!(
        e.contains("rank 65 is above the 64 dimensions hlatc supports"),
        "{e}"
    );
}

/// A scatter of several inputs (one update each, one reducer over all of
/// them) gives a tuple, as XLA's variadic scatter does.
#[test]
fn a_variadic_scatter_gives_one_result_per_input() {
    let src = |reducer_result: &str, second_update: &str| {
        format!(
            "HloModule m\n\nboth {{\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  c = f32[] parameter(2)\n  d = s32[] parameter(3)\n  x = f32[] add(a, c)\n  y = s32[] maximum(b, d)\n  ROOT t = {reducer_result} tuple(x, y)\n}}\n\nENTRY e {{\n  t = f32[8,4] parameter(0)\n  v = s32[8,4] parameter(1)\n  i = s32[3,1] parameter(2)\n  u = f32[3,4] parameter(3)\n  w = {second_update} parameter(4)\n  ROOT s = (f32[8,4], s32[8,4]) scatter(t, v, i, u, w), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=both\n}}\n"
        )
    };
    let m = text::parse_module(&src("(f32[], s32[])", "s32[3,4]")).unwrap();
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
    let e = verify(&text::parse_module(&src("(f32[], s32[])", "f32[3,4]")).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("scatter: element types differ (s32 vs f32)"),
        "{e}"
    );
    // The reducer takes every input's scalar, then every update's.
    let wrong = src("(f32[], s32[])", "s32[3,4]").replace(
        "scatter(t, v, i, u, w), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=both",
        "scatter(t, v, i, u, w), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
    ).replace("HloModule m\n\n", "HloModule m\n\nadd {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] add(p, q)\n}\n\n");
    let e = verify(&text::parse_module(&wrong).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'add' has signature (f32[], f32[]) -> f32[] but (f32[], s32[], f32[], s32[]) -> (f32[], s32[]) is required"),
        "{e}"
    );
}

#[test]
fn tokens_go_where_tokens_belong() {
    // after-all may follow values as well as tokens, as XLA's verifier and
    // XLA CPU allow (its AddDependency test orders work after an f32).
    accepted("  p = f32[] parameter(0)\n  t = token[] after-all(p)\n  ROOT r = f32[] add-dependency(p, t)");
    let e = refused(
        "  p = f32[4] parameter(0)\n  ROOT s = (f32[4], u32[], token[]) send(p, p), channel_id=1",
    );
    assert!(
        e.ends_with("send: send's operand 1 must be a token, got f32[4]{0}"),
        "{e}"
    );
    accepted("  p = f32[4] parameter(0)\n  t = token[] after-all()\n  s = (f32[4], u32[], token[]) send(p, t), channel_id=1\n  ROOT d = token[] send-done(s), channel_id=1");
}

#[test]
fn a_transfer_is_finished_by_its_own_done() {
    // XLA's text parser lets a send-done take a tuple of the send's shape
    // from elsewhere; its proto reader does not, so neither does hlatc.
    let e = refused("  p = f32[4] parameter(0)\n  t = token[] after-all()\n  s = (f32[4], u32[], token[]) send(p, t), channel_id=1\n  w = ((f32[4], u32[], token[])) tuple(s)\n  g = (f32[4], u32[], token[]) get-tuple-element(w), index=0\n  ROOT d = token[] send-done(g), channel_id=1");
    assert!(
        e.ends_with("send-done takes 'g', a get-tuple-element, where XLA requires the send itself"),
        "{e}"
    );
}

#[test]
fn a_custom_calls_dim_labels_must_be_spellable() {
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
    let err = verify(&m).unwrap_err().to_string();
    assert!(
        err.ends_with(
            "custom-call: dim_labels: kernel dimension 5 is out of range for rank 3 or named twice"
        ),
        "{err}"
    );
}

#[test]
fn reducers_may_differ_in_float_width_where_xla_allows_it() {
    let src = |body: &str| {
        format!("HloModule m\n\nmax {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}}\n\nENTRY e {{\n  p = bf16[4,8] parameter(0)\n{body}\n}}\n")
    };
    let verified =
        |body: &str| verify(&text::parse_module(&src(body)).unwrap()).map_err(|e| e.to_string());
    // The collectives and scatter keep their operands' type.
    verified("  ROOT r = bf16[4,8] all-reduce(p), to_apply=max").unwrap();
    // reduce takes its result type from the reducer in XLA, so an f32
    // reducer over bf16 cannot give the bf16 result written here.
    let e = verified(
        "  z = bf16[] constant(0)\n  ROOT r = bf16[4] reduce(p, z), dimensions={1}, to_apply=max",
    )
    .unwrap_err();
    assert!(
        e.ends_with("reduce: 'max' has signature (f32[], f32[]) -> f32[] but (bf16[], bf16[]) -> bf16[] is required"),
        "{e}"
    );
    // A collective's reducer may even be of another kind than its operands
    // (XLA's verifier does not compare them, and XLA CPU compiles it).
    verified("  c = s32[4,8] convert(p)\n  ROOT r = s32[4,8] all-reduce(c), to_apply=max").unwrap();
}

/// Complex values take the float arithmetic XLA gives them and nothing
/// more: no conversion drops an imaginary part, `complex` builds from f32
/// or f64 only, and an fft's operand must be of its transform's kind and
/// length (a transform reading past its operand would crash XLA CPU).
#[test]
fn complex_types_take_their_own_ops() {
    accepted("  p = c64[4] parameter(0)\n  e = c64[4] exponential(p)\n  a = f32[4] abs(e)\n  f = c64[4] fft(e), fft_type=FFT, fft_length={4}\n  ROOT c = pred[4] compare(e, f), direction=EQ");
    for (body, message) in [
        (
            "  p = c64[4] parameter(0)\n  ROOT c = f32[4] convert(p)",
            "convert from c64 to f32 would drop the imaginary part; use real or imag",
        ),
        (
            "  p = bf16[4] parameter(0)\n  ROOT c = c64[4] complex(p, p)",
            "complex does not accept bf16",
        ),
        (
            "  p = c64[4] parameter(0)\n  ROOT f = f32[4] floor(p)",
            "floor does not accept c64",
        ),
        (
            "  p = c64[4] parameter(0)\n  ROOT f = c64[4] fft(p), fft_type=RFFT, fft_length={4}",
            "RFFT transforms f32 or f64, got c64",
        ),
        (
            "  p = c64[8] parameter(0)\n  ROOT f = c64[8] fft(p), fft_type=FFT, fft_length={4}",
            "FFT with fft_length=[4] needs those innermost dimensions, got c64[8]",
        ),
        // Found by the fuzzer: an abort in XLA CPU's evaluator.
        (
            "  p = c128[2] parameter(0)\n  ROOT r = pred[2] compare(p, p), direction=LT",
            "compare of c128 values can only be EQ or NE, got LT",
        ),
        // Found by the fuzzer: a segfault in XLA CPU.
        (
            "  p = c128[2] parameter(0)\n  ROOT r = c128[2] remainder(p, p)",
            "remainder does not accept c128",
        ),
        (
            "  p = c64[2] parameter(0)\n  ROOT r = c64[2] cbrt(p)",
            "cbrt does not accept c64",
        ),
        // Found by the fuzzer aborting XLA CPU's bitcast expander.
        (
            "  p = c64[2,2] parameter(0)\n  ROOT b = c128[2] bitcast-convert(p)",
            "bitcast-convert between complex types of different widths (c64 to c128)",
        ),
        // Passed before, and aborted XLA CPU: "array sizes are not
        // conformable".
        (
            "  p = c64[3,8] parameter(0)\n  ROOT f = c64[3,8] fft(p), fft_type=FFT, fft_length={5,0}",
            "FFT with fft_length=[5, 0] needs those innermost dimensions, got c64[3,8]",
        ),
        (
            "  p = c64[4] parameter(0)\n  ROOT f = f32[8] fft(p), fft_type=IRFFT, fft_length={8}",
            "IRFFT of length 8 needs 5 frequencies in the last dimension of c64[4]",
        ),
        (
            "  p = c64[2,2,2,2] parameter(0)\n  ROOT f = c64[2,2,2,2] fft(p), fft_type=FFT, fft_length={2,2,2,2}",
            "fft transforms 1 to 3 dimensions, fft_length has 4",
        ),
    ] {
        let e = refused(body);
        assert!(e.contains(message), "{e}");
    }
}

/// `ragged-dot` in XLA's three modes: the ragged lhs dimension not
/// contracted (each row group meets the rhs matrix its group picks),
/// contracted (the group count leads the result) and a batch dimension;
/// and what each mode refuses.
#[test]
fn ragged_dot_shapes_by_mode() {
    accepted("  a = f32[8,5] parameter(0)\n  b = f32[3,5,7] parameter(1)\n  g = s64[3] parameter(2)\n  ROOT d = f32[8,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}");
    accepted("  a = f32[11,8] parameter(0)\n  b = f32[8,7] parameter(1)\n  g = s32[3] parameter(2)\n  ROOT d = f32[3,11,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}");
    accepted("  a = f32[4,11,8] parameter(0)\n  b = f32[4,8,7] parameter(1)\n  g = s32[2] parameter(2)\n  ROOT d = f32[4,11,7] ragged-dot(a, b, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={0}");
    for (body, message) in [
        (
            "  a = f32[8,5] parameter(0)\n  b = f32[3,5,7] parameter(1)\n  g = s64[4] parameter(2)\n  ROOT d = f32[8,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}",
            "ragged-dot has 4 groups in s64[4]{0}, but rhs dimension 0 of f32[3,5,7]{2,1,0} holds 3",
        ),
        (
            "  a = f32[8,5] parameter(0)\n  b = f32[3,5,7] parameter(1)\n  g = s64[3] parameter(2)\n  ROOT d = f32[8,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}",
            "a ragged-dot whose ragged dimension is not contracted needs one rhs_group_dims, got []",
        ),
        (
            "  a = f32[11,8] parameter(0)\n  b = f32[8,7] parameter(1)\n  g = f32[3] parameter(2)\n  ROOT d = f32[3,11,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}",
            "ragged-dot's group sizes are an integer array, got f32[3]{0}",
        ),
        (
            "  a = f32[11,8] parameter(0)\n  b = f32[8,7] parameter(1)\n  g = s32[3] parameter(2)\n  ROOT d = f32[11,7] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}",
            "ragged-dot produces f32[3,11,7]",
        ),
    ] {
        let e = refused(body);
        assert!(e.contains(message), "{e}");
    }
}

/// Batch normalization keeps one statistic per entry of the feature
/// dimension; select-and-scatter takes one source value per window and
/// a `select` that answers pred.
#[test]
fn batch_norm_and_select_and_scatter_shapes() {
    for (body, message) in [
        (
            "  x = f32[2,3] parameter(0)\n  s = f32[2] parameter(1)\n  ROOT t = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.001, feature_index=1",
            "batch-norm-training operand 1 must be f32[3], one entry per feature, got f32[2]{0}",
        ),
        (
            "  x = f32[2,3] parameter(0)\n  s = f32[3] parameter(1)\n  ROOT y = f32[2,3] batch-norm-inference(x, s, s, s, s), epsilon=0.001, feature_index=2",
            "batch-norm-inference's feature_index 2 is not a dimension of f32[2,3]{1,0}",
        ),
        // Found by the fuzzer aborting XLA CPU's expander.
        (
            "  x = f32[] parameter(0)\n  g = f32[] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[] select-and-scatter(x, g, z), window={}, select=add, scatter=add",
            "select-and-scatter needs an operand of rank 1 or more, got f32[]",
        ),
        (
            "  x = f32[4] parameter(0)\n  g = f32[3] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(x, g, z), window={size=2 stride=2}, select=add, scatter=add",
            "select-and-scatter's source must have one value per window, f32[2]{0}, got f32[3]{0}",
        ),
        (
            "  x = f32[4] parameter(0)\n  g = f32[2] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(x, g, z), window={size=2 stride=2}, select=add, scatter=add",
            "'add'",
        ),
    ] {
        let e = refused(body);
        assert!(e.contains(message), "{e}");
    }
}
