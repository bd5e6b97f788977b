//! The passes crate's layering (ARCHITECTURE.md): imports point down,
//! `infra < targets < transforms < registry`. `infra` names no pass, and a
//! target names no transform and not the other target, in any path, an
//! attribute's included (a `#[from]` type is an import too). The arrows
//! out of `transforms` (among them the one into a target, `fuse-softmax`
//! writing Neuron's softmax calls) are not checked here.

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Every `crate::MODULE` path the files of `src/DIR` name, with its line.
fn arrows(dir: &str, above: &[&str]) -> Vec<String> {
    arrows_under(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir),
        above,
    )
}

fn arrows_under(root: &Path, above: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for file in sources(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for module in above {
                if code.contains(&format!("crate::{module}")) {
                    out.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    out
}

#[test]
fn infra_names_no_pass() {
    let up = arrows("infra", &["targets", "transforms", "registry"]);
    assert!(up.is_empty(), "infra imports a pass:\n{}", up.join("\n"));
}

#[test]
fn a_target_names_no_transform_and_not_the_other_target() {
    let up = arrows("targets", &["transforms", "registry"]);
    assert!(
        up.is_empty(),
        "a target imports a transform:\n{}",
        up.join("\n")
    );
    for (target, other) in [
        ("targets/cpu", "targets::neuron"),
        ("targets/neuron", "targets::cpu"),
    ] {
        let across = arrows(target, &[other]);
        assert!(
            across.is_empty(),
            "{target} imports {other}:\n{}",
            across.join("\n")
        );
    }
}

#[test]
fn a_planted_arrow_is_seen() {
    let dir = std::env::temp_dir().join(format!("hlatc-layering-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("planted.rs"),
        "enum E {\n    Config(#[from] crate::targets::neuron::X),\n}\n",
    )
    .unwrap();
    let found = arrows_under(&dir, &["targets"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("planted.rs:2: Config(#[from] crate::targets::neuron::X),"));
    let _ = std::fs::remove_dir_all(dir);
}
