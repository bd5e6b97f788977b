//! The `hlatc` binary, end to end: what a user types and what they see.
//! `hlatc run` of a module of several replicas runs one device per
//! replica, inputs shared or per rank (`{rank}` in a path), outputs per
//! rank.

use crate::support::{assert_code, error_code, hlatc, stderr, stdout};
use hlatc::runtime::{read_safetensors, write_safetensors};
use hlatc::Literal;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// A fresh folder for one test's files.
fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-devices-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn p(path: &std::path::Path) -> &str {
    path.to_str().unwrap()
}

fn f32s(v: &[f32]) -> Literal {
    Literal::from_f32(vec![v.len() as i64], v).unwrap()
}

/// Four replicas: each scales its `x` by the shared `w`, and pairs of
/// replicas sum what they scaled; each also returns its replica id.
const PAIRS: &str = "HloModule pairs, replica_count=4

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  w = f32[3] parameter(0)
  x = f32[3] parameter(1)
  m = f32[3] multiply(w, x)
  r = f32[3] all-reduce(m), replica_groups={{0,1},{2,3}}, to_apply=sum
  id = u32[] replica-id()
  ROOT t = (f32[3], u32[]) tuple(r, id)
}
";

/// `dir/pairs.hlo`, `dir/state.safetensors` (w = 1, 2, 3) and
/// `dir/batch.R.safetensors` (x = R, R, R) for ranks 0 to 3.
fn pairs_files(d: &std::path::Path) -> PathBuf {
    let module = d.join("pairs.hlo");
    std::fs::write(&module, PAIRS).unwrap();
    write_safetensors(
        &d.join("state.safetensors"),
        &[("w".into(), f32s(&[1.0, 2.0, 3.0]))],
    )
    .unwrap();
    for r in 0..4 {
        let x = r as f32;
        write_safetensors(
            &d.join(format!("batch.{r}.safetensors")),
            &[("x".into(), f32s(&[x, x, x]))],
        )
        .unwrap();
    }
    module
}

#[test]
fn run_on_devices_takes_shared_and_per_rank_inputs_and_writes_per_rank_outputs() {
    let d = dir("pairs");
    let module = pairs_files(&d);
    let state = d.join("state.safetensors");
    let batch = d.join("batch.{rank}.safetensors");
    let out = d.join("out.{rank}.safetensors");
    let o = hlatc(&[
        "run",
        p(&module),
        "--devices",
        "4",
        "--inputs",
        p(&state),
        "--inputs",
        p(&batch),
        "--outputs",
        p(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 12, "{s}");
    assert_eq!(lines[0], "rank 0");
    assert!(lines[1].starts_with("  out0  f32[3]"), "{s}");
    assert_eq!(lines[11], "  out1  u32[]            = 3");
    // The plugin's note of its device count stays out of the way.
    assert!(!stderr(&o).contains("cpu_device_count"), "{}", stderr(&o));
    // Ranks 0 and 1 sum w * 0 + w * 1, ranks 2 and 3 w * 2 + w * 3.
    for r in 0..4 {
        let got = read_safetensors(&d.join(format!("out.{r}.safetensors"))).unwrap();
        let k = if r < 2 { 1.0 } else { 5.0 };
        assert_eq!(got["out0"].to_f64_vec(), [k, 2.0 * k, 3.0 * k], "rank {r}");
        assert_eq!(got["out1"].to_f64_vec(), [r as f64], "rank {r}");
    }
    // Each rank against its own reference, then all against rank 0's.
    let expect = |path: &PathBuf| {
        hlatc(&[
            "run",
            p(&module),
            "--inputs",
            p(&state),
            "--inputs",
            p(&batch),
            "--expect",
            p(path),
        ])
    };
    let o = expect(&out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with(&format!(
            "all 2 outputs of each of 4 ranks match {} (worst error 0.00e0 of the output's largest magnitude)\n",
            out.display()
        )),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("running 'pairs' on 4 devices, one per replica (its replica_count)"),
        "{}",
        stderr(&o)
    );
    let o = expect(&d.join("out.0.safetensors"));
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("rank 1: mismatch in out1")
            && e.contains("rank 2: mismatch in out0")
            && !e.contains("rank 0:"),
        "{e}"
    );
}

/// Without inputs each rank draws its own from the seed, rank 0 what a
/// one-device run draws.
#[test]
fn run_on_devices_generates_each_ranks_inputs_from_the_seed() {
    let d = dir("seeded");
    let module = d.join("echo.hlo");
    std::fs::write(
        &module,
        "HloModule echo, replica_count=2\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  x = f32[4] parameter(0)\n  c = f32[4] copy(x)\n  r = f32[4] all-reduce(x), replica_groups={}, to_apply=sum\n  ROOT t = (f32[4], f32[4]) tuple(c, r)\n}\n",
    )
    .unwrap();
    let one = d.join("one.hlo");
    std::fs::write(
        &one,
        "HloModule one\n\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT c = f32[4] copy(x)\n}\n",
    )
    .unwrap();
    let out = d.join("out.{rank}.safetensors");
    let o = hlatc(&["run", p(&module), "--seed", "5", "--outputs", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let single = d.join("single.{rank}.safetensors");
    let o = hlatc(&["run", p(&one), "--seed", "5", "--outputs", p(&single)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rank = |r: usize| read_safetensors(&d.join(format!("out.{r}.safetensors"))).unwrap();
    let (r0, r1) = (rank(0), rank(1));
    let x0 = r0["out0"].to_f64_vec();
    let x1 = r1["out0"].to_f64_vec();
    assert_ne!(x0, x1);
    let sum: Vec<f64> = x0.iter().zip(&x1).map(|(a, b)| a + b).collect();
    for r in [&r0, &r1] {
        let got = r["out1"].to_f64_vec();
        for (g, s) in got.iter().zip(&sum) {
            assert!((g - s).abs() <= 1e-6, "{got:?} vs {sum:?}");
        }
    }
    let single = read_safetensors(&d.join("single.0.safetensors")).unwrap();
    assert_eq!(single["out0"].to_f64_vec(), x0);
}

#[test]
fn run_on_devices_refuses_what_does_not_fit_the_ranks() {
    let d = dir("refused");
    let module = pairs_files(&d);
    let state = d.join("state.safetensors");
    let batch = d.join("batch.{rank}.safetensors");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", p(&module)];
        args.extend_from_slice(extra);
        hlatc(&args)
    };
    let error = |o: &Output| {
        assert_eq!(o.status.code(), Some(1), "{}", stdout(o));
        stderr(o)
    };
    // It names both counts, since a module of partitions runs too (it said
    // "4 replica(s) (replica_count=4)" before partitions could run).
    assert_eq!(
        error(&run(&["--devices", "2"])),
        "error[usage.conflict]: --devices 2: module 'pairs' is for 4 rank(s) (replica_count=4, num_partitions=1), one per device; run it with --devices 4\n"
    );
    let single = d.join("single.hlo");
    std::fs::write(
        &single,
        "HloModule single\nENTRY main {\n  ROOT x = f32[2] parameter(0)\n}\n",
    )
    .unwrap();
    assert_eq!(
        error(&hlatc(&["run", p(&single), "--devices", "8"])),
        "error[usage.conflict]: --devices 8: module 'single' is for 1 rank(s) (replica_count=1, num_partitions=1), one per device; run it with --devices 1\n"
    );
    let e = error(&run(&["--outputs", p(&d.join("out.safetensors"))]));
    assert!(
        e.contains("the module runs on 4 ranks, so its path needs {rank}"),
        "{e}"
    );
    // A rank without its file, a tensor in two files, a rank's tensor of
    // the wrong shape: each names the file, or the rank and both shapes.
    std::fs::rename(
        d.join("batch.3.safetensors"),
        d.join("batch.3.moved.safetensors"),
    )
    .unwrap();
    let e = error(&run(&["--inputs", p(&state), "--inputs", p(&batch)]));
    assert!(
        e.contains(&format!("{}", d.join("batch.3.safetensors").display())),
        "{e}"
    );
    write_safetensors(
        &d.join("batch.3.safetensors"),
        &[
            ("x".into(), f32s(&[3.0, 3.0, 3.0])),
            ("w".into(), f32s(&[1.0, 1.0, 1.0])),
        ],
    )
    .unwrap();
    let e = error(&run(&["--inputs", p(&state), "--inputs", p(&batch)]));
    assert!(
        e.contains(&format!(
            "tensor 'w' is in both {} and {}",
            state.display(),
            d.join("batch.3.safetensors").display()
        )),
        "{e}"
    );
    write_safetensors(
        &d.join("batch.2.safetensors"),
        &[("x".into(), f32s(&[2.0, 2.0]))],
    )
    .unwrap();
    write_safetensors(
        &d.join("batch.3.safetensors"),
        &[("x".into(), f32s(&[3.0, 3.0, 3.0]))],
    )
    .unwrap();
    let e = error(&run(&["--inputs", p(&state), "--inputs", p(&batch)]));
    assert!(
        e.ends_with("replica 2: input 1 ('x') is f32[2]{0}, parameter expects f32[3]{0}\n"),
        "{e}"
    );
    let e = error(&run(&["--inputs", p(&state)]));
    assert!(
        e.contains(&format!(
            "rank 0: no tensor for parameter 'x' (or 'arg1') in {}",
            state.display()
        )),
        "{e}"
    );
    let o = run(&["--devices", "4", "--one-device"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The plugin's own log lines (its device count, absl's note that logging
/// is not initialized) are silenced unless `HLATC_XLA_LOG` asks for them.
#[test]
fn the_plugins_log_lines_are_silenced_unless_asked_for() {
    let d = dir("pairs-log");
    let module = pairs_files(&d);
    let (state, batch) = (
        d.join("state.safetensors"),
        d.join("batch.{rank}.safetensors"),
    );
    let args = [
        "run",
        p(&module),
        "--devices",
        "4",
        "--inputs",
        p(&state),
        "--inputs",
        p(&batch),
    ];
    let run = |asked: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"));
        c.args(args).env_remove("TF_CPP_MIN_LOG_LEVEL");
        match asked {
            true => c.env("HLATC_XLA_LOG", "1"),
            false => c.env_remove("HLATC_XLA_LOG"),
        };
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let quiet = run(false);
    assert!(!quiet.contains("cpu_device_count"), "{quiet}");
    let asked = run(true);
    assert!(asked.contains("cpu_device_count"), "{asked}");
}
