//! Random modules that pass hlatc's verifier: a pool of values grows one
//! instruction at a time, each op with random operands and attributes
//! (edge cases included: zero-sized dimensions, huge strides, every
//! comparison type, mixed index types, perturbed gather and scatter
//! dimension numbers). A candidate joins only when shape inference, the
//! verifier's own rules, accepts it, so every module is well typed by
//! hlatc's definition, and the question is whether XLA agrees.

use hlatc_compiler::ir::op::*;
use hlatc_compiler::ir::window::{Window, WindowDim};
use hlatc_compiler::{
    infer_shape, verify, ArrayShape, CalleeSignature, Computation, ComputationId, ElementType,
    InstrId, Instruction, Literal, Module, Op, Scalar, Shape,
};
use hlatc_runtime::inputs::SplitMix64;

const TYPES: [ElementType; ElementType::ALL.len()] = ElementType::ALL;

pub struct ModuleGen {
    rng: SplitMix64,
    unary: Vec<UnaryOp>,
    binary: Vec<BinaryOp>,
    entry: Computation,
    reducers: Vec<Computation>,
    pool: Vec<(InstrId, ArrayShape)>,
    params: i64,
    names: usize,
}

impl ModuleGen {
    pub fn new(seed: u64) -> Self {
        ModuleGen {
            rng: SplitMix64::new(seed),
            unary: UnaryOp::all().collect(),
            binary: BinaryOp::all().collect(),
            entry: Computation::new("main"),
            reducers: Vec::new(),
            pool: Vec::new(),
            params: 0,
            names: 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.next_u64() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn name(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}.{}", self.names)
    }

    fn random_shape(&mut self, ty: ElementType) -> ArrayShape {
        let rank = self.below(4);
        let dims = (0..rank)
            .map(|_| {
                if self.chance(5) {
                    0
                } else {
                    1 + self.below(4) as i64
                }
            })
            .collect();
        ArrayShape::new(ty, dims)
    }

    fn parameter(&mut self, shape: ArrayShape) -> InstrId {
        let n = self.params;
        self.params += 1;
        let name = self.name("p");
        let id = self.entry.add(
            Instruction::new(name, Shape::Array(shape.clone()), Op::Parameter(n)),
            &[],
        );
        self.pool.push((id, shape.clone()));
        id
    }

    /// The reducers are computations 1.. of the module made (the entry is 0).
    fn lookup<'s>(&'s self) -> impl Fn(ComputationId) -> Option<(&'s str, CalleeSignature)> + 's {
        |id| {
            let c = self.reducers.get(id.index().checked_sub(1)?)?;
            Some((c.name.as_str(), c.signature()?))
        }
    }

    /// Adds `op` when shape inference accepts it; the new value joins the
    /// pool when it is an array.
    fn try_add(
        &mut self,
        op: Op,
        operands: &[InstrId],
        declared: Option<Shape>,
    ) -> Option<InstrId> {
        let shapes: Vec<&Shape> = operands
            .iter()
            .map(|&o| &self.entry.instr(o).shape)
            .collect();
        let shape = infer_shape(&op, &shapes, declared.as_ref(), &self.lookup()).ok()?;
        let name = self.name(op.opcode());
        let id = self
            .entry
            .add(Instruction::new(name, shape.clone(), op), operands);
        if let Shape::Array(a) = shape {
            self.pool.push((id, a));
        }
        Some(id)
    }

    fn value(&mut self) -> (InstrId, ArrayShape) {
        if self.pool.is_empty() || self.chance(10) {
            let ty = self.pick(&TYPES);
            let s = self.random_shape(ty);
            self.parameter(s);
        }
        let i = self.below(self.pool.len());
        self.pool[i].clone()
    }

    /// A value of exactly `shape`, from the pool or a new parameter.
    fn value_like(&mut self, shape: &ArrayShape) -> InstrId {
        let same: Vec<InstrId> = self
            .pool
            .iter()
            .filter(|(_, s)| s.same_dims_and_type(shape))
            .map(|(id, _)| *id)
            .collect();
        if same.is_empty() || self.chance(20) {
            self.parameter(shape.clone())
        } else {
            self.pick(&same)
        }
    }

    fn constant(&mut self, ty: ElementType, dims: Vec<i64>) -> Option<InstrId> {
        let n = dims.iter().product::<i64>().max(0) as usize;
        let values: Vec<Scalar> = (0..n)
            .map(|_| match ty {
                ElementType::Pred => Scalar::Bool(self.chance(50)),
                t if t.is_float() => Scalar::Float(self.rng.next_f64() * 8.0 - 4.0),
                t if t.is_unsigned_int() => Scalar::UInt(self.below(200) as u64),
                _ => Scalar::Int(self.below(200) as i64 - 100),
            })
            .collect();
        let lit = Literal::from_scalars(ty, dims.clone(), &values).ok()?;
        self.try_add(Op::Constant(lit), &[], Some(Shape::array(ty, dims)))
    }

    /// A scalar `op` computation for reductions, when `op` accepts `ty`.
    fn reducer(&mut self, op: BinaryOp, ty: ElementType) -> Option<ComputationId> {
        let name = format!("reduce_{}_{}", op.opcode(), ty.name());
        self.scalar_computation(name, ty, Op::Binary(op))
    }

    /// The computation `op(x, y)` of two scalars of `ty`, named `name`
    /// (made once), when `op` accepts them.
    fn scalar_computation(
        &mut self,
        name: String,
        ty: ElementType,
        op: Op,
    ) -> Option<ComputationId> {
        let s = Shape::scalar(ty);
        let result = infer_shape(&op, &[&s, &s], None, &|_| None).ok()?;
        if let Some(k) = self.reducers.iter().position(|c| c.name == name) {
            return Some(ComputationId::new(1 + k));
        }
        {
            let mut c = Computation::new(name.clone());
            let x = c.add(
                Instruction::new(format!("{name}.x"), s.clone(), Op::Parameter(0)),
                &[],
            );
            let y = c.add(
                Instruction::new(format!("{name}.y"), s, Op::Parameter(1)),
                &[],
            );
            let r = c.add(Instruction::new(format!("{name}.r"), result, op), &[x, y]);
            c.set_root(r);
            self.reducers.push(c);
        }
        Some(ComputationId::new(self.reducers.len()))
    }

    fn index_scalar(&mut self, ty: ElementType) -> InstrId {
        if self.chance(50) {
            self.parameter(ArrayShape::scalar(ty))
        } else {
            self.constant(ty, vec![])
                .unwrap_or_else(|| self.parameter(ArrayShape::scalar(ty)))
        }
    }

    fn index_type(&mut self) -> ElementType {
        self.pick(&[
            ElementType::S32,
            ElementType::S64,
            ElementType::U32,
            ElementType::S8,
        ])
    }

    /// One random instruction (or nothing, when the candidate was invalid).
    fn step(&mut self) {
        let (x, xs) = self.value();
        let r = xs.rank();
        match self.below(28) {
            0 => {
                let i = self.below(self.unary.len());
                let u = self.unary[i];
                self.try_add(Op::Unary(u), &[x], None);
            }
            1 => {
                let i = self.below(self.binary.len());
                let b = self.binary[i];
                let y = self.value_like(&xs);
                self.try_add(Op::Binary(b), &[x, y], None);
            }
            2 => {
                let y = self.value_like(&xs);
                let direction = self.pick(&ComparisonDirection::ALL);
                let kind = if self.chance(50) {
                    None
                } else {
                    Some(self.pick(&ComparisonType::ALL))
                };
                self.try_add(Op::Compare { direction, kind }, &[x, y], None);
            }
            3 => {
                let p = self.value_like(&ArrayShape::new(ElementType::Pred, xs.dims.clone()));
                let y = self.value_like(&xs);
                self.try_add(Op::Select, &[p, x, y], None);
            }
            4 => {
                let ty = self.pick(&TYPES);
                self.try_add(Op::Convert, &[x], Some(Shape::array(ty, xs.dims.clone())));
            }
            5 => {
                let ty = self.pick(&TYPES);
                self.try_add(
                    Op::BitcastConvert,
                    &[x],
                    Some(Shape::array(ty, xs.dims.clone())),
                );
            }
            6 => {
                let mut dims = xs.dims.clone();
                let mut mapping: Vec<i64> = (0..r as i64).collect();
                for _ in 0..self.below(3) {
                    let at = self.below(dims.len() + 1);
                    dims.insert(at, 1 + self.below(3) as i64);
                    for m in &mut mapping {
                        if *m >= at as i64 {
                            *m += 1;
                        }
                    }
                }
                self.try_add(
                    Op::Broadcast {
                        dimensions: mapping,
                    },
                    &[x],
                    Some(Shape::array(xs.ty, dims)),
                );
            }
            7 => {
                let n = xs.element_count();
                let dims = if n > 1 && n % 2 == 0 && self.chance(50) {
                    vec![2, n / 2]
                } else {
                    vec![n]
                };
                self.try_add(Op::RESHAPE, &[x], Some(Shape::array(xs.ty, dims)));
            }
            8 => {
                let mut permutation: Vec<i64> = (0..r as i64).collect();
                for i in (1..r).rev() {
                    let j = self.below(i + 1);
                    permutation.swap(i, j);
                }
                self.try_add(Op::Transpose { permutation }, &[x], None);
            }
            9 => {
                let dimensions = (0..r as i64).filter(|_| self.chance(50)).collect();
                self.try_add(Op::Reverse { dimensions }, &[x], None);
            }
            10 => {
                let slices = xs
                    .dims
                    .iter()
                    .map(|&d| {
                        let start = self.below(d as usize + 1) as i64;
                        let limit = start + self.below((d - start) as usize + 1) as i64;
                        let stride = if self.chance(5) {
                            i64::MAX
                        } else {
                            1 + self.below(3) as i64
                        };
                        SliceDim {
                            start,
                            limit,
                            stride,
                        }
                    })
                    .collect();
                self.try_add(Op::Slice { slices }, &[x], None);
            }
            11 | 12 => {
                let sizes: Vec<i64> = xs
                    .dims
                    .iter()
                    .map(|&d| self.below(d as usize + 1) as i64)
                    .collect();
                let mixed = self.chance(20);
                let first = self.index_type();
                let mut operands = vec![x];
                let update = if self.below(2) == 0 {
                    None
                } else {
                    Some(self.value_like(&ArrayShape::new(xs.ty, sizes.clone())))
                };
                operands.extend(update);
                for _ in 0..r {
                    let ty = if mixed { self.index_type() } else { first };
                    operands.push(self.index_scalar(ty));
                }
                match update {
                    None => self.try_add(Op::DynamicSlice { sizes }, &operands, None),
                    Some(_) => self.try_add(Op::DynamicUpdateSlice, &operands, None),
                };
            }
            13 if r > 0 => {
                let dimension = self.below(r) as i64;
                let y = self.value_like(&xs);
                self.try_add(Op::Concatenate { dimension }, &[x, y], None);
            }
            14 => {
                let pad_value = self.value_like(&ArrayShape::scalar(xs.ty));
                let config = (0..r)
                    .map(|_| PadDim {
                        low: self.below(4) as i64 - 1,
                        high: self.below(4) as i64 - 1,
                        interior: self.below(2) as i64,
                    })
                    .collect();
                self.try_add(Op::Pad { config }, &[x, pad_value], None);
            }
            15 if r >= 1 => {
                let k = xs.dims[r - 1];
                let n = 1 + self.below(3) as i64;
                // Now and then operands of two types, or a written result
                // type of any kind, as XLA's verifier takes them.
                let rhs_ty = if self.chance(25) {
                    self.pick(&TYPES)
                } else {
                    xs.ty
                };
                let y = self.value_like(&ArrayShape::new(rhs_ty, vec![k, n]));
                let dims = DotDims {
                    lhs_contracting: vec![r as i64 - 1],
                    rhs_contracting: vec![0],
                    ..Default::default()
                };
                let declared = (rhs_ty != xs.ty || self.chance(30)).then(|| {
                    let mut out = xs.dims[..r - 1].to_vec();
                    out.push(n);
                    Shape::array(self.pick(&TYPES), out)
                });
                self.try_add(
                    Op::Dot {
                        dims,
                        precision: vec![],
                        algorithm: Default::default(),
                    },
                    &[x, y],
                    declared,
                );
            }
            16 => {
                let op = self.pick(&[
                    BinaryOp::Add,
                    BinaryOp::Maximum,
                    BinaryOp::Minimum,
                    BinaryOp::Multiply,
                    BinaryOp::And,
                ]);
                let Some(to_apply) = self.reducer(op, xs.ty) else {
                    return;
                };
                let init = self.value_like(&ArrayShape::scalar(xs.ty));
                let dimensions = (0..r as i64).filter(|_| self.chance(50)).collect();
                self.try_add(
                    Op::Reduce {
                        dimensions,
                        to_apply,
                    },
                    &[x, init],
                    None,
                );
            }
            17 => {
                let ty = self.pick(&TYPES);
                let s = self.random_shape(ty);
                let dimension = self.below(s.rank()) as i64;
                self.try_add(Op::Iota { dimension }, &[], Some(Shape::Array(s)));
            }
            18 => {
                let ty = self.pick(&TYPES);
                let s = self.random_shape(ty);
                self.constant(ty, s.dims);
            }
            19 => self.gather(x, &xs),
            20 => self.scatter(x, &xs),
            21 => {
                let state_ty = if self.chance(80) {
                    ElementType::U64
                } else {
                    self.pick(&TYPES)
                };
                let state = ArrayShape::new(state_ty, vec![self.pick(&[2, 3, 1, 4])]);
                let s = self.parameter(state.clone());
                let bits_ty = self.pick(&[ElementType::U32, ElementType::U64, ElementType::S32]);
                let bits = self.random_shape(bits_ty);
                let algorithm = self.pick(&[
                    RngAlgorithm::Default,
                    RngAlgorithm::ThreeFry,
                    RngAlgorithm::Philox,
                ]);
                let result = Shape::Tuple(vec![Shape::Array(state), Shape::Array(bits)]);
                if let Some(t) = self.try_add(
                    Op::RngBitGenerator { algorithm },
                    &[s],
                    Some(result.clone()),
                ) {
                    let Shape::Tuple(elems) = result else {
                        unreachable!()
                    };
                    let index = self.below(2) as i64;
                    self.try_add(
                        Op::GetTupleElement { index },
                        &[t],
                        Some(elems[index as usize].clone()),
                    );
                }
            }
            22 => {
                let target = self.pick(&[
                    "TopK",
                    "Sharding",
                    "SliceToDynamic",
                    "__onednn$matmul",
                    "NoSuchTarget",
                ]);
                let result = if self.chance(50) {
                    Shape::Array(xs.clone())
                } else {
                    Shape::Array(self.random_shape(xs.ty))
                };
                let call = CustomCall {
                    target: target.to_string(),
                    api_version: CustomCallApiVersion::Original,
                    has_side_effect: false,
                    convolution: None,
                    operand_layouts: None,
                    aliasing: Vec::new(),
                    called: Vec::new(),
                    ..Default::default()
                };
                self.try_add(Op::CustomCall(call), &[x], Some(result));
            }
            23 if r > 0 => self.fft(x, &xs),
            24 if r > 0 => self.batch_norm(x, &xs),
            25 => self.windowed(x, &xs),
            26 if r > 0 => self.dynamic_dimension(x, &xs),
            _ => {
                let lo = self.value_like(&xs);
                let hi = self.value_like(&xs);
                self.try_add(Op::Clamp, &[lo, x, hi], None);
            }
        }
    }

    /// One of the batch normalizations over a random feature dimension
    /// (now and then one past the last), with per-feature vectors of the
    /// operand's type.
    fn batch_norm(&mut self, x: InstrId, xs: &ArrayShape) {
        let r = xs.rank();
        let past_the_last = usize::from(self.chance(10));
        let feature_index = self.below(r + past_the_last) as i64;
        let features = xs.dims.get(feature_index as usize).copied().unwrap_or(1);
        let vector = ArrayShape::new(xs.ty, vec![features]);
        let kind = self.pick(&BatchNormKind::ALL);
        let mut operands = vec![x];
        let vectors = match kind {
            BatchNormKind::Training => 2,
            BatchNormKind::Inference => 4,
            BatchNormKind::Grad => 3,
        };
        for _ in 0..vectors {
            operands.push(self.value_like(&vector));
        }
        if kind == BatchNormKind::Grad {
            operands.push(self.value_like(xs));
        }
        let epsilon = F32Bits::new(self.pick(&[0.0, 1e-5, 0.5]));
        if let Some(t) = self.try_add(
            Op::BatchNorm {
                kind,
                epsilon,
                feature_index,
            },
            &operands,
            None,
        ) {
            if kind != BatchNormKind::Inference {
                let index = self.below(3) as i64;
                self.try_add(Op::GetTupleElement { index }, &[t], None);
            }
        }
    }

    /// A `reduce-window` or `select-and-scatter` (a max pool's gradient)
    /// over a random window: sizes 1 to 3, strides 1 to 3, padding 0 or 1.
    fn windowed(&mut self, x: InstrId, xs: &ArrayShape) {
        let dims = (0..xs.rank())
            .map(|_| WindowDim {
                stride: 1 + self.below(3) as i64,
                padding_low: self.below(2) as i64,
                padding_high: self.below(2) as i64,
                ..WindowDim::of_size(1 + self.below(3) as i64)
            })
            .collect();
        let window = Window { dims };
        let init = self.value_like(&ArrayShape::scalar(xs.ty));
        let Some(scatter) = self.reducer(BinaryOp::Add, xs.ty) else {
            return;
        };
        if self.chance(50) {
            self.try_add(
                Op::ReduceWindow {
                    window,
                    to_apply: scatter,
                },
                &[x, init],
                None,
            );
            return;
        }
        let Ok(windows) = window.output_dims(&xs.dims) else {
            return;
        };
        let source = self.value_like(&ArrayShape::new(xs.ty, windows));
        let Some(select) = self.comparator(xs.ty) else {
            return;
        };
        self.try_add(
            Op::SelectAndScatter {
                window,
                select,
                scatter,
            },
            &[x, source, init],
            None,
        );
    }

    /// A scalar `>=` computation over `ty`, for select-and-scatter, when
    /// `ty` has an order.
    /// A dimension made dynamic with any s32 size (in range or not: the
    /// inputs are random), read back and reduced over. The dynamic value
    /// stays inside the module, which runs only with a static boundary.
    fn dynamic_dimension(&mut self, x: InstrId, xs: &ArrayShape) {
        let d = self.below(xs.rank());
        let size = self.index_scalar(ElementType::S32);
        let Some(dynamic) = self.try_add(
            Op::SetDimensionSize {
                dimension: d as i64,
            },
            &[x, size],
            None,
        ) else {
            return;
        };
        self.pool.retain(|(id, _)| *id != dynamic);
        self.try_add(
            Op::GetDimensionSize {
                dimension: d as i64,
            },
            &[dynamic],
            None,
        );
        let op = self.pick(&[BinaryOp::Add, BinaryOp::Maximum, BinaryOp::Multiply]);
        if let Some(to_apply) = self.reducer(op, xs.ty) {
            let init = self.value_like(&ArrayShape::scalar(xs.ty));
            self.try_add(
                Op::Reduce {
                    dimensions: vec![d as i64],
                    to_apply,
                },
                &[dynamic, init],
                None,
            );
        }
    }

    fn comparator(&mut self, ty: ElementType) -> Option<ComputationId> {
        let compare = Op::Compare {
            direction: ComparisonDirection::Ge,
            kind: None,
        };
        self.scalar_computation(format!("select_ge_{}", ty.name()), ty, compare)
    }

    /// An `fft` of 1 to 3 innermost dimensions, of a complex value (a
    /// real one converted to c64 first) or, for RFFT, a real one; its
    /// lengths now and then perturbed, zeros included.
    fn fft(&mut self, x: InstrId, xs: &ArrayShape) {
        let r = xs.rank();
        let rank = 1 + self.below(r.min(3));
        let mut length: Vec<i64> = xs.dims[r - rank..].to_vec();
        if self.chance(25) {
            let i = self.below(rank);
            length[i] = self.below(5) as i64;
        }
        let fft_type = self.pick(&[FftType::Fft, FftType::Ifft, FftType::Rfft, FftType::Irfft]);
        let input = if fft_type == FftType::Rfft || xs.ty.is_complex() {
            x
        } else {
            let c64 = Shape::array(ElementType::C64, xs.dims.clone());
            match self.try_add(Op::Convert, &[x], Some(c64)) {
                Some(id) => id,
                None => return,
            }
        };
        // IRFFT reads n/2 + 1 frequencies of a length-n signal.
        if fft_type == FftType::Irfft {
            if let Some(last) = length.last_mut() {
                *last = (*last - 1).max(0) * 2;
            }
        }
        self.try_add(
            Op::Fft {
                fft_type,
                fft_length: length,
            },
            &[input],
            None,
        );
    }

    /// An embedding-style gather (`table[ids]`), with one field perturbed
    /// now and then.
    fn gather(&mut self, table: InstrId, ts: &ArrayShape) {
        if ts.rank() != 2 {
            return;
        }
        let ity = self.index_type();
        let n = 1 + self.below(3) as i64;
        let ids = self.parameter(ArrayShape::new(ity, vec![n]));
        let mut dims = GatherDims {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let mut slice_sizes = vec![1, ts.dims[1]];
        match self.below(8) {
            0 => dims.offset_dims = vec![self.below(3) as i64],
            1 => dims.collapsed_slice_dims = vec![1],
            2 => dims.start_index_map = vec![0, 1],
            3 => dims.index_vector_dim = self.below(3) as i64,
            4 => slice_sizes[0] = ts.dims[0],
            5 => dims.operand_batching_dims = vec![1],
            _ => {}
        }
        let op = Op::Gather {
            dims,
            slice_sizes,
            indices_are_sorted: self.chance(20),
        };
        self.try_add(op, &[table, ids], None);
    }

    /// `table[ids] += updates`, perturbed like `gather`.
    fn scatter(&mut self, table: InstrId, ts: &ArrayShape) {
        if ts.rank() != 2 {
            return;
        }
        let ity = self.index_type();
        let n = 1 + self.below(3) as i64;
        let ids = self.parameter(ArrayShape::new(ity, vec![n, 1]));
        let updates = self.value_like(&ArrayShape::new(ts.ty, vec![n, ts.dims[1]]));
        let Some(to_apply) = self.reducer(BinaryOp::Add, ts.ty) else {
            return;
        };
        let mut dims = ScatterDims {
            update_window_dims: vec![1],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        match self.below(8) {
            0 => dims.update_window_dims = vec![0],
            1 => dims.inserted_window_dims = vec![1],
            2 => dims.scatter_dims_to_operand_dims = vec![1],
            3 => dims.index_vector_dim = self.below(3) as i64,
            4 => dims.scatter_dims_to_operand_dims = vec![0, 0],
            5 => dims.input_batching_dims = vec![1],
            _ => {}
        }
        let op = Op::Scatter {
            dims,
            to_apply,
            indices_are_sorted: false,
            unique_indices: self.chance(20),
        };
        self.try_add(op, &[table, ids, updates], None);
    }

    /// A module of about `size` instructions whose result is a tuple of up
    /// to four values, or the verifier's error with the module's text (by
    /// construction that should not happen).
    pub fn module(mut self, size: usize) -> Result<Module, String> {
        for _ in 0..size {
            self.step();
        }
        if self.pool.is_empty() {
            self.value();
        }
        let k = 1 + self.below(4.min(self.pool.len()));
        let outs: Vec<InstrId> = (0..k).map(|_| self.value().0).collect();
        let shapes = outs
            .iter()
            .map(|&o| self.entry.instr(o).shape.clone())
            .collect();
        let name = self.name("result");
        let root = self.entry.add(
            Instruction::new(name, Shape::Tuple(shapes), Op::Tuple),
            &outs,
        );
        self.entry.set_root(root);
        let mut m = Module::new("fuzz", self.entry);
        for c in self.reducers {
            m.add_computation(c);
        }
        match verify(&m) {
            Ok(()) => Ok(m),
            Err(e) => Err(format!(
                "{e}:\n{}",
                hlatc_compiler::formats::text::print_module(&m)
            )),
        }
    }
}
