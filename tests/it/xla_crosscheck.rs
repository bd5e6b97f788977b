//! XLA itself reads what hlatc writes, and reads it as hlatc meant it: every
//! fixture, and the tiny model's compiled training step, is printed and
//! emitted by hlatc, parsed/loaded by XLA (through
//! jaxlib, `tools/xla_crosscheck.py`), written back by XLA as a proto, and
//! that proto decodes to the module we started from. The sharded step's
//! collectives are among them.
//!
//! Needs `pip install -r tools/requirements.txt` (scripts/test.sh does it).

use hlatc::compiler::ir::stack_frames::ResolvedLocation;
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
    if crate::support::skip_slow_tests() {
        return;
    }
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
        parallel: hlatc::models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    modules.push((
        "tiny_train_step".into(),
        hlatc::train_step::build_train_step(&cfg).unwrap().module,
    ));
    // And its sharded form, through the cpu pipeline: every collective
    // the sharded step emits (all-reduce by sum and max over TP, DP and
    // holder groups, all-gather and reduce-scatter of sequence shards).
    let sharded = hlatc::train_step::StepConfig {
        parallel: hlatc::models::Parallelism {
            tp: 2,
            dp: 2,
            sequence_parallel: true,
            zero1: false,
            pp: 1,
            ..hlatc::models::Parallelism::SINGLE
        },
        batch: hlatc::models::BatchShape {
            batch_size: 4,
            seq_len: 8,
        },
        ..cfg.clone()
    };
    let mut step = hlatc::train_step::build_train_step(&sharded).unwrap();
    let target = hlatc::passes::Target::Cpu;
    let pipeline = hlatc::passes::default_pipeline::<&str>(target, &[]).unwrap();
    hlatc::train_step::optimize(&mut step, &pipeline, target, Default::default()).unwrap();
    let opcodes: std::collections::BTreeSet<&str> = step
        .module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| c.instr(id).op.opcode()))
        .filter(|o| o.starts_with("all-") || o.starts_with("reduce-scatter"))
        .collect();
    assert_eq!(
        opcodes.into_iter().collect::<Vec<_>>(),
        ["all-gather", "all-reduce", "reduce-scatter"]
    );
    let text = hlatc::text::print_module(&step.module);
    assert_eq!(hlatc::text::parse_module(&text).unwrap(), step.module);
    let proto = hlatc::proto::encode_module(&step.module);
    assert_eq!(hlatc::proto::decode_module(&proto).unwrap(), step.module);
    modules.push(("tiny_sharded_train_step".into(), step.module));
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
            let mut back = hlatc::load_module(&p).unwrap_or_else(|e| panic!("{e}"));
            // XLA's config flags have no field in HloModuleProto: XLA's own
            // proto of our text lacks them, as its proto dumps do.
            back.adopt_config(m);
            // XLA renumbers stack-frame tables as it reads them: compare
            // what each instruction's frame means, then the rest.
            let (mut ours, theirs) = (m.clone(), &mut back);
            let (a, b) = (frame_chains(&ours), frame_chains(theirs));
            let first = a.iter().zip(&b).find(|(x, y)| x != y);
            assert!(
                a.len() == b.len() && first.is_none(),
                "{stem}: XLA's reading ({suffix}) gives other source locations ({} and {} instructions); first difference:\n{first:#?}",
                a.len(),
                b.len()
            );
            strip_frames(&mut ours);
            strip_frames(theirs);
            let m = &ours;
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

/// Every instruction's stack-frame chain, by computation and name.
fn frame_chains(m: &hlatc::Module) -> Vec<(String, String, Vec<ResolvedLocation>)> {
    let mut out = Vec::new();
    for c in &m.computations {
        for id in c.ids() {
            let i = c.instr(id);
            out.push((
                c.name.clone(),
                i.name.clone(),
                m.stack_frames.chain(i.metadata.stack_frame_id),
            ));
        }
    }
    out.sort();
    out
}

fn strip_frames(m: &mut hlatc::Module) {
    m.stack_frames = Default::default();
    for c in &mut m.computations {
        let ids: Vec<_> = c.ids().collect();
        for id in ids {
            c.instr_mut(id).metadata.stack_frame_id = 0;
        }
    }
}

/// A JAX `--xla_dump_to` dump of the tiny Llama step, as written (stack-frame
/// tables, `stack_frame_id`, SPMD flags; `tools/jax_dump.py`), is read and
/// gives JAX's own outputs on XLA CPU.
#[test]
fn a_jax_dump_with_stack_frames_runs_with_jaxs_outputs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jax");
    let m = hlatc::load_module(&dir.join("llama_tiny_step.dump.hlo")).unwrap();
    assert!(m.stack_frames.stack_frames.len() > 10);
    let with_frame = m
        .entry()
        .ids()
        .filter(|&id| m.entry().instr(id).metadata.stack_frame_id != 0)
        .count();
    assert!(with_frame > 100, "{with_frame} instructions carry a frame");
    // The first dot's innermost frame is in the model's source.
    let chains: Vec<_> = m
        .entry()
        .ids()
        .map(|id| {
            m.stack_frames
                .chain(m.entry().instr(id).metadata.stack_frame_id)
        })
        .filter(|c| !c.is_empty())
        .collect();
    assert!(chains
        .iter()
        .any(|c| c[0].0.ends_with("jax_llama_step.py") && c.len() >= 3));
    assert_runs_with_jaxs_outputs(&m, "unrolled");
}

/// Runs `m` on the tiny step's inputs (`tools/jax_llama_step.py`) and
/// checks every output against JAX's to f32 rounding.
fn assert_runs_with_jaxs_outputs(m: &hlatc::Module, what: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jax");
    assert_runs_with_recorded_outputs(m, what, &dir.join("llama_tiny_step"));
}

/// Runs `m` on XLA CPU with `{stem}.inputs.safetensors` (`arg0`, ...) and
/// compares each output with `{stem}.outputs.safetensors` (`out0`, ...), to
/// 1e-5 of the output's largest magnitude: what the stack that wrote the
/// dump computed.
fn assert_runs_with_recorded_outputs(m: &hlatc::Module, what: &str, stem: &Path) {
    let file = |suffix: &str| {
        let mut p = stem.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let ins = hlatc::runtime::read_safetensors(&file(".inputs.safetensors")).unwrap();
    let want = hlatc::runtime::read_safetensors(&file(".outputs.safetensors")).unwrap();
    let inputs: Vec<_> = (0..ins.len())
        .map(|i| ins[&format!("arg{i}")].clone())
        .collect();
    let rt = hlatc::runtime::Runtime::shared().unwrap();
    let out = rt.compile(m).unwrap().run(&inputs).unwrap();
    assert_eq!(out.len(), want.len(), "{what}");
    for (i, got) in out.iter().enumerate() {
        let e = &want[&format!("out{i}")];
        let scale = hlatc::runtime::max_abs(e).max(1e-30);
        hlatc::runtime::assert_close(e, got, 1e-5, 1e-5 * scale)
            .unwrap_or_else(|msg| panic!("{what} out{i}: {msg}"));
    }
}

/// torch-xla's dumps of a Hugging Face LlamaForCausalLM training step called
/// the usual way (`tools/torch_xla_llama_step.py --variant causal`: no mask
/// passed, `use_cache=False`, parameter aliasing on): the text dump and the
/// `xla.HloProto` that `--xla_dump_hlo_as_proto` writes. Each is read as
/// written, is the same program, and gives torch-xla's outputs for the
/// values its parameters had.
#[test]
fn torch_xlas_text_and_proto_dumps_run_with_torch_xlas_outputs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch_xla");
    let stem = dir.join("torch_xla_llama_step.causal");
    let (text, _) = hlatc::load_module_noted(&dir.join("torch_xla_llama_step.causal.hlo")).unwrap();
    let (proto, notes) =
        hlatc::load_module_noted(&dir.join("torch_xla_llama_step.causal.hlo.pb")).unwrap();
    assert_eq!(notes, ["an xla.HloProto: its module is read"]);
    // Hugging Face's packed-sequence check is a cumsum: a reduce-window.
    let windows = text
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| c.instr(id).op.opcode()))
        .filter(|&o| o == "reduce-window")
        .count();
    assert!(windows >= 1, "{windows} reduce-windows");
    assert!(
        text.buffer_donors.len() > 10,
        "torch-xla donates the weights"
    );
    // The proto also says where the program ran; text has no syntax for it.
    let assignment = proto.device_assignment.clone().unwrap();
    assert_eq!(assignment.single_device(), Some(0));
    assert_eq!(hlatc::unwritten(&proto, hlatc::Format::Text).len(), 1);
    let mut same = proto.clone();
    same.device_assignment = None;
    assert!(same == text, "the text and proto dumps differ");
    assert_runs_with_recorded_outputs(&text, "torch-xla text", &stem);
    assert_runs_with_recorded_outputs(&proto, "torch-xla proto", &stem);
    // hlatc's own proto keeps the assignment.
    let back = hlatc::compiler::formats::proto::decode_module(
        &hlatc::compiler::formats::proto::encode_module(&proto),
    )
    .unwrap();
    assert_eq!(back.device_assignment, Some(assignment));
}

/// JAX's dumps of the same step written three other ways (`tools/jax_dump.py
/// --variant`): the layers as a `jax.lax.scan` (a while loop), each layer
/// under `jax.checkpoint`, and the step sharded over a 2 x 4 mesh of CPU
/// devices (Shardy's attributes, tuple shardings). Each is read as written
/// and gives JAX's outputs for the same inputs on XLA CPU; the sharded one,
/// not yet partitioned, runs as one device's program.
#[test]
fn jax_dumps_of_scanned_rematerialized_and_sharded_steps_run_with_jaxs_outputs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jax");
    for variant in ["scan", "remat", "sharded"] {
        let mut m =
            hlatc::load_module(&dir.join(format!("llama_tiny_step.{variant}.dump.hlo"))).unwrap();
        let count = |op: &str| {
            m.computations
                .iter()
                .flat_map(|c| c.ids().map(move |id| c.instr(id).op.opcode()))
                .filter(|o| *o == op)
                .count()
        };
        match variant {
            "scan" => {
                // The forward scan and its transpose in the backward pass.
                assert_eq!(count("while"), 2, "{variant}");
            }
            "remat" => {
                // jax.checkpoint keeps the recomputation apart with
                // optimization barriers.
                assert!(count("opt-barrier") >= 2, "{variant}");
            }
            _ => {
                assert_eq!(m.devices.num_partitions, 8);
                assert!(m.frontend_attributes["xla.sdy.meshes"].contains("\"model\"=4"));
                let sharded = m
                    .entry()
                    .ids()
                    .filter(|&id| m.entry().instr(id).sharding.is_some())
                    .count();
                assert!(sharded > 50, "{sharded} sharded instructions");
                m.devices = Default::default();
            }
        }
        assert_runs_with_jaxs_outputs(&m, variant);
    }
}

/// The program XLA partitions the sharded step into (one device's part of
/// it) is read too: its collectives name their groups over the mesh
/// (`replica_groups=mesh[...] {...}`), which survive text and proto (the
/// cross-check above has XLA read both).
#[test]
fn a_partitioned_jax_program_keeps_its_groups_over_the_mesh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jax");
    let m = hlatc::load_module(&dir.join("llama_tiny_step.sharded.partitioned.hlo")).unwrap();
    assert_eq!(m.devices.num_partitions, 8);
    let mut over_mesh = 0;
    for c in &m.computations {
        for id in c.ids() {
            let Some(coll) = c.instr(id).op.collective() else {
                continue;
            };
            if let hlatc::compiler::ir::collective::ReplicaGroups::Mesh(g) = &coll.replica_groups {
                over_mesh += 1;
                // Every group spans part of the 8 devices, each once.
                let groups = g.expanded();
                let mut ids: Vec<i64> = groups.iter().flatten().copied().collect();
                ids.sort_unstable();
                assert_eq!(ids, (0..8).collect::<Vec<_>>(), "{}", c.instr(id).name);
                assert!(groups.iter().all(|gr| gr.len() as i64 == g.group_size()));
            }
        }
    }
    assert!(over_mesh >= 20, "{over_mesh} collectives over the mesh");
    let printed = hlatc::text::print_module(&m);
    assert_eq!(
        hlatc::text::print_module(&hlatc::text::parse_module(&printed).unwrap()),
        printed
    );
    let mut back = hlatc::proto::decode_module(&hlatc::proto::encode_module(&m)).unwrap();
    back.adopt_config(&m);
    assert_eq!(hlatc::text::print_module(&back), printed);
}
