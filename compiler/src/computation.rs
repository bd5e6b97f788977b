//! A computation: instructions in a petgraph `StableGraph`, edges from operand
//! to user weighted by operand position, so node ids survive removals.

use crate::fx::FxHashMap;
use crate::instruction::Instruction;
use crate::op::Op;
use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences, NodeIndexable};
use petgraph::Direction;
use std::collections::BTreeMap;

pub type InstrId = NodeIndex<u32>;

#[derive(Clone, Debug, Default)]
pub struct Computation {
    pub name: String,
    graph: StableGraph<Instruction, u32>,
    root: Option<InstrId>,
}

impl Computation {
    pub fn new(name: impl Into<String>) -> Self {
        Computation {
            name: name.into(),
            graph: StableGraph::new(),
            root: None,
        }
    }

    /// Adds an instruction reading `operands` in order. No checks: the
    /// verifier owns them, so importers can build first and report later.
    pub fn add(&mut self, instr: Instruction, operands: &[InstrId]) -> InstrId {
        let id = self.graph.add_node(instr);
        for (i, &o) in operands.iter().enumerate() {
            self.graph.add_edge(o, id, i as u32);
        }
        id
    }

    /// Appends operands to `id`, after any it already has.
    pub fn connect_operands(&mut self, id: InstrId, operands: &[InstrId]) {
        let base = self.graph.edges_directed(id, Direction::Incoming).count() as u32;
        for (i, &o) in operands.iter().enumerate() {
            self.graph.add_edge(o, id, base + i as u32);
        }
    }

    #[inline]
    pub fn instr(&self, id: InstrId) -> &Instruction {
        &self.graph[id]
    }

    #[inline]
    pub fn instr_mut(&mut self, id: InstrId) -> &mut Instruction {
        &mut self.graph[id]
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
        self.root = Some(id);
    }

    pub fn graph(&self) -> &StableGraph<Instruction, u32> {
        &self.graph
    }

    /// All instruction ids in node-index order (stable, but not topological).
    pub fn ids(&self) -> impl Iterator<Item = InstrId> + '_ {
        self.graph.node_indices()
    }

    /// Operands in positional order.
    pub fn operands(&self, id: InstrId) -> Vec<InstrId> {
        let mut out = Vec::new();
        self.operands_into(id, &mut out);
        out
    }

    /// [`Computation::operands`] into `out` (cleared first), so a walk over
    /// every instruction can reuse one buffer instead of allocating each time.
    pub fn operands_into(&self, id: InstrId, out: &mut Vec<InstrId>) {
        out.clear();
        // Edges come back newest first: operands were added in order, so
        // reversing usually sorts them; sort only when it does not.
        let mut last = u32::MAX;
        let mut descending = true;
        for e in self.graph.edges_directed(id, Direction::Incoming) {
            let w = *e.weight();
            descending &= w < last;
            last = w;
            out.push(e.source());
        }
        if descending {
            out.reverse();
        } else {
            let mut edges: Vec<(u32, InstrId)> = self
                .graph
                .edges_directed(id, Direction::Incoming)
                .map(|e| (*e.weight(), e.source()))
                .collect();
            edges.sort_unstable_by_key(|(i, _)| *i);
            out.clear();
            out.extend(edges.into_iter().map(|(_, s)| s));
        }
    }

    /// Every operand of `id`, in no particular order (a repeated operand
    /// comes once per use).
    pub fn operands_unordered(&self, id: InstrId) -> impl Iterator<Item = InstrId> + '_ {
        self.graph.neighbors_directed(id, Direction::Incoming)
    }

    /// The one instruction that reads `id`, if exactly one does (however
    /// many times), without listing the readers.
    pub fn sole_user(&self, id: InstrId) -> Option<InstrId> {
        let mut users = self.graph.neighbors_directed(id, Direction::Outgoing);
        let first = users.next()?;
        users.all(|u| u == first).then_some(first)
    }

    /// Whether `id`'s operands are exactly `operands`, in order.
    pub fn reads_exactly(&self, id: InstrId, operands: &[InstrId]) -> bool {
        let mut count = 0;
        for e in self.graph.edges_directed(id, Direction::Incoming) {
            count += 1;
            if operands.get(*e.weight() as usize) != Some(&e.source()) {
                return false;
            }
        }
        count == operands.len()
    }

    /// Whether anything reads `id` (without listing the readers).
    #[inline]
    pub fn has_users(&self, id: InstrId) -> bool {
        self.graph
            .neighbors_directed(id, Direction::Outgoing)
            .next()
            .is_some()
    }

    /// Distinct users, in node-index order.
    pub fn users(&self, id: InstrId) -> Vec<InstrId> {
        let mut u: Vec<InstrId> = self
            .graph
            .neighbors_directed(id, Direction::Outgoing)
            .collect();
        u.sort_unstable();
        u.dedup();
        u
    }

    /// Parameters sorted by parameter number.
    pub fn parameters(&self) -> Vec<InstrId> {
        let mut params: Vec<(i64, InstrId)> = self
            .graph
            .node_indices()
            .filter_map(|id| match self.graph[id].op {
                Op::Parameter(n) => Some((n, id)),
                _ => None,
            })
            .collect();
        params.sort_unstable();
        params.into_iter().map(|(_, id)| id).collect()
    }

    /// Parameter shapes (by number) and the root's shape; `None` without a root.
    pub fn signature(&self) -> Option<crate::shape_inference::CalleeSignature> {
        let root = self.root.filter(|&r| self.contains(r))?;
        Some(crate::shape_inference::CalleeSignature {
            params: self
                .parameters()
                .into_iter()
                .map(|p| self.instr(p).shape.clone())
                .collect(),
            result: self.instr(root).shape.clone(),
        })
    }

    pub fn find(&self, name: &str) -> Option<InstrId> {
        self.graph
            .node_indices()
            .find(|&id| self.graph[id].name == name)
    }

    /// Points every use of `old` at `new` (and the root, if it was `old`).
    pub fn replace_all_uses(&mut self, old: InstrId, new: InstrId) {
        let uses: Vec<(petgraph::stable_graph::EdgeIndex<u32>, InstrId, u32)> = self
            .graph
            .edges_directed(old, Direction::Outgoing)
            .map(|e| (e.id(), e.target(), *e.weight()))
            .collect();
        for (edge, user, pos) in uses {
            self.graph.remove_edge(edge);
            self.graph.add_edge(new, user, pos);
        }
        if self.root == Some(old) {
            self.root = Some(new);
        }
    }

    /// Points each user's operands at its new list (one per operand it
    /// has, in order). Returns the operands the users read before, so a
    /// caller can remove what no longer has a reader.
    ///
    /// Removing one edge walks its source's user list, so rewiring the
    /// readers of a value read hundreds of times one by one is quadratic
    /// (in amp, 288 pads of one zero constant read by 688); every edge is
    /// laid again once instead.
    pub fn set_operands_of_many(
        &mut self,
        updates: &FxHashMap<InstrId, Vec<InstrId>>,
    ) -> Vec<InstrId> {
        let mut users: Vec<InstrId> = updates.keys().copied().collect();
        users.sort_unstable();
        let dropped = users
            .iter()
            .flat_map(|&u| self.graph.neighbors_directed(u, Direction::Incoming))
            .collect();
        self.relay_edges(&users, updates);
        dropped
    }

    /// Lays every edge again, the `users`' from `updates`.
    fn relay_edges(&mut self, users: &[InstrId], updates: &FxHashMap<InstrId, Vec<InstrId>>) {
        // Kept edges are read in storage order (a sequential scan, where
        // walking each user's list chases pointers); each user's edges are
        // laid in operand order, so its list reads back already sorted.
        let mut updated = vec![false; self.graph.node_bound()];
        for user in users {
            updated[user.index()] = true;
        }
        let mut edges: Vec<(InstrId, InstrId, u32)> = Vec::with_capacity(self.graph.edge_count());
        edges.extend(
            (&self.graph)
                .edge_references()
                .filter(|e| !updated[e.target().index()])
                .map(|e| (e.source(), e.target(), *e.weight())),
        );
        for &user in users {
            edges.extend(
                updates[&user]
                    .iter()
                    .enumerate()
                    .map(|(i, &o)| (o, user, i as u32)),
            );
        }
        self.graph.clear_edges();
        for (source, user, index) in edges {
            self.graph.add_edge(source, user, index);
        }
    }

    /// Points `user`'s reads of `old` at `new`, leaving other users alone.
    pub fn replace_uses_in(&mut self, user: InstrId, old: InstrId, new: InstrId) {
        let uses: Vec<(petgraph::stable_graph::EdgeIndex<u32>, u32)> = self
            .graph
            .edges_directed(old, Direction::Outgoing)
            .filter(|e| e.target() == user)
            .map(|e| (e.id(), *e.weight()))
            .collect();
        for (edge, pos) in uses {
            self.graph.remove_edge(edge);
            self.graph.add_edge(new, user, pos);
        }
    }

    pub fn remove(&mut self, id: InstrId) -> Option<Instruction> {
        if self.root == Some(id) {
            self.root = None;
        }
        self.graph.remove_node(id)
    }

    /// A deterministic topological order: depth-first post-order from every
    /// instruction nobody uses (in node order), the root last. Iterative, so
    /// 100k-deep chains do not overflow the stack.
    pub fn post_order(&self) -> Vec<InstrId> {
        self.walk_post_order(|_, _| {})
    }

    /// [`Computation::post_order`] with every instruction's operands as the
    /// walk read them: a pass that visits in this order and reads operands
    /// (as `amp` does for every instruction) need not walk the edges twice.
    pub fn post_order_with_operands(&self) -> PostOrder {
        const UNEXPANDED: (u32, u32) = (u32::MAX, 0);
        let mut spans = vec![UNEXPANDED; self.graph.node_bound()];
        let mut flat = Vec::with_capacity(self.graph.edge_count());
        let order = self.walk_post_order(|id, operands| {
            spans[id.index()] = (flat.len() as u32, operands.len() as u32);
            flat.extend_from_slice(operands);
        });
        // Instructions on a cycle are listed without being expanded.
        let mut operands = Vec::new();
        for &id in &order {
            if spans[id.index()] == UNEXPANDED {
                self.operands_into(id, &mut operands);
                spans[id.index()] = (flat.len() as u32, operands.len() as u32);
                flat.extend_from_slice(&operands);
            }
        }
        PostOrder { order, spans, flat }
    }

    /// The post-order walk; `expand` sees each instruction's operands when
    /// the walk first reaches it.
    fn walk_post_order(&self, mut expand: impl FnMut(InstrId, &[InstrId])) -> Vec<InstrId> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.graph.node_bound()];
        let mut order = Vec::with_capacity(self.len());
        let mut sinks: Vec<InstrId> = self
            .graph
            .node_indices()
            .filter(|&id| {
                Some(id) != self.root
                    && self
                        .graph
                        .neighbors_directed(id, Direction::Outgoing)
                        .next()
                        .is_none()
            })
            .collect();
        sinks.extend(self.root);
        let mut stack: Vec<(InstrId, bool)> = Vec::new();
        let mut operands = Vec::new();
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
                self.operands_into(id, &mut operands);
                expand(id, &operands);
                for &o in operands.iter().rev() {
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
        fn canon(c: &Computation) -> Option<BTreeMap<&str, (&Instruction, Vec<&str>)>> {
            let mut m = BTreeMap::new();
            for id in c.ids() {
                let ops = c
                    .operands(id)
                    .into_iter()
                    .map(|o| c.instr(o).name.as_str())
                    .collect();
                if m.insert(c.instr(id).name.as_str(), (c.instr(id), ops))
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

/// A computation's instructions in post order, with the operands each had
/// when the order was taken.
pub struct PostOrder {
    pub order: Vec<InstrId>,
    spans: Vec<(u32, u32)>,
    flat: Vec<InstrId>,
}

impl PostOrder {
    /// `id`'s operands, in operand order, as they were when the order was
    /// taken.
    pub fn operands(&self, id: InstrId) -> &[InstrId] {
        let (start, len) = self.spans[id.index()];
        &self.flat[start as usize..(start + len) as usize]
    }
}
