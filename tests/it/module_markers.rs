//! `compile --module-markers`: neuronx-cc's module markers around each
//! decoder layer, forward and backward, that change no value.

use hlatc::bundle::lower_for_cpu;
use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
use hlatc::compiler::graph::module_markers::ModuleMarker;
use hlatc::initial_inputs::initial_inputs;
use hlatc::passes::RematPolicy;
use hlatc::Module;
use std::collections::BTreeMap;

fn options(model: &str, markers: bool) -> CompileOptions {
    CompileOptions {
        model: ModelSource::Preset(model.into()),
        seq_len: Some(8),
        module_markers: markers,
        ..CompileOptions::default()
    }
}

/// How many markers of each kind the module holds.
fn markers(m: &Module) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for c in &m.computations {
        for id in c.ids() {
            if let Some(marker) = ModuleMarker::of(&c.instr(id).op) {
                *counts.entry(marker.target()).or_default() += 1;
                let operands = c.operands(id);
                assert_eq!(operands.len(), 1);
                assert_eq!(c.instr(operands[0]).shape, c.instr(id).shape);
            }
        }
    }
    counts
}

#[test]
fn each_layer_is_marked_once_forward_and_backward() {
    let want = |n| {
        ModuleMarker::ALL
            .iter()
            .map(|m| (m.target(), n))
            .collect::<BTreeMap<_, _>>()
    };
    let tiny = compile_step(&options("tiny", true)).unwrap();
    assert_eq!(markers(&tiny.programs.main().module), want(2));
    // Recomputing whole layers repeats none of them (they lie outside the
    // layers' scopes), nor does a division over ranks.
    for (remat, tp) in [(RematPolicy::FullLayer, 1), (RematPolicy::CoreAttention, 8)] {
        let mut o = options("hlat-7b", true);
        o.remat = remat;
        o.parallel.tp = tp;
        o.parallel.sequence_parallel = tp > 1;
        let step = compile_step(&o).unwrap();
        assert_eq!(
            markers(&step.programs.main().module),
            want(32),
            "{remat:?}, TP {tp}"
        );
    }
    let plain = compile_step(&options("tiny", false)).unwrap();
    assert!(markers(&plain.programs.main().module).is_empty());
}

/// The marked step computes the unmarked one's values bit for bit on XLA
/// CPU (markers become the tensor they mark), and the manifest says so
/// only when they are on.
#[test]
fn markers_change_no_value() {
    let rt = hlatc::runtime::Runtime::shared().unwrap();
    let run = |markers: bool| {
        let c = compile_step(&options("tiny", markers)).unwrap();
        let mut module = c.programs.main().module.clone();
        lower_for_cpu(&mut module).unwrap();
        assert!(self::markers(&module).is_empty(), "lowered for XLA CPU");
        let inputs = initial_inputs(&c.cfg, &c.programs.main().inputs, 7).unwrap();
        let manifest = hlatc::bundle::manifest_json(c.programs.main(), &c.cfg, c.target, "");
        let out = rt.compile(&module).unwrap().run(&inputs[0]).unwrap();
        (out, manifest)
    };
    let (marked, with) = run(true);
    let (plain, without) = run(false);
    assert_eq!(marked.len(), plain.len());
    for (i, (a, b)) in marked.iter().zip(&plain).enumerate() {
        assert_eq!(a.bytes(), b.bytes(), "output {i}");
    }
    assert!(with.contains("\"module_markers\": true"));
    assert!(!without.contains("module_markers"));
}
