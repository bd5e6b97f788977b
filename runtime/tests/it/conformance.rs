//! Conformance with XLA's reader over XLA's own test HLO
//! (`tests/fixtures/conformance/xla.tar.gz`, 4,147 modules XLA's parser
//! accepts).
//!
//! Every module hlatc accepts must be read, verified, printed and read back
//! to the same text, and XLA must read hlatc's text and proto to the same
//! program shape, instruction count, scheduling and shardings as the
//! original. Every module hlatc
//! refuses must be in `tests/fixtures/conformance/refused.tsv` with the
//! reason's category; a module that is refused for another reason, or no
//! longer refused, fails the test until the list is blessed
//! (`HLATC_BLESS=1`), so the list only ever tells the truth.
//!
//! Every module is read and checked against the list by hlatc; XLA's
//! reading is compared on a sample of [`CROSSCHECKED`] accepted modules
//! drawn from the day's seed, all of them with `HLATC_FULL_SWEEP=1`
//! (`hlatc_filetest::sweep`: the test prints its seed, and
//! `HLATC_SWEEP_SEED` draws the same sample again).
//!
//! Every 16th accepted module of those also runs on XLA CPU twice, as hlatc read
//! the text and as XLA read it (its own proto of the original), with the
//! same seeded inputs and every loop stopped after [`MAX_TRIPS`]: the
//! outputs must be bit for bit alike, or neither reading may run. Where
//! hlatc encodes both readings to the same bytes, they are one program,
//! run once.

use hlatc_compiler::{formats::proto, formats::text, verify};
use hlatc_filetest::sweep::Sweep;
use hlatc_runtime::host_memory::module_bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/conformance")
        .join(name)
}

/// Every `xla/NNNNN.hlo` in the archive, by file name.
fn corpus() -> BTreeMap<String, String> {
    let file = std::fs::File::open(fixture("xla.tar.gz")).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut out = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().into_owned();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !name.ends_with(".hlo") {
            continue;
        }
        let mut s = String::new();
        entry.read_to_string(&mut s).unwrap();
        out.insert(name, s);
    }
    out
}

/// Why a module was refused: a category for the table and the message.
#[derive(Clone, Debug, PartialEq)]
struct Refusal {
    category: String,
    message: String,
}

/// The quoted name after `prefix` in `msg` (`unsupported opcode 'fusion'`).
fn quoted_after<'a>(msg: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = &msg[msg.find(prefix)? + prefix.len()..];
    rest.split('\'').next()
}

/// The outermost attribute being read at `column` of `line`: the last
/// `key=` outside braces before it, so a syntax error inside
/// `window={size=3 pad=1_1}` is filed under `window`, not `size`.
fn attribute_at(line: &str, column: usize) -> Option<String> {
    let before: Vec<char> = line.chars().take(column.saturating_sub(1)).collect();
    let (mut depth, mut quoted, mut found) = (0i32, false, None);
    for (i, &c) in before.iter().enumerate() {
        match c {
            '"' => quoted = !quoted,
            '{' | '(' | '[' if !quoted => depth += 1,
            '}' | ')' | ']' if !quoted => depth -= 1,
            '=' if !quoted && depth <= 0 => {
                let key: String = before[..i]
                    .iter()
                    .rev()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '.')
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if !key.is_empty() {
                    found = Some(key);
                }
            }
            _ => {}
        }
    }
    found
}

/// What a syntax error is really about, where its text says so.
fn syntax_category(msg: &str, line: &str, column: usize) -> String {
    // Only an expectation message says what it found.
    let found = msg.rsplit_once("found `").map_or("", |(_, found)| found);
    if found.starts_with('"') && found.contains("_config") {
        return "backend_config as JSON".into();
    }
    if found.starts_with(":T(") || found.contains(":T(") || found.starts_with(":S(") {
        return "layout tiles or memory space".into();
    }
    if found.starts_with("<=") {
        return "dynamic dimensions".into();
    }
    if msg.contains("expected `[`") && found.starts_with('(') {
        return "buffer shapes, b(...)".into();
    }
    if msg.starts_with("entry_computation_layout gives") {
        return "entry_computation_layout unlike the entry's (not kept)".into();
    }
    match attribute_at(line, column) {
        Some(key) => format!("syntax in {key}="),
        None => "syntax".into(),
    }
}

fn parse_refusal(src: &str, e: &text::ParseError) -> Refusal {
    let msg = e.message.as_str();
    let category = if let Some(op) = quoted_after(msg, "unsupported opcode '") {
        format!("op {op}")
    } else if let Some(t) = quoted_after(msg, "unsupported element type '") {
        format!("type {t}")
    } else if let Some(a) = quoted_after(msg, "unsupported attribute '") {
        format!("attribute {a}")
    } else if let Some(a) = quoted_after(msg, "module attribute '") {
        format!(
            "module attribute {} (not kept)",
            a.split('=').next().unwrap_or(a)
        )
    } else if msg.contains("elided") {
        "elided constants".to_string()
    } else {
        let line = src.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
        syntax_category(msg, line, e.column)
    };
    Refusal {
        category,
        message: format!("{}:{}: {msg}", e.line, e.column),
    }
}

/// hlatc's reading of one module: the module, or why not.
fn read(src: &str) -> Result<hlatc_compiler::Module, Refusal> {
    let m = text::parse_module(src).map_err(|e| parse_refusal(src, &e))?;
    verify(&m).map_err(|e| Refusal {
        category: "verifier".into(),
        message: e.to_string(),
    })?;
    Ok(m)
}

fn one_line(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| if c == '\t' || c == '\n' { ' ' } else { c })
        .collect();
    s.chars().take(200).collect()
}

/// The committed list: file -> (category, message).
fn refused_list() -> BTreeMap<String, Refusal> {
    let text = std::fs::read_to_string(fixture("refused.tsv")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let name = f.next().unwrap().to_string();
            let category = f.next().unwrap_or("").to_string();
            let message = f.next().unwrap_or("").to_string();
            (name, Refusal { category, message })
        })
        .collect()
}

fn write_refused_list(refused: &BTreeMap<String, Refusal>) {
    let mut out = String::from(
        "# Modules of xla.tar.gz that hlatc refuses: file, category, message.\n\
         # Written by `HLATC_BLESS=1 cargo test --release -p hlatc-runtime --test it conformance`.\n",
    );
    for (name, r) in refused {
        out.push_str(&format!(
            "{name}\t{}\t{}\n",
            r.category,
            one_line(&r.message)
        ));
    }
    std::fs::write(fixture("refused.tsv"), out).unwrap();
}

/// Acceptance by category, largest first, as docs/src/hlo-support.md states it.
fn summary(total: usize, refused: &BTreeMap<String, Refusal>) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for r in refused.values() {
        *by.entry(r.category.as_str()).or_default() += 1;
    }
    let mut rows: Vec<(&str, usize)> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let accepted = total - refused.len();
    let mut out = format!(
        "accepted {accepted} of {total} ({:.1}%); refused by category:\n",
        100.0 * accepted as f64 / total as f64
    );
    for (c, n) in rows {
        out.push_str(&format!("  {n:5}  {c}\n"));
    }
    out
}

#[test]
fn xla_test_modules_are_read_or_listed_as_refused() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let corpus = corpus();
    assert_eq!(corpus.len(), 4147, "the archive holds XLA's 4,147 modules");
    let mut refused = BTreeMap::new();
    let mut accepted = BTreeMap::new();
    for (name, src) in &corpus {
        match read(src) {
            Ok(m) => {
                accepted.insert(name.clone(), m);
            }
            Err(r) => {
                refused.insert(name.clone(), r);
            }
        }
    }
    eprintln!("{}", summary(corpus.len(), &refused));
    if std::env::var_os("HLATC_BLESS").is_some() {
        write_refused_list(&refused);
    }
    let listed = refused_list();
    let mut stale = Vec::new();
    for (name, r) in &refused {
        match listed.get(name) {
            Some(l) if l.category == r.category => {}
            Some(l) => stale.push(format!(
                "{name}: refused for `{}` ({}), listed as `{}`",
                r.category, r.message, l.category
            )),
            None => stale.push(format!(
                "{name}: refused for `{}` ({}), not listed",
                r.category, r.message
            )),
        }
    }
    for name in listed.keys() {
        if !refused.contains_key(name) {
            stale.push(format!("{name}: listed as refused, now read"));
        }
    }
    assert!(
        stale.is_empty(),
        "tests/fixtures/conformance/refused.tsv is out of date ({} modules; bless with HLATC_BLESS=1 after checking):\n{}",
        stale.len(),
        stale[..stale.len().min(30)].join("\n")
    );

    // XLA parsing each module three times is most of the test's time.
    let names: Vec<&String> = accepted.keys().collect();
    let crosschecked: BTreeSet<&str> = Sweep::from_env("conformance")
        .sample(
            names.len(),
            CROSSCHECKED,
            "accepted modules read by XLA too",
        )
        .into_iter()
        .map(|i| names[i].as_str())
        .collect();
    let run_sample: Vec<String> = run_sample(&accepted)
        .into_iter()
        .filter(|name| crosschecked.contains(name.as_str()))
        .collect();

    // What hlatc reads, it prints, reads back to the same text, and emits
    // as a proto it reads back to the same module.
    let dir = std::env::temp_dir().join(format!("hlatc-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, m) in &accepted {
        let printed = text::print_module(m);
        let again = text::parse_module(&printed)
            .unwrap_or_else(|e| panic!("{name}: hlatc cannot read its own print: {e}\n{printed}"));
        assert_eq!(
            text::print_module(&again),
            printed,
            "{name}: printing is not a fixpoint"
        );
        let bytes = proto::encode_module(m);
        let mut decoded = proto::decode_module(&bytes)
            .unwrap_or_else(|e| panic!("{name}: hlatc cannot read its own proto: {e}"));
        decoded.adopt_config(m);
        assert_eq!(
            text::print_module(&decoded),
            printed,
            "{name}: the proto does not read back to the same module"
        );
        if !crosschecked.contains(name.as_str()) {
            continue;
        }
        let stem = name.trim_end_matches(".hlo");
        if sampled_for_running(&run_sample, name) {
            std::fs::write(dir.join(format!("{stem}.run")), "").unwrap();
        }
        std::fs::write(dir.join(format!("{stem}.orig.txt")), &corpus[name]).unwrap();
        std::fs::write(dir.join(format!("{stem}.hlatc.txt")), &printed).unwrap();
        std::fs::write(dir.join(format!("{stem}.hlatc.pb")), &bytes).unwrap();
    }

    // XLA reads hlatc's text and proto as the same program.
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/xla_conformance.py"))
        .arg(&dir)
        .output()
        .expect("python3 runs tools/xla_conformance.py (scripts/test.sh installs jaxlib)");
    assert!(
        out.status.success(),
        "tools/xla_conformance.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = v["name"].as_str().unwrap();
        let forms = &v["forms"];
        let orig = &forms["orig"];
        assert!(
            orig.get("error").is_none(),
            "{name}: XLA no longer reads the original: {orig}"
        );
        for form in ["text", "proto"] {
            let got = &forms[form];
            if got != orig {
                mismatches.push(format!(
                    "{name} ({form}): XLA reads {got}, the original as {orig}"
                ));
            }
        }
        checked += 1;
    }
    let runs = run_beside_xla(&dir, &accepted, &run_sample);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(checked, crosschecked.len(), "XLA answered for every module");
    assert!(
        mismatches.is_empty(),
        "{} of {} modules differ once hlatc has written them:\n{}",
        mismatches.len(),
        crosschecked.len(),
        mismatches[..mismatches.len().min(30)].join("\n")
    );
    eprintln!(
        "ran {} of {} sampled modules on XLA CPU as hlatc read them and as XLA read them, bit for bit alike ({} read alike to the byte, run once); {} XLA CPU runs neither way",
        runs.ran,
        run_sample.len(),
        runs.identical,
        runs.skipped.len()
    );
    if std::env::var_os("HLATC_CONFORMANCE_TRACE").is_some() {
        eprintln!("{}", runs.skipped.join("\n"));
    }
    assert!(
        runs.differ.is_empty(),
        "{} sampled modules run differently as hlatc read them and as XLA read them:\n{}",
        runs.differ.len(),
        runs.differ.join("\n")
    );
    // A full sweep runs 194 of 251; fewer than a quarter would mean runs
    // that fail for a reason of their own.
    assert!(
        runs.ran * 4 >= run_sample.len(),
        "only {} of {} sampled modules ran; XLA CPU ran neither reading of:\n{}",
        runs.ran,
        run_sample.len(),
        runs.skipped.join("\n")
    );
}

/// How many accepted modules XLA reads beside hlatc in a sampled sweep:
/// about a quarter of them, each day's another.
const CROSSCHECKED: usize = 1000;

/// One module of every 16 read, in name order: the first of the 16 whose
/// inputs and result fit in [`RUN_BYTES`].
fn run_sample(accepted: &BTreeMap<String, hlatc_compiler::Module>) -> Vec<String> {
    let names: Vec<&String> = accepted.keys().collect();
    names
        .chunks(16)
        .filter_map(|sixteen| {
            sixteen
                .iter()
                .find(|name| module_bytes(&accepted[name.as_str()]) <= RUN_BYTES)
                .map(|name| (*name).clone())
        })
        .collect()
}

/// What a sampled module may take in and give out. A run is to see both
/// readings compute alike, which a small program shows as well as a large
/// one: the largest of XLA's modules convolve 600 MB of random inputs, 2
/// to 4 s each at XLA's optimization level 0 (a third of all the runs'
/// time for ten modules), where the next of their sixteen takes
/// milliseconds. Every module, large ones too, is still read by XLA and
/// compared above.
const RUN_BYTES: u64 = 64 << 20;

/// Random inputs may keep a `while` going for ever, and a run cannot be
/// cut short: both readings stop every loop after this many trips.
const MAX_TRIPS: u32 = 16;

fn sampled_for_running(sample: &[String], name: &str) -> bool {
    sample.binary_search_by(|s| s.as_str().cmp(name)).is_ok()
}

#[derive(Default)]
struct Runs {
    ran: usize,
    /// Sampled modules whose two readings hlatc encodes alike.
    identical: usize,
    skipped: Vec<String>,
    differ: Vec<String>,
}

/// One run of `m` on XLA CPU with inputs drawn from a fixed seed, its
/// loops stopped after [`MAX_TRIPS`].
fn run_once(m: &hlatc_compiler::Module) -> Result<Vec<hlatc_compiler::Literal>, String> {
    use hlatc_runtime::{inputs, Runtime};
    let rt = Runtime::shared().map_err(|e| e.to_string())?;
    hlatc_runtime::ensure_fits(m).map_err(|e| e.to_string())?;
    let mut m = m.clone();
    hlatc_passes::bound_loops(&mut m, MAX_TRIPS).map_err(|e| e.to_string())?;
    let program = rt.compile(&m).map_err(|e| e.to_string())?;
    let mut rng = inputs::SplitMix64::new(7);
    let args = program
        .parameters()
        .iter()
        .map(|(name, s)| {
            s.as_array()
                .map(|a| inputs::random_literal(a, &mut rng))
                .ok_or_else(|| format!("parameter {name} is {s}, not an array"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    program.run(&args).map_err(|e| e.to_string())
}

/// Runs each sampled module as hlatc read it and as XLA read it (XLA's own
/// proto of the original, `tools/xla_conformance.py`), with the same
/// inputs: the outputs must agree bit for bit, or neither may run.
fn run_beside_xla(
    dir: &Path,
    accepted: &BTreeMap<String, hlatc_compiler::Module>,
    sample: &[String],
) -> Runs {
    let mut runs = Runs::default();
    for name in sample {
        let stem = name.trim_end_matches(".hlo");
        let theirs = std::fs::read(dir.join(format!("{stem}.xla.pb")))
            .map_err(|e| e.to_string())
            .and_then(|b| proto::decode_module(&b).map_err(|e| e.to_string()));
        let theirs = match theirs {
            Ok(m) => m,
            Err(e) => {
                runs.differ.push(format!("{name}: XLA's proto of it: {e}"));
                continue;
            }
        };
        if std::env::var_os("HLATC_CONFORMANCE_TRACE").is_some() {
            eprintln!("running {name}");
        }
        let ours = &accepted[name];
        // Both readings are given to XLA CPU as hlatc encodes them, with
        // the module config that text keeps: where both are the same
        // bytes, it is one program, and one run says how both go.
        let alike = proto::encode_module(ours) == proto::encode_module(&theirs)
            && text::print_module(ours) == text::print_module(&theirs);
        let outcomes = if alike {
            runs.identical += 1;
            let once = run_once(ours);
            (once.clone(), once)
        } else {
            (run_once(ours), run_once(&theirs))
        };
        match outcomes {
            (Ok(a), Ok(b)) if a == b => runs.ran += 1,
            (Ok(_), Ok(_)) => runs.differ.push(format!("{name}: the outputs differ")),
            (Err(a), Err(_)) => runs.skipped.push(format!("{name}: {a}")),
            (Ok(_), Err(e)) => runs
                .differ
                .push(format!("{name}: only hlatc's reading runs ({e})")),
            (Err(e), Ok(_)) => runs
                .differ
                .push(format!("{name}: only XLA's reading runs ({e})")),
        }
    }
    runs
}
