//! The order of an attention tensor's four dimensions in a kernel brought
//! from another stack, and the wrapper that lets the step call the kernel
//! in its own order, `[batch, heads, seq, head_dim]`, whatever the kernel's.

use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::{ArrayShape, InstrId, Module, Op, Shape};

/// The dimensions' names, in the step's order.
const NAMES: [&str; 4] = ["batch", "heads", "seq", "head_dim"];

/// Why a layout cannot be read, or a kernel not wrapped in it.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("'{text}': '{name}' is not a dimension (the four are batch, heads, seq, head_dim)")]
    UnknownDimension { text: String, name: String },
    #[error("'{text}': each of batch, heads, seq, head_dim once, in any order")]
    NotEachOnce { text: String },
    #[error("{what} is {shape}, where layout {layout} needs four dimensions")]
    NotFourDimensions {
        /// `parameter NAME`, or `a result`.
        what: String,
        shape: String,
        layout: String,
    },
    #[error("the wrapper around the kernel: {0}")]
    Build(#[from] hlatc_compiler::graph::builder::BuildError),
    #[error("the kernel as a callee: {0}")]
    Import(#[from] hlatc_compiler::graph::builder::ImportError),
}

/// A kernel tensor's dimensions, as indices into the step's
/// `[batch, heads, seq, head_dim]`: `[0, 1, 3, 2]` is
/// `batch,heads,head_dim,seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorLayout([usize; 4]);

impl TensorLayout {
    /// The step's own order.
    pub const STANDARD: TensorLayout = TensorLayout([0, 1, 2, 3]);

    /// `batch,heads,seq,head_dim` or another order of the four names.
    pub fn parse(text: &str) -> Result<TensorLayout, LayoutError> {
        let names: Vec<&str> = text.split(',').map(str::trim).collect();
        let mut order = [0; 4];
        let mut seen = [false; 4];
        let not_each_once = || LayoutError::NotEachOnce {
            text: text.to_string(),
        };
        for (i, name) in names.iter().enumerate() {
            let k = NAMES.iter().position(|n| n == name).ok_or_else(|| {
                LayoutError::UnknownDimension {
                    text: text.to_string(),
                    name: name.to_string(),
                }
            })?;
            if i >= 4 || seen[k] {
                return Err(not_each_once());
            }
            seen[k] = true;
            order[i] = k;
        }
        if names.len() != 4 {
            return Err(not_each_once());
        }
        Ok(TensorLayout(order))
    }

    /// `shape` (in the step's order) in this layout.
    pub fn arrange(&self, shape: &ArrayShape) -> ArrayShape {
        let dims = self.0.iter().map(|&k| shape.dims[k]).collect();
        ArrayShape::new(shape.ty, dims)
    }

    /// A shape in this layout, in the step's order.
    fn arrange_back(&self, shape: &ArrayShape) -> ArrayShape {
        let mut dims = vec![0; 4];
        for (i, &k) in self.0.iter().enumerate() {
            dims[k] = shape.dims[i];
        }
        ArrayShape::new(shape.ty, dims)
    }

    /// The transpose from the step's order to this one.
    fn out_of_step_order(self) -> [i64; 4] {
        self.0.map(|k| k as i64)
    }

    /// The transpose from this order back to the step's.
    fn into_step_order(self) -> [i64; 4] {
        let mut back = [0; 4];
        for (i, &k) in self.0.iter().enumerate() {
            back[k] = i as i64;
        }
        back
    }

    /// The layout as a convention writes it.
    pub fn spelled(&self) -> String {
        self.0.map(|k| NAMES[k]).join(",")
    }
}

/// `module` as the step calls it: parameters and results in the step's
/// order, transposed to and from each one's layout around a call of the
/// module. The module itself where every layout is the step's.
pub fn standard_form(
    module: &Module,
    parameters: &[Option<TensorLayout>],
    results: &[Option<TensorLayout>],
) -> Result<Module, LayoutError> {
    let moved = |l: &Option<TensorLayout>| l.is_some_and(|l| l != TensorLayout::STANDARD);
    if !parameters.iter().chain(results).any(moved) {
        return Ok(module.clone());
    }
    let name = format!("{}_in_step_layout", module.name);
    let mut b = Builder::new(&name);
    let entry = module.entry();
    let mut operands = Vec::new();
    for (&p, layout) in entry.parameters().iter().zip(parameters) {
        let shape = &entry.instr(p).shape;
        let x = match (layout, shape.as_array()) {
            (Some(l), Some(a)) if a.rank() == 4 => {
                let standard = l.arrange_back(a);
                let x = b.parameter(&entry.instr(p).name, Shape::Array(standard));
                b.transpose(x, &l.out_of_step_order())?
            }
            (Some(l), _) => {
                return Err(LayoutError::NotFourDimensions {
                    what: format!("parameter {}", entry.instr(p).name),
                    shape: shape.to_string(),
                    layout: l.spelled(),
                })
            }
            (None, _) => b.parameter(&entry.instr(p).name, shape.clone()),
        };
        operands.push(x);
    }
    let callee = b.import(module.clone())?;
    let call = Op::Call {
        to_apply: callee,
        is_composite: false,
    };
    let result = b.add_fresh(call, &operands)?;
    let outputs: Vec<InstrId> = match b.shape(result).is_tuple() {
        false => vec![result],
        true => (0..results.len())
            .map(|i| b.add(Op::GetTupleElement { index: i as i64 }, &[result], None))
            .collect::<Result<_, _>>()?,
    };
    let mut back = Vec::new();
    for (&y, layout) in outputs.iter().zip(results) {
        back.push(match layout {
            Some(l) if b.shape(y).as_array().is_some_and(|a| a.rank() == 4) => {
                b.transpose(y, &l.into_step_order())?
            }
            Some(l) => {
                return Err(LayoutError::NotFourDimensions {
                    what: "a result".to_string(),
                    shape: b.shape(y).to_string(),
                    layout: l.spelled(),
                })
            }
            None => y,
        });
    }
    let root = match back.as_slice() {
        [one] if outputs.len() == 1 && !b.shape(result).is_tuple() => *one,
        _ => b.add(Op::Tuple, &back, None)?,
    };
    Ok(b.into_module(&name, root))
}
