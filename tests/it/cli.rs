//! The `hlatc` binary, end to end: what a user types and what they see.

use crate::support::{assert_code, error_code, hlatc, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(rel: &str) -> String {
    root().join(rel).display().to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn fmt_prints_canonical_text_deterministically() {
    let f = fixture("tests/fixtures/hlo/xla_classic.hlo");
    let a = hlatc(&["fmt", &f]);
    assert!(a.status.success(), "{}", stderr(&a));
    let text = stdout(&a);
    assert!(
        text.starts_with(
            "HloModule classic_style, is_scheduled=true, input_output_alias={ {0}: (1, {}, must-alias) }"
        ),
        "{text}"
    );
    assert!(
        text.contains("ROOT tuple.13 = (f32[4]{0}, f32[]) tuple(multiply.3, reduce.11)"),
        "{text}"
    );
    assert!(!text.contains('%'));
    assert_eq!(stdout(&hlatc(&["fmt", &f])), text);
    // Formatting canonical text is the identity.
    let p = tmp("canon.hlo");
    std::fs::write(&p, &text).unwrap();
    assert_eq!(stdout(&hlatc(&["fmt", p.to_str().unwrap()])), text);
}

#[test]
fn convert_round_trips_through_the_proto() {
    let f = fixture("tests/fixtures/jax/llama_tiny_step.hlo");
    let pb = tmp("step.hlo_module.pb");
    let txt = tmp("step.txt");
    let o = hlatc(&["convert", &f, "-o", pb.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&pb).unwrap();
    assert!(bytes.len() > 10_000 && bytes[0] == 0x0a, "not a proto");
    let o = hlatc(&["convert", pb.to_str().unwrap(), "-o", txt.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(&txt).unwrap(),
        stdout(&hlatc(&["fmt", &f]))
    );
    // Converting again gives the same bytes.
    let pb2 = tmp("again.bin");
    let o = hlatc(&[
        "convert",
        txt.to_str().unwrap(),
        "-o",
        pb2.to_str().unwrap(),
        "--to",
        "proto",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&pb2).unwrap(), bytes);
}

#[test]
fn run_matches_jax_and_writes_outputs() {
    let base = "tests/fixtures/jax/llama_tiny_step";
    let out = tmp("out.safetensors");
    let o = hlatc(&[
        "run",
        &fixture(&format!("{base}.hlo")),
        "--inputs",
        &fixture(&format!("{base}.inputs.safetensors")),
        "--expect",
        &fixture(&format!("{base}.outputs.safetensors")),
        "--outputs",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let s = stdout(&o);
    assert!(s.starts_with("out0  f32[]            = 4.5762"), "{s}");
    assert!(s.contains("out63  f32[64,32]"), "{s}");
    assert!(s.contains("all 64 outputs match"), "{s}");
    let written = hlatc::runtime::read_safetensors(&out).unwrap();
    assert_eq!(written.len(), 64);
    assert_eq!(written["out1"].dims(), &[64, 32]);
}

#[test]
fn run_one_device_runs_a_sharded_module_before_partitioning() {
    let base = "tests/fixtures/jax/llama_tiny_step";
    let sharded = fixture(&format!("{base}.sharded.dump.hlo"));
    let args = |one_device: bool| {
        let mut v = vec![
            "run".to_string(),
            sharded.clone(),
            "--inputs".into(),
            fixture(&format!("{base}.inputs.safetensors")),
            "--expect".into(),
            fixture(&format!("{base}.outputs.safetensors")),
        ];
        if one_device {
            v.push("--one-device".into());
        }
        v
    };
    let run = |one_device| {
        let a = args(one_device);
        hlatc(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let refused = run(false);
    assert_eq!(error_code(&refused), "run_module.multi_device");
    let o = run(true);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("all 64 outputs match"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("--one-device: running 'jit_step' (written for 1 replica(s) x 8 partition(s)) as one device's program"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_without_inputs_is_seeded_and_deterministic() {
    let f = fixture("tests/fixtures/hlo/xla_classic.hlo");
    let a = hlatc(&["run", &f, "--seed", "7"]);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(stdout(&a), stdout(&hlatc(&["run", &f, "--seed", "7"])));
    assert_ne!(stdout(&a), stdout(&hlatc(&["run", &f, "--seed", "8"])));
    let lines: Vec<String> = stdout(&a).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("out0  f32[4]") && lines[1].starts_with("out1  f32[]"),
        "{lines:?}"
    );
}

#[test]
fn run_reports_a_mismatch_with_status_1() {
    let base = "tests/fixtures/jax/llama_tiny_step";
    // Wrong reference: the inputs file has other tensors under other names.
    let o = hlatc(&[
        "run",
        &fixture(&format!("{base}.hlo")),
        "--inputs",
        &fixture(&format!("{base}.inputs.safetensors")),
        "--expect",
        &fixture(&format!("{base}.inputs.safetensors")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("mismatch: ")
            && stderr(&o).contains("holds 66 tensors, the module returned 64 outputs"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_status_1() {
    let bad = tmp("bad.hlo");
    std::fs::write(
        &bad,
        "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[3] negate(x)\n}\n",
    )
    .unwrap();
    let o = hlatc(&["fmt", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "error[artifact.verify]: {}: computation 'e', instruction 'y': negate produces f32[2]{{0}} but the instruction declares f32[3]{{0}}\n",
            bad.display()
        )
    );
    std::fs::write(
        &bad,
        "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] neg(x)\n}\n",
    )
    .unwrap();
    let e = stderr(&hlatc(&["fmt", bad.to_str().unwrap()]));
    assert!(
        e.starts_with(&format!(
            "error[parse]: {}:4:19: unsupported opcode 'neg'",
            bad.display()
        )),
        "{e}"
    );
    let e = stderr(&hlatc(&["fmt", "/nonexistent.hlo"]));
    assert_eq!(
        e,
        "error[artifact.io]: /nonexistent.hlo: No such file or directory (os error 2)\n"
    );
    let junk = tmp("junk.pb");
    std::fs::write(&junk, [0x0a, 0xff, 0xff, 0x01]).unwrap();
    let e = stderr(&hlatc(&["fmt", junk.to_str().unwrap()]));
    assert!(
        e.starts_with(&format!(
            "error[artifact.proto]: {}: not a valid HloModuleProto",
            junk.display()
        )),
        "{e}"
    );
}

#[test]
fn run_names_missing_inputs_and_missing_plugin() {
    let f = fixture("tests/fixtures/hlo/xla_classic.hlo");
    let inputs = tmp("partial.safetensors");
    let one = hlatc::Literal::from_f32(vec![4], &[1.0; 4]).unwrap();
    hlatc::runtime::write_safetensors(&inputs, &[("Arg_0.1".into(), one)]).unwrap();
    let o = hlatc(&["run", &f, "--inputs", inputs.to_str().unwrap()]);
    assert_eq!(error_code(&o), "usage.not_found");

    let o = Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args(["run", &f])
        .env("HLATC_PJRT_PLUGIN", "/nowhere/xla_cpu_pjrt.so")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("plugin not found (looked in /nowhere/xla_cpu_pjrt.so)"),
        "{}",
        stderr(&o)
    );
}

/// XLA aborts the process on a flag in `XLA_FLAGS` it does not define
/// ("Unknown flag in XLA_FLAGS"), and builds of XLA drop flags: the
/// runtime reads the plugin's flags first and refuses by name.
#[test]
fn a_flag_the_plugin_does_not_define_is_refused_before_xla_aborts() {
    let flags = format!(
        "{} --xla_no_such_flag_of_hlatcs=1",
        std::env::var("XLA_FLAGS").unwrap_or_default()
    );
    let o = Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args(["train", "--model", "tiny", "--steps", "1"])
        .env("XLA_FLAGS", flags)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("XLA_FLAGS sets --xla_no_such_flag_of_hlatcs, which PJRT plugin")
            && e.contains("does not define"),
        "{e}"
    );
}

#[test]
fn help_teaches_every_subcommand() {
    let h = stdout(&hlatc(&["--help"]));
    for word in [
        "fmt",
        "convert",
        "run",
        "HloModuleProto",
        "scripts/fetch-xla-cpu-plugin.sh",
        "Examples:",
    ] {
        assert!(h.contains(word), "--help lacks {word}:\n{h}");
    }
    let h = stdout(&hlatc(&["run", "--help"]));
    for word in [
        "--inputs",
        "--outputs",
        "--seed",
        "--expect",
        "--rtol",
        "--atol",
        "arg0",
    ] {
        assert!(h.contains(word), "run --help lacks {word}:\n{h}");
    }
    assert!(Path::new(env!("CARGO_BIN_EXE_hlatc")).exists());
}

/// A bundle runs by directory: inputs and outputs carry the manifest's
/// names, one step's outputs are the next step's state, and int64 token
/// files (what torch writes) are converted when every id fits.
#[test]
fn run_a_bundle_step_after_step() {
    let dir = tmp("bundle-run");
    let o = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--seq-len",
        "4",
        "--batch-size",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let d = dir.to_str().unwrap();
    let first = tmp("step1.safetensors");
    let o = hlatc(&["run", d, "--outputs", first.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.starts_with("loss "), "{s}");
    assert!(
        s.contains("\nmodel.embed_tokens.weight ") && s.contains("\nstep "),
        "{s}"
    );
    let state = hlatc::runtime::read_safetensors(&first).unwrap();
    let ids = |v: &[i64]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        hlatc::Literal::from_bytes(hlatc::compiler::ElementType::S64, vec![1, 4], bytes).unwrap()
    };
    let batch = tmp("batch.safetensors");
    let write_batch = |targets: &[i64]| {
        hlatc::runtime::write_safetensors(
            &batch,
            &[
                ("tokens".into(), ids(&[1, 2, 3, 4])),
                ("targets".into(), ids(targets)),
            ],
        )
        .unwrap()
    };
    write_batch(&[2, 3, 4, -100]);
    let second = tmp("step2.safetensors");
    let o = hlatc(&[
        "run",
        d,
        "--inputs",
        first.to_str().unwrap(),
        "--inputs",
        batch.to_str().unwrap(),
        "--outputs",
        second.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("tensor 'loss' matches no parameter and is ignored"),
        "{}",
        stderr(&o)
    );
    let next = hlatc::runtime::read_safetensors(&second).unwrap();
    assert_eq!(
        next["step"].to_i64_vec()[0],
        state["step"].to_i64_vec()[0] + 1
    );
    // An id that does not fit the parameter's s32 is named.
    write_batch(&[2, 3, 1 << 40, 0]);
    let o = hlatc(&[
        "run",
        d,
        "--inputs",
        first.to_str().unwrap(),
        "--inputs",
        batch.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "tensor 'targets' element 2 is 1099511627776, which does not fit the parameter's s32"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_unknown_remat_policy_lists_the_known_ones() {
    for command in ["compile", "train", "opt"] {
        let mut args = vec![command, "--remat", "everything"];
        if command == "opt" {
            args.push("x.hlo");
        }
        let o = hlatc(&args);
        assert!(!o.status.success(), "{command}");
        assert!(
            stderr(&o).contains(
                "unknown remat policy 'everything' (known: none, core-attention, full-layer, stage)"
            ),
            "{command}: {}",
            stderr(&o)
        );
    }
}

/// A negative value after a flag is read as its value, so the flag's own
/// check names the problem (clap said "unexpected argument '-1' found").
#[test]
fn a_negative_value_is_refused_by_its_flags_own_check() {
    let out = tmp("negative").join("out");
    let out = out.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["compile", "--model", "tiny", "--lr-max", "-1", "--out", out],
            "option.lr_max",
        ),
        (
            vec!["compile", "--model", "tiny", "--tp", "-2", "--out", out],
            "option.tp",
        ),
        (
            vec![
                "compile",
                "--model",
                "tiny-moe",
                "--capacity-factor",
                "-1",
                "--out",
                out,
            ],
            "option.capacity_factor",
        ),
        (
            vec!["train", "--model", "tiny", "--steps", "-3"],
            "cli.value_validation.steps",
        ),
        (
            vec!["plan", "--model", "hlat-7b", "--nodes", "-2"],
            "plan.option.nodes",
        ),
    ] {
        let o = hlatc(&args);
        assert!(!o.status.success(), "{args:?}");
        assert_code(&stderr(&o), expected);
    }
}

#[test]
fn train_writes_every_steps_metrics_as_csv() {
    let path = tmp("metrics.csv");
    let o = hlatc(&["train", "--steps", "4", "--metrics", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(&path).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("step,loss,grad_norm,learning_rate,held_out_loss")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 4);
    // The same losses the progress lines print, to their 4 decimals.
    let printed: Vec<f64> = stdout(&o)
        .lines()
        .filter_map(|l| l.split("loss ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .take(4)
        .collect();
    assert_eq!(printed.len(), 4, "{}", stdout(&o));
    for (k, (row, shown)) in rows.iter().zip(&printed).enumerate() {
        assert_eq!(row[0], (k + 1).to_string());
        let loss: f64 = row[1].parse().unwrap();
        assert!(
            (loss - shown).abs() < 5e-5,
            "step {}: {loss} vs {shown}",
            k + 1
        );
        let lr: f64 = row[3].parse().unwrap();
        assert!(lr > 0.0 && row[4].is_empty(), "{row:?}");
    }
}

/// Converting between forms says what the target form cannot carry, rather
/// than dropping it silently: module config has no proto field, and a
/// proto's device assignment no text syntax.
#[test]
fn converting_notes_what_the_target_form_cannot_carry() {
    let pb = tmp("sharded.pb");
    let sharded = fixture("tests/fixtures/jax/llama_tiny_step.sharded.dump.hlo");
    let o = hlatc(&["convert", &sharded, "-o", pb.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'jit_step': replica_count=1 and num_partitions=8 are module config, which HloModuleProto has no field for, and are not written; the text form keeps them"),
        "{}",
        stderr(&o)
    );
    let passthrough = tmp("passthrough.hlo");
    std::fs::write(
        &passthrough,
        "HloModule p, alias_passthrough_params=true\n\nENTRY e {\n  ROOT x = f32[2] parameter(0)\n}\n",
    )
    .unwrap();
    let o = hlatc(&[
        "convert",
        passthrough.to_str().unwrap(),
        "-o",
        pb.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'p': alias_passthrough_params=true is module config, which HloModuleProto has no field for, and is not written; the text form keeps it"),
        "{}",
        stderr(&o)
    );
    let dumped = fixture("tests/fixtures/torch_xla/torch_xla_llama_step.causal.hlo.pb");
    let o = hlatc(&["fmt", &dumped]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("its device_assignment (1 replica(s) x 1 computation(s) on devices [[0]]) has no HLO text syntax and is not written; the proto form keeps it"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("reduce-window("));
}

#[test]
fn run_max_trips_stops_a_loop_that_never_ends() {
    let forever = "HloModule forever\ncond {\n  s = (s32[], f32[2]) parameter(0)\n  ROOT go = pred[] constant(true)\n}\nbody {\n  s.1 = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(s.1), index=0\n  one = s32[] constant(1)\n  next = s32[] add(i, one)\n  x = f32[2] get-tuple-element(s.1), index=1\n  ROOT t = (s32[], f32[2]) tuple(next, x)\n}\nENTRY e {\n  x.1 = f32[2] parameter(0)\n  zero = s32[] constant(0)\n  init = (s32[], f32[2]) tuple(zero, x.1)\n  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body\n}\n";
    let p = tmp("forever.hlo");
    std::fs::write(&p, forever).unwrap();
    let f = p.to_str().unwrap();
    let o = hlatc(&["run", f, "--max-trips", "7"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).lines().next().unwrap().ends_with("= 7"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("--max-trips 7: running 'forever' with its 1 while loop(s) stopped after at most 7 trips"),
        "{}",
        stderr(&o)
    );
    let zero = hlatc(&["run", f, "--max-trips", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    assert_eq!(error_code(&zero), "cli.value_validation.max_trips");
}

#[test]
fn run_passes_a_tuple_parameter_as_its_leaves() {
    let p = tmp("tupled.hlo");
    std::fs::write(&p, "HloModule m\nENTRY e {\n  t = (f32[3], (s32[], f32[2])) parameter(0)\n  x = f32[3] get-tuple-element(t), index=0\n  n = f32[3] negate(x)\n  i = (s32[], f32[2]) get-tuple-element(t), index=1\n  ROOT r = (f32[3], (s32[], f32[2])) tuple(n, i)\n}\n").unwrap();
    let o = hlatc(&["run", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("running 'm' with the tuples at its entry's edges as their leaves: parameters t.0, t.1.0, t.1.1; a tuple result's leaves in order"),
        "{}",
        stderr(&o)
    );
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().nth(1).unwrap().starts_with("out1  s32[]"),
        "{out}"
    );
}

/// `hlatc compile`'s flags are the list every front end is held to
/// (`hlatc::compile_step::spellings`): no flag more or less, each default
/// value the one `--help` prints, each switch without one, each Python
/// keyword the flag's name; and the book names every flag, in compile's
/// usage line or a row of its option tables.
#[test]
fn every_compile_option_is_spelled_as_the_list_says() {
    use hlatc::compile_step::spellings::{CompileOption, DefaultValue, SPELLINGS};
    use hlatc::compile_step::CompileOptions;
    let help = stdout(&hlatc(&["compile", "--help"]));
    // Each flag's block of help: its line and the lines up to the next flag.
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let flag = line
            .trim_start()
            .trim_start_matches("-h, ")
            .strip_prefix("--")
            .filter(|_| line.starts_with("  "))
            .map(|rest| {
                rest.split([' ', '='])
                    .next()
                    .unwrap_or_default()
                    .to_string()
            });
        match (flag, blocks.last_mut()) {
            (Some(f), _) if f != "help" => blocks.push((f, String::new())),
            (Some(_), _) => break,
            (None, Some((_, text))) => {
                text.push(' ');
                text.push_str(line.trim());
            }
            (None, None) => {}
        }
    }
    let mut listed: Vec<&str> = SPELLINGS.iter().map(|s| s.flag).collect();
    let mut printed: Vec<&str> = blocks.iter().map(|(f, _)| f.as_str()).collect();
    listed.sort_unstable();
    printed.sort_unstable();
    assert_eq!(printed, listed, "hlatc compile --help against the list");
    let book = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/cli.md"),
    )
    .unwrap();
    let usage = book
        .lines()
        .find(|l| l.starts_with("| `hlatc compile ["))
        .expect("the compile usage line");
    for s in SPELLINGS {
        let (_, text) = blocks.iter().find(|(f, _)| f == s.flag).unwrap();
        let default = text.split("[default: ").nth(1);
        match s.default {
            DefaultValue::Value(v) => assert!(
                default.is_some_and(|d| d.starts_with(&format!("{v}]"))),
                "--{}: [default: {v}] in {text:?}",
                s.flag
            ),
            DefaultValue::Off | DefaultValue::Empty => {
                assert_eq!(default, None, "--{} has no default value", s.flag)
            }
            DefaultValue::Unset => {}
        }
        // The keyword is the flag with underscores; a repeated flag that
        // Python takes all at once as a dict is its plural (`--kernel`,
        // `kernels={...}`, as the issue that added it spells them).
        if let Some(python) = s.python {
            let plain = s.flag.replace('-', "_");
            let plural = format!("{plain}s");
            assert!(
                python == plain || (s.flag == "kernel" && python == plural),
                "--{}: {python}",
                s.flag
            );
        }
        // The library's own defaults, which every front end builds on: a
        // default the row states is the one CompileOptions::default() has
        // (setting it changes nothing the options write).
        if let (DefaultValue::Value(v), Some(&option)) = (
            s.default,
            CompileOption::ALL.iter().find(|o| o.spelling() == s),
        ) {
            let o = CompileOptions::default();
            let mut given = o.clone();
            given.set(option, Some(v)).unwrap();
            assert_eq!(
                given.settings().unwrap(),
                o.settings().unwrap(),
                "--{}: CompileOptions::default() differs from the row's {v}",
                s.flag
            );
        }
        let flag = format!("--{}", s.flag);
        assert!(
            usage.contains(&flag) || book.contains(&format!("| `{flag}")),
            "docs/src/cli.md names {flag} neither in compile's usage line nor in an option table"
        );
    }
}

/// Autodiff's copies of forward values are known by their mark
/// (`frontend_attributes={_hlatc_recomputed="true"}` in the text), not by
/// their names: a step printed before its passes and read back is
/// optimized to the very module the compile wrote, and with the marks
/// taken out (the `recomputed.N` names left) it is not.
#[test]
fn a_step_read_back_from_its_text_is_optimized_as_the_built_one() {
    let dir = tmp("recomputed-marks");
    let _ = std::fs::remove_dir_all(&dir);
    let (raw, built) = (dir.join("raw"), dir.join("built"));
    let compile = |out: &Path, passes: Option<&str>| {
        let out_s = out.display().to_string();
        let mut args = vec![
            "compile", "--model", "tiny", "--target", "cpu", "--out", &out_s,
        ];
        args.extend(passes);
        let o = hlatc(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(out.join("model.hlo.txt")).unwrap()
    };
    let text = compile(&raw, Some("--passes="));
    let want = compile(&built, None);
    let marks = text.matches("_hlatc_recomputed=\"true\"").count();
    let named = text
        .lines()
        .filter(|l| l.trim_start().starts_with("recomputed."))
        .count();
    assert!(marks > 0 && marks == named, "{marks} marks, {named} copies");
    assert!(
        !want.contains("_hlatc_recomputed"),
        "remat clears the marks it acted on"
    );
    let pipeline = stdout(&hlatc(&["passes"]))
        .lines()
        .find_map(|l| l.strip_prefix("default pipeline for cpu: "))
        .unwrap()
        .to_string();
    let optimized = |input: &str, name: &str| {
        let (src, out) = (
            dir.join(format!("{name}.hlo")),
            dir.join(format!("{name}.opt.hlo")),
        );
        std::fs::write(&src, input).unwrap();
        let o = hlatc(&[
            "opt",
            &src.display().to_string(),
            "--target",
            "cpu",
            "--precision",
            "bf16-mixed",
            &format!("--passes={pipeline}"),
            "-o",
            &out.display().to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(out).unwrap()
    };
    assert_eq!(optimized(&text, "marked"), want);
    let unmarked = text
        .replace(", frontend_attributes={_hlatc_recomputed=\"true\"}", "")
        .replace("_hlatc_recomputed=\"true\",", "");
    assert!(!unmarked.contains("_hlatc_recomputed"));
    assert_ne!(optimized(&unmarked, "unmarked"), want);
    std::fs::remove_dir_all(&dir).unwrap();
}
