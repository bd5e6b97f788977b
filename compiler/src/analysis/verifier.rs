//! Structural and shape checks over a whole module. Every error names the
//! computation, the instruction and the rule it breaks.

use crate::analysis::shape_inference::{infer_shape, CalleeSignature};
use crate::ir::computation::Computation;
use crate::ir::computation_id::ComputationId;
use crate::ir::module::Module;
use crate::ir::op::Op;
use crate::ir::shape::Shape;
use crate::util::fx::FxHashMap;
pub use problem::{AliasProblem, DonorProblem, Problem};
pub use rule_error::RuleError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

mod problem;
mod rule_error;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct VerifyError {
    pub computation: String,
    /// The offending instruction, when the rule is about one.
    pub instruction: Option<String>,
    /// Boxed: every verifier function returns it, and the largest
    /// problems hold shapes.
    pub problem: Box<Problem>,
}

impl VerifyError {
    /// `problem`, found in `computation` (the module's name, for a rule
    /// about the module) and about `instruction` where there is one.
    fn new(computation: &str, instruction: Option<&str>, problem: Problem) -> Self {
        VerifyError {
            computation: computation.to_string(),
            instruction: instruction.map(str::to_string),
            problem: Box::new(problem),
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.instruction {
            Some(i) => write!(
                f,
                "computation '{}', instruction '{}': {}",
                self.computation, i, self.problem
            ),
            None => write!(f, "computation '{}': {}", self.computation, self.problem),
        }
    }
}

/// The name and signature of every computation an instruction may call,
/// by id: all with a root but the entry, which the verifier refuses as a
/// callee. What shape inference asks of a module's callees.
#[derive(Clone, Debug, Default)]
pub struct CalleeSignatures(Vec<Option<(String, CalleeSignature)>>);

impl CalleeSignatures {
    /// The entry is the one large computation, so leaving it out also
    /// saves finding its parameters.
    pub fn of(module: &Module) -> Self {
        CalleeSignatures(
            module
                .computations
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == module.entry.index() {
                        return None;
                    }
                    Some((c.name.clone(), c.signature()?))
                })
                .collect(),
        )
    }

    pub fn get(&self, id: ComputationId) -> Option<(&str, CalleeSignature)> {
        let (name, sig) = self.0.get(id.index())?.as_ref()?;
        Some((name, sig.clone()))
    }

    /// Records a computation added at `id` after these were taken.
    pub fn insert(&mut self, id: ComputationId, c: &Computation) {
        if self.0.len() <= id.index() {
            self.0.resize(id.index() + 1, None);
        }
        self.0[id.index()] = c.signature().map(|sig| (c.name.clone(), sig));
    }
}

/// Checks the module; returns the first problem found.
pub fn verify(module: &Module) -> Result<(), VerifyError> {
    let module_err = |problem: Problem| VerifyError::new(&module.name, None, problem);
    if module.get_computation(module.entry).is_none() {
        return Err(module_err(Problem::NoEntry));
    }
    if !is_hlo_name(&module.name) {
        return Err(module_err(Problem::ModuleName(module.name.clone())));
    }
    check_attribute_keys(&module.frontend_attributes).map_err(|e| module_err(Problem::Rule(e)))?;
    if let Some(d) = &module.device_assignment {
        d.check()
            .map_err(|e| module_err(Problem::DeviceAssignment(e)))?;
    }
    module
        .stack_frames
        .check()
        .map_err(|e| module_err(Problem::StackFrames(e)))?;
    for c in &module.computations {
        for id in c.ids() {
            let i = c.instr(id);
            if !module.stack_frames.has_frame(i.metadata.stack_frame_id) {
                return Err(VerifyError::new(
                    &c.name,
                    Some(&i.name),
                    Problem::StackFrameId {
                        id: i.metadata.stack_frame_id,
                        frames: module.stack_frames.stack_frames.len(),
                    },
                ));
            }
        }
    }
    if let Some(l) = &module.entry_layout {
        l.check(module)
            .map_err(|e| module_err(Problem::EntryLayout(e)))?;
    }
    let mut names = BTreeSet::new();
    for c in &module.computations {
        if !is_hlo_name(&c.name) {
            return Err(module_err(Problem::ComputationName(c.name.clone())));
        }
        if !names.insert(c.name.as_str()) {
            return Err(module_err(Problem::ComputationTwice(c.name.clone())));
        }
    }
    // XLA's verifier: "Seen buffers while buffers aren't allowed in this
    // context" (XLA test 04757).
    let entry = module.entry();
    for id in entry.parameters().into_iter().chain(entry.root()) {
        let i = entry.instr(id);
        if i.shape.has_buffer() {
            return Err(VerifyError::new(
                &entry.name,
                Some(&i.name),
                Problem::BufferAtEntry(i.shape.clone()),
            ));
        }
    }
    let sigs = CalleeSignatures::of(module);
    for c in &module.computations {
        verify_computation(module, c, &sigs)?;
    }
    check_names_unique_in_module(module)?;
    check_call_graph_acyclic(module)?;
    check_async_threads(module)?;
    verify_aliases(module)
}

fn verify_computation(
    module: &Module,
    c: &Computation,
    sigs: &CalleeSignatures,
) -> Result<(), VerifyError> {
    let err = |instr: Option<&str>, problem: Problem| VerifyError::new(&c.name, instr, problem);
    if !c.root().is_some_and(|r| c.contains(r)) {
        return Err(err(None, Problem::NoRoot));
    }
    let order = c.post_order();
    if has_cycle(c, &order) {
        return Err(err(None, Problem::Cycle));
    }
    let mut param_numbers = BTreeMap::new();
    let lookup = |id| sigs.get(id);
    for id in order {
        let instr = c.instr(id);
        let here = Some(instr.name.as_str());
        if instr.name.is_empty() {
            return Err(err(
                None,
                Problem::EmptyName {
                    opcode: instr.op.opcode(),
                },
            ));
        }
        if !is_hlo_name(&instr.name) {
            return Err(err(None, Problem::InstructionName(instr.name.clone())));
        }
        check_rules(module, c, id).map_err(|e| err(here, Problem::Rule(e)))?;
        if let Op::Parameter(n) = instr.op {
            if let Some(prev) = param_numbers.insert(n, instr.name.clone()) {
                return Err(err(
                    here,
                    Problem::ParameterTwice {
                        number: n,
                        other: prev,
                    },
                ));
            }
        }
        let operand_shapes: Vec<&Shape> = c
            .operand_ids(id)
            .iter()
            .map(|&o| &c.instr(o).shape)
            .collect();
        let inferred = infer_shape(&instr.op, &operand_shapes, Some(&instr.shape), &lookup)
            .map_err(|source| {
                err(
                    here,
                    Problem::Shape {
                        opcode: instr.op.opcode(),
                        source,
                    },
                )
            })?;
        if !inferred.compatible(&instr.shape) {
            return Err(err(
                here,
                Problem::ShapeDiffers {
                    opcode: instr.op.opcode(),
                    inferred,
                    declared: instr.shape.clone(),
                },
            ));
        }
    }
    for (expected, (&n, name)) in param_numbers.iter().enumerate() {
        if n != expected as i64 {
            return Err(err(
                Some(name),
                Problem::ParameterGap {
                    count: param_numbers.len(),
                    found: n,
                },
            ));
        }
    }
    Ok(())
}

/// The rules one instruction keeps on its own and with its operands,
/// before its shape is inferred.
fn check_rules(module: &Module, c: &Computation, id: crate::InstrId) -> Result<(), RuleError> {
    let instr = c.instr(id);
    check_callees(module, &instr.op)?;
    check_attribute_keys(&instr.frontend_attributes)?;
    if matches!(
        instr.op,
        Op::Call {
            is_composite: true,
            ..
        }
    ) {
        check_composite(&instr.frontend_attributes)?;
    }
    check_layouts(&instr.shape)?;
    check_annotations(instr)?;
    if let Op::CustomCall(cc) = &instr.op {
        let operands: Vec<&Shape> = c
            .operand_ids(id)
            .iter()
            .map(|&o| &c.instr(o).shape)
            .collect();
        check_buffers_passed_on(&cc.aliasing, &operands)?;
    }
    check_transfer_done(c, id)?;
    check_async_chain(module, c, id)?;
    check_parameter_replication(instr)
}

/// A parameter's replication flags, one per leaf buffer.
fn check_parameter_replication(instr: &crate::Instruction) -> Result<(), RuleError> {
    let Some(r) = &instr.parameter_replication else {
        return Ok(());
    };
    if !matches!(instr.op, Op::Parameter(_)) {
        return Err(RuleError::ReplicationOffParameter);
    }
    let leaves = instr.shape.leaf_count();
    if r.len() != leaves {
        return Err(RuleError::ReplicationCount {
            entries: r.len(),
            shape: instr.shape.clone(),
            leaves,
        });
    }
    Ok(())
}

/// A `send-done` takes its `send` and a `recv-done` its `recv` directly,
/// not a tuple of the same shape from elsewhere: XLA's text parser lets
/// that pass, but XLA's proto reader RET_CHECKs it (hlatc's proto of such
/// a module would be refused by XLA).
fn check_transfer_done(c: &Computation, id: crate::InstrId) -> Result<(), RuleError> {
    use crate::ir::op::{Transfer, TransferStep};
    let Op::Transfer(Transfer { step, .. }) = c.instr(id).op else {
        return Ok(());
    };
    let started = match step {
        TransferStep::SendDone => TransferStep::Send,
        TransferStep::RecvDone => TransferStep::Recv,
        TransferStep::Send | TransferStep::Recv => return Ok(()),
    };
    match c.operands(id).first().map(|&o| c.instr(o)) {
        Some(o) if !matches!(o.op, Op::Transfer(t) if t.step == started) => {
            Err(RuleError::TransferDone {
                step,
                started,
                operand: o.name.clone(),
                operand_opcode: o.op.opcode(),
            })
        }
        _ => Ok(()),
    }
}

/// An `async-update` or `async-done` continues an `async-start` or
/// `async-update` of the same computation: the bundle it takes is that
/// op's own, not a tuple of the same shape from elsewhere.
/// Every callee is a computation of the module, and none is the entry.
fn check_callees(module: &Module, op: &Op) -> Result<(), RuleError> {
    for callee in op.called_computations() {
        if module.get_computation(callee).is_none() {
            return Err(RuleError::UnknownCallee {
                opcode: op.opcode(),
                callee,
            });
        }
        if callee == module.entry {
            return Err(RuleError::CallsEntry {
                opcode: op.opcode(),
                entry: module.entry().name.clone(),
            });
        }
    }
    Ok(())
}

fn check_async_chain(
    module: &Module,
    c: &Computation,
    id: crate::InstrId,
) -> Result<(), RuleError> {
    use crate::ir::op::AsyncStep;
    let Op::Async { step, calls, .. } = &c.instr(id).op else {
        return Ok(());
    };
    if *step == AsyncStep::Start {
        return Ok(());
    }
    match c.operands(id).first().map(|&o| c.instr(o)) {
        Some(o) => match &o.op {
            Op::Async {
                step: AsyncStep::Start | AsyncStep::Update,
                calls: theirs,
                ..
            } if theirs == calls => Ok(()),
            Op::Async {
                step: AsyncStep::Start | AsyncStep::Update,
                calls: theirs,
                ..
            } => Err(RuleError::AsyncCallee {
                step: *step,
                calls: module.callee_name(*calls).into_owned(),
                operand: o.name.clone(),
                theirs: module.callee_name(*theirs).into_owned(),
            }),
            _ => Err(RuleError::AsyncOperand {
                step: *step,
                operand: o.name.clone(),
                operand_opcode: o.op.opcode(),
            }),
        },
        None => Ok(()),
    }
}

/// An async op and the computation it wraps run on one thread: XLA sets
/// the wrapped computation's `execution_thread` from the async ops'.
fn check_async_threads(module: &Module) -> Result<(), VerifyError> {
    for c in &module.computations {
        for id in c.ids() {
            let instr = c.instr(id);
            let Op::Async { calls, thread, .. } = &instr.op else {
                continue;
            };
            let Some(callee) = module.get_computation(*calls) else {
                continue;
            };
            if callee.execution_thread != *thread {
                let name = |t: &Option<String>| {
                    t.clone()
                        .unwrap_or_else(|| crate::ir::computation::MAIN_THREAD.to_string())
                };
                return Err(VerifyError::new(
                    &c.name,
                    Some(&instr.name),
                    Problem::AsyncThread {
                        opcode: instr.op.opcode(),
                        thread: name(thread),
                        callee: callee.name.clone(),
                        callee_thread: name(&callee.execution_thread),
                    },
                ));
            }
        }
    }
    Ok(())
}

/// Whether some instruction does not come after all its operands in `order`
/// (a post-order, which puts nodes on a cycle last). Linear and without
/// recursion, unlike a depth-first cycle search, so a chain of 100k
/// instructions cannot overflow the stack.
fn has_cycle(c: &Computation, order: &[crate::InstrId]) -> bool {
    let mut position = vec![usize::MAX; c.id_bound()];
    for (i, id) in order.iter().enumerate() {
        position[id.index()] = i;
    }
    order.iter().any(|&id| {
        c.operands_unordered(id)
            .chain(c.control_predecessors(id).iter().copied())
            .any(|o| position[o.index()] >= position[id.index()])
    })
}

/// What XLA's lexer reads as a name: `[A-Za-z_][A-Za-z0-9_.-]*`. Names from
/// protos are checked so that every verified module prints as parsable text.
pub fn is_hlo_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A buffer a custom call takes is passed on: aliased to exactly one of
/// its outputs, as XLA's verifier requires ("buffer is used in operands
/// but not in results", "... in results multiple times").
fn check_buffers_passed_on(
    aliasing: &[crate::ir::op::OperandAlias],
    operands: &[&Shape],
) -> Result<(), RuleError> {
    fn buffers(s: &Shape, index: &mut Vec<i64>, out: &mut Vec<Vec<i64>>) {
        match s {
            Shape::Buffer(_) => out.push(index.clone()),
            Shape::Tuple(elems) => {
                for (i, e) in elems.iter().enumerate() {
                    index.push(i as i64);
                    buffers(e, index, out);
                    index.pop();
                }
            }
            Shape::Array(_) | Shape::Token => {}
        }
    }
    for (n, s) in operands.iter().enumerate() {
        let mut found = Vec::new();
        buffers(s, &mut Vec::new(), &mut found);
        for index in found {
            let uses = aliasing
                .iter()
                .filter(|a| a.operand == n as i64 && a.operand_index == index)
                .count();
            match uses {
                1 => {}
                0 => return Err(RuleError::BufferDropped { operand: n, index }),
                outputs => {
                    return Err(RuleError::BufferShared {
                        operand: n,
                        index,
                        outputs,
                    })
                }
            }
        }
    }
    Ok(())
}

/// The annotations XLA aborts on, or that text could not write back.
fn check_annotations(instr: &crate::Instruction) -> Result<(), RuleError> {
    if let Some(problem) = instr
        .result_accuracy
        .as_ref()
        .and_then(|a| a.problem_on(&instr.op))
    {
        return Err(RuleError::ResultAccuracy(problem));
    }
    if let Some(problem) = instr.original_value.as_ref().and_then(|v| v.problem()) {
        return Err(RuleError::OriginalValue(problem));
    }
    if let Some(s) = &instr.statistics {
        if let Some((name, _)) = s
            .values
            .iter()
            .find(|(n, _)| !crate::ir::statistics::is_stat_name(n))
        {
            return Err(RuleError::StatisticName(name.clone()));
        }
    }
    Ok(())
}

fn check_attribute_keys(attrs: &BTreeMap<String, String>) -> Result<(), RuleError> {
    // XLA reads a key as an attribute name: a name's characters, dots
    // included (Shardy's `xla.sdy.sharding`).
    for k in attrs.keys() {
        if !is_hlo_name(k) {
            return Err(RuleError::AttributeKey(k.clone()));
        }
    }
    Ok(())
}

/// A composite call names the op it stands for, and its version when
/// given is a count (XLA checks both when it builds the call).
fn check_composite(attrs: &BTreeMap<String, String>) -> Result<(), RuleError> {
    if attrs.get("composite.name").is_none_or(|n| n.is_empty()) {
        return Err(RuleError::CompositeName);
    }
    match attrs.get("composite.version") {
        Some(v) if !v.parse::<i64>().is_ok_and(|n| n >= 0) => {
            Err(RuleError::CompositeVersion(v.clone()))
        }
        _ => Ok(()),
    }
}

/// XLA requires instruction names to be unique across the whole module (its
/// compiler RET_CHECKs this), not just within a computation.
fn check_names_unique_in_module(module: &Module) -> Result<(), VerifyError> {
    let mut seen: FxHashMap<&str, usize> = FxHashMap::default();
    seen.reserve(module.instruction_count());
    for (ci, c) in module.computations.iter().enumerate() {
        for id in c.ids() {
            let name = c.instr(id).name.as_str();
            if let Some(other) = seen.insert(name, ci) {
                let problem = if other == ci {
                    Problem::NameTwice
                } else {
                    Problem::NameInOtherComputation(module.computations[other].name.clone())
                };
                return Err(VerifyError::new(&c.name, Some(name), problem));
            }
        }
    }
    Ok(())
}

/// The most dimensions an array may have. Literals are printed and read one
/// nesting level per dimension, so the rank bounds their recursion.
pub const MAX_RANK: usize = 64;

/// What XLA's layout validation asks of tiles, sizes, memory spaces and
/// split configs.
fn check_physical_layout(
    a: &crate::ArrayShape,
    p: &crate::PhysicalLayout,
) -> Result<(), RuleError> {
    if let Some(t) = p.tiles.iter().find(|t| {
        t.is_empty()
            || t.iter()
                .any(|&d| d <= 0 && d != crate::ir::shape::COMBINE_DIMENSION)
    }) {
        return Err(RuleError::Tile {
            shape: a.clone(),
            tile: t.clone(),
        });
    }
    if p.tail_padding_alignment_in_elements < 1 {
        return Err(RuleError::TailPadding {
            shape: a.clone(),
            alignment: p.tail_padding_alignment_in_elements,
        });
    }
    if p.element_size_in_bits < 0 || p.memory_space < 0 {
        return Err(RuleError::NegativeSize(a.clone()));
    }
    for sc in &p.split_configs {
        let in_rank = (0..a.rank() as i64).contains(&sc.dimension);
        let ascending = sc.split_indices.windows(2).all(|w| w[0] < w[1])
            && sc.split_indices.first().is_none_or(|&i| i > 0);
        if !in_rank || !ascending {
            return Err(RuleError::Split {
                shape: a.clone(),
                dimension: sc.dimension,
                indices: sc.split_indices.clone(),
            });
        }
    }
    Ok(())
}

fn check_layouts(shape: &Shape) -> Result<(), RuleError> {
    match shape {
        Shape::Array(a) | Shape::Buffer(a) => {
            if a.rank() > MAX_RANK {
                return Err(RuleError::Rank(a.rank()));
            }
            if (0..a.rank()).any(|i| a.dims[i] < 0 && !a.is_unbounded(i)) {
                return Err(RuleError::NegativeDimension(a.clone()));
            }
            if !a.has_unbounded()
                && a.checked_element_count()
                    .is_none_or(|n| n.checked_mul(a.ty.byte_size() as i64).is_none())
            {
                return Err(RuleError::TooLarge(a.clone()));
            }
            // Rank is at most 64 here, so one bit per dimension.
            let mut seen = 0u64;
            let is_permutation = a.minor_to_major.len() == a.rank()
                && a.minor_to_major.iter().all(|&d| {
                    let fresh = (0..a.rank() as i64).contains(&d) && seen & (1 << d) == 0;
                    seen |= 1u64.checked_shl(d as u32).unwrap_or(0);
                    fresh
                });
            if !is_permutation {
                return Err(RuleError::MinorToMajor {
                    shape: a.clone(),
                    minor_to_major: a.minor_to_major.clone(),
                });
            }
            if let Some(p) = &a.physical {
                check_physical_layout(a, p)?;
            }
            Ok(())
        }
        Shape::Tuple(elems) => elems.iter().try_for_each(check_layouts),
        Shape::Token => Ok(()),
    }
}

fn check_call_graph_acyclic(module: &Module) -> Result<(), VerifyError> {
    // A computation may only call computations defined before it in
    // dependency order; `computation_order` breaks cycles, so recheck here.
    let order = module.computation_order();
    let mut position = vec![usize::MAX; module.computations.len()];
    for (pos, &c) in order.iter().enumerate() {
        position[c.index()] = pos;
    }
    for (pos, &k) in order.iter().enumerate() {
        let c = module.computation(k);
        for id in c.ids() {
            for callee in c.instr(id).op.called_computations() {
                if position.get(callee.index()).is_some_and(|&p| p >= pos) {
                    return Err(VerifyError::new(
                        &c.name,
                        Some(&c.instr(id).name),
                        Problem::RecursiveCall(module.callee_name(callee).into_owned()),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn verify_aliases(module: &Module) -> Result<(), VerifyError> {
    let entry = module.entry();
    let err = |problem: Problem| VerifyError::new(&entry.name, None, problem);
    let alias_err = |p: AliasProblem| err(Problem::Alias(p));
    let params = module.entry_parameter_shapes();
    let result = module
        .entry_result_shape()
        .ok_or_else(|| alias_err(AliasProblem::NoRoot))?;
    let mut outputs = BTreeSet::new();
    let mut donated = BTreeMap::new();
    for a in &module.input_output_alias {
        let out = result.subshape(&a.output_index).ok_or_else(|| {
            alias_err(AliasProblem::NoOutput {
                index: a.output_index.clone(),
                result: result.clone(),
            })
        })?;
        let p = usize::try_from(a.parameter)
            .ok()
            .and_then(|p| params.get(p))
            .ok_or_else(|| alias_err(AliasProblem::NoParameter(a.parameter)))?;
        let ps = p.subshape(&a.parameter_index).ok_or_else(|| {
            alias_err(AliasProblem::NoParameterIndex {
                parameter: a.parameter,
                index: a.parameter_index.clone(),
            })
        })?;
        if !ps.compatible(out) {
            return Err(alias_err(AliasProblem::Incompatible {
                output: a.output_index.clone(),
                output_shape: out.clone(),
                parameter: a.parameter,
                parameter_shape: ps.clone(),
            }));
        }
        if !outputs.insert(a.output_index.clone()) {
            return Err(alias_err(AliasProblem::OutputTwice(a.output_index.clone())));
        }
        if let Some(other) =
            donated.insert((a.parameter, a.parameter_index.clone()), &a.output_index)
        {
            return Err(alias_err(AliasProblem::ParameterTwice {
                parameter: a.parameter,
                index: a.parameter_index.clone(),
                first: other.clone(),
                second: a.output_index.clone(),
            }));
        }
    }
    let donor_err = |p: DonorProblem| err(Problem::Donor(p));
    let mut donors = BTreeSet::new();
    for d in &module.buffer_donors {
        let (parameter, index) = (d.parameter, d.parameter_index.clone());
        let p = usize::try_from(d.parameter)
            .ok()
            .and_then(|p| params.get(p))
            .ok_or_else(|| donor_err(DonorProblem::NoParameter(parameter)))?;
        if p.subshape(&d.parameter_index).is_none() {
            return Err(donor_err(DonorProblem::NoParameterIndex {
                parameter,
                index,
            }));
        }
        if !donors.insert((d.parameter, &d.parameter_index)) {
            return Err(donor_err(DonorProblem::Twice { parameter, index }));
        }
        if donated.contains_key(&(d.parameter, d.parameter_index.clone())) {
            return Err(donor_err(DonorProblem::AlsoAliased { parameter, index }));
        }
    }
    Ok(())
}
