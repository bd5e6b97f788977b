//! A computation: instructions in a petgraph `StableGraph`, so node ids
//! survive removals. Each node keeps its operands in order and its users
//! (one entry per use) inline: walking operands is a slice read, where
//! petgraph's edge lists chased a pointer per edge and showed in every
//! pass's profile.

use crate::ir::instruction::Instruction;
use crate::ir::op::Op;
use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::visit::NodeIndexable;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub type InstrId = NodeIndex<u32>;

/// Most instructions read at most four values and are read by a few.
pub type IdList = SmallVec<[InstrId; 4]>;

#[derive(Clone, Debug)]
struct Node {
    instr: Instruction,
    operands: IdList,
    /// One entry per use: a user reading this twice is listed twice.
    users: IdList,
}

/// An instruction's control dependencies: what must run before it, and
/// what waits for it, with no value passing between them.
#[derive(Clone, Debug, Default)]
struct ControlEdges {
    predecessors: IdList,
    successors: IdList,
}

#[derive(Clone, Debug, Default)]
pub struct Computation {
    pub name: String,
    /// The thread it runs on when not the main one (`execution_thread=` in
    /// text, proto field 8): a computation an `async-start` wraps runs on
    /// the async ops' thread.
    pub execution_thread: Option<String>,
    graph: StableGraph<Node, ()>,
    root: Option<InstrId>,
    /// Control dependencies, by instruction. Beside the graph rather than
    /// in each node: imported modules have a few, hlatc's own none, and
    /// every walk can skip them when this is empty.
    control: BTreeMap<InstrId, ControlEdges>,
    /// [`Computation::post_order`], kept until the graph next changes:
    /// passes, the verifier, the printer and the proto writer each walk a
    /// computation in that order, most of them over a graph nothing
    /// changed since the last walk (the walk chases every node's operands:
    /// about a twelfth of compiling the 7B step before). Every method that
    /// changes operands, users, control edges or the root forgets it;
    /// `instr_mut` cannot change any of them.
    post_order: OnceLock<Vec<InstrId>>,
}

/// The name XLA gives the main thread, which hlatc models as no thread.
pub const MAIN_THREAD: &str = "main";

/// Removes one `user` entry from a user list (one use dropped).
fn drop_use(users: &mut IdList, user: InstrId) {
    if let Some(i) = users.iter().position(|&u| u == user) {
        users.remove(i);
    }
}

impl Computation {
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_capacity(name, 0)
    }

    /// An empty computation with room for `instructions` (a reader that
    /// knows how many are coming saves the graph's regrowth).
    pub fn with_capacity(name: impl Into<String>, instructions: usize) -> Self {
        Computation {
            name: name.into(),
            execution_thread: None,
            graph: StableGraph::with_capacity(instructions, 0),
            root: None,
            control: BTreeMap::new(),
            post_order: OnceLock::new(),
        }
    }

    /// Adds an instruction reading `operands` in order. No checks: the
    /// verifier owns them, so importers can build first and report later.
    /// Every operand must be an instruction of this computation.
    pub fn add(&mut self, instr: Instruction, operands: &[InstrId]) -> InstrId {
        self.post_order.take();
        let id = self.graph.add_node(Node {
            instr,
            operands: IdList::from_slice(operands),
            users: IdList::new(),
        });
        for &o in operands {
            self.graph[o].users.push(id);
        }
        id
    }

    /// Appends operands to `id`, after any it already has.
    pub fn connect_operands(&mut self, id: InstrId, operands: &[InstrId]) {
        self.post_order.take();
        self.graph[id].operands.extend_from_slice(operands);
        for &o in operands {
            self.graph[o].users.push(id);
        }
    }

    #[inline]
    pub fn instr(&self, id: InstrId) -> &Instruction {
        &self.graph[id].instr
    }

    #[inline]
    pub fn instr_mut(&mut self, id: InstrId) -> &mut Instruction {
        &mut self.graph[id].instr
    }

    #[inline]
    pub fn contains(&self, id: InstrId) -> bool {
        self.graph.contains_node(id)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    #[inline]
    pub fn root(&self) -> Option<InstrId> {
        self.root
    }

    pub fn set_root(&mut self, id: InstrId) {
        self.post_order.take();
        self.root = Some(id);
    }

    /// One past the largest id in use: a table indexed by `id.index()`
    /// needs this many slots.
    pub fn id_bound(&self) -> usize {
        self.graph.node_bound()
    }

    /// All instruction ids in node-index order (stable, but not topological).
    pub fn ids(&self) -> impl Iterator<Item = InstrId> + '_ {
        self.graph.node_indices()
    }

    /// Operands in positional order.
    pub fn operands(&self, id: InstrId) -> Vec<InstrId> {
        self.graph[id].operands.to_vec()
    }

    /// Operands in positional order, borrowed.
    #[inline]
    pub fn operand_ids(&self, id: InstrId) -> &[InstrId] {
        &self.graph[id].operands
    }

    /// [`Computation::operands`] into `out` (cleared first), so a walk over
    /// every instruction can reuse one buffer instead of allocating each time.
    pub fn operands_into(&self, id: InstrId, out: &mut Vec<InstrId>) {
        out.clear();
        out.extend_from_slice(&self.graph[id].operands);
    }

    /// Every operand of `id` (a repeated operand comes once per use).
    pub fn operands_unordered(&self, id: InstrId) -> impl Iterator<Item = InstrId> + '_ {
        self.graph[id].operands.iter().copied()
    }

    /// The one instruction that reads `id`, if exactly one does (however
    /// many times), without listing the readers.
    pub fn sole_user(&self, id: InstrId) -> Option<InstrId> {
        let mut users = self.graph[id].users.iter().copied();
        let first = users.next()?;
        users.all(|u| u == first).then_some(first)
    }

    /// Whether `id`'s operands are exactly `operands`, in order.
    #[inline]
    pub fn reads_exactly(&self, id: InstrId, operands: &[InstrId]) -> bool {
        self.graph[id].operands.as_slice() == operands
    }

    /// Whether anything reads `id` (without listing the readers).
    #[inline]
    pub fn has_users(&self, id: InstrId) -> bool {
        !self.graph[id].users.is_empty()
    }

    /// Distinct users, in node-index order.
    pub fn users(&self, id: InstrId) -> Vec<InstrId> {
        let mut u: Vec<InstrId> = self.graph[id].users.to_vec();
        u.sort_unstable();
        u.dedup();
        u
    }

    /// Parameters sorted by parameter number.
    pub fn parameters(&self) -> Vec<InstrId> {
        let mut params: Vec<(i64, InstrId)> = self
            .graph
            .node_indices()
            .filter_map(|id| match self.graph[id].instr.op {
                Op::Parameter(n) => Some((n, id)),
                _ => None,
            })
            .collect();
        params.sort_unstable();
        params.into_iter().map(|(_, id)| id).collect()
    }

    /// Parameter shapes (by number) and the root's shape; `None` without a root.
    pub fn signature(&self) -> Option<CalleeSignature> {
        let root = self.root.filter(|&r| self.contains(r))?;
        Some(CalleeSignature {
            params: self
                .parameters()
                .into_iter()
                .map(|p| self.instr(p).shape.clone())
                .collect(),
            result: self.instr(root).shape.clone(),
        })
    }

    /// Gives every op's callee `renumber(callee)`, as the module's
    /// computations are removed, reordered or moved into another module.
    pub fn renumber_callees(
        &mut self,
        renumber: &dyn Fn(
            crate::ir::computation_id::ComputationId,
        ) -> crate::ir::computation_id::ComputationId,
    ) {
        for node in self.graph.node_weights_mut() {
            for callee in node.instr.op.called_computations_mut() {
                *callee = renumber(*callee);
            }
        }
    }

    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.graph
            .node_indices()
            .find(|&id| self.graph[id].instr.name == name)
    }

    /// Points every use of `old` at `new` (and the root, if it was `old`).
    pub fn replace_all_uses(&mut self, old: InstrId, new: InstrId) {
        self.post_order.take();
        if old != new {
            let mut users = std::mem::take(&mut self.graph[old].users);
            users.sort_unstable();
            users.dedup();
            for user in users {
                self.replace_uses_in(user, old, new);
            }
        }
        if self.root == Some(old) {
            self.root = Some(new);
        }
    }

    /// Points `user`'s operands at `operands` (one per operand it has, in
    /// order). Returns the operands it read before, so a caller can remove
    /// what no longer has a reader.
    pub fn set_operands(&mut self, user: InstrId, operands: &[InstrId]) -> IdList {
        self.post_order.take();
        let old = std::mem::replace(&mut self.graph[user].operands, IdList::from_slice(operands));
        for &o in &old {
            drop_use(&mut self.graph[o].users, user);
        }
        for &n in operands {
            self.graph[n].users.push(user);
        }
        old
    }

    /// Points `user`'s reads of `old` at `new`, leaving other users alone.
    pub fn replace_uses_in(&mut self, user: InstrId, old: InstrId, new: InstrId) {
        self.post_order.take();
        if old == new {
            return;
        }
        let mut uses = 0;
        for o in self.graph[user].operands.iter_mut() {
            if *o == old {
                *o = new;
                uses += 1;
            }
        }
        for _ in 0..uses {
            drop_use(&mut self.graph[old].users, user);
            self.graph[new].users.push(user);
        }
    }

    /// Makes `successor` wait for `predecessor` (XLA's
    /// `control-predecessors`); a dependency already there is not repeated.
    pub fn add_control_dependency(&mut self, predecessor: InstrId, successor: InstrId) {
        self.post_order.take();
        let preds = &mut self.control.entry(successor).or_default().predecessors;
        if preds.contains(&predecessor) {
            return;
        }
        preds.push(predecessor);
        self.control
            .entry(predecessor)
            .or_default()
            .successors
            .push(successor);
    }

    /// What must run before `id`, in the order the dependencies were added.
    pub fn control_predecessors(&self, id: InstrId) -> &[InstrId] {
        self.control.get(&id).map_or(&[], |e| &e.predecessors)
    }

    /// What waits for `id`.
    pub fn control_successors(&self, id: InstrId) -> &[InstrId] {
        self.control.get(&id).map_or(&[], |e| &e.successors)
    }

    /// Whether any instruction of the computation has a control dependency.
    pub fn has_control_dependencies(&self) -> bool {
        !self.control.is_empty()
    }

    /// Gives `to` every control dependency `from` has, both ways (a
    /// replacement keeps the ordering its original had).
    pub fn copy_control_dependencies(&mut self, from: InstrId, to: InstrId) {
        let preds = self.control_predecessors(from).to_vec();
        let succs = self.control_successors(from).to_vec();
        for p in preds.into_iter().filter(|&p| p != to) {
            self.add_control_dependency(p, to);
        }
        for s in succs.into_iter().filter(|&s| s != to) {
            self.add_control_dependency(to, s);
        }
    }

    /// Drops `id`'s control dependencies, handing each of its predecessors
    /// to each of its successors, so the order among the rest still holds
    /// (XLA's `SafelyDropAllControlDependencies`).
    fn drop_control_dependencies(&mut self, id: InstrId) {
        self.post_order.take();
        let Some(edges) = self.control.remove(&id) else {
            return;
        };
        for &p in &edges.predecessors {
            if let Some(e) = self.control.get_mut(&p) {
                e.successors.retain(|s| *s != id);
            }
        }
        for &s in &edges.successors {
            if let Some(e) = self.control.get_mut(&s) {
                e.predecessors.retain(|p| *p != id);
            }
        }
        for &p in &edges.predecessors {
            for &s in &edges.successors {
                self.add_control_dependency(p, s);
            }
        }
        // Only the neighbours can have been left with no edges.
        for n in edges.predecessors.iter().chain(&edges.successors) {
            if self
                .control
                .get(n)
                .is_some_and(|e| e.predecessors.is_empty() && e.successors.is_empty())
            {
                self.control.remove(n);
            }
        }
    }

    /// Removes `id`; what it read loses a user, and what read it (nothing,
    /// once a pass has rewired its users) loses that operand. Its control
    /// dependencies are handed on (see `drop_control_dependencies`).
    pub fn remove(&mut self, id: InstrId) -> Option<Instruction> {
        self.post_order.take();
        if self.root == Some(id) {
            self.root = None;
        }
        if !self.control.is_empty() {
            self.drop_control_dependencies(id);
        }
        let node = self.graph.remove_node(id)?;
        for &o in &node.operands {
            if let Some(n) = self.graph.node_weight_mut(o) {
                drop_use(&mut n.users, id);
            }
        }
        for &u in &node.users {
            if let Some(n) = self.graph.node_weight_mut(u) {
                n.operands.retain(|o| *o != id);
            }
        }
        Some(node.instr)
    }

    /// A deterministic topological order: depth-first post-order from every
    /// instruction nobody uses (in node order), the root last. Iterative, so
    /// 100k-deep chains do not overflow the stack.
    pub fn post_order(&self) -> Vec<InstrId> {
        self.post_order
            .get_or_init(|| self.walk_post_order())
            .clone()
    }

    /// The post-order walk.
    fn walk_post_order(&self) -> Vec<InstrId> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.graph.node_bound()];
        let mut order = Vec::with_capacity(self.len());
        // A control predecessor is reached from what waits for it.
        let control = !self.control.is_empty();
        let sinks = self
            .graph
            .node_indices()
            .filter(|&id| {
                Some(id) != self.root
                    && !self.has_users(id)
                    && (!control || self.control_successors(id).is_empty())
            })
            .chain(self.root);
        let mut stack: Vec<(InstrId, bool)> = Vec::new();
        for start in sinks {
            if state[start.index()] != NEW {
                continue;
            }
            // (node, operands already pushed?)
            stack.push((start, false));
            while let Some((id, expanded)) = stack.pop() {
                let s = &mut state[id.index()];
                if expanded {
                    if *s == OPEN {
                        *s = DONE;
                        order.push(id);
                    }
                    continue;
                }
                if *s != NEW {
                    continue;
                }
                *s = OPEN;
                stack.push((id, true));
                if control {
                    for &o in self.control_predecessors(id).iter().rev() {
                        if state[o.index()] == NEW {
                            stack.push((o, false));
                        }
                    }
                }
                for &o in self.operand_ids(id).iter().rev() {
                    if state[o.index()] == NEW {
                        stack.push((o, false));
                    }
                }
            }
        }
        // Nodes on a cycle are never reached from a sink; keep them so the
        // verifier can see and report them.
        if order.len() != self.len() {
            order.extend(
                self.graph
                    .node_indices()
                    .filter(|id| state[id.index()] != DONE),
            );
        }
        order
    }

    /// Structural equality up to node ids and instruction order: the same
    /// instructions by name, with the same contents and operands.
    pub fn structurally_eq(&self, other: &Computation) -> bool {
        if self.execution_thread != other.execution_thread {
            return false;
        }
        type Canon<'a> = BTreeMap<&'a str, (&'a Instruction, Vec<&'a str>, Vec<&'a str>)>;
        fn canon(c: &Computation) -> Option<Canon<'_>> {
            let mut m = BTreeMap::new();
            let names = |ids: &[InstrId]| -> Vec<&str> {
                ids.iter().map(|&o| c.instr(o).name.as_str()).collect()
            };
            for id in c.ids() {
                let ops = names(c.operand_ids(id));
                let control = names(c.control_predecessors(id));
                if m.insert(c.instr(id).name.as_str(), (c.instr(id), ops, control))
                    .is_some()
                {
                    return None;
                }
            }
            Some(m)
        }
        let root_name = |c: &Computation| c.root.map(|r| c.instr(r).name.clone());
        self.name == other.name
            && root_name(self) == root_name(other)
            && match (canon(self), canon(other)) {
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
    }
}

/// The signature of a called computation.
#[derive(Clone, Debug, PartialEq)]
pub struct CalleeSignature {
    pub params: Vec<crate::ir::shape::Shape>,
    pub result: crate::ir::shape::Shape,
}

impl CalleeSignature {
    /// `(params) -> result`, for messages.
    pub fn text(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(crate::ir::shape::Shape::to_string)
            .collect();
        format!("({}) -> {}", params.join(", "), self.result)
    }
}
