//! Attributes of custom calls: their targets' contract with XLA (API
//! version, aliasing, which fusions share, scheduling, convolution
//! attributes).

use super::Precision;
use crate::ir::computation_id::ComputationId;
use crate::ir::literal::Literal;
use crate::ir::shape::Shape;
use crate::ir::window::{ConvDims, Window};

spelled_enum! {
    /// `custom_call_api_version` (hlo.proto `CustomCallApiVersion`).
    /// XLA's text parser assumes `Original` when `api_version` is absent
    /// (and its compiler rejects `Unspecified`), so that is the default
    /// here too.
    #[derive(Default)]
    pub enum CustomCallApiVersion {
        Unspecified = ("API_VERSION_UNSPECIFIED", 0),
        #[default]
        Original = ("API_VERSION_ORIGINAL", 1),
        StatusReturning = ("API_VERSION_STATUS_RETURNING", 2),
        StatusReturningUnified = ("API_VERSION_STATUS_RETURNING_UNIFIED", 3),
        TypedFfi = ("API_VERSION_TYPED_FFI", 4),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CustomCall {
    pub target: String,
    pub api_version: CustomCallApiVersion,
    pub has_side_effect: bool,
    /// The convolution attributes a call may carry (cuDNN's convolutions
    /// do), kept for the target to read; `None` when none is written.
    pub convolution: Option<Box<CallConvolution>>,
    /// `operand_layout_constraints`: the layout each operand must arrive
    /// in (XLA's layout-constrained custom call); `None` when free.
    pub operand_layouts: Option<Vec<Shape>>,
    pub aliasing: Vec<OperandAlias>,
    /// `called_computations={a, b}`: computations the target may run.
    pub called: Vec<ComputationId>,
    /// `schedule=`: where a scheduler should place the call.
    pub schedule: CustomCallSchedule,
    /// `padding_type=`: how a convolution target pads (TensorFlow's
    /// `VALID` and `SAME`, for the dynamic-shape convolutions).
    pub padding_type: PaddingType,
    /// `literal=s32[2]{0} {1, 2}`: a constant the target reads. Boxed:
    /// rare.
    pub literal: Option<Box<Literal>>,
}

spelled_enum! {
    /// How a custom call's convolution pads (`padding_type=`, XLA's
    /// `PaddingType`): not said, no padding, or to keep the size.
    #[derive(Default)]
    pub enum PaddingType {
        #[default]
        Invalid = ("PADDING_INVALID", 0),
        Valid = ("PADDING_VALID", 1),
        Same = ("PADDING_SAME", 2),
    }
}

spelled_enum! {
    /// Where a scheduler should place a custom call (`schedule=`, XLA's
    /// `CustomCallSchedule`): anywhere, as late or as early as it can.
    #[derive(Default)]
    pub enum CustomCallSchedule {
        #[default]
        None = ("SCHEDULE_NONE", 0),
        Latest = ("SCHEDULE_LATEST", 1),
        Earliest = ("SCHEDULE_EARLIEST", 2),
    }
}

/// One entry of `output_to_operand_aliasing={{0}: (1, {})}`: the output at
/// `output_index` reuses the buffer of operand `operand` at `operand_index`
/// (custom calls and fusions that update in place).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperandAlias {
    pub output_index: Vec<i64>,
    pub operand: i64,
    pub operand_index: Vec<i64>,
}

impl OperandAlias {
    /// Reads XLA's text, the braces included:
    /// `{{}: (0, {}), {1}: (2, {0,1})}`.
    pub fn parse_list(text: &str) -> Result<Vec<OperandAlias>, OperandAliasError> {
        let bad = || OperandAliasError {
            text: text.to_string(),
        };
        let inner = text
            .trim()
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(bad)?;
        let index = |s: &str| -> Result<Vec<i64>, OperandAliasError> {
            let s = s
                .trim()
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .ok_or_else(bad)?;
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().map_err(|_| bad()))
                .collect()
        };
        let mut out = Vec::new();
        let mut rest = inner.trim();
        while !rest.is_empty() {
            let (output, after) = rest.split_once(':').ok_or_else(bad)?;
            let after = after.trim_start().strip_prefix('(').ok_or_else(bad)?;
            let (inside, tail) = after.split_once(')').ok_or_else(bad)?;
            let (operand, operand_index) = inside.split_once(',').ok_or_else(bad)?;
            out.push(OperandAlias {
                output_index: index(output)?,
                operand: operand.trim().parse().map_err(|_| bad())?,
                operand_index: index(operand_index)?,
            });
            rest = tail.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        Ok(out)
    }
}

/// An `output_to_operand_aliasing` that does not read as a braced list of
/// `{index}: (operand, {index})` entries. One message for every flaw:
/// the list is short, and the expected form says what to write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("output_to_operand_aliasing '{text}' is not {{{{index}}: (operand, {{index}}), ...}}")]
pub struct OperandAliasError {
    /// The attribute's value as written, braces included.
    pub text: String,
}

impl std::fmt::Display for OperandAlias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let index = |v: &[i64]| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        write!(
            f,
            "{{{}}}: ({}, {{{}}})",
            index(&self.output_index),
            self.operand,
            index(&self.operand_index)
        )
    }
}

/// A custom call's `window`, `dim_labels`, group counts and operand
/// precision: what `convolution` has, each optional here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallConvolution {
    /// Written even when empty (`window={}`), as XLA keeps it.
    pub window: Option<Window>,
    pub dims: Option<ConvDims>,
    pub feature_group_count: i64,
    pub batch_group_count: i64,
    pub precision: Vec<Precision>,
}

impl CallConvolution {
    /// Whether it says nothing a call without it would not: such a call is
    /// kept as one without, so text and proto read back the same.
    pub fn is_empty(&self) -> bool {
        self.window.is_none()
            && self.dims.is_none()
            && self.feature_group_count == 1
            && self.batch_group_count == 1
            && self.precision.is_empty()
    }
}
