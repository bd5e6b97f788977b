//! The pass manager verifies between passes, reports what changed, dumps.

use hlatc_compiler::{text, ElementType, Module, Shape};
use hlatc_passes::{Pass, PassError, PassManager};

struct BreakShapes;

impl Pass for BreakShapes {
    fn name(&self) -> &'static str {
        "break-shapes"
    }
    fn run(&self, m: &mut Module) -> Result<bool, PassError> {
        let e = m.entry_mut();
        let root = e.root().unwrap();
        e.instr_mut(root).shape = Shape::array(ElementType::F32, [99]);
        Ok(true)
    }
}

fn module() -> Module {
    text::parse_module("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  a = f32[2] negate(p)\n  b = f32[2] negate(p)\n  ROOT r = f32[2] add(a, b)\n}\n").unwrap()
}

#[test]
fn a_pass_that_breaks_the_module_is_named() {
    let mut pm = PassManager::new();
    pm.add(Box::new(BreakShapes));
    let e = pm.run(&mut module()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pass 'break-shapes' produced a module that does not verify: computation 'e', instruction 'r': add produces f32[2]{0} but the instruction declares f32[99]{0}"
    );
}

#[test]
fn reports_and_dumps_each_pass() {
    let dir = std::env::temp_dir().join(format!("hlatc-dump-{}", std::process::id()));
    let mut pm = PassManager::from_names(&["cse", "dce", "cse"]).unwrap();
    pm.dump_to(dir.clone());
    let mut m = module();
    let report = pm.run(&mut m).unwrap();
    let summary: Vec<(&str, bool, usize, usize)> = report
        .runs
        .iter()
        .map(|r| {
            (
                r.pass,
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
