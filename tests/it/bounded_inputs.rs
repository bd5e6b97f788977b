//! Issue 92: a file whose size is not known before it is read (a device, a
//! FIFO, anything not a regular file) is refused by name before it is
//! read, by every reader: the CLI's under a 4 GiB address-space limit and
//! a time limit (`/dev/zero` read without bound takes gigabytes in
//! seconds; a FIFO without a writer blocks its reader forever), the
//! libraries' on a FIFO and `/dev/null` in this process, each on a thread
//! waited on for a bounded time.

use crate::support::{code_in, scratch, stderr, WORD_TOKENIZER};
use hlatc::compiler::util::input_file::{FileKind, NotRegularFile};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a refusal may take: it comes before anything is read.
const LIMIT: Duration = Duration::from_secs(60);

/// `hlatc args...` in `dir`, under `ulimit -v` of 4 GiB, killed (and the
/// test failed) past [`LIMIT`]. Its output goes to files, so no pipe can
/// stall it.
fn hlatc_bounded(dir: &Path, args: &[&str]) -> Output {
    let out = dir.join("stdout.txt");
    let err = dir.join("stderr.txt");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_hlatc"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = crate::support::wait_within(&mut child, args, LIMIT);
    Output {
        status,
        stdout: std::fs::read(out).unwrap(),
        stderr: std::fs::read(err).unwrap(),
    }
}

/// A FIFO in `dir` (no writer ever opens it), if `mkfifo` makes one.
fn fifo(dir: &Path) -> Option<PathBuf> {
    let path = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&path).status();
    made.is_ok_and(|s| s.success()).then_some(path)
}

/// Every reader the CLI has, given `bad` in its file's place (in `dir`,
/// which holds what the other arguments name), and the code each refusal
/// has.
fn readers(dir: &Path, bad: &str) -> Vec<(Vec<String>, &'static str)> {
    let corpus = dir.join("corpus.jsonl");
    crate::corpus::word_corpus(&corpus, 40, 3, 1);
    let corpus = corpus.display().to_string();
    std::fs::write(
        dir.join("m.hlo"),
        "HloModule m\n\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0)\n}\n",
    )
    .unwrap();
    let kernel = format!("attention=imported:{bad}");
    let train = ["train", "--model", "tiny", "--steps", "1"];
    let cases: Vec<(Vec<&str>, &'static str)> = vec![
        (vec!["fmt", bad], "artifact.not_regular_file"),
        (vec!["check", bad], "artifact.not_regular_file"),
        (
            vec!["compile", "--config", bad, "--out", "b"],
            "artifact.config.not_regular_file",
        ),
        (
            vec![
                "compile", "--model", "tiny", "--kernel", &kernel, "--out", "b",
            ],
            "kernel.imported.not_regular_file",
        ),
        (
            vec!["run", "m.hlo", "--inputs", bad],
            "artifact.tensors.not_regular_file",
        ),
        (
            vec!["plot", bad, "--out", "p.png"],
            "metrics.not_regular_file",
        ),
        (
            vec!["plan", "--model", "tiny", "--calibration", bad],
            "plan.not_regular_file",
        ),
        // A run's identity hashes its data, tokenizer and initial weights
        // before anything else reads them.
        (
            [&train[..], &["--data", bad]].concat(),
            "artifact.identity.not_regular_file",
        ),
        (
            [&train[..], &["--init", bad]].concat(),
            "artifact.identity.not_regular_file",
        ),
        (
            [
                &train[..],
                &["--corpus", bad, "--tokenizer", WORD_TOKENIZER],
            ]
            .concat(),
            "loader.not_regular_file",
        ),
        (
            [&train[..], &["--corpus", &corpus, "--tokenizer", bad]].concat(),
            "artifact.identity.not_regular_file",
        ),
    ];
    cases
        .into_iter()
        .map(|(args, code)| (args.into_iter().map(str::to_string).collect(), code))
        .collect()
}

#[track_caller]
fn assert_refused(dir: &Path, args: &[String], want: &str) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = hlatc_bounded(dir, &args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "hlatc {args:?}: {err}");
    assert_eq!(code_in(&err), want, "hlatc {args:?}: {err}");
}

/// `/dev/zero`, which a reader without the check reads until memory runs
/// out, is refused by every reader of the CLI, the bundle's `--inputs` of
/// issue 92 first.
#[test]
fn every_reader_refuses_dev_zero_by_name() {
    let d = scratch("bounded-dev-zero");
    let bundle = d.join("tiny");
    let o = crate::support::hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--out",
        bundle.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_refused(
        &d,
        &["run", "tiny", "--inputs", "/dev/zero"].map(String::from),
        "artifact.tensors.not_regular_file",
    );
    for (args, code) in readers(&d, "/dev/zero") {
        assert_refused(&d, &args, code);
    }
}

/// A FIFO no one writes, whose reader would wait for ever, is refused by
/// every reader of the CLI before it is opened.
#[test]
fn every_reader_refuses_a_fifo_by_name() {
    let d = scratch("bounded-fifo");
    let Some(fifo) = fifo(&d) else {
        eprintln!("skipped: mkfifo made no FIFO");
        return;
    };
    for (args, code) in readers(&d, &fifo.display().to_string()) {
        assert_refused(&d, &args, code);
    }
}

/// `f(path)` on a thread, waited on for [`LIMIT`]: a reader blocked on a
/// FIFO fails the test instead of hanging it.
fn within<T: Send + 'static>(path: &Path, f: fn(&Path) -> T) -> T {
    let (send, receive) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = send.send(f(&path));
    });
    receive
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("a reader still waits after {LIMIT:?}"))
}

/// The libraries' readers, each refusing a FIFO and `/dev/null` (a device
/// that reads as empty, so a reader without the check fails otherwise,
/// and at once) with its variant wrapping [`NotRegularFile`].
#[test]
fn each_library_reader_refuses_a_device_and_a_fifo_by_its_variant() {
    use hlatc::artifacts::Error as A;
    use hlatc::run_identity::Coverage;
    use hlatc::train::loader::{LoaderError as L, RawDtype, SpecialToken};
    let d = scratch("bounded-library");
    let mut bad = vec![(PathBuf::from("/dev/null"), FileKind::CharDevice)];
    bad.extend(fifo(&d).map(|f| (f, FileKind::Fifo)));
    bad.push((d.clone(), FileKind::Directory));
    for (path, kind) in bad {
        let is = |e: &NotRegularFile| e.path == path && e.kind == kind;
        // The safetensors readers' are the runtime crate's own tests
        // (tests/it/errors.rs).
        let r = within(&path, |p| hlatc::models::ModelConfig::from_hf_file(p).err());
        assert!(
            matches!(&r, Some(hlatc::models::ConfigError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| {
            hlatc::models::imported_kernel::ImportedKernel::load(p).err()
        });
        assert!(
            matches!(&r, Some(hlatc::models::imported_kernel::ImportedKernelError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| hlatc::load_module(p).err());
        assert!(
            matches!(&r, Some(hlatc::Error::Artifact(A::NotRegularFile(e))) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| hlatc::bundle::read_module(p).err());
        assert!(matches!(&r, Some(A::NotRegularFile(e)) if is(e)), "{r:?}");
        let r = within(&path, |p| hlatc::metrics::MetricsLog::read(p).err());
        assert!(
            matches!(&r, Some(hlatc::metrics::MetricsError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| {
            hlatc::plan::calibration::Calibration::read(p).err()
        });
        assert!(
            matches!(&r, Some(hlatc::plan::PlanError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| hlatc::run_identity::tokenizer_hash(p).err());
        assert!(
            matches!(&r, Some(hlatc::run_identity::RunIdentityError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| {
            let files = [p.to_path_buf()];
            hlatc::run_identity::files_fingerprint(&files, Coverage::Whole).err()
        });
        assert!(
            matches!(&r, Some(hlatc::run_identity::RunIdentityError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| hlatc::run_identity::init_from_file(p).err());
        assert!(
            matches!(&r, Some(hlatc::run_identity::RunIdentityError::NotRegularFile(e)) if is(e)),
            "{r:?}"
        );
        let r = within(&path, |p| {
            let (bos, eos) = (SpecialToken::None, SpecialToken::None);
            hlatc::train::loader::tokenize::TextTokenizer::open(p, &bos, &eos, 64).err()
        });
        assert!(matches!(&r, Some(L::NotRegularFile(e)) if is(e)), "{r:?}");
        let r = within(&path, |p| {
            hlatc::train::loader::token_ids::IdReader::open(p, RawDtype::U16, 64, 0).err()
        });
        assert!(matches!(&r, Some(L::NotRegularFile(e)) if is(e)), "{r:?}");
        let r = within(&path, |p| {
            hlatc::train::loader::sources::expand(&[p.display().to_string()]).err()
        });
        assert!(matches!(&r, Some(L::NotRegularFile(e)) if is(e)), "{r:?}");
    }
}
