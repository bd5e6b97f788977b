//! The reference tables in `docs/` that the code can produce are produced
//! by it: the pass list from the pass registry, the op table from the op
//! descriptions and the backward rules. Each sits between marker lines in
//! its chapter; a mismatch prints both, and `HLATC_BLESS=1` rewrites it.

use hlatc::compiler::graph::autodiff::{gradient, Gradient, Saved};
use hlatc::compiler::ir::op::description::{Arity, OpTraits};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn docs(chapter: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/src")
        .join(chapter)
}

/// The text between `<!-- generated:NAME:begin -->` and its `end` line.
fn check_generated(chapter: &str, name: &str, generated: &str) {
    let path = docs(chapter);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let begin = format!("<!-- generated:{name}:begin -->\n");
    let end = format!("<!-- generated:{name}:end -->");
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        panic!("{}: no {begin} ... {end} markers", path.display());
    };
    let current = &text[b + begin.len()..e];
    if current == generated {
        return;
    }
    if std::env::var_os("HLATC_BLESS").is_some_and(|v| v != "0") {
        let updated = format!("{}{generated}{}", &text[..b + begin.len()], &text[e..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let diff = similar::TextDiff::from_lines(current, generated)
        .unified_diff()
        .header("docs", "generated")
        .to_string();
    panic!(
        "{}: the {name} table differs from what the code says (bless with HLATC_BLESS=1):\n{diff}",
        path.display()
    );
}

#[test]
fn the_neuron_rule_table_is_the_code() {
    check_generated(
        "neuron-preflight.md",
        "neuron-rules",
        &hlatc::passes::neuron_check::markdown_table(),
    );
}

#[test]
fn the_pass_table_is_the_registry() {
    check_generated("passes.md", "passes", &hlatc::passes::markdown_table());
}

/// One instance of every opcode XLA's parser accepts, so each row is read
/// from an op the IR holds.
fn op_instances() -> BTreeMap<&'static str, hlatc::compiler::Op> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hlo/all_ops.hlo");
    let m = hlatc::load_module(&path).unwrap();
    let mut ops = BTreeMap::new();
    for c in &m.computations {
        for id in c.ids() {
            let op = &c.instr(id).op;
            ops.entry(op.opcode()).or_insert_with(|| op.clone());
        }
    }
    ops
}

fn op_table() -> String {
    let mut out =
        String::from("| opcode | operands | traits | gradient |\n| --- | --- | --- | --- |\n");
    for (opcode, op) in op_instances() {
        let operands = match op.arity() {
            Arity::Exactly(n) => n.to_string(),
            Arity::Variadic => "any".to_string(),
        };
        let traits: Vec<&str> = [
            (OpTraits::IMPURE, "impure"),
            (OpTraits::COLLECTIVE, "collective"),
            (OpTraits::SIDE_EFFECT, "side effect"),
            (OpTraits::CARRIES_FLOAT_TYPE, "carries float type"),
        ]
        .into_iter()
        .filter(|(t, _)| op.traits().has(*t))
        .map(|(_, name)| name)
        .collect();
        let gradient = match gradient(&op) {
            Gradient::Rule(rule) if rule.saves.is_empty() => "rule".to_string(),
            Gradient::Rule(rule) => {
                let saved: Vec<String> = rule
                    .saves
                    .iter()
                    .map(|s| match s {
                        Saved::Operand(k) => format!("operand {k}"),
                        Saved::Output => "output".to_string(),
                        Saved::OperandsFrom(k) => format!("operands {k}.."),
                    })
                    .collect();
                format!("rule, saves {}", saved.join(", "))
            }
            Gradient::Zero => "zero".to_string(),
            Gradient::Refused(why) => format!("refused: {why}"),
        };
        out += &format!(
            "| `{opcode}` | {operands} | {} | {gradient} |\n",
            traits.join(", ")
        );
    }
    out
}

#[test]
fn the_op_table_is_the_ir_and_its_backward_rules() {
    check_generated("hlo-support.md", "ops", &op_table());
}

/// Every chapter in `docs/src` is in the book's table of contents, and
/// every entry there is a chapter that exists (mdBook would otherwise
/// create an empty page for it, or leave a chapter unreachable).
#[test]
fn the_books_contents_list_every_chapter() {
    let summary = std::fs::read_to_string(docs("SUMMARY.md")).unwrap();
    let listed: std::collections::BTreeSet<String> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(target, _)| target.to_string()))
        .collect();
    let chapters: std::collections::BTreeSet<String> = std::fs::read_dir(docs(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    assert_eq!(
        listed, chapters,
        "docs/src/SUMMARY.md against the chapters in docs/src"
    );
}

/// The folders ARCHITECTURE.md's code map names: a line of the map that
/// starts with `NAME/` (the top level), or `src/NAME/` (a crate's
/// folders), inside its fenced blocks.
fn mapped_folders(text: &str, prefix: &str) -> std::collections::BTreeSet<String> {
    let mut inside = false;
    let mut out = std::collections::BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            inside = !inside;
            continue;
        }
        if let Some(name) = inside
            .then(|| line.strip_prefix(prefix))
            .flatten()
            .and_then(|rest| rest.split_once('/'))
            .map(|(name, _)| name)
            .filter(|n| !n.is_empty() && !n.contains(' '))
        {
            out.insert(name.to_string());
        }
    }
    out
}

/// The folders of `dir`, but hidden ones and `ignored` (outputs).
fn folders(dir: &Path, ignored: &[&str]) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !ignored.contains(&n.as_str()))
        .collect()
}

/// ARCHITECTURE.md's code map names every top-level folder (every crate
/// among them) and every folder of the compiler's `src/`, and nothing
/// that is not there: moving or adding one without the map fails here.
#[test]
fn the_architecture_map_names_every_crate_and_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    assert_eq!(
        mapped_folders(&text, ""),
        // Cargo's output, and the README's main job's bundle.
        folders(root, &["target", "build"]),
        "ARCHITECTURE.md's code map against the repository's folders"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap();
    for member in members.split(',').map(|m| m.trim().trim_matches('"')) {
        assert!(
            text.contains(&format!("\n{member}/")),
            "ARCHITECTURE.md does not map the crate {member}/"
        );
    }
    assert_eq!(
        mapped_folders(&text, "src/"),
        folders(&root.join("compiler/src"), &[]),
        "ARCHITECTURE.md's compiler map against compiler/src"
    );
}

/// The planner chapter's tables: the instances' facts, the parameters and
/// their fit, each shared run predicted from the others, and the runs the
/// fit never saw.
#[test]
fn the_planner_tables_are_the_cost_model_and_its_errors() {
    use hlatc::plan::calibration::{builtin_params, errors_markdown, Calibration, BUILTIN_FILE};
    use hlatc::plan::cost::params_markdown;
    use hlatc::plan::Assumptions;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Named by their paths in the repository, whatever the directory.
    let read = |file: &str| {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let base = root.join(file);
        Calibration::parse(&text, file, base.parent().unwrap()).unwrap()
    };
    check_generated(
        "planner.md",
        "planner-hardware",
        &hlatc::plan::hardware::markdown_table(),
    );
    check_generated(
        "planner.md",
        "planner-params",
        &params_markdown(&builtin_params()),
    );
    let shared = read(BUILTIN_FILE);
    let report = shared.fit_report(&Assumptions::default()).unwrap();
    check_generated(
        "planner.md",
        "planner-leave-one-out",
        &errors_markdown(&report.leave_one_out),
    );
    let other = read("data/planner/sdk-other-runs.csv");
    let errors = other
        .predict_with(&builtin_params(), &Assumptions::default())
        .unwrap();
    check_generated("planner.md", "planner-held-out", &errors_markdown(&errors));
}

/// Each row of `moe.md`'s 32-node table is what `hlatc compile` prints for
/// its layout: the parameters a rank holds, its memory per rank, with and
/// without ZeRO-1, and the pre-flight's warning (issue 92: the table had
/// drifted from the program).
#[test]
fn the_moe_chapters_32_node_table_is_what_compile_prints() {
    use crate::support::{hlatc, scratch, stdout};
    let text = std::fs::read_to_string(docs("moe.md")).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("| `mixtral-8x7b`, 32 nodes")
                || l.starts_with("| `qwen3-30b-a3b`, 32 nodes")
        })
        .collect();
    assert_eq!(rows.len(), 2, "the table's rows");
    for row in rows {
        let cells: Vec<&str> = row
            .split(" | ")
            .map(|c| c.trim_matches(['|', ' ']))
            .collect();
        let model = cells[0].split('`').nth(1).unwrap();
        let sequences = cells[0]
            .split(", ")
            .find_map(|p| p.strip_suffix(" sequences of 4096"))
            .and_then(|p| p.rsplit(' ').next())
            .unwrap_or_else(|| panic!("no batch in {row}"));
        let flags: Vec<&str> = cells[1].trim_matches('`').split_whitespace().collect();
        let compile = |zero1: bool| {
            let dir = scratch(&format!("moe-table-{model}-{zero1}"));
            let _ = std::fs::remove_dir_all(&dir);
            let mut args = vec![
                "compile",
                "--model",
                model,
                "--batch-size",
                sequences,
                "--seq-len",
                "4096",
                "--out",
            ];
            args.push(dir.to_str().unwrap());
            args.extend(flags.iter().filter(|&&f| zero1 || f != "--zero1"));
            let o = hlatc(&args);
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let _ = std::fs::remove_dir_all(&dir);
            stdout(&o)
        };
        let said = compile(true);
        let field = |said: &str, line: &str, after: &str, until: char| -> String {
            let l = said
                .lines()
                .find(|l| l.trim_start().starts_with(line))
                .unwrap();
            let rest =
                &l[l.find(after).unwrap_or_else(|| panic!("{after} in {l}")) + after.len()..];
            rest[..rest.find(until).unwrap()].to_string()
        };
        let holds = field(&said, "ranks", "each holds ", ' ');
        let per_rank = field(&said, "memory", "per rank ", ':');
        let without = field(&compile(false), "memory", "per rank ", ':');
        let instructions = field(&said, "tensor engine", "at least ", ' ');
        let cell = &cells[2];
        assert!(
            cell.starts_with(&format!("{holds} M parameters, {per_rank} (")),
            "{model}: {cell} against {holds} M, {per_rank}"
        );
        assert!(
            cell.contains(&format!("({without} without")),
            "{model}: {cell} against {without} without ZeRO-1"
        );
        assert!(
            cells[3].contains(&format!("at least {instructions} M")),
            "{model}: {} against {instructions} M",
            cells[3]
        );
        assert!(said.contains("1 warning"), "{model}: {said}");
    }
}

#[test]
fn the_error_code_list_is_every_code_the_errors_can_have() {
    check_generated(
        "cli.md",
        "error-codes",
        &hlatc::every_error_code::markdown_table(),
    );
}
