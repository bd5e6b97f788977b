//! The ids a batch feeds a step, checked before the step runs. XLA clamps
//! an out-of-range gather index and a one-hot of an id past the vocabulary
//! is all zeros, so a bad id is never an error there: the loss silently
//! counts it. And a document whose ids stop and start again would attend
//! across the document between. Each check names the input, the row and
//! column, the value and what is allowed.

use crate::train_step::{Role, TensorSpec};
use hlatc_compiler::Literal;
use std::collections::HashMap;

#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
pub enum BatchError {
    /// A batch input of another shape than the step's `[batch, seq]`.
    #[error("{input} is {got:?}, but the step takes [batch, seq] = {want:?} (compiled with batch_size {}, seq_len {})", want[0], want[1])]
    Shape {
        input: &'static str,
        got: Vec<i64>,
        want: [i64; 2],
    },
    #[error("{input}[{row}, {col}] is {value}, outside the vocabulary 0..{vocab}{}",
        ignore_index.map_or(String::new(), |i| format!(" (and not the ignore index {i})")))]
    OutOfVocabulary {
        input: String,
        row: usize,
        col: usize,
        value: i64,
        vocab: i64,
        /// The one value outside the vocabulary a target may take.
        ignore_index: Option<i64>,
    },
    #[error("{input}[{row}, {col}] is {value}, but document {value} ended at column {ended} of row {row}: a document's tokens must be contiguous")]
    DocumentResumed {
        input: String,
        row: usize,
        col: usize,
        value: i64,
        ended: usize,
    },
    #[error("{input}[{row}, {col}] is {value}, less than the {previous} before it: segment ids must not decrease along a row")]
    Decreasing {
        input: String,
        row: usize,
        col: usize,
        value: i64,
        previous: i64,
    },
    #[error("{input}[{row}, {col}] is {value}, after the padding (segment id 0) that starts at column {padding_from}: padding ends a row")]
    DocumentAfterPadding {
        input: String,
        row: usize,
        col: usize,
        value: i64,
        padding_from: usize,
    },
    #[error("{input} is {dtype}{dims:?}; a batch input is an integer [batch, seq]")]
    NotIds {
        input: String,
        dtype: String,
        dims: Vec<i64>,
    },
}

/// Checks the batch input `spec` of a step over a vocabulary of `vocab`
/// ids; any other input passes.
pub fn check_batch_input(spec: &TensorSpec, value: &Literal, vocab: i64) -> Result<(), BatchError> {
    match spec.role {
        Role::Tokens => check_ids(&spec.name, value, vocab, None),
        Role::Targets => check_ids(&spec.name, value, vocab, Some(hlatc_models::IGNORE_INDEX)),
        Role::SegmentIds => check_segment_ids(&spec.name, value),
        _ => Ok(()),
    }
}

/// Checks the batch inputs among one rank's `values` of the inputs `specs`
/// (in signature order).
pub fn check_batch_inputs(
    specs: &[TensorSpec],
    values: &[Literal],
    vocab: i64,
) -> Result<(), BatchError> {
    specs
        .iter()
        .zip(values)
        .try_for_each(|(spec, value)| check_batch_input(spec, value, vocab))
}

/// The rows of `ids` (`[batch, seq]` integers) as `i64`s.
fn rows(input: &str, ids: &Literal) -> Result<(Vec<i64>, usize), BatchError> {
    match ids.dims() {
        [_, seq] if ids.ty().is_integer() => Ok((ids.to_i64_vec(), (*seq).max(1) as usize)),
        dims => Err(BatchError::NotIds {
            input: input.to_string(),
            dtype: ids.ty().to_string(),
            dims: dims.to_vec(),
        }),
    }
}

/// Fails on the first id of `ids` outside `0..vocab`, other than
/// `ignore_index`.
pub fn check_ids(
    input: &str,
    ids: &Literal,
    vocab: i64,
    ignore_index: Option<i64>,
) -> Result<(), BatchError> {
    let (values, seq) = rows(input, ids)?;
    match values
        .iter()
        .position(|&t| !(0..vocab).contains(&t) && Some(t) != ignore_index)
    {
        None => Ok(()),
        Some(i) => Err(BatchError::OutOfVocabulary {
            input: input.to_string(),
            row: i / seq,
            col: i % seq,
            value: values[i],
            vocab,
            ignore_index,
        }),
    }
}

/// Fails where a row's segment ids are not a packing: each document's
/// tokens contiguous, and the ids never decreasing along the row (as a
/// packing dataloader numbers documents in order), but for padding at the
/// end of a row, segment id 0 after higher ids (MaxText's and T5's packed
/// convention), which nothing but padding may follow.
pub fn check_segment_ids(input: &str, ids: &Literal) -> Result<(), BatchError> {
    let (values, seq) = rows(input, ids)?;
    for (row, r) in values.chunks(seq).enumerate() {
        // Each document's last column so far.
        let mut last: HashMap<i64, usize> = HashMap::new();
        let mut padding_from = None;
        for (col, &value) in r.iter().enumerate() {
            if let Some(padding_from) = padding_from.filter(|_| value != 0) {
                return Err(BatchError::DocumentAfterPadding {
                    input: input.to_string(),
                    row,
                    col,
                    value,
                    padding_from,
                });
            }
            if col > 0 && r[col - 1] != value {
                // Segment 0 that began the row is a document: it may not
                // start again as padding.
                if let Some(&ended) = last.get(&value) {
                    return Err(BatchError::DocumentResumed {
                        input: input.to_string(),
                        row,
                        col,
                        value,
                        ended,
                    });
                }
                if value == 0 {
                    padding_from = Some(col);
                    continue;
                }
                if value < r[col - 1] {
                    return Err(BatchError::Decreasing {
                        input: input.to_string(),
                        row,
                        col,
                        value,
                        previous: r[col - 1],
                    });
                }
            }
            last.insert(value, col);
        }
    }
    Ok(())
}

/// Every input of `batch` in the step's shape, `[batch, seq]`: a batch of
/// other rows would be read past its end, or only in part.
pub fn check_batch_shape(
    batch: &crate::data::Batch,
    shape: hlatc_models::BatchShape,
) -> Result<(), BatchError> {
    let want = [shape.batch_size, shape.seq_len];
    let inputs = [
        ("tokens", Some(&batch.tokens)),
        ("targets", Some(&batch.targets)),
        ("segment_ids", batch.segment_ids.as_ref()),
    ];
    for (input, value) in inputs {
        if let Some(v) = value.filter(|v| v.dims() != want) {
            return Err(BatchError::Shape {
                input,
                got: v.dims().to_vec(),
                want,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(rows: &[&[i32]]) -> Literal {
        let seq = rows[0].len() as i64;
        let flat: Vec<i32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        Literal::from_s32(vec![rows.len() as i64, seq], &flat).unwrap()
    }

    #[test]
    fn ids_outside_the_vocabulary_are_named_with_their_place() {
        let e = check_ids("tokens", &ids(&[&[1, 2], &[3, 300]]), 256, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tokens[1, 1] is 300, outside the vocabulary 0..256"
        );
        let e = check_ids("targets", &ids(&[&[-1, 2]]), 256, Some(-100)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "targets[0, 0] is -1, outside the vocabulary 0..256 (and not the ignore index -100)"
        );
        let e = check_ids("targets", &ids(&[&[0, 256]]), 256, Some(-100)).unwrap_err();
        assert!(matches!(
            e,
            BatchError::OutOfVocabulary {
                value: 256,
                col: 1,
                ..
            }
        ));
        check_ids("targets", &ids(&[&[-100, 255, 0]]), 256, Some(-100)).unwrap();
    }

    #[test]
    fn segment_ids_must_be_a_packing() {
        check_segment_ids("segment_ids", &ids(&[&[1, 1, 2, 3], &[0, 0, 0, 7]])).unwrap();
        // Padding after the last document, as MaxText and T5 pack.
        check_segment_ids("segment_ids", &ids(&[&[1, 2, 0, 0], &[3, 3, 3, 0]])).unwrap();
        let e = check_segment_ids("segment_ids", &ids(&[&[1, 2, 0, 3]])).unwrap_err();
        assert_eq!(
            e,
            BatchError::DocumentAfterPadding {
                input: "segment_ids".into(),
                row: 0,
                col: 3,
                value: 3,
                padding_from: 2
            }
        );
        let e = check_segment_ids("segment_ids", &ids(&[&[1, 2, 0, 2]])).unwrap_err();
        assert!(matches!(e, BatchError::DocumentAfterPadding { col: 3, .. }));
        let e = check_segment_ids("segment_ids", &ids(&[&[0, 1, 0, 0]])).unwrap_err();
        assert!(matches!(
            e,
            BatchError::DocumentResumed {
                col: 2,
                value: 0,
                ..
            }
        ));
        let e = check_segment_ids("segment_ids", &ids(&[&[1, 1, 2, 1]])).unwrap_err();
        assert_eq!(
            e,
            BatchError::DocumentResumed {
                input: "segment_ids".into(),
                row: 0,
                col: 3,
                value: 1,
                ended: 1
            }
        );
        let e = check_segment_ids("segment_ids", &ids(&[&[1, 1], &[3, 2]])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "segment_ids[1, 1] is 2, less than the 3 before it: segment ids must not decrease along a row"
        );
    }
}
