//! The one inliner: copies a computation's body into another at a call
//! site, the callee's parameters read as the call's arguments. Passes that
//! dissolve a call-like op (`conditional-to-select` inlines each branch)
//! share it, so names, provenance and control dependencies are copied one
//! way.

use crate::infra::names::Names;
use hlatc_compiler::util::fx::FxHashMap as HashMap;
use hlatc_compiler::{Computation, InstrId, Op};

/// A call site that does not fit the computation it would inline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InlineError {
    #[error("computation '{callee}' takes {params} parameters, the call site gives {args}")]
    Arity {
        callee: String,
        params: usize,
        args: usize,
    },
    #[error("computation '{callee}': parameter {number} is {param}, the call site gives {arg}")]
    Shape {
        callee: String,
        number: usize,
        param: String,
        arg: String,
    },
    #[error("computation '{callee}' has no root")]
    NoRoot { callee: String },
}

/// Copies every instruction of `callee` but its parameters into `caller`,
/// parameter `k` read as `args[k]` (which must have its shape), and
/// returns the copy of the callee's root (an argument, when the root is a
/// parameter). Each copy keeps its original's attributes and metadata,
/// under a module-unique name made from its original's by `names`; control
/// dependencies between copied instructions are copied too. Computations
/// the callee's instructions call are shared, not copied: they are
/// module-level and unchanged.
pub fn inline(
    caller: &mut Computation,
    callee: &Computation,
    args: &[InstrId],
    names: &mut Names,
) -> Result<InstrId, InlineError> {
    let params = callee.parameters();
    if params.len() != args.len() {
        return Err(InlineError::Arity {
            callee: callee.name.clone(),
            params: params.len(),
            args: args.len(),
        });
    }
    let mut copy: HashMap<InstrId, InstrId> = HashMap::default();
    for (number, (&p, &a)) in params.iter().zip(args).enumerate() {
        let (param, arg) = (&callee.instr(p).shape, &caller.instr(a).shape);
        if param != arg {
            return Err(InlineError::Shape {
                callee: callee.name.clone(),
                number,
                param: param.to_string(),
                arg: arg.to_string(),
            });
        }
        copy.insert(p, a);
    }
    let root = callee.root().ok_or_else(|| InlineError::NoRoot {
        callee: callee.name.clone(),
    })?;
    let order = callee.post_order();
    for &id in &order {
        if matches!(callee.instr(id).op, Op::Parameter(_)) {
            continue;
        }
        let mut instr = callee.instr(id).clone();
        instr.name = names.fresh(&instr.name);
        let operands: Vec<InstrId> = callee.operand_ids(id).iter().map(|o| copy[o]).collect();
        let new = caller.add(instr, &operands);
        copy.insert(id, new);
    }
    // Ordering constraints inside the body still hold in its copy; one on
    // a parameter has no copy to hold between.
    for &id in &order {
        for &pred in callee.control_predecessors(id) {
            let is_param = |i: InstrId| matches!(callee.instr(i).op, Op::Parameter(_));
            if !is_param(id) && !is_param(pred) {
                caller.add_control_dependency(copy[&pred], copy[&id]);
            }
        }
    }
    Ok(copy[&root])
}

#[cfg(test)]
mod tests {
    use super::*;
    use hlatc_compiler::formats::text;

    #[test]
    fn a_body_is_copied_under_fresh_names_reading_the_arguments() {
        let mut m = text::parse_module(
            "HloModule m\n\nbody {\n  p = f32[2] parameter(0)\n  n = f32[2] negate(p)\n  ROOT a = f32[2] add(n, p)\n}\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ex = f32[2] exponential(x)\n  ROOT c = f32[2] call(ex), to_apply=body\n}\n",
        )
        .unwrap();
        let mut names = Names::of_module(&m);
        let callee = m.computation_named("body").unwrap().clone();
        let entry = m.entry_mut();
        let arg = entry.find("ex").unwrap();
        let root = inline(entry, &callee, &[arg], &mut names).unwrap();
        entry.set_root(root);
        let text = text::print_module(&m);
        assert!(text.contains("n.1 = f32[2]{0} negate(ex)"), "{text}");
        assert!(text.contains("ROOT a.1 = f32[2]{0} add(n.1, ex)"), "{text}");
    }

    #[test]
    fn a_call_site_of_another_shape_is_refused() {
        let m = text::parse_module(
            "HloModule m\n\nbody {\n  ROOT p = f32[2] parameter(0)\n}\n\nENTRY e {\n  x = f32[3] parameter(0)\n  ROOT c = f32[3] negate(x)\n}\n",
        )
        .unwrap();
        let mut names = Names::of_module(&m);
        let callee = m.computation_named("body").unwrap().clone();
        let mut entry = m.entry().clone();
        let x = entry.find("x").unwrap();
        let err = inline(&mut entry, &callee, &[x], &mut names).unwrap_err();
        assert!(matches!(err, InlineError::Shape { number: 0, .. }), "{err}");
        let err = inline(&mut entry, &callee, &[], &mut names).unwrap_err();
        assert!(
            matches!(
                err,
                InlineError::Arity {
                    params: 1,
                    args: 0,
                    ..
                }
            ),
            "{err}"
        );
    }
}
