//! How each [`Matcher`] of the rule table is evaluated on one instruction.
//! A match returns a detail for the finding (the type, the target, the
//! dilation found), so the report says what matched, not only which rule.

use super::index_bounds::{gather_out_of_bounds, scatter_out_of_bounds};
use super::mx_contract::violation;
use super::rules::{Matcher, TypedOp};
use super::trip_count::has_static_trip_count;
use crate::targets::neuron::native_kernel::NativeKernelConfig;
use hlatc_compiler::ir::op::{BinaryOp, RngAlgorithm};
use hlatc_compiler::{Computation, ElementType, InstrId, Module, Op, Opcode, Scalar, Shape};

/// Opcodes spelt in a constant, each checked against the op table when
/// hlatc compiles.
macro_rules! opcodes {
    ($($s:literal),* $(,)?) => {
        const { &[$(Opcode::new($s)),*] }
    };
}

/// The element types of a shape's leaves, as a bit set: the types an
/// instruction's result holds are found once and every type rule tests
/// its bits.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Types(u64);

impl Types {
    pub(super) fn of(shape: &Shape) -> Types {
        match shape {
            Shape::Array(a) | Shape::Buffer(a) => Types(1 << a.ty as u32),
            Shape::Tuple(parts) => parts
                .iter()
                .fold(Types(0), |t, s| Types(t.0 | Types::of(s).0)),
            Shape::Token => Types(0),
        }
    }

    pub(super) fn has(self, ty: ElementType) -> bool {
        self.0 & (1 << ty as u32) != 0
    }

    /// The first of `tys` this set holds.
    pub(super) fn first_of(self, tys: &[ElementType]) -> Option<ElementType> {
        tys.iter().copied().find(|&t| self.has(t))
    }
}

impl Types {
    /// The union of what every instruction of `m` holds.
    pub(super) fn of_module(m: &Module) -> Types {
        m.computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| Types::of(&c.instr(id).shape)))
            .fold(Types(0), |t, u| Types(t.0 | u.0))
    }
}

/// What a module must hold for `matcher` to match anywhere in it: one of
/// these opcodes (`None`: any), which is the opcode of the instruction it
/// matches, and one of these result types (`None`: any). Every operand is some instruction's result, so a type no
/// instruction produces is on no operand either. The check drops a rule
/// whose needs the module does not meet before it walks the
/// instructions, which keeps it at a few rules per instruction.
pub(super) fn needs(
    matcher: &'static Matcher,
) -> (Option<&'static [Opcode]>, Option<&'static [ElementType]>) {
    const S64_U64: &[ElementType] = &[ElementType::S64, ElementType::U64];
    match *matcher {
        Matcher::ElementType(tys) => (None, Some(tys)),
        Matcher::ComplexOutside(_) => (None, Some(&[ElementType::C64])),
        Matcher::DynamicShape
        | Matcher::InstructionLimit(_)
        | Matcher::IoOverHbm
        | Matcher::IoAndScratchOverHbm => (None, None),
        Matcher::Opcode(ref opcode) => (Some(std::slice::from_ref(opcode)), None),
        Matcher::CustomCallTargetNotIn(_)
        | Matcher::CustomCallTargetIn(_)
        | Matcher::NativeKernelConfigUnreadable
        | Matcher::Mx(_) => (Some(opcodes!("custom-call")), None),
        Matcher::RngAlgorithmNotDefault => (Some(opcodes!("rng-bit-generator")), None),
        Matcher::ReduceWindowVariadic
        | Matcher::ReduceWindowBaseDilation
        | Matcher::ReduceWindowWindowDilation => (Some(opcodes!("reduce-window")), None),
        Matcher::ConvolutionBothDilations | Matcher::ConvolutionStrideWithBaseDilation => {
            (Some(opcodes!("convolution")), None)
        }
        Matcher::VariadicReduce => (Some(opcodes!("reduce")), None),
        Matcher::TypedOp(op, tys) => (Some(typed_opcodes(op)), Some(tys)),
        Matcher::SortComparatorOutside(_) => (Some(opcodes!("sort")), None),
        Matcher::WhileWithoutStaticTripCount => (Some(opcodes!("while")), None),
        Matcher::GatherIotaOutOfBounds => (Some(opcodes!("gather")), None),
        Matcher::ScatterIotaOutOfBounds => (Some(opcodes!("scatter")), None),
        Matcher::Wide64BitConstant => (Some(opcodes!("constant")), Some(S64_U64)),
        Matcher::Produces64BitInteger => (None, Some(S64_U64)),
    }
}

fn typed_opcodes(op: TypedOp) -> &'static [Opcode] {
    match op {
        TypedOp::Dot => opcodes!("dot"),
        TypedOp::ScatterWithCompute => opcodes!("scatter"),
        TypedOp::AllReduce => opcodes!("all-reduce", "all-reduce-start"),
        TypedOp::ReduceScatter => opcodes!("reduce-scatter"),
        TypedOp::Power => opcodes!("power"),
        TypedOp::TopK => opcodes!("topk", "custom-call"),
        TypedOp::ShiftRightArithmetic => opcodes!("shift-right-arithmetic"),
    }
}

/// One instruction and where it is.
pub(super) struct Site<'a> {
    pub m: &'a Module,
    pub c: &'a Computation,
    pub id: InstrId,
    /// What its result holds.
    pub types: Types,
}

impl Site<'_> {
    fn op(&self) -> &Op {
        &self.c.instr(self.id).op
    }

    fn operand_types(&self, k: usize) -> Types {
        self.c
            .operand_ids(self.id)
            .get(k)
            .map_or(Types(0), |&o| Types::of(&self.c.instr(o).shape))
    }

    fn all_operand_types(&self) -> Types {
        self.c.operand_ids(self.id).iter().fold(Types(0), |t, &o| {
            Types(t.0 | Types::of(&self.c.instr(o).shape).0)
        })
    }
}

/// Whether `matcher` matches the instruction at `s`, and if so what it
/// found. The module's own matchers ([`Matcher::InstructionLimit`] and
/// the memory ones) never match an instruction.
pub(super) fn matches(matcher: &Matcher, s: &Site<'_>) -> Option<String> {
    match *matcher {
        Matcher::ElementType(tys) => s
            .types
            .first_of(tys)
            .map(|t| format!("{} result", t.name())),
        Matcher::ComplexOutside(allowed) => {
            let opcode = Opcode::of(s.op());
            let complex =
                s.types.has(ElementType::C64) || s.all_operand_types().has(ElementType::C64);
            (complex && !allowed.contains(&opcode)).then(|| format!("{opcode} on c64"))
        }
        Matcher::DynamicShape => dynamic_shape(&s.c.instr(s.id).shape),
        Matcher::Opcode(opcode) => (Opcode::of(s.op()) == opcode).then(String::new),
        Matcher::CustomCallTargetNotIn(lists) => match s.op() {
            Op::CustomCall(cc) if !lists.iter().any(|l| l.contains(&cc.target.as_str())) => {
                Some(format!("target \"{}\"", cc.target))
            }
            _ => None,
        },
        Matcher::CustomCallTargetIn(targets) => match s.op() {
            Op::CustomCall(cc) if targets.contains(&cc.target.as_str()) => {
                Some(format!("target \"{}\"", cc.target))
            }
            _ => None,
        },
        Matcher::Mx(check) => violation(check, s.c, s.id),
        Matcher::NativeKernelConfigUnreadable => match NativeKernelConfig::of(s.c.instr(s.id))? {
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        },
        Matcher::RngAlgorithmNotDefault => match s.op() {
            Op::RngBitGenerator { algorithm } if *algorithm != RngAlgorithm::Default => {
                Some(algorithm.name().to_string())
            }
            _ => None,
        },
        Matcher::ReduceWindowVariadic => match s.op() {
            Op::ReduceWindow { .. } if s.c.operand_ids(s.id).len() != 2 => {
                Some(format!("{} operands", s.c.operand_ids(s.id).len()))
            }
            _ => None,
        },
        Matcher::ReduceWindowBaseDilation => match s.op() {
            Op::ReduceWindow { window, .. } => {
                largest(window.dims.iter().map(|d| d.base_dilation), "base dilation")
            }
            _ => None,
        },
        Matcher::ReduceWindowWindowDilation => match s.op() {
            Op::ReduceWindow { window, .. } => largest(
                window.dims.iter().map(|d| d.window_dilation),
                "window dilation",
            ),
            _ => None,
        },
        Matcher::ConvolutionBothDilations => match s.op() {
            Op::Convolution { window, .. } => {
                let input = window.dims.iter().any(|d| d.base_dilation > 1);
                let kernel = window.dims.iter().any(|d| d.window_dilation > 1);
                (input && kernel).then(|| "lhs_dilate and rhs_dilate".to_string())
            }
            _ => None,
        },
        Matcher::ConvolutionStrideWithBaseDilation => match s.op() {
            Op::Convolution { window, .. } => {
                let strided = window.dims.iter().any(|d| d.stride > 1);
                let dilated = window.dims.iter().any(|d| d.base_dilation > 1);
                (strided && dilated).then(|| "stride and lhs_dilate".to_string())
            }
            _ => None,
        },
        Matcher::VariadicReduce => match s.op() {
            Op::Reduce { .. } if s.c.operand_ids(s.id).len() > 2 => {
                Some(format!("{} inputs", s.c.operand_ids(s.id).len() / 2))
            }
            _ => None,
        },
        Matcher::TypedOp(op, tys) => typed_operands(op, s)?
            .first_of(tys)
            .map(|t| format!("{} operands", t.name())),
        Matcher::SortComparatorOutside(allowed) => match s.op() {
            Op::Sort { comparator, .. } => {
                let cmp = s.m.get_computation(*comparator)?;
                cmp.ids().find_map(|i| match cmp.instr(i).op {
                    Op::Compare { direction, .. } if !allowed.contains(&direction) => {
                        Some(format!("{} in comparator {}", direction.name(), cmp.name))
                    }
                    _ => None,
                })
            }
            _ => None,
        },
        Matcher::WhileWithoutStaticTripCount => match s.op() {
            Op::While { .. } if !has_static_trip_count(s.m, s.c, s.id) => Some(String::new()),
            _ => None,
        },
        Matcher::GatherIotaOutOfBounds => gather_out_of_bounds(s.c, s.id),
        Matcher::ScatterIotaOutOfBounds => scatter_out_of_bounds(s.c, s.id),
        Matcher::Wide64BitConstant => match s.op() {
            Op::Constant(l) if matches!(l.ty(), ElementType::S64 | ElementType::U64) => {
                (0..l.element_count()).find_map(|i| match l.get(i) {
                    Scalar::Int(v) if i32::try_from(v).is_err() => Some(format!("value {v}")),
                    Scalar::UInt(v) if u32::try_from(v).is_err() => Some(format!("value {v}")),
                    _ => None,
                })
            }
            _ => None,
        },
        Matcher::Produces64BitInteger => s
            .types
            .first_of(&[ElementType::S64, ElementType::U64])
            .map(|t| format!("{} result", t.name())),
        Matcher::InstructionLimit(_) | Matcher::IoOverHbm | Matcher::IoAndScratchOverHbm => None,
    }
}

/// What the rule's op takes of the types it restricts, when `s` is that op.
fn typed_operands(op: TypedOp, s: &Site<'_>) -> Option<Types> {
    match (op, s.op()) {
        (TypedOp::Dot, Op::Dot { .. }) => Some(Types(s.operand_types(0).0 | s.operand_types(1).0)),
        (TypedOp::ScatterWithCompute, Op::Scatter { to_apply, .. })
            if combines(s.m.get_computation(*to_apply)?) =>
        {
            Some(s.operand_types(0))
        }
        (TypedOp::AllReduce, Op::AllReduce { .. } | Op::AllReduceStart { .. })
        | (TypedOp::ReduceScatter, Op::ReduceScatter { .. })
        | (TypedOp::Power, Op::Binary(BinaryOp::Power)) => Some(s.all_operand_types()),
        (TypedOp::TopK, Op::TopK { .. }) => Some(s.operand_types(0)),
        (TypedOp::TopK, Op::CustomCall(cc)) if cc.target == "AwsNeuronTopK" => {
            Some(s.operand_types(0))
        }
        (TypedOp::ShiftRightArithmetic, Op::Binary(BinaryOp::ShiftRightArithmetic)) => {
            Some(s.operand_types(0))
        }
        _ => None,
    }
}

/// Whether a scatter's update computation combines the old value with the
/// update (a scatter-with-compute) rather than returning the update: by
/// the arithmetic the SDK names, or by `and` and `or`, which are the
/// minimum and maximum of a pred.
fn combines(update: &Computation) -> bool {
    update.root().is_some_and(|r| {
        matches!(
            update.instr(r).op,
            Op::Binary(
                BinaryOp::Add
                    | BinaryOp::Multiply
                    | BinaryOp::Minimum
                    | BinaryOp::Maximum
                    | BinaryOp::And
                    | BinaryOp::Or
            )
        )
    })
}

fn dynamic_shape(shape: &Shape) -> Option<String> {
    match shape {
        Shape::Array(a) | Shape::Buffer(a) => (0..a.rank())
            .any(|i| a.is_dynamic(i))
            .then(|| format!("dimension of {} is dynamic", a.ty.name())),
        Shape::Tuple(parts) => parts.iter().find_map(dynamic_shape),
        Shape::Token => None,
    }
}

/// The largest of `values` when it is above 1, as `what N`.
fn largest(values: impl Iterator<Item = i64>, what: &str) -> Option<String> {
    values
        .max()
        .filter(|&v| v > 1)
        .map(|v| format!("{what} {v}"))
}
