//! `hlatc run` of a module of several replicas: one device per replica,
//! inputs shared or per rank (`{rank}` in a path), outputs per rank.

use crate::support::{hlatc, stderr, stdout};
use hlatc::runtime::{read_safetensors, write_safetensors};
use hlatc::Literal;
use std::path::PathBuf;
use std::process::Output;

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
