//! The proto form of the annotations any instruction may carry:
//! `statistics_viz`, `result_accuracy` and `original_value`.

use super::messages::{
    OriginalArrayProto, OriginalTensorProto, OriginalValueProto, ResultAccuracyProto, Statistic,
    StatisticsViz, ToleranceProto,
};
use crate::ir::op::F64Bits;
use crate::ir::original_value::{OriginalArray, OriginalLeaf, OriginalValue};
use crate::ir::result_accuracy::ResultAccuracy;
use crate::ir::statistics::Statistics;

/// Why an instruction's annotation is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnnotationError {
    #[error(
        "statistic name '{0}' cannot be written in HLO text (letters, digits, '_', '-' and '.')"
    )]
    StatisticName(String),
    #[error("result_accuracy sets both mode and tolerance, which XLA's oneof cannot hold")]
    ModeAndTolerance,
    #[error("unknown result_accuracy mode {0} (known: 0 default, 1 highest)")]
    UnknownAccuracyMode(i32),
    /// Read, but not an accuracy hlatc holds ([`ResultAccuracy::problem`]).
    #[error("{0}")]
    InvalidAccuracy(String),
    #[error("original_value is a synthetic call and has leaves too")]
    SyntheticCallWithLeaves,
    /// Read, but not a value hlatc holds ([`OriginalValue::problem`]).
    #[error("{0}")]
    InvalidOriginalValue(String),
}

pub(super) fn statistics_to_proto(s: &Statistics) -> StatisticsViz {
    StatisticsViz {
        stat_index_to_visualize: s.visualizing_index,
        statistics: s
            .values
            .iter()
            .map(|(name, v)| Statistic {
                stat_name: name.clone(),
                stat_val: v.get(),
            })
            .collect(),
    }
}

/// `None` for an empty message, as XLA writes one on every instruction.
pub(super) fn statistics_from_proto(
    p: &StatisticsViz,
) -> Result<Option<Statistics>, AnnotationError> {
    if p.stat_index_to_visualize == 0 && p.statistics.is_empty() {
        return Ok(None);
    }
    let values = p
        .statistics
        .iter()
        .map(|s| {
            if crate::ir::statistics::is_stat_name(&s.stat_name) {
                Ok((s.stat_name.clone(), F64Bits::new(s.stat_val)))
            } else {
                Err(AnnotationError::StatisticName(s.stat_name.clone()))
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(Statistics {
        visualizing_index: p.stat_index_to_visualize,
        values,
    }))
}

pub(super) fn result_accuracy_to_proto(a: &ResultAccuracy) -> ResultAccuracyProto {
    match *a {
        ResultAccuracy::Highest => ResultAccuracyProto {
            mode: Some(1),
            tolerance: None,
        },
        ResultAccuracy::Tolerance { atol, rtol, ulps } => ResultAccuracyProto {
            mode: None,
            tolerance: Some(ToleranceProto {
                atol: atol.get(),
                rtol: rtol.get(),
                ulps,
            }),
        },
    }
}

/// Mode 0 (default) is no annotation.
pub(super) fn result_accuracy_from_proto(
    p: &ResultAccuracyProto,
) -> Result<Option<ResultAccuracy>, AnnotationError> {
    let accuracy = match (p.mode, &p.tolerance) {
        (Some(_), Some(_)) => return Err(AnnotationError::ModeAndTolerance),
        (None | Some(0), None) => None,
        (Some(1), None) => Some(ResultAccuracy::Highest),
        (Some(m), None) => return Err(AnnotationError::UnknownAccuracyMode(m)),
        (None, Some(t)) => Some(ResultAccuracy::Tolerance {
            atol: F64Bits::new(t.atol),
            rtol: F64Bits::new(t.rtol),
            ulps: t.ulps,
        }),
    };
    match accuracy.as_ref().and_then(ResultAccuracy::problem) {
        Some(problem) => Err(AnnotationError::InvalidAccuracy(problem)),
        None => Ok(accuracy),
    }
}

pub(super) fn original_value_to_proto(v: &OriginalValue) -> OriginalValueProto {
    match v {
        OriginalValue::SyntheticCall => OriginalValueProto {
            leaves: Vec::new(),
            is_synthetic_call: true,
        },
        OriginalValue::Tree(leaves) => OriginalValueProto {
            leaves: leaves
                .iter()
                .map(|l| OriginalTensorProto {
                    leaf_shape_index: l.index.clone(),
                    original_array: l.array.as_ref().map(|a| OriginalArrayProto {
                        instruction_name: a.instruction.clone(),
                        shape_index: a.shape_index.clone(),
                    }),
                })
                .collect(),
            is_synthetic_call: false,
        },
    }
}

pub(super) fn original_value_from_proto(
    p: &OriginalValueProto,
) -> Result<OriginalValue, AnnotationError> {
    if p.is_synthetic_call {
        if !p.leaves.is_empty() {
            return Err(AnnotationError::SyntheticCallWithLeaves);
        }
        return Ok(OriginalValue::SyntheticCall);
    }
    let v = OriginalValue::Tree(
        p.leaves
            .iter()
            .map(|l| OriginalLeaf {
                index: l.leaf_shape_index.clone(),
                array: l.original_array.as_ref().map(|a| OriginalArray {
                    instruction: a.instruction_name.clone(),
                    shape_index: a.shape_index.clone(),
                }),
            })
            .collect(),
    );
    match v.problem() {
        Some(problem) => Err(AnnotationError::InvalidOriginalValue(problem)),
        None => Ok(v),
    }
}
