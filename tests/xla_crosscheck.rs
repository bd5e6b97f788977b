//! XLA itself reads what hlatc writes, and reads it as hlatc meant it: every
//! fixture, and the tiny model's compiled training step, is printed and
//! emitted by hlatc, parsed/loaded by XLA (through
//! jaxlib, `tools/xla_crosscheck.py`), written back by XLA as a proto, and
//! that proto decodes to the module we started from.
//!
//! Needs `pip install -r tools/requirements.txt` (scripts/test.sh does it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<PathBuf> = [
        "tests/fixtures/hlo",
        "tests/fixtures/jax",
        "tests/fixtures/torch_xla",
    ]
    .iter()
    .flat_map(|d| {
        std::fs::read_dir(root.join(d))
            .unwrap()
            .map(|e| e.unwrap().path())
    })
    .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
    .collect();
    v.sort();
    v
}

#[test]
fn xla_reads_our_text_and_protos_as_we_meant_them() {
    let dir = std::env::temp_dir().join(format!("hlatc-xla-crosscheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut modules: Vec<(String, hlatc::Module)> = fixtures()
        .into_iter()
        .map(|f| {
            (
                f.file_stem().unwrap().to_string_lossy().to_string(),
                hlatc::load_module(&f).unwrap(),
            )
        })
        .collect();
    // hlatc's own output: the tiny model's whole training step.
    let cfg = hlatc::train_step::StepConfig {
        model: hlatc::models::ModelConfig::tiny(),
        batch: hlatc::models::BatchShape {
            batch_size: 2,
            seq_len: 8,
        },
        optimizer: Default::default(),
        precision: hlatc::precision::Precision::Fp32,
        packed: false,
    };
    modules.push((
        "tiny_train_step".into(),
        hlatc::train_step::build_train_step(&cfg).unwrap().module,
    ));
    let mut originals = Vec::new();
    for (stem, m) in modules {
        hlatc::save_module(&m, &dir.join(format!("{stem}.txt"))).unwrap();
        hlatc::save_module(&m, &dir.join(format!("{stem}.pb"))).unwrap();
        originals.push((stem, m));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/xla_crosscheck.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .output()
        .expect("python3 must be on PATH");
    assert!(
        out.status.success(),
        "XLA rejected hlatc output (install the reference with `pip install -r tools/requirements.txt`):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (stem, m) in &originals {
        for suffix in ["xla_text", "xla_proto"] {
            let p = dir.join(format!("{stem}.{suffix}.pb"));
            let back = hlatc::load_module(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                &back == m,
                "{stem}: XLA's reading ({suffix}) differs from ours:\n--- ours\n{}\n--- XLA\n{}",
                hlatc::text::print_module(m),
                hlatc::text::print_module(&back)
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
