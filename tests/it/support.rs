//! What the tests share: running the `hlatc` binary and reading what it
//! printed, and the codes of the errors it printed.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// HLAT's 7B layout, as the README's first command compiles it: TP 8
/// with sequence parallelism over DP 4 (one sequence each), ZeRO-1, f32
/// master weights.
pub const HLAT_7B_LAYOUT: [&str; 11] = [
    "compile",
    "--model",
    "hlat-7b",
    "--tp",
    "8",
    "--sequence-parallel",
    "--dp",
    "4",
    "--zero1",
    "--precision",
    "bf16-master",
];

/// Whether to skip a slow test, as rust-analyzer's `skip_slow_tests`
/// does: the fast tier (`scripts/test-fast.sh`, or `cargo test` alone)
/// leaves out the tests that take seconds each, and `RUN_SLOW_TESTS=1`
/// (what `scripts/test.sh` and CI set) runs them. A skipped test passes,
/// and says so on standard error.
pub fn skip_slow_tests() -> bool {
    let skip = std::env::var_os("RUN_SLOW_TESTS").map_or(true, |v| v == "0");
    if skip {
        eprintln!("skipped: a slow test, which RUN_SLOW_TESTS=1 runs");
    }
    skip
}

/// `hlatc args...`, run to the end.
pub fn hlatc(args: &[&str]) -> Output {
    command(args).output().unwrap()
}

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hlatc"));
    c.args(args);
    c
}

/// `hlatc args...` with XLA CPU's default (fusion) emitters, whichever
/// `XLA_FLAGS` picks otherwise. `scripts/test.sh` picks the legacy ones
/// where the plugin has them, which compile small modules in about half
/// the time; a module as large as the 70B step's (27,393 instructions)
/// they compile in three times the fusion emitters' (92 s against 32 s at
/// optimization level 0, 2-core VM). A plugin without the flag (jaxlib
/// 0.11's XLA) has only the fusion emitters, and refuses the flag.
pub fn hlatc_with_fusion_emitters(args: &[&str]) -> Output {
    let flags = std::env::var("XLA_FLAGS").unwrap_or_default();
    let flag = hlatc::runtime::xla_cpu_flags::FUSION_EMITTERS_FLAG;
    let mut c = command(args);
    if flags.contains(flag) {
        c.env("XLA_FLAGS", format!("{flags} --{flag}=true"));
    }
    c.output().unwrap()
}

/// `hlatc args...` (in `dir` when given), which fails the test if it runs
/// past `limit` (killed first). Its output is drained on threads while it
/// runs, so a full pipe cannot stall it.
pub fn hlatc_within(dir: Option<&Path>, args: &[&str], limit: Duration) -> Output {
    let mut c = command(args);
    if let Some(dir) = dir {
        c.current_dir(dir);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            pipe.read_to_end(&mut v).ok();
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = wait_within(&mut child, args, limit);
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// `child`'s exit status (the run `hlatc args...`), failing the test if it
/// runs past `limit` (killed first).
pub fn wait_within(child: &mut Child, args: &[&str], limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hlatc {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An empty folder of this test process's own, `name`d for the test.
pub use crate::scratch::scratch;

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The code of the error `o` failed with (`error[CODE]: ..`, the error's
/// typed path: hlatc::error_code), which a test matches where it would
/// otherwise match the sentence. Asserts a failure (status 1, or clap's 2)
/// and no panic.
#[track_caller]
pub fn error_code(o: &Output) -> String {
    let err = stderr(o);
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "status {:?}; stderr:\n{err}",
        o.status
    );
    code_in(&err).to_string()
}

/// Asserts the error in `err`, a failed run's stderr, is `want` by its code.
#[track_caller]
pub fn assert_code(err: &str, want: &str) {
    let got = code_in(err);
    assert_eq!(got, want, "{err}");
}

/// The code of the `error[CODE]: ..` line in `err`, a failed run's stderr.
/// Asserts it is one `docs/src/cli.md` lists (`every_code`), or one of
/// clap's (`cli.…`), so the list holds every code a test meets.
#[track_caller]
pub fn code_in(err: &str) -> &str {
    let code = err
        .lines()
        .find_map(|l| l.strip_prefix("error[")?.split_once("]: "))
        .map(|(code, _)| code)
        .unwrap_or_else(|| panic!("no error[CODE] line in:\n{err}"));
    static EVERY: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let every = EVERY.get_or_init(hlatc::every_error_code::every_code);
    assert!(
        code.starts_with("cli.") || every.iter().any(|c| c == code),
        "{code} is not a code every_error_code lists:\n{err}"
    );
    code
}

/// The tokenizer of `crate::corpus::word_corpus`: a Hugging Face `tokenizer.json`
/// (WordLevel, whitespace, lowercase) of 59 ids, `<s>` and `</s>` among
/// them, that fits the tiny model's vocabulary of 64.
pub const WORD_TOKENIZER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tokenizer-words.json"
);

/// `hlatc check DIR` of a trn2 bundle hlatc wrote: every program checked
/// for trn2 with no findings, and its memory plan within trn2's core.
pub fn assert_checks_clean_on_trn2(dir: &Path) {
    let check = hlatc(&["check", dir.to_str().unwrap()]);
    let said = stdout(&check);
    assert!(check.status.success(), "{said}");
    assert!(
        said.contains("trn2 (pinned in compile_flags.json: --native-int64=enabled --implicit-integer-downcast=none): no findings"),
        "{said}"
    );
    assert!(
        said.contains("of trn2's 24.00 GiB per core: fits"),
        "{said}"
    );
}
