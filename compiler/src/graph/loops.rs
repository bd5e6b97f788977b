//! `while` loops with a static trip count, and the dynamic slices their
//! bodies index by the loop's counter: what a computation needs to visit
//! `n` tiles with one body instead of `n` copies of it.
//!
//! A loop built here is the form neuronx-cc takes: its condition compares
//! a counter that starts at 0 and steps by 1 with a constant, so the trip
//! count is known when the module is compiled, and nothing in the body
//! decides whether it runs again.

use crate::graph::builder::{BuildError, Builder};
use crate::ir::computation::InstrId;
use crate::ir::op::{ComparisonDirection, Op};
use crate::ir::shape::{ElementType, Shape};

impl Builder {
    /// Element `index` of tuple `t`.
    pub fn get(&mut self, t: InstrId, index: usize) -> Result<InstrId, BuildError> {
        self.add(
            Op::GetTupleElement {
                index: index as i64,
            },
            &[t],
            None,
        )
    }

    /// `size` entries of `x` along `dim` from `start` (`s32[]`), all of
    /// every other dimension.
    pub fn dynamic_slice_dim(
        &mut self,
        x: InstrId,
        dim: usize,
        start: InstrId,
        size: i64,
    ) -> Result<InstrId, BuildError> {
        let mut dims = self.dims(x);
        dims[dim] = size;
        let starts = self.starts_at(dims.len(), dim, start);
        let mut operands = vec![x];
        operands.extend(starts);
        let shape = Shape::array(self.ty(x), dims.clone());
        self.add(Op::DynamicSlice { sizes: dims }, &operands, Some(shape))
    }

    /// `x` with `update` written along `dim` from `start` (`s32[]`).
    pub fn dynamic_update_slice_dim(
        &mut self,
        x: InstrId,
        update: InstrId,
        dim: usize,
        start: InstrId,
    ) -> Result<InstrId, BuildError> {
        let starts = self.starts_at(self.dims(x).len(), dim, start);
        let mut operands = vec![x, update];
        operands.extend(starts);
        self.add(Op::DynamicUpdateSlice, &operands, None)
    }

    /// Start indices of a rank-`rank` slice: `start` along `dim`, 0 along
    /// the rest.
    fn starts_at(&mut self, rank: usize, dim: usize, start: InstrId) -> Vec<InstrId> {
        let zero = self.scalar(ElementType::S32, 0.0);
        (0..rank)
            .map(|d| if d == dim { start } else { zero })
            .collect()
    }

    /// A loop that runs `body` `trips` times over `state`, named `name`:
    /// `body` gets the counter (`s32[]`, 0 first) and the state, and gives
    /// the next state, each value the shape it had. The state after the
    /// last trip.
    pub fn static_loop(
        &mut self,
        name: &str,
        trips: i64,
        state: &[InstrId],
        body: impl FnOnce(&mut Builder, InstrId, &[InstrId]) -> Result<Vec<InstrId>, BuildError>,
    ) -> Result<Vec<InstrId>, BuildError> {
        let zero = self.scalar(ElementType::S32, 0.0);
        let mut items = vec![zero];
        items.extend_from_slice(state);
        let init = self.add_fresh(Op::Tuple, &items)?;
        let shape = self.shape(init).clone();
        let scope = self.scope().to_string();

        let mut cond = Builder::new("condition");
        cond.set_scope(scope.clone());
        let p = cond.parameter("state", shape.clone());
        let counter = cond.get(p, 0)?;
        let limit = cond.scalar(ElementType::S32, trips as f64);
        let more = cond.compare(counter, limit, ComparisonDirection::Lt)?;
        let condition = self.callee(cond.into_module(name, more))?;

        let mut step = Builder::new("body");
        step.set_scope(scope);
        let p = step.parameter("state", shape);
        let values = (0..items.len())
            .map(|k| step.get(p, k))
            .collect::<Result<Vec<_>, _>>()?;
        let next = body(&mut step, values[0], &values[1..])?;
        let one = step.scalar(ElementType::S32, 1.0);
        let mut out = vec![step.add2(values[0], one)?];
        out.extend(next);
        let root = step.add_fresh(Op::Tuple, &out)?;
        let body = self.callee(step.into_module(name, root))?;

        let done = self.add_fresh(Op::While { condition, body }, &[init])?;
        (1..items.len()).map(|k| self.get(done, k)).collect()
    }

    /// `module` as a callee of the computation built here.
    fn callee(&mut self, module: crate::Module) -> Result<crate::ComputationId, BuildError> {
        let name = module.name.clone();
        self.import(module).map_err(|e| BuildError {
            computation: self.computation().name.clone(),
            opcode: "while",
            operands: format!("(the loop's computation {name}: {e})"),
            source: crate::analysis::shape_inference::ShapeError::UnknownComputation(
                crate::ComputationId::PENDING,
            ),
        })
    }
}
