//! The compiler's folders are the pipeline's stages, lowest first: `util`,
//! `ir`, `analysis`, `formats`, `graph`. A file may name its own stage or a
//! lower one, never a higher one, and no two modules import each other
//! round a cycle (a parent and its own child modules excepted). This reads
//! the sources, as `tools/import_graph.py` draws them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const STAGES: [&str; 5] = ["util", "ir", "analysis", "formats", "graph"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `ir::op` for `src/ir/op/description.rs` and `src/ir/op/mod.rs`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.truncate(2);
    parts
}

/// Code without comments, so a doc link to a higher stage is no import.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first two segments of every path named from `crate::`, each branch
/// of a `crate::{a::x, b}` group on its own.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        rest = &rest[at + "crate::".len()..];
        if preceded {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut branch = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(segments(&branch));
                        branch.clear();
                        continue;
                    }
                    _ => {}
                }
                branch.push(c);
            }
        } else {
            out.push(segments(rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

fn segments(path: &str) -> Vec<String> {
    path.trim()
        .split("::")
        .take(2)
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect::<String>()
        })
        .take_while(|s| !s.is_empty())
        .collect()
}

fn stage(name: &str) -> Option<usize> {
    STAGES.iter().position(|s| *s == name)
}

fn imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in files {
        let me = module_of(&src, &file);
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let edges = graph.entry(me.clone()).or_default();
        for path in crate_paths(&code) {
            if stage(&path[0]).is_some() && path != me && !me.starts_with(&path) {
                edges.insert(path);
            }
        }
    }
    graph
}

#[test]
fn no_stage_imports_a_higher_one() {
    let mut upward = Vec::new();
    for (from, targets) in imports() {
        let Some(own) = from.first().and_then(|f| stage(f)) else {
            continue;
        };
        for to in targets {
            if stage(&to[0]).is_some_and(|s| s > own) {
                upward.push(format!("{} -> {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports back up the pipeline:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_modules_import_each_other_round_a_cycle() {
    let graph = imports();
    // Depth-first search for a back edge, reporting the cycle it closes.
    fn visit(
        v: &Vec<String>,
        graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|p| p == v) {
            let cycle: Vec<String> = path[i..].iter().chain([v]).map(|m| m.join("::")).collect();
            return Some(cycle.join(" -> "));
        }
        if !done.insert(v.clone()) {
            return None;
        }
        path.push(v.clone());
        for w in graph.get(v).into_iter().flatten() {
            if let Some(c) = visit(w, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for v in graph.keys() {
        if let Some(cycle) = visit(v, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle: {cycle}");
        }
    }
}

#[test]
fn the_reader_finds_grouped_and_plain_paths() {
    let code = "use crate::{ir::op::Op, formats::{text, proto}};\nlet x = crate::util::fx::hash(); a_crate::graph::x;";
    let found = crate_paths(code);
    let names: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(names, ["ir::op", "formats", "util::fx"]);
}
