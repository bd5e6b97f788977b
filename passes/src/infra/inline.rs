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
