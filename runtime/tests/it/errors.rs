//! Failures surface as errors with their cause, never as aborts.

use crate::common::*;
use hlatc_compiler::formats::text;
use hlatc_runtime::{cpu_preflight, plugin, Emitters, Runtime, RuntimeError};

#[test]
fn pjrt_errors_carry_the_plugin_message() {
    // XLA CPU has no handler for a Neuron custom call: compilation fails in
    // the plugin, and its message reaches the caller.
    let m = text::parse_module(&entry(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] custom-call(x), custom_call_target=\"AwsNeuronSoftmax\"",
    ))
    .unwrap();
    let e = runtime().compile(&m).err().expect("compile must fail");
    let msg = e.to_string();
    assert!(matches!(e, RuntimeError::Rejected { .. }), "{msg}");
    // The error names the module, then gives XLA's own words.
    assert!(
        msg.starts_with("XLA CPU rejected module 'test'") && msg.contains("AwsNeuronSoftmax"),
        "{msg}"
    );
}

#[test]
fn inputs_are_checked_before_the_plugin_sees_them() {
    let m = text::parse_module(&entry(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[4] negate(x)",
    ))
    .unwrap();
    let p = runtime().compile(&m).unwrap();
    let e = p.run(&[f32s(&[3], &[1.0, 2.0, 3.0])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input 0 ('x') is f32[3]{0}, parameter expects f32[4]{0}"
    );
    let e = p.run(&[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the module takes 1 parameter(s), 0 input(s) were given"
    );
}

#[test]
fn modules_that_do_not_verify_are_refused() {
    let m = text::parse_module(&entry(
        "  x = f32[4] parameter(0)\n  ROOT r = f32[5] negate(x)",
    ))
    .unwrap();
    let e = runtime().compile(&m).err().unwrap();
    assert_eq!(
        e.to_string(),
        "module does not verify: computation 'main', instruction 'r': negate produces f32[4]{0} but the instruction declares f32[5]{0}"
    );
}

/// XLA CPU aborts the process on a concatenate of 2-bit integers (found by
/// the fuzzer); the preflight refuses it first. 4-bit ones run.
#[test]
fn concatenating_two_bit_integers_is_refused_before_the_plugin() {
    let m = text::parse_module(&entry(
        "  x = u2[4] parameter(0)\n  ROOT r = u2[8] concatenate(x, x), dimensions={0}",
    ))
    .unwrap();
    let e = runtime().compile(&m).err().unwrap();
    assert!(
        e.to_string().ends_with(
            "computation 'main', instruction 'r': XLA CPU aborts when concatenating u2 arrays (2-bit elements); convert them to s8 or u8 first"
        ),
        "{e}"
    );
    let m = text::parse_module(&entry(
        "  x = s4[4] parameter(0)\n  ROOT r = s4[8] concatenate(x, x), dimensions={0}",
    ))
    .unwrap();
    assert!(runtime().compile(&m).is_ok());
}

/// XLA CPU's legacy emitters (`--xla_cpu_use_fusion_emitters=false`) abort
/// on a pad of 2-bit integers (found by the fuzzer run with them): the
/// preflight refuses it under them, and leaves it to the fusion emitters,
/// which compile it. 4-bit pads compile under both.
#[test]
fn padding_two_bit_integers_is_refused_under_the_legacy_emitters() {
    let pad = |ty: &str| {
        text::parse_module(&entry(&format!(
            "  x = {ty}[5,3] parameter(0)\n  z = {ty}[] parameter(1)\n  ROOT r = {ty}[8,4] pad(x, z), padding=2_1x0_1"
        )))
        .unwrap()
    };
    let refusal = "computation 'main', instruction 'r': XLA CPU's legacy emitters (xla_cpu_use_fusion_emitters=false) abort when padding u2 arrays (2-bit elements); convert them to s8 or u8 first, or compile with its default emitters";
    let e = cpu_preflight::check(&pad("u2"), Emitters::Legacy).unwrap_err();
    assert_eq!(e.to_string(), refusal);
    assert_eq!(cpu_preflight::check(&pad("u2"), Emitters::Fusion), Ok(()));
    assert_eq!(cpu_preflight::check(&pad("s4"), Emitters::Legacy), Ok(()));
    // The runtime states its emitters in every compile, whichever XLA_FLAGS
    // picks (scripts/test.sh picks the legacy ones): with the fusion ones
    // XLA CPU compiles the pad, with the legacy ones the preflight refuses
    // it, where XLA CPU would abort.
    let fusion = runtime().with_emitters(Emitters::Fusion);
    assert!(fusion.compile(&pad("u2")).is_ok());
    let legacy = runtime().with_emitters(Emitters::Legacy);
    match legacy.emitters() {
        Emitters::Legacy => {
            let e = legacy.compile(&pad("u2")).err().unwrap();
            assert!(e.to_string().ends_with(refusal), "{e}");
        }
        // A plugin without the flag that picks them has no legacy
        // emitters (jaxlib 0.11's XLA): asked for them, the runtime
        // compiles with the fusion ones, which take the pad.
        Emitters::Fusion => {
            assert!(legacy
                .options_left_out()
                .contains(&hlatc_runtime::xla_cpu_flags::FUSION_EMITTERS_FLAG));
            assert!(legacy.compile(&pad("u2")).is_ok());
        }
    }
    assert!(legacy.compile(&pad("s4")).is_ok());
    assert!(runtime().compile(&pad("s4")).is_ok());
}

/// A scatter into 4-bit integers that a tuple returns throws a C++
/// exception out of XLA CPU (found by the fuzzer once it generated ffts,
/// which moved its random stream); the preflight refuses it first. An
/// 8-bit one runs.
#[test]
fn scattering_into_sub_byte_integers_is_refused_before_the_plugin() {
    let body = |ty: &str| {
        format!("  p = {ty}[2,4] parameter(0)\n  i = s8[2,1] parameter(1)\n  u = {ty}[2,4] parameter(2)\n  s = {ty}[2,4] scatter(p, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{1}}, index_vector_dim=1, to_apply=add_{ty}\n  ROOT t = ({ty}[2,4], {ty}[2,4]) tuple(p, s)")
    };
    let module = |ty: &str| {
        let src = format!("HloModule m\n\nadd_{ty} {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT c = {ty}[] add(a, b)\n}}\n\nENTRY main {{\n{}\n}}\n", body(ty));
        text::parse_module(&src).unwrap()
    };
    let e = runtime().compile(&module("s4")).err().unwrap();
    assert!(
        e.to_string().ends_with(
            "computation 'main', instruction 's': XLA CPU aborts when scattering into s4 arrays (sub-byte elements); convert them to s8 or u8 first"
        ),
        "{e}"
    );
    assert!(runtime().compile(&module("s8")).is_ok());
    // A gather of 2-bit values whose slices come first is transposed
    // inside XLA CPU, and aborts it; one whose slices trail runs.
    let gather = |offset: &str, shape: &str| {
        text::parse_module(&entry(&format!(
            "  p = u2[2,2] parameter(0)\n  i = s32[3] parameter(1)\n  g = {shape} gather(p, i), offset_dims={{{offset}}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,2}}\n  ROOT t = ({shape}, s32[3]) tuple(g, i)"
        )))
        .unwrap()
    };
    let e = runtime().compile(&gather("0", "u2[2,3]")).err().unwrap();
    assert!(
        e.to_string().ends_with(
            "computation 'main', instruction 'g': XLA CPU aborts when gathering (through a transpose) u2 arrays (sub-byte elements); convert them to s8 or u8 first"
        ),
        "{e}"
    );
    assert!(runtime().compile(&gather("1", "u2[3,2]")).is_ok());
}

#[test]
fn a_missing_plugin_says_how_to_fetch_it() {
    let e = Runtime::with_plugin(std::path::Path::new("/nonexistent/xla_cpu_pjrt.so"))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("cannot load PJRT plugin /nonexistent/xla_cpu_pjrt.so"),
        "{e}"
    );
    let e = RuntimeError::PluginNotFound {
        searched: vec!["/a/b.so".into()],
    };
    let msg = e.to_string();
    assert!(
        msg.contains("/a/b.so")
            && msg.contains("scripts/fetch-xla-cpu-plugin.sh")
            && msg.contains(plugin::PLUGIN_ENV),
        "{msg}"
    );
}

#[test]
fn a_multi_device_module_is_refused_before_the_plugin() {
    let m = text::parse_module(
        "HloModule m, num_partitions=4\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n",
    )
    .unwrap();
    let e = runtime().compile(&m).err().expect("compile must fail");
    assert!(matches!(e, RuntimeError::MultiDevice { .. }), "{e}");
    // It says which partitioned programs do run, since hand-partitioned
    // ones (manual entry) now do.
    assert_eq!(
        e.to_string(),
        "module 'm' is for 1 replica(s) x 4 partition(s); the XLA CPU runtime runs replicas of one partition, or partitions of one replica whose entry parameters and root are all sharding={manual} (partitioned already, as hlatc's --spmd partitions writes them), not programs XLA would partition itself (`hlatc run --one-device` runs one that is not yet partitioned as one device's program)"
    );
}

/// XLA CPU would wait forever on an infeed or outfeed nobody serves (found
/// by running one: the process hung), and a token cannot be passed in or
/// read back; each is refused with its reason instead.
#[test]
fn feeds_and_tokens_at_the_boundary_are_refused_not_hung() {
    let e = refused("  t = token[] after-all()\n  i = (f32[4], token[]) infeed(t)\n  ROOT x = f32[4] get-tuple-element(i), index=0");
    assert!(
        e.ends_with("instruction 'i': hlatc runs modules without a host side for infeed, so XLA CPU would wait on it forever"),
        "{e}"
    );
    let e = refused("  p = f32[4] parameter(0)\n  t = token[] after-all()\n  o = token[] outfeed(p, t)\n  ROOT d = f32[4] add-dependency(p, o)");
    assert!(e.contains("without a host side for outfeed"), "{e}");
    let e = refused("  p = f32[4] parameter(0)\n  t = token[] parameter(1)\n  ROOT d = f32[4] add-dependency(p, t)");
    assert_eq!(
        e,
        "parameter 't' is token[]; only arrays, and tuples of them, can be passed in"
    );
    let e = refused("  p = f32[4] parameter(0)\n  t = token[] after-all()\n  ROOT r = (f32[4], token[]) tuple(p, t)");
    assert_eq!(
        e,
        "the module returns (f32[4]{0}, token[]); only arrays, and tuples of them, can be read back"
    );
    // Inside a tuple, named as the module writes it.
    let e = refused("  p = f32[4] parameter(0)\n  t = token[] after-all()\n  i = (f32[4], token[]) tuple(p, t)\n  ROOT r = ((f32[4], token[]), f32[4]) tuple(i, p)");
    assert_eq!(
        e,
        "the module returns ((f32[4]{0}, token[]), f32[4]{0}); only arrays, and tuples of them, can be read back"
    );
    let e = refused(
        "  q = (f32[4], token[]) parameter(0)\n  ROOT p = f32[4] get-tuple-element(q), index=0",
    );
    assert_eq!(
        e,
        "parameter 'q.1' is token[]; only arrays, and tuples of them, can be passed in"
    );
}

/// XLA CPU passes a dynamic array with its sizes after the data; a buffer
/// of the bound's size aborted it ("Size mismatch on param 0", XLA test
/// 00126). Dynamic dimensions inside a module run (`ops.rs`).
#[test]
fn dynamic_dimensions_at_the_boundary_are_refused_before_the_plugin() {
    let e = refused("  p = f32[<=8,2] parameter(0)\n  ROOT c = f32[<=8,2] convert(p)");
    assert!(
        e.ends_with("instruction 'p': a parameter has dynamic dimensions (f32[<=8,2]{1,0}); hlatc passes and reads back static arrays only"),
        "{e}"
    );
    let e = refused("  p = f32[8] parameter(0)\n  n = s32[] parameter(1)\n  ROOT d = f32[<=8] set-dimension-size(p, n), dimensions={0}");
    assert!(
        e.contains("instruction 'd': the result has dynamic dimensions"),
        "{e}"
    );
}

/// A dot may write any result type (XLA's verifier takes it), but one that
/// mixes two 8-bit float formats of the same widths aborted XLA CPU
/// (found by the fuzzer): refused before the plugin. Mixing formats XLA
/// can order, as `f8e4m3fn` into `bf16`, runs.
#[test]
fn dots_of_unordered_eight_bit_floats_are_refused_before_the_plugin() {
    let dot = |l: &str, r: &str, out: &str| {
        format!("  a = {l}[3] parameter(0)\n  b = {r}[3,1] parameter(1)\n  ROOT d = {out}[1] dot(a, b), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}")
    };
    let e = refused(&dot("f8e5m2", "f8e5m2", "f8e5m2fnuz"));
    assert!(
        e.ends_with("XLA CPU aborts on a dot that mixes f8e5m2 and f8e5m2fnuz, two 8-bit float formats of the same widths whose precision it cannot order"),
        "{e}"
    );
    let m = text::parse_module(&entry(&dot("f8e4m3fn", "f8e4m3fn", "bf16"))).unwrap();
    runtime().compile(&m).unwrap();
}

/// A dot of complex values into a real type: XLA's verifier takes it, but
/// XLA CPU wrote a `pred` byte of 254 (found by the fuzzer). Refused.
#[test]
fn dots_of_complex_values_into_real_types_are_refused_before_the_plugin() {
    let e = refused("  a = c64[2] parameter(0)\n  b = c64[2,1] parameter(1)\n  ROOT d = pred[1] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}");
    assert!(
        e.ends_with(
            "XLA CPU writes garbage for a dot of c64 values into pred; convert its result instead"
        ),
        "{e}"
    );
}

/// What the runtime says, refusing the module whose entry body is `body`.
fn refused(body: &str) -> String {
    let m = text::parse_module(&entry(body)).unwrap();
    runtime()
        .compile(&m)
        .err()
        .expect("must be refused")
        .to_string()
}

/// The pre-flight's refusals are variants with what they found, not
/// sentences: a caller tells them apart by matching.
#[test]
fn preflight_refusals_are_typed() {
    use cpu_preflight::{Refusal, Unsupported};
    let check = |body: &str| {
        let m = text::parse_module(&entry(body)).unwrap();
        cpu_preflight::check(&m, Emitters::Legacy).unwrap_err()
    };
    let e = check("  t = token[] after-all()\n  i = (f32[4], token[]) infeed(t)\n  ROOT x = f32[4] get-tuple-element(i), index=0");
    assert_eq!(e.instruction, "i");
    let Refusal::Unsupported(u) = &e.reason else {
        panic!("{e}")
    };
    assert_eq!(
        **u,
        Unsupported::NoHostSide {
            opcode: hlatc_compiler::Opcode::new("infeed")
        }
    );
    let e = check("  p = f32[<=8,2] parameter(0)\n  ROOT c = f32[<=8,2] convert(p)");
    assert!(
        matches!(&e.reason, Refusal::Unsupported(u)
            if matches!(**u, Unsupported::DynamicAtTheBoundary { what: "a parameter", .. })),
        "{e}"
    );
    let e = check(
        "  p = u2[4] parameter(0)\n  z = u2[] constant(0)\n  ROOT r = u2[6] pad(p, z), padding=1_1",
    );
    assert!(
        matches!(&e.reason, Refusal::Unsupported(u)
            if **u == Unsupported::LegacyPad2Bit { ty: hlatc_compiler::ElementType::U2 }),
        "{e}"
    );
}

/// A tensor file that cannot be read keeps the operating system's error,
/// so a caller tells a missing file from a refused one by its kind.
#[test]
fn a_missing_tensor_file_keeps_its_io_error_kind() {
    let path =
        std::env::temp_dir().join(format!("hlatc-missing-{}.safetensors", std::process::id()));
    match hlatc_runtime::read_safetensors(&path) {
        Err(hlatc_runtime::TensorFileError::Io { source, tensor, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(tensor, None);
        }
        other => panic!("{:?}", other.err()),
    }
}

/// A path that is not a regular file is refused by name before it is
/// read (issue 92), by each safetensors reader: `/dev/null` (a device
/// that reads as empty, so a reader without the check fails otherwise,
/// at once), a FIFO no one writes (whose reader would wait for ever: each
/// read runs on a thread waited on for 20 s) and a directory.
#[test]
fn a_tensor_file_that_is_not_a_regular_file_is_refused_by_name() {
    use hlatc_compiler::util::input_file::{FileKind, NotRegularFile};
    use hlatc_runtime::TensorFileError as T;
    use std::path::{Path, PathBuf};
    fn within(path: &Path, read: fn(&Path) -> Option<T>) -> Option<T> {
        let (send, receive) = std::sync::mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let _ = send.send(read(&path));
        });
        receive
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("a reader still waits"))
    }
    let d = std::env::temp_dir().join(format!("hlatc-runtime-{}-not-regular", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut cases = vec![
        (PathBuf::from("/dev/null"), FileKind::CharDevice),
        (d.clone(), FileKind::Directory),
    ];
    let fifo = d.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        cases.push((fifo, FileKind::Fifo));
    }
    for (path, kind) in cases {
        let want = NotRegularFile {
            path: path.clone(),
            kind,
        };
        let readers: [fn(&Path) -> Option<T>; 3] = [
            |p| hlatc_runtime::read_safetensors(p).err(),
            |p| hlatc_runtime::read_safetensors_metadata(p).err(),
            |p| hlatc_runtime::SafetensorsIndex::open(p).err(),
        ];
        for read in readers {
            match within(&path, read) {
                Some(T::NotRegularFile(e)) => assert_eq!(e, want),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}
