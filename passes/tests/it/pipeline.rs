//! Pipelines verify between passes and blame the pass that broke the
//! module, nest with their runs reported by path, cap fixpoints, and dump.

use hlatc_compiler::{formats::text, ElementType, Module, Shape};
use hlatc_passes::{
    pipeline_from_names, CheckPolicy, Fixpoint, Pass, PassContext, PassError, Pipeline, Target,
};

struct BreakShapes;

impl Pass for BreakShapes {
    fn name(&self) -> &str {
        "break-shapes"
    }
    fn run(&self, m: &mut Module, _: &mut PassContext) -> Result<bool, PassError> {
        let e = m.entry_mut();
        let root = e.root().unwrap();
        e.instr_mut(root).shape = Shape::array(ElementType::F32, [99]);
        Ok(true)
    }
}

/// Breaks the module as [`BreakShapes`] does, but says it changed nothing.
struct BreakShapesQuietly;

impl Pass for BreakShapesQuietly {
    fn name(&self) -> &str {
        "break-shapes-quietly"
    }
    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        BreakShapes.run(m, ctx)?;
        Ok(false)
    }
}

/// Claims a change every time: a fixpoint over it must stop at its cap.
struct NeverSettles;

impl Pass for NeverSettles {
    fn name(&self) -> &str {
        "never-settles"
    }
    fn run(&self, _: &mut Module, _: &mut PassContext) -> Result<bool, PassError> {
        Ok(true)
    }
}

fn module() -> Module {
    text::parse_module("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  a = f32[2] negate(p)\n  b = f32[2] negate(p)\n  ROOT r = f32[2] add(a, b)\n}\n").unwrap()
}

fn ctx() -> PassContext {
    PassContext::new(Target::Cpu)
}

/// Checked after every pass, a broken input is refused before the first
/// pass runs; checked once at the end, it is still caught, after the
/// pipeline, and never reaches the caller as a verified module.
#[test]
fn a_broken_input_is_caught_under_either_policy() {
    let broken = || {
        let mut m = module();
        let e = m.entry_mut();
        let root = e.root().unwrap();
        e.instr_mut(root).shape = Shape::array(ElementType::F32, [3]);
        m
    };
    let mut p = pipeline_from_names("p", &["dce"]).unwrap();
    p.check_policy(CheckPolicy::EachPass);
    let e = p.run_module(&mut broken(), &mut ctx()).unwrap_err();
    assert!(matches!(e, PassError::InvalidInput { .. }), "{e}");
    p.check_policy(CheckPolicy::End);
    let e = p.run_module(&mut broken(), &mut ctx()).unwrap_err();
    assert!(
        e.to_string().contains("checked after the last pass, dce"),
        "{e}"
    );
}

#[test]
fn a_pass_that_breaks_the_module_is_named() {
    let mut p = Pipeline::new("p");
    p.add(Box::new(BreakShapes));
    let e = p.run_module(&mut module(), &mut ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pass 'break-shapes' produced a module that breaks invariant 'verifier': computation 'e', instruction 'r': add produces f32[2]{0} but the instruction declares f32[99]{0}"
    );
    // Checked once at the end, the pipeline is blamed, naming its last pass.
    p.check_policy(CheckPolicy::End);
    let e = p.run_module(&mut module(), &mut ctx()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("pass 'p (checked after the last pass, break-shapes)' produced a module that breaks invariant 'verifier'"),
        "{e}"
    );
}

/// A pass that says it changed nothing is not checked after (the module is
/// the one checked last), so one that breaks the module and says so is
/// caught by the pipeline's last check, which names it.
#[test]
fn a_pass_that_breaks_the_module_but_says_it_changed_nothing_is_still_caught() {
    let p = Pipeline::new("p").with(Box::new(BreakShapesQuietly)).with(
        pipeline_from_names("cleanup", &["dce"])
            .unwrap()
            .into_boxed(),
    );
    let e = p.run_module(&mut module(), &mut ctx()).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "pass 'p (checked after the last pass, cleanup)' produced a module that breaks invariant 'verifier'"
        ),
        "{e}"
    );
}

#[test]
fn a_broken_pass_inside_a_nested_pipeline_is_named() {
    let inner = Pipeline::new("inner").with(Box::new(BreakShapes));
    let outer = Pipeline::new("outer").with(Box::new(inner));
    let e = outer.run_module(&mut module(), &mut ctx()).unwrap_err();
    assert!(e.to_string().starts_with("pass 'break-shapes'"), "{e}");
}

#[test]
fn a_fixpoint_that_never_settles_is_an_error_at_its_cap() {
    let p = Pipeline::new("p").with(Box::new(Fixpoint::new(Box::new(NeverSettles), 3)));
    let e = p.run_module(&mut module(), &mut ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pass 'never-settles' did not reach a fixpoint in 3 iterations"
    );
}

#[test]
fn nested_runs_are_reported_by_path_and_depth() {
    let inner = pipeline_from_names("cleanup", &["cse", "dce"]).unwrap();
    let outer = Pipeline::new("all").with(Box::new(inner)).with(
        pipeline_from_names("x", &["simplify"])
            .unwrap()
            .into_boxed(),
    );
    let mut m = module();
    let report = outer.run_module(&mut m, &mut ctx()).unwrap();
    let paths: Vec<(String, usize, bool)> = report
        .runs
        .iter()
        .map(|r| (r.pass.clone(), r.depth, r.changed))
        .collect();
    let want = [
        ("cleanup", 0, true),
        ("cleanup/cse", 1, true),
        ("cleanup/dce", 1, false),
        ("x", 0, false),
        ("x/fixpoint(simplify)", 1, false),
        ("x/fixpoint(simplify)/simplify", 2, false),
    ];
    let want: Vec<(String, usize, bool)> = want
        .iter()
        .map(|(p, d, c)| (p.to_string(), *d, *c))
        .collect();
    assert_eq!(paths, want);
}

#[test]
fn reports_and_dumps_each_pass() {
    let dir = std::env::temp_dir().join(format!("hlatc-dump-{}", std::process::id()));
    let mut p = pipeline_from_names("p", &["cse", "dce", "cse"]).unwrap();
    p.dump_to(dir.clone());
    let mut m = module();
    let report = p.run_module(&mut m, &mut ctx()).unwrap();
    let summary: Vec<(&str, bool, usize, usize)> = report
        .runs
        .iter()
        .map(|r| {
            (
                r.pass.as_str(),
                r.changed,
                r.instructions_before,
                r.instructions_after,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("cse", true, 4, 3),
            ("dce", false, 3, 3),
            ("cse", false, 3, 3)
        ]
    );
    assert!(text::print_module(&m).contains("ROOT r = f32[2]{0} add(a, a)"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "01-cse.after.hlo",
            "01-cse.before.hlo",
            "02-dce.after.hlo",
            "02-dce.before.hlo",
            "03-cse.after.hlo",
            "03-cse.before.hlo"
        ]
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_pass_that_changes_a_scheduled_module_drops_its_schedule_with_a_note() {
    let src = "HloModule s, is_scheduled=true\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  n = f32[2]{0} negate(p)\n  d = f32[2]{0} negate(p)\n  ROOT r = f32[2]{0} add(n, d)\n}\n";
    let mut m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    assert!(m.is_scheduled);
    let mut ctx = hlatc_passes::PassContext::new(hlatc_passes::Target::Cpu);
    let cse = hlatc_passes::pipeline_from_names("cse", &["cse"]).unwrap();
    let report = cse.run_module(&mut m, &mut ctx).unwrap();
    assert!(report.changed(), "cse merges the two negates");
    assert!(!m.is_scheduled);
    assert!(
        ctx.notes()
            .iter()
            .any(|n| n.contains("schedule is dropped")),
        "{:?}",
        ctx.notes()
    );
    assert!(!hlatc_compiler::formats::text::print_module(&m).contains("is_scheduled"));
}

/// Adds a negate of the entry's first parameter, named from the stem `k`
/// through the name index passes hand on.
struct AddThroughIndex;

impl Pass for AddThroughIndex {
    fn name(&self) -> &str {
        "add-through-index"
    }
    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        use hlatc_compiler::ir::op::UnaryOp;
        let mut mr = hlatc_passes::rewriter::ModuleRewriter::for_pass(m, ctx);
        let entry = m.entry;
        let mut r = mr.on(m.computation_mut(entry));
        let p = r.comp().parameters()[0];
        let k = r
            .add_named("k", hlatc_compiler::Op::Unary(UnaryOp::Negate), &[p], None)
            .map_err(PassError::rewrite(self.name()))?;
        let root = r.comp().root().unwrap();
        let sum = r
            .add(
                hlatc_compiler::Op::Binary(hlatc_compiler::ir::op::BinaryOp::Add),
                &[root, k],
                None,
            )
            .map_err(PassError::rewrite(self.name()))?;
        r.set_root(sum);
        drop(r);
        mr.finish(ctx);
        Ok(true)
    }
}

/// Adds `k.1` straight into the computation, bypassing the name index.
struct AddBehindIndex;

impl Pass for AddBehindIndex {
    fn name(&self) -> &str {
        "add-behind-index"
    }
    fn run(&self, m: &mut Module, _: &mut PassContext) -> Result<bool, PassError> {
        use hlatc_compiler::ir::op::UnaryOp;
        let e = m.entry_mut();
        let p = e.parameters()[0];
        let root = e.root().unwrap();
        let shape = e.instr(p).shape.clone();
        let k1 = e.add(
            hlatc_compiler::Instruction::new(
                "k.1",
                shape.clone(),
                hlatc_compiler::Op::Unary(UnaryOp::Negate),
            ),
            &[p],
        );
        let sum = e.add(
            hlatc_compiler::Instruction::new(
                "sum.behind",
                shape,
                hlatc_compiler::Op::Binary(hlatc_compiler::ir::op::BinaryOp::Add),
            ),
            &[root, k1],
        );
        e.set_root(sum);
        Ok(true)
    }
}

#[test]
fn the_name_index_handed_between_passes_is_dropped_after_a_pass_that_bypassed_it() {
    let mut m = module();
    let mut pipeline = Pipeline::new("names");
    pipeline
        .add(Box::new(AddThroughIndex))
        .add(Box::new(AddBehindIndex))
        .add(Box::new(AddThroughIndex));
    pipeline.run_module(&mut m, &mut ctx()).unwrap();
    let names: Vec<String> = m
        .entry()
        .ids()
        .map(|id| m.entry().instr(id).name.clone())
        .filter(|n| n.starts_with('k'))
        .collect();
    // A stale index would have handed out `k.1` again.
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["k", "k.1", "k.2"], "{names:?}");
    hlatc_compiler::analysis::verifier::verify(&m).unwrap();
}

/// Passes build instructions from shape inference, which gives bounds and
/// not which of them are dynamic, so a module with dynamic dimensions is
/// refused whole rather than rewritten into one that lost them.
#[test]
fn a_module_with_dynamic_dimensions_is_refused_whole() {
    let mut m = text::parse_module("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[<=4] set-dimension-size(p, n), dimensions={0}\n  ROOT r = f32[<=4] negate(d)\n}\n").unwrap();
    let before = text::print_module(&m);
    let p = pipeline_from_names("p", &["cse", "dce"]).unwrap();
    let e = p.run_module(&mut m, &mut ctx()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "passes do not track dynamic dimensions yet: computation 'e', instruction 'd' is f32[<=4]{0}"
    );
    assert_eq!(text::print_module(&m), before);
}

/// A pipeline of passes that keep dynamic dimensions (`async-to-sync`,
/// `bitcast-to-reshape`) runs over such a module; one more pass that does
/// not makes it refuse the module again.
#[test]
fn passes_that_keep_dynamic_dimensions_run_over_them() {
    let src = "HloModule m\nENTRY e {\n  p = f32[2,2] parameter(0)\n  b = f32[4] bitcast(p)\n  n = s32[] parameter(1)\n  d = f32[<=4] set-dimension-size(b, n), dimensions={0}\n  ROOT r = f32[<=4] negate(d)\n}\n";
    let mut m = text::parse_module(src).unwrap();
    let keeping = pipeline_from_names("p", &["async-to-sync", "bitcast-to-reshape"]).unwrap();
    assert!(keeping
        .run_module(&mut m, &mut ctx())
        .unwrap()
        .fired("bitcast-to-reshape"));
    let printed = text::print_module(&m);
    assert!(
        printed.contains("d = f32[<=4]{0} set-dimension-size("),
        "{printed}"
    );
    assert!(!printed.contains("bitcast("), "{printed}");
    let mut m = text::parse_module(src).unwrap();
    let mixed = pipeline_from_names("p", &["bitcast-to-reshape", "cse"]).unwrap();
    assert!(matches!(
        mixed.run_module(&mut m, &mut ctx()),
        Err(hlatc_passes::PassError::DynamicDimensions { .. })
    ));
}
