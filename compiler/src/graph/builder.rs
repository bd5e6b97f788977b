//! A small builder over the IR: every instruction it adds has its shape
//! inferred and checked on the spot, so a builder bug is reported where it is
//! made, not by the verifier later.

use crate::analysis::shape_inference::{infer_shape, CalleeSignature, ShapeError};
use crate::ir::computation::{Computation, InstrId};
use crate::ir::computation_id::ComputationId;
use crate::ir::instruction::Instruction;
use crate::ir::literal::Literal;
use crate::ir::op::{BinaryOp, Op, UnaryOp};
use crate::ir::shape::{ElementType, Shape};
use crate::util::fx::{BuildFxHasher, FxHasher};
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("building '{computation}': {opcode} {operands}: {source}")]
pub struct BuildError {
    pub computation: String,
    pub opcode: &'static str,
    /// The operand shapes, for the message.
    pub operands: String,
    #[source]
    pub source: ShapeError,
}

/// A module that cannot be called from a built computation.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ImportError {
    #[error("computation '{0}' has no root instruction")]
    NoRoot(String),
    #[error("computation '{0}' is in the module already")]
    NameTaken(String),
}

pub struct Builder {
    comp: Computation,
    /// Scalar reducers made on demand by `reduce_*`, in the order made:
    /// the `k`-th is computation `k + 1` of the module `into_module` makes,
    /// whose entry (0) is the computation built here.
    reducers: Vec<Reducer>,
    /// Each reducer's id, by its name.
    reducer_ids: BTreeMap<String, ComputationId>,
    /// The last `k` [`Builder::import`] gave each module name (its prefix
    /// `name.k`, or `name` for 1): the smallest free one is never below
    /// it, since prefixes are only ever taken, so a step of many loops
    /// does not search its callees from 1 for each.
    import_suffixes: BTreeMap<String, usize>,
    counters: BTreeMap<&'static str, usize>,
    next_param: i64,
    /// Value numbering: every pure instruction built so far, by a hash of
    /// what it computes (op, operands, shape). Asking for the same value
    /// again returns the same instruction, so built graphs hold no
    /// duplicates for cse to find. A hash's candidates are compared with
    /// the instructions themselves: keying by a copy of the op, operands
    /// and shape cloned all three for every instruction built.
    values: HashMap<u64, SmallVec<[InstrId; 1]>, BuildFxHasher>,
    /// Provenance: the `/`-separated scope path (`layers.3/self_attn`)
    /// written into `metadata.op_name` of every instruction added, so a pass
    /// report, a dump or a policy such as remat can tell which layer and
    /// which part of it an instruction came from.
    scope: String,
}

/// A computation the built one calls: a scalar reducer the builder made
/// (`p0 op p1`, with its op), or one of a module brought in whole
/// ([`Builder::import`]).
struct Reducer {
    computation: Computation,
    signature: CalleeSignature,
    op: Option<BinaryOp>,
}

impl Builder {
    pub fn new(name: impl Into<String>) -> Self {
        Builder {
            comp: Computation::new(name),
            reducers: Vec::new(),
            reducer_ids: BTreeMap::new(),
            import_suffixes: BTreeMap::new(),
            counters: BTreeMap::new(),
            next_param: 0,
            values: HashMap::default(),
            scope: String::new(),
        }
    }

    /// Enters scope `name` (one path component, no `/`): instructions added
    /// until the matching [`Builder::pop_scope`] carry it in their
    /// `metadata.op_name`.
    pub fn push_scope(&mut self, name: &str) {
        debug_assert!(!name.is_empty() && !name.contains('/'), "scope '{name}'");
        if !self.scope.is_empty() {
            self.scope.push('/');
        }
        self.scope.push_str(name);
    }

    /// Leaves the innermost scope.
    pub fn pop_scope(&mut self) {
        let cut = self.scope.rfind('/').unwrap_or(0);
        self.scope.truncate(cut);
    }

    /// The current scope path.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// Replaces the whole scope path and returns the previous one, for
    /// code that emits on behalf of another instruction (autodiff writes a
    /// rule's instructions under `backward/` and the forward op's scope).
    pub fn set_scope(&mut self, path: impl Into<String>) -> String {
        std::mem::replace(&mut self.scope, path.into())
    }

    /// The computation built so far.
    pub fn computation(&self) -> &Computation {
        &self.comp
    }

    /// Points `user`'s reads of `old` at `new`: a value built once and then
    /// read from elsewhere (a pipeline's backward slot reading a kept
    /// activation instead of its recomputation). Value numbering keeps
    /// `user` under its old operands, so a later request for the same op
    /// over the new ones builds a fresh instruction rather than sharing it:
    /// never wrong, only not merged.
    pub fn replace_uses_in(&mut self, user: InstrId, old: InstrId, new: InstrId) {
        self.comp.replace_uses_in(user, old, new);
    }

    pub fn shape(&self, id: InstrId) -> &Shape {
        &self.comp.instr(id).shape
    }

    fn fresh_name(&mut self, opcode: &'static str) -> String {
        let n = self.counters.entry(opcode).or_insert(0);
        *n += 1;
        format!("{opcode}.{n}")
    }

    /// Adds `op` over `operands`; `shape` is needed only for ops that take
    /// (part of) their result shape from the instruction. Building a pure
    /// value that exists already returns the existing instruction.
    pub fn add(
        &mut self,
        op: Op,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<InstrId, BuildError> {
        let inferred = self.infer(&op, operands, shape)?;
        Ok(self.insert(op, operands, inferred, true))
    }

    /// Adds a new instruction that value numbering never merges with an
    /// existing one: a backward rule's recomputation from its saved values
    /// must not silently read a forward value it did not declare.
    pub fn add_fresh(&mut self, op: Op, operands: &[InstrId]) -> Result<InstrId, BuildError> {
        let inferred = self.infer(&op, operands, None)?;
        Ok(self.insert(op, operands, inferred, false))
    }

    /// A copy of `x`'s op over `operands` (shaped as `x`'s are), with
    /// `x`'s shape, named `{stem}.{n}` and never merged with an existing
    /// instruction: autodiff's recomputation of a forward value in the
    /// backward pass (`GradHints::recompute`), marked
    /// [`crate::Instruction::recomputed`] for the passes.
    pub fn recompute(
        &mut self,
        stem: &'static str,
        x: InstrId,
        operands: &[InstrId],
    ) -> Result<InstrId, BuildError> {
        let (op, shape) = {
            let i = self.comp.instr(x);
            (i.op.clone(), i.shape.clone())
        };
        let inferred = self.infer(&op, operands, Some(shape))?;
        let name = self.fresh_name(stem);
        let id = self.insert(op, operands, inferred, false);
        let copy = self.comp.instr_mut(id);
        copy.name = name;
        copy.recomputed = true;
        Ok(id)
    }

    fn infer(
        &self,
        op: &Op,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<Shape, BuildError> {
        let shapes: Vec<&Shape> = operands
            .iter()
            .map(|&o| &self.comp.instr(o).shape)
            .collect();
        let callee = |id: ComputationId| {
            let r = self.reducers.get(id.index().checked_sub(1)?)?;
            Some((r.computation.name.as_str(), r.signature.clone()))
        };
        infer_shape(op, &shapes, shape.as_ref(), &callee).map_err(|source| BuildError {
            computation: self.comp.name.clone(),
            opcode: op.opcode(),
            operands: format!(
                "({})",
                shapes
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            source,
        })
    }

    /// Adds the instruction, or returns the existing one computing the same
    /// value when `share` allows it.
    fn insert(&mut self, op: Op, operands: &[InstrId], shape: Shape, share: bool) -> InstrId {
        let key = (share && op.is_pure()).then(|| value_hash(&op, operands, &shape));
        if let Some(same) = key.and_then(|k| self.values.get(&k)) {
            let c = &self.comp;
            let found = same.iter().copied().find(|&id| {
                let i = c.instr(id);
                i.op == op && i.shape == shape && c.operand_ids(id) == operands
            });
            if let Some(id) = found {
                return id;
            }
        }
        let name = self.fresh_name(op.opcode());
        let mut instr = Instruction::new(name, shape, op);
        instr.metadata.op_name.clone_from(&self.scope);
        let id = self.comp.add(instr, operands);
        if let Some(k) = key {
            self.values.entry(k).or_default().push(id);
        }
        id
    }

    /// Adds a new instruction with this name (unique in the computation);
    /// named instructions are never shared.
    pub fn add_named(
        &mut self,
        name: &str,
        op: Op,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<InstrId, BuildError> {
        let inferred = self.infer(&op, operands, shape)?;
        let id = self.insert(op, operands, inferred, false);
        self.comp.instr_mut(id).name = name.to_string();
        Ok(id)
    }

    /// The next parameter, numbered in call order.
    pub fn parameter(&mut self, name: &str, shape: Shape) -> InstrId {
        let n = self.next_param;
        self.next_param += 1;
        self.comp
            .add(Instruction::new(name, shape, Op::Parameter(n)), &[])
    }

    pub fn constant(&mut self, lit: Literal) -> InstrId {
        let shape = Shape::Array(lit.shape.clone());
        self.insert(Op::Constant(lit), &[], shape, true)
    }

    /// A scalar constant of `value`. Integer and pred types take `value`
    /// rounded toward zero and clamped to the type's range (so -inf is the
    /// type's lowest value, the identity of a max-reduction).
    pub fn scalar(&mut self, ty: ElementType, value: f64) -> InstrId {
        let lit = Literal::from_scalars(ty, vec![], &[crate::Scalar::Float(value)])
            .or_else(|_| {
                let (lo, hi) = ty.integer_range().unwrap_or((0, 1));
                let v = if value.is_nan() { 0.0 } else { value };
                // `as` saturates, then the type's own range clamps.
                let v = (v as i128).clamp(lo, hi);
                let s = match i64::try_from(v) {
                    Ok(i) => crate::Scalar::Int(i),
                    Err(_) => crate::Scalar::UInt(v as u64),
                };
                Literal::from_scalars(ty, vec![], &[s])
            })
            .expect("a value clamped to the type's range converts");
        self.constant(lit)
    }

    pub fn unary(&mut self, op: UnaryOp, x: InstrId) -> Result<InstrId, BuildError> {
        self.add(Op::Unary(op), &[x], None)
    }

    pub fn binary(&mut self, op: BinaryOp, x: InstrId, y: InstrId) -> Result<InstrId, BuildError> {
        self.add(Op::Binary(op), &[x, y], None)
    }

    /// Broadcasts `x` to `dims`, mapping operand dimension i to `mapping[i]`.
    pub fn broadcast(
        &mut self,
        x: InstrId,
        dims: &[i64],
        mapping: &[i64],
    ) -> Result<InstrId, BuildError> {
        let ty = self.elem_type(x);
        self.add(
            Op::Broadcast {
                dimensions: mapping.to_vec(),
            },
            &[x],
            Some(Shape::array(ty, dims.to_vec())),
        )
    }

    pub fn reshape(&mut self, x: InstrId, dims: &[i64]) -> Result<InstrId, BuildError> {
        let ty = self.elem_type(x);
        self.add(Op::RESHAPE, &[x], Some(Shape::array(ty, dims.to_vec())))
    }

    /// `x` as `dims`: `x` itself when it has them already. Code that packs
    /// tensors of any rank into flat buckets (a sharded step's gradient
    /// sums, ZeRO-1) would otherwise build a reshape per 1-D tensor that
    /// `simplify` then has to find and remove, at every world size.
    pub fn reshape_unless_same(&mut self, x: InstrId, dims: &[i64]) -> Result<InstrId, BuildError> {
        if self.array_shape(x).dims == dims {
            return Ok(x);
        }
        self.reshape(x, dims)
    }

    pub fn convert(&mut self, x: InstrId, ty: ElementType) -> Result<InstrId, BuildError> {
        let dims = self
            .shape(x)
            .as_array()
            .map(|a| a.dims.clone())
            .unwrap_or_default();
        self.add(Op::Convert, &[x], Some(Shape::array(ty, dims)))
    }

    /// `x` as `ty`: `x` itself when it has that type already.
    pub fn convert_unless_same(
        &mut self,
        x: InstrId,
        ty: ElementType,
    ) -> Result<InstrId, BuildError> {
        if self.elem_type(x) == ty {
            return Ok(x);
        }
        self.convert(x, ty)
    }

    fn elem_type(&self, x: InstrId) -> ElementType {
        self.shape(x)
            .as_array()
            .map(|a| a.ty)
            .unwrap_or(ElementType::F32)
    }

    /// Sets the root and returns the finished computation.
    pub fn finish(mut self, root: InstrId) -> Computation {
        self.comp.set_root(root);
        self.comp
    }

    /// Sets the root and wraps the computation, with the reducers it uses,
    /// into a module.
    pub fn into_module(mut self, name: &str, root: InstrId) -> crate::Module {
        self.comp.set_root(root);
        // The entry is computation 0 and each reducer follows at the id
        // `reducer` gave it.
        let mut m = crate::Module::new(name, self.comp);
        for r in self.reducers {
            m.add_computation(r.computation);
        }
        m
    }

    pub fn array_shape(&self, id: InstrId) -> &crate::ArrayShape {
        self.shape(id)
            .as_array()
            .expect("builder helpers take arrays")
    }

    pub fn dims(&self, id: InstrId) -> Vec<i64> {
        self.array_shape(id).dims.clone()
    }

    pub fn ty(&self, id: InstrId) -> ElementType {
        self.array_shape(id).ty
    }

    /// A scalar reducer (`a op b`) callable by reduce and scatter.
    pub fn reducer(&mut self, op: BinaryOp, ty: ElementType) -> ComputationId {
        let name = format!("{}_{}", op.opcode(), ty.name());
        if let Some(&id) = self.reducer_ids.get(&name) {
            return id;
        }
        let mut b = Builder::new(name.clone());
        let x = b.parameter(&format!("{name}.lhs"), Shape::scalar(ty));
        let y = b.parameter(&format!("{name}.rhs"), Shape::scalar(ty));
        let r = b
            .add_named(&format!("{name}.out"), Op::Binary(op), &[x, y], None)
            .expect("a binary op over equal scalars is well-formed");
        let signature = CalleeSignature {
            params: vec![Shape::scalar(ty); 2],
            result: b.shape(r).clone(),
        };
        let computation = b.finish(r);
        self.reducers.push(Reducer {
            computation,
            signature,
            op: Some(op),
        });
        let id = ComputationId::new(self.reducers.len());
        self.reducer_ids.insert(name, id);
        id
    }

    /// `module`'s computations as callees of the computation built here,
    /// each callee renumbered: the id of its entry, which a `call` takes.
    /// A kernel brought from another stack comes in this way. Its
    /// computations and instructions take the module's name as a prefix
    /// (`jit_attention.add.3`), and a number after it when another import
    /// took that name, so names stay unique in the module built. A
    /// computation without a root has no signature and is refused.
    pub fn import(&mut self, module: crate::Module) -> Result<ComputationId, ImportError> {
        let base = self.reducers.len() + 1;
        let shift = |id: ComputationId| id.shifted(base);
        let entry = shift(module.entry);
        let taken = |name: &str, rs: &[Reducer]| rs.iter().any(|r| r.computation.name == name);
        let named = |k: usize| match k {
            1 => module.name.clone(),
            k => format!("{}.{k}", module.name),
        };
        let mut k = self.import_suffixes.get(&module.name).copied().unwrap_or(1);
        let mut prefix = named(k);
        loop {
            let dotted = format!("{prefix}.");
            if !self
                .reducers
                .iter()
                .any(|r| r.computation.name.starts_with(&dotted))
            {
                break;
            }
            k += 1;
            prefix = named(k);
        }
        self.import_suffixes.insert(module.name.clone(), k);
        for mut c in module.computations {
            c.renumber_callees(&shift);
            c.name = format!("{prefix}.{}", c.name);
            if taken(&c.name, &self.reducers) {
                return Err(ImportError::NameTaken(c.name));
            }
            let ids: Vec<InstrId> = c.ids().collect();
            for id in ids {
                let i = c.instr_mut(id);
                i.name = format!("{prefix}.{}", i.name);
            }
            let signature = c
                .signature()
                .ok_or_else(|| ImportError::NoRoot(c.name.clone()))?;
            self.reducers.push(Reducer {
                computation: c,
                signature,
                op: None,
            });
        }
        Ok(entry)
    }

    /// A callee's name, for messages.
    pub fn callee_name(&self, id: ComputationId) -> String {
        id.index()
            .checked_sub(1)
            .and_then(|k| self.reducers.get(k))
            .map_or_else(|| id.describe(), |r| r.computation.name.clone())
    }

    /// The binary op a reducer of this builder applies.
    pub fn reducer_op(&self, id: ComputationId) -> Option<BinaryOp> {
        let r = self.reducers.get(id.index().checked_sub(1)?)?;
        r.op
    }

    /// `x` of any shape reduced with `op` over `dims`, starting from `init`.
    pub fn reduce(
        &mut self,
        op: BinaryOp,
        x: InstrId,
        dims: &[i64],
        init: f64,
    ) -> Result<InstrId, BuildError> {
        let ty = self.ty(x);
        let to_apply = self.reducer(op, ty);
        let init = self.scalar(ty, init);
        self.add(
            Op::Reduce {
                dimensions: dims.to_vec(),
                to_apply,
            },
            &[x, init],
            None,
        )
    }

    pub fn reduce_sum(&mut self, x: InstrId, dims: &[i64]) -> Result<InstrId, BuildError> {
        self.reduce(BinaryOp::Add, x, dims, 0.0)
    }

    pub fn reduce_max(&mut self, x: InstrId, dims: &[i64]) -> Result<InstrId, BuildError> {
        self.reduce(BinaryOp::Maximum, x, dims, f64::NEG_INFINITY)
    }

    /// A constant of `value` in the shape of `like`.
    pub fn full_like(&mut self, like: InstrId, value: f64) -> Result<InstrId, BuildError> {
        let (ty, dims) = (self.ty(like), self.dims(like));
        self.full(ty, &dims, value)
    }

    pub fn full(
        &mut self,
        ty: ElementType,
        dims: &[i64],
        value: f64,
    ) -> Result<InstrId, BuildError> {
        let s = self.scalar(ty, value);
        if dims.is_empty() {
            return Ok(s);
        }
        self.broadcast(s, dims, &[])
    }

    pub fn transpose(&mut self, x: InstrId, permutation: &[i64]) -> Result<InstrId, BuildError> {
        self.add(
            Op::Transpose {
                permutation: permutation.to_vec(),
            },
            &[x],
            None,
        )
    }

    /// `[start, limit)` of dimension `dim`, everything of the others.
    pub fn slice_dim(
        &mut self,
        x: InstrId,
        dim: usize,
        start: i64,
        limit: i64,
    ) -> Result<InstrId, BuildError> {
        let slices = self
            .dims(x)
            .iter()
            .enumerate()
            .map(|(i, &n)| crate::ir::op::SliceDim {
                start: if i == dim { start } else { 0 },
                limit: if i == dim { limit } else { n },
                stride: 1,
            })
            .collect();
        self.add(Op::Slice { slices }, &[x], None)
    }

    /// [`Builder::slice_dim`], or `x` itself when `[start, limit)` is
    /// all of dimension `dim` (a bucket of one tensor, a shard without
    /// padding).
    pub fn slice_dim_unless_whole(
        &mut self,
        x: InstrId,
        dim: usize,
        start: i64,
        limit: i64,
    ) -> Result<InstrId, BuildError> {
        if start == 0 && self.array_shape(x).dims.get(dim) == Some(&limit) {
            return Ok(x);
        }
        self.slice_dim(x, dim, start, limit)
    }

    pub fn concatenate(&mut self, xs: &[InstrId], dimension: i64) -> Result<InstrId, BuildError> {
        self.add(Op::Concatenate { dimension }, xs, None)
    }

    pub fn dot(
        &mut self,
        x: InstrId,
        y: InstrId,
        dims: crate::ir::op::DotDims,
    ) -> Result<InstrId, BuildError> {
        self.add(
            Op::Dot {
                dims,
                precision: Vec::new(),
                algorithm: Default::default(),
            },
            &[x, y],
            None,
        )
    }

    pub fn compare(
        &mut self,
        x: InstrId,
        y: InstrId,
        direction: crate::ir::op::ComparisonDirection,
    ) -> Result<InstrId, BuildError> {
        self.add(
            Op::Compare {
                direction,
                kind: None,
            },
            &[x, y],
            None,
        )
    }

    pub fn select(&mut self, p: InstrId, t: InstrId, f: InstrId) -> Result<InstrId, BuildError> {
        self.add(Op::Select, &[p, t, f], None)
    }

    pub fn iota(
        &mut self,
        ty: ElementType,
        dims: &[i64],
        dimension: i64,
    ) -> Result<InstrId, BuildError> {
        self.add(
            Op::Iota { dimension },
            &[],
            Some(Shape::array(ty, dims.to_vec())),
        )
    }

    pub fn mul(&mut self, x: InstrId, y: InstrId) -> Result<InstrId, BuildError> {
        self.binary(BinaryOp::Multiply, x, y)
    }

    pub fn add2(&mut self, x: InstrId, y: InstrId) -> Result<InstrId, BuildError> {
        self.binary(BinaryOp::Add, x, y)
    }

    /// `xs` added left to right, or a zero of `ty` when there are none:
    /// no `0 + x` for `simplify` to remove.
    pub fn sum_of(
        &mut self,
        xs: impl IntoIterator<Item = InstrId>,
        ty: ElementType,
    ) -> Result<InstrId, BuildError> {
        let mut total = None;
        for x in xs {
            total = Some(match total {
                None => x,
                Some(acc) => self.add2(acc, x)?,
            });
        }
        Ok(total.unwrap_or_else(|| self.scalar(ty, 0.0)))
    }

    pub fn sub(&mut self, x: InstrId, y: InstrId) -> Result<InstrId, BuildError> {
        self.binary(BinaryOp::Subtract, x, y)
    }

    pub fn div(&mut self, x: InstrId, y: InstrId) -> Result<InstrId, BuildError> {
        self.binary(BinaryOp::Divide, x, y)
    }

    /// Softmax over `axis`, `exp(x - max) / sum(exp(x - max))`: returns the
    /// result and the max, a shift that cancels exactly (a caller that
    /// differentiates treats it as a constant).
    pub fn softmax(&mut self, x: InstrId, axis: i64) -> Result<(InstrId, InstrId), BuildError> {
        let dims = self.dims(x);
        let keep = all_but(dims.len(), axis);
        let m = self.reduce_max(x, &[axis])?;
        let mb = self.broadcast(m, &dims, &keep)?;
        let z = self.sub(x, mb)?;
        let e = self.unary(UnaryOp::Exp, z)?;
        let s = self.reduce_sum(e, &[axis])?;
        let sb = self.broadcast(s, &dims, &keep)?;
        Ok((self.div(e, sb)?, m))
    }

    /// `y * (dy - sum(dy * y))` over `axis`: the gradient through a softmax
    /// whose output is `y`, given the gradient `dy` of `y`.
    pub fn softmax_backward(
        &mut self,
        y: InstrId,
        dy: InstrId,
        axis: i64,
    ) -> Result<InstrId, BuildError> {
        let dims = self.dims(y);
        let p = self.mul(dy, y)?;
        let s = self.reduce_sum(p, &[axis])?;
        let sb = self.broadcast(s, &dims, &all_but(dims.len(), axis))?;
        let t = self.sub(dy, sb)?;
        self.mul(y, t)
    }

    /// `x * c` for a scalar constant `c`, broadcast to `x`'s shape.
    /// `x` (f32) rounded to bf16 stochastically with `random` (u32, same
    /// dims): up with probability equal to the distance from the lower
    /// neighbour, so the rounding is unbiased. Plain HLO that XLA CPU runs
    /// (its `stochastic-convert` does not take f32 to bf16): the random low
    /// 16 bits are added to the value's bits and cut off. NaN stays NaN, and
    /// a finite value never rounds up into infinity.
    pub fn stochastic_round_bf16(
        &mut self,
        x: InstrId,
        random: InstrId,
    ) -> Result<InstrId, BuildError> {
        use crate::ir::op::ComparisonDirection::{Eq, Lt, Ne};
        let dims = self.dims(x);
        let u32_shape = Shape::array(ElementType::U32, dims.clone());
        let f32_shape = Shape::array(ElementType::F32, dims.clone());
        let bits = self.add(Op::BitcastConvert, &[x], Some(u32_shape.clone()))?;
        let low_mask = self.full(ElementType::U32, &dims, 65535.0)?;
        let high_mask = self.full(ElementType::U32, &dims, 4_294_901_760.0)?;
        let low = self.binary(BinaryOp::And, random, low_mask)?;
        let sum = self.add2(bits, low)?;
        let up = self.binary(BinaryOp::And, sum, high_mask)?;
        let down = self.binary(BinaryOp::And, bits, high_mask)?;
        let up = self.add(Op::BitcastConvert, &[up], Some(f32_shape.clone()))?;
        let down = self.add(Op::BitcastConvert, &[down], Some(f32_shape))?;
        let inf = self.full(ElementType::F32, &dims, f64::INFINITY)?;
        let (ax, aup) = (self.unary(UnaryOp::Abs, x)?, self.unary(UnaryOp::Abs, up)?);
        let finite = self.compare(ax, inf, Lt)?;
        let went_infinite = self.compare(aup, inf, Eq)?;
        let overflow = self.binary(BinaryOp::And, finite, went_infinite)?;
        let rounded = self.select(overflow, down, up)?;
        let nan = self.compare(x, x, Ne)?;
        let kept = self.select(nan, x, rounded)?;
        self.convert(kept, ElementType::Bf16)
    }

    /// `values` read back through an `opt-barrier` that also waits for
    /// `until`: copies no compiler may merge with the values themselves or
    /// compute before `until` exists. A backward rule that recomputes from
    /// forward values reads them this way, so that its recomputation runs
    /// in the backward pass and is never folded into the forward's.
    pub fn held_until<const N: usize>(
        &mut self,
        values: [InstrId; N],
        until: InstrId,
    ) -> Result<[InstrId; N], BuildError> {
        let mut held = values;
        let read = self.held_until_all(&values, until)?;
        held.copy_from_slice(&read);
        Ok(held)
    }

    /// [`Builder::held_until`] of any number of values.
    pub fn held_until_all(
        &mut self,
        values: &[InstrId],
        until: InstrId,
    ) -> Result<Vec<InstrId>, BuildError> {
        let mut items = values.to_vec();
        items.push(until);
        let tuple = self.add_fresh(Op::Tuple, &items)?;
        let barrier = self.add_fresh(Op::OptBarrier, &[tuple])?;
        (0..values.len())
            .map(|index| {
                let index = index as i64;
                self.add(Op::GetTupleElement { index }, &[barrier], None)
            })
            .collect()
    }

    pub fn scale(&mut self, x: InstrId, c: f64) -> Result<InstrId, BuildError> {
        let k = self.full_like(x, c)?;
        self.mul(x, k)
    }
}

/// What value numbering files an instruction under.
fn value_hash(op: &Op, operands: &[InstrId], shape: &Shape) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FxHasher::default();
    op.hash(&mut h);
    operands.hash(&mut h);
    shape.hash(&mut h);
    h.finish()
}

/// The dimensions `0..rank` except `axis`: where a value reduced over
/// `axis` is broadcast back from.
fn all_but(rank: usize, axis: i64) -> Vec<i64> {
    (0..rank as i64).filter(|&k| k != axis).collect()
}

/// `Some(op)` when `c` computes `op(parameter 0, parameter 1)` on scalars.
pub fn binary_reducer_op(c: &Computation) -> Option<BinaryOp> {
    let root = c.root()?;
    let Op::Binary(op) = c.instr(root).op else {
        return None;
    };
    let params = c.parameters();
    (params.len() == 2 && c.operands(root) == params).then_some(op)
}

/// `(a, b) -> a + b` over scalars of `ty`: the reducer of sums.
pub fn scalar_reducer(name: &str, ty: ElementType, op: BinaryOp) -> Computation {
    let mut b = Builder::new(name);
    let x = b.parameter("x", Shape::scalar(ty));
    let y = b.parameter("y", Shape::scalar(ty));
    let r = b
        .binary(op, x, y)
        .expect("a binary op over equal scalars is well-formed");
    b.finish(r)
}
