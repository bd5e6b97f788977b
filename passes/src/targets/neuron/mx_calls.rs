//! The MX custom calls in the form neuronx-cc takes them (Trainium3), and
//! what they compute on XLA CPU. `amp` writes a quantized dot this way for
//! `neuron`; `lower-neuron-calls` maps the calls back to plain HLO of the
//! same numbers, so `--verify` runs the Neuron step's numerics. The calls'
//! form lives here and only here; the pre-flight's contract checks
//! (`preflight::mx_contract`) read it.
//!
//! The form, from the SDK's error pages NCC_EVRF036 to EVRF058:
//! - `QuantizeMX` takes one bf16 (or f16) operand and returns the tuple
//!   (data, scales). The data is u32, four 8-bit values packed in each,
//!   the input's shape with the quantized dimension divided by four. Its
//!   `backend_config` is `{"dtype", "dim", "block_size": 32,
//!   "scale_method": "EMAX"}`, and `dim` must be the last dimension or
//!   the one before it.
//! - `__op$block_scaled_dot` takes (lhs, rhs, lhs scales, rhs scales) and
//!   returns f32 or bf16; its `backend_config` holds
//!   `scaled_dot_backend_config` with XLA's four dimension lists and the
//!   element dtype.
//!
//! Not documented, chosen here:
//! - **The scales' HLO type and shape** ([`SCALE_TYPE`]): u8 holding the
//!   E8M0 code, one per block, the input's shape with the quantized
//!   dimension divided by 32. NKI's `quantize_mx` keeps its scales as
//!   `float8_e8m0fnu`, but neuronx-cc refuses that type in HLO (NCC_ESPP047
//!   lists only f8e4m3 and f8e5m2 among 8-bit floats), and a u8 carries the
//!   same bits.
//! - **The order of the four values in a u32** is neuronx-cc's own. The
//!   references below put a group's first value in the lowest byte; they
//!   read back only what they wrote, so the lowered module computes the
//!   values the blocks hold whatever neuronx-cc's order is.
//! - **The scaled dot's result order** is XLA's `dot`'s: batch dimensions,
//!   then lhs's free ones, then rhs's.

use crate::infra::mx_blocks::{dequantize, quantize, Blocks, MxFormat};
use crate::infra::pass::MxCallProblem;
use crate::infra::rewriter::{RewriteError, Rewriter};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{CustomCall, CustomCallApiVersion, DotDims};
use hlatc_compiler::{
    ArrayShape, Computation, ElementType, InstrId, Instruction, Module, Op, Shape,
};
use serde_json::Value;

/// The MX custom-call targets.
pub const QUANTIZE_MX: &str = "QuantizeMX";
pub const BLOCK_SCALED_DOT: &str = "__op$block_scaled_dot";
pub const MX_CUSTOM_CALLS: &[&str] = &[QUANTIZE_MX, BLOCK_SCALED_DOT];

/// The packed data's type, and how many 8-bit values each holds.
pub const PACKED_TYPE: ElementType = ElementType::U32;
pub const VALUES_PER_WORD: i64 = 4;
/// The scales' HLO type (see the module's documentation for why).
pub const SCALE_TYPE: ElementType = ElementType::U8;

/// The formats hlatc computes, by their `dtype` names: E4M3 alone, the
/// one its reference is checked against (`QuantizeMX` also writes
/// `float8_e5m2`, which lowering refuses by name).
const DTYPES: [(&str, MxFormat); 1] = [("float8_e4m3fn", MxFormat::E4M3)];

/// `format`'s `dtype` name.
pub fn dtype_name(format: MxFormat) -> &'static str {
    DTYPES
        .iter()
        .find(|(_, f)| *f == format)
        .map_or("", |(name, _)| name)
}

/// The format a `dtype` names, if `QuantizeMX` writes it.
pub fn format_named(dtype: &str) -> Option<MxFormat> {
    DTYPES.iter().find(|(n, _)| *n == dtype).map(|(_, f)| *f)
}

// Why a config cannot be read is a pass failure's case, so it is defined
// beside `PassError`, which `infra` keeps free of any pass.
pub use crate::infra::pass::MxConfigError;

/// A `backend_config` read as a JSON object.
pub fn config_object(text: &str) -> Result<serde_json::Map<String, Value>, MxConfigError> {
    let text = text.trim();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(MxConfigError::NotObject),
        Err(_) if text.is_empty() => Err(MxConfigError::Empty),
        Err(e) => Err(MxConfigError::NotJson(e.to_string())),
    }
}

/// What a `QuantizeMX` call's `backend_config` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuantizeConfig {
    pub format: MxFormat,
    /// The quantized dimension, within the input's rank.
    pub dim: i64,
}

impl QuantizeConfig {
    /// The `backend_config` text (keys in the order the SDK's pages list
    /// them).
    pub fn text(&self) -> String {
        format!(
            r#"{{"dtype": "{}", "dim": {}, "block_size": {}, "scale_method": "EMAX"}}"#,
            dtype_name(self.format),
            self.dim,
            self.format.block
        )
    }

    /// The config of `instr` when it is a `QuantizeMX` call of an input of
    /// `rank` dimensions; an error where hlatc cannot compute it (the
    /// pre-flight says which contract it breaks).
    pub fn of(instr: &Instruction, rank: usize) -> Option<Result<QuantizeConfig, MxCallProblem>> {
        match &instr.op {
            Op::CustomCall(cc) if cc.target == QUANTIZE_MX => {
                Some(QuantizeConfig::read(&instr.backend_config, rank))
            }
            _ => None,
        }
    }

    fn read(text: &str, rank: usize) -> Result<QuantizeConfig, MxCallProblem> {
        QuantizeConfig::parse(text, rank).map_err(|problem| MxCallProblem::Config {
            target: QUANTIZE_MX,
            problem,
        })
    }

    fn parse(text: &str, rank: usize) -> Result<QuantizeConfig, MxConfigError> {
        let config = config_object(text)?;
        let field = |field, v: Option<&Value>| MxConfigError::Field {
            field,
            value: v.map_or("missing".to_string(), Value::to_string),
        };
        let format = match config.get("dtype") {
            Some(Value::String(d)) => format_named(d).ok_or_else(|| MxConfigError::Uncomputed {
                dtype: d.clone(),
                computed: DTYPES.map(|(name, _)| name).join(", "),
            })?,
            other => return Err(field("dtype", other)),
        };
        let dim = match config.get("dim") {
            None => 0,
            Some(v) => v.as_i64().ok_or_else(|| field("dim", Some(v)))?,
        };
        let dim = if dim < 0 { dim + rank as i64 } else { dim };
        if !(0..rank as i64).contains(&dim) {
            return Err(MxConfigError::Dim { dim, rank });
        }
        if let Some(v) = config.get("block_size") {
            if v.as_i64() != Some(format.block) {
                return Err(field("block_size", Some(v)));
            }
        }
        if let Some(v) = config.get("scale_method") {
            if v.as_str() != Some("EMAX") {
                return Err(field("scale_method", Some(v)));
            }
        }
        Ok(QuantizeConfig { format, dim })
    }
}

/// What a `__op$block_scaled_dot` call's `backend_config` says: its
/// dimension lists (each empty where not given) and element dtype.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScaledDotConfig {
    pub dims: DotDims,
    /// `element_dtype`, where it is given.
    pub element: Option<String>,
}

impl ScaledDotConfig {
    /// The `backend_config` text.
    pub fn text(&self) -> String {
        let list = |l: &[i64]| {
            let items: Vec<String> = l.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(", "))
        };
        let d = &self.dims;
        let element = self
            .element
            .as_ref()
            .map_or(String::new(), |e| format!(r#", "element_dtype": "{e}""#));
        format!(
            r#"{{"scaled_dot_backend_config": {{"lhs_batch_dimensions": {}, "rhs_batch_dimensions": {}, "lhs_contracting_dimensions": {}, "rhs_contracting_dimensions": {}{element}}}}}"#,
            list(&d.lhs_batch),
            list(&d.rhs_batch),
            list(&d.lhs_contracting),
            list(&d.rhs_contracting),
        )
    }

    /// Reads a `backend_config` as neuronx-cc does (EVRF049): empty,
    /// `None`, or JSON whose dimension lists hold integers; `Err` says
    /// what it could not read.
    pub fn read(text: &str) -> Result<ScaledDotConfig, MxConfigError> {
        let text = text.trim();
        let mut out = ScaledDotConfig::default();
        if text.is_empty() || text == "None" {
            return Ok(out);
        }
        let v: Value =
            serde_json::from_str(text).map_err(|e| MxConfigError::NotJson(e.to_string()))?;
        let Some(config) = v.get("scaled_dot_backend_config") else {
            return Ok(out);
        };
        let list = |name: &'static str| -> Result<Vec<i64>, MxConfigError> {
            match config.get(name) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| {
                        i.as_i64().ok_or_else(|| MxConfigError::Item {
                            field: name,
                            item: i.to_string(),
                        })
                    })
                    .collect(),
                Some(other) => Err(MxConfigError::Field {
                    field: name,
                    value: other.to_string(),
                }),
            }
        };
        out.dims.lhs_batch = list("lhs_batch_dimensions")?;
        out.dims.rhs_batch = list("rhs_batch_dimensions")?;
        out.dims.lhs_contracting = list("lhs_contracting_dimensions")?;
        out.dims.rhs_contracting = list("rhs_contracting_dimensions")?;
        out.element = match config.get("element_dtype") {
            None => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(MxConfigError::Field {
                    field: "element_dtype",
                    value: other.to_string(),
                })
            }
        };
        Ok(out)
    }

    /// The dimension numbers as neuronx-cc reads them for operands of
    /// `ranks` (lhs, rhs): a side listing no contracting dimension
    /// contracts its last.
    pub fn dims_as_read(&self, ranks: [usize; 2]) -> DotDims {
        let mut dims = self.dims.clone();
        for (listed, rank) in [&mut dims.lhs_contracting, &mut dims.rhs_contracting]
            .into_iter()
            .zip(ranks)
        {
            if listed.is_empty() {
                listed.push(rank as i64 - 1);
            }
        }
        dims
    }

    /// The dimension neuronx-cc contracts of an operand of `rank`
    /// dimensions: the first listed, else the last.
    pub fn contracted(listed: &[i64], rank: usize) -> i64 {
        listed.first().copied().unwrap_or(rank as i64 - 1)
    }
}

/// `dims` with dimension `dim` divided by `by`.
fn divided(dims: &[i64], dim: usize, by: i64) -> Vec<i64> {
    let mut d = dims.to_vec();
    d[dim] /= by;
    d
}

fn custom_call(target: &str) -> Op {
    Op::CustomCall(CustomCall {
        target: target.to_string(),
        api_version: CustomCallApiVersion::Original,
        ..Default::default()
    })
}

/// Rewrites `dot` (bf16 operands, an f32 or bf16 result) as
/// `__op$block_scaled_dot` of its operands quantized by `QuantizeMX` along
/// `axes` (each operand's one contracting dimension, a whole number of
/// `format`'s blocks). An operand contracted neither on its last dimension
/// nor on the one before it is transposed first, its contracting dimension
/// moved last (EVRF038). Returns the scaled dot; `dot` is left for the
/// caller's sweep. The rewriter's provenance applies to all it adds.
pub fn write_scaled_dot(
    r: &mut Rewriter<'_>,
    dot: InstrId,
    axes: [i64; 2],
    format: MxFormat,
) -> Result<InstrId, RewriteError> {
    let Op::Dot { dims, .. } = r.comp().instr(dot).op.clone() else {
        return Ok(dot);
    };
    let operands = [r.comp().operand_ids(dot)[0], r.comp().operand_ids(dot)[1]];
    let mut batches = [dims.lhs_batch.clone(), dims.rhs_batch.clone()];
    let mut contracting = [0i64; 2];
    let mut quantized = [(dot, dot); 2];
    for side in 0..2 {
        let (x, axis) = quantizable(r, operands[side], axes[side], &mut batches[side])?;
        contracting[side] = axis;
        quantized[side] = write_quantize(r, x, QuantizeConfig { format, dim: axis })?;
    }
    let config = ScaledDotConfig {
        dims: DotDims {
            lhs_batch: batches[0].clone(),
            rhs_batch: batches[1].clone(),
            lhs_contracting: vec![contracting[0]],
            rhs_contracting: vec![contracting[1]],
        },
        element: Some(dtype_name(format).to_string()),
    };
    let shape = r.shape(dot).clone();
    r.set_backend_config(config.text());
    let [(ld, ls), (rd, rs)] = quantized;
    let call = r.add_named(
        "block_scaled_dot",
        custom_call(BLOCK_SCALED_DOT),
        &[ld, rd, ls, rs],
        Some(shape),
    );
    r.set_backend_config(String::new());
    call
}

/// `x`, contracted on `axis`, in a form `QuantizeMX` takes (the axis last
/// or the one before it): as it is, or transposed with `axis` moved last
/// (`batch`, its batch dimensions, renumbered to match). The operand and
/// its contracting dimension.
fn quantizable(
    r: &mut Rewriter<'_>,
    x: InstrId,
    axis: i64,
    batch: &mut [i64],
) -> Result<(InstrId, i64), RewriteError> {
    let rank = r.shape(x).array_dims().len() as i64;
    if axis >= rank - 2 {
        return Ok((x, axis));
    }
    let mut permutation: Vec<i64> = (0..rank).filter(|&d| d != axis).collect();
    permutation.push(axis);
    for b in batch.iter_mut() {
        *b -= i64::from(*b > axis);
    }
    let moved = r.add(Op::Transpose { permutation }, &[x], None)?;
    Ok((moved, rank - 1))
}

/// What `QuantizeMX` of `input` by `config` returns, (data, scales);
/// `None` where the quantized dimension is not a whole number of blocks.
pub fn quantized_shape(input: &ArrayShape, config: QuantizeConfig) -> Option<Shape> {
    let dim = config.dim as usize;
    let extent = *input.dims.get(dim)?;
    config.format.blocks(extent).then(|| {
        Shape::Tuple(vec![
            Shape::array(PACKED_TYPE, divided(&input.dims, dim, VALUES_PER_WORD)),
            Shape::array(SCALE_TYPE, divided(&input.dims, dim, config.format.block)),
        ])
    })
}

/// `QuantizeMX` of `x` by `config`: (data, scales). `x`'s quantized
/// dimension is a whole number of blocks.
fn write_quantize(
    r: &mut Rewriter<'_>,
    x: InstrId,
    config: QuantizeConfig,
) -> Result<(InstrId, InstrId), RewriteError> {
    let shape = r
        .shape(x)
        .as_array()
        .and_then(|input| quantized_shape(input, config));
    r.set_backend_config(config.text());
    let call = r.add_named("quantize_mx", custom_call(QUANTIZE_MX), &[x], shape);
    r.set_backend_config(String::new());
    let call = call?;
    let data = r.add(Op::GetTupleElement { index: 0 }, &[call], None)?;
    let scales = r.add(Op::GetTupleElement { index: 1 }, &[call], None)?;
    Ok((data, scales))
}

/// A module whose entry computes `QuantizeMX` of an `input` by `config`
/// on XLA CPU: the blocks of `infra::mx_blocks`, their values packed four
/// to a u32 (the first in the lowest byte) and their codes as u8.
pub fn quantize_reference(
    input: &ArrayShape,
    config: QuantizeConfig,
) -> Result<Module, BuildError> {
    let mut b = Builder::new("quantize_mx_reference");
    let x = b.parameter("x", Shape::Array(input.clone()));
    let blocks = quantize(&mut b, x, config.dim, config.format)?;
    let dim = config.dim as usize;
    let values = b.reshape(blocks.elements, &input.dims)?;
    let data = pack(&mut b, values, dim)?;
    let scales = b.convert(blocks.codes, SCALE_TYPE)?;
    let root = b.add(Op::Tuple, &[data, scales], None)?;
    Ok(b.into_module("quantize_mx_reference", root))
}

/// 8-bit `values` packed four to a u32 along `dim`: each group of four
/// consecutive values moved to a last dimension and bitcast.
fn pack(b: &mut Builder, values: InstrId, dim: usize) -> Result<InstrId, BuildError> {
    let dims = b.dims(values);
    let mut grouped = divided(&dims, dim, VALUES_PER_WORD);
    grouped.insert(dim + 1, VALUES_PER_WORD);
    let grouped = b.reshape(values, &grouped)?;
    let rank = grouped_rank(&dims);
    let mut last: Vec<i64> = (0..rank).filter(|&d| d != dim as i64 + 1).collect();
    last.push(dim as i64 + 1);
    let grouped = b.transpose(grouped, &last)?;
    let packed_dims = divided(&dims, dim, VALUES_PER_WORD);
    b.add(
        Op::BitcastConvert,
        &[grouped],
        Some(Shape::array(PACKED_TYPE, packed_dims)),
    )
}

/// [`pack`] undone: the `format` values a packed `data` holds along `dim`.
fn unpack(
    b: &mut Builder,
    data: InstrId,
    dim: usize,
    format: MxFormat,
) -> Result<InstrId, BuildError> {
    let packed = b.dims(data);
    let mut split = packed.clone();
    split.push(VALUES_PER_WORD);
    let values = b.add(
        Op::BitcastConvert,
        &[data],
        Some(Shape::array(format.element, split)),
    )?;
    // The group's dimension, last, back after `dim`.
    let rank = grouped_rank(&packed);
    let mut back: Vec<i64> = (0..rank - 1).collect();
    back.insert(dim + 1, rank - 1);
    let values = b.transpose(values, &back)?;
    let mut dims = packed;
    dims[dim] *= VALUES_PER_WORD;
    b.reshape(values, &dims)
}

/// The rank of `dims` with one dimension split in two.
fn grouped_rank(dims: &[i64]) -> i64 {
    dims.len() as i64 + 1
}

/// The operands a `__op$block_scaled_dot` reference reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScaledDotShapes {
    /// lhs, rhs (packed), lhs scales, rhs scales.
    pub operands: [ArrayShape; 4],
    /// Each side's element format.
    pub formats: [MxFormat; 2],
    pub result: ArrayShape,
}

/// A module whose entry computes `__op$block_scaled_dot` on XLA CPU: each
/// side unpacked and read back from its blocks along its contracting
/// dimension (`dims`, one a side), then XLA's `dot` of the two in f32.
pub fn scaled_dot_reference(
    shapes: &ScaledDotShapes,
    dims: &DotDims,
) -> Result<Module, BuildError> {
    let mut b = Builder::new("block_scaled_dot_reference");
    let p: Vec<InstrId> = ["lhs", "rhs", "lhs_scales", "rhs_scales"]
        .iter()
        .zip(&shapes.operands)
        .map(|(name, s)| b.parameter(name, Shape::Array(s.clone())))
        .collect();
    let mut values = [p[0]; 2];
    for side in 0..2 {
        let listed = [&dims.lhs_contracting, &dims.rhs_contracting][side];
        let dim = ScaledDotConfig::contracted(listed, shapes.operands[side].rank());
        let format = shapes.formats[side];
        let elements = unpack(&mut b, p[side], dim as usize, format)?;
        let whole = b.dims(elements);
        let mut split = divided(&whole, dim as usize, format.block);
        split.insert(dim as usize + 1, format.block);
        let elements = b.reshape(elements, &split)?;
        let codes = b.convert(p[side + 2], ElementType::S32)?;
        values[side] = dequantize(&mut b, Blocks { elements, codes }, dim, &whole)?;
    }
    let product = b.dot(values[0], values[1], dims.clone())?;
    let product = b.convert_unless_same(product, shapes.result.ty)?;
    Ok(b.into_module("block_scaled_dot_reference", product))
}

/// The `__op$block_scaled_dot` call `id` of `c` as a dot's dimension
/// numbers (the contracting ones filled in as neuronx-cc reads them) and
/// its packed operands' dimensions; `None` where `id` is not one or
/// neuronx-cc could not read it.
pub fn scaled_dot_packed(c: &Computation, id: InstrId) -> Option<(DotDims, [Vec<i64>; 2])> {
    let instr = c.instr(id);
    let Op::CustomCall(cc) = &instr.op else {
        return None;
    };
    if cc.target != BLOCK_SCALED_DOT {
        return None;
    }
    let config = ScaledDotConfig::read(&instr.backend_config).ok()?;
    let operands = c.operand_ids(id);
    let dims_of = |side: usize| -> Option<Vec<i64>> {
        Some(c.instr(*operands.get(side)?).shape.as_array()?.dims.clone())
    };
    let packed = [dims_of(0)?, dims_of(1)?];
    let dims = config.dims_as_read([packed[0].len(), packed[1].len()]);
    for (d, listed) in packed
        .iter()
        .zip([&dims.lhs_contracting, &dims.rhs_contracting])
    {
        if listed
            .iter()
            .any(|&k| usize::try_from(k).ok().and_then(|k| d.get(k)).is_none())
        {
            return None;
        }
    }
    Some((dims, packed))
}

/// What the `__op$block_scaled_dot` call `id` of `c` multiplies:
/// [`scaled_dot_packed`] with each contracting dimension
/// [`VALUES_PER_WORD`] times its packed extent.
pub fn scaled_dot_operands(c: &Computation, id: InstrId) -> Option<(DotDims, [Vec<i64>; 2])> {
    let (dims, mut operands) = scaled_dot_packed(c, id)?;
    for (d, listed) in operands
        .iter_mut()
        .zip([&dims.lhs_contracting, &dims.rhs_contracting])
    {
        for &k in listed {
            d[k as usize] *= VALUES_PER_WORD;
        }
    }
    Some((dims, operands))
}
