//! [`RowBatch`]: the rows a loader hands out, and the step's inputs they
//! become.

use super::position::Totals;
use hlatc_compiler::Literal;
use hlatc_step::data::Batch;

/// One batch of rows, row-major `[rows, seq]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowBatch {
    pub rows: usize,
    pub seq: usize,
    pub tokens: Vec<i32>,
    pub targets: Vec<i32>,
    /// `None` for concatenated rows.
    pub segment_ids: Option<Vec<i32>>,
    /// What this batch's rows hold.
    pub totals: Totals,
}

impl RowBatch {
    /// The batch as the step's inputs take it.
    pub fn to_batch(&self) -> Batch {
        let dims = vec![self.rows as i64, self.seq as i64];
        let lit = |v: &[i32]| Literal::from_s32(dims.clone(), v).expect("rows x seq ids");
        Batch {
            tokens: lit(&self.tokens),
            targets: lit(&self.targets),
            segment_ids: self.segment_ids.as_deref().map(lit),
        }
    }

    /// `parts` one after another (each DP replica's rows in turn).
    pub fn concat(parts: Vec<RowBatch>) -> RowBatch {
        let mut out = RowBatch {
            rows: 0,
            seq: parts.first().map_or(0, |p| p.seq),
            tokens: Vec::new(),
            targets: Vec::new(),
            segment_ids: parts
                .first()
                .and_then(|p| p.segment_ids.as_ref().map(|_| Vec::new())),
            totals: Totals::default(),
        };
        for p in parts {
            out.rows += p.rows;
            out.tokens.extend(p.tokens);
            out.targets.extend(p.targets);
            if let (Some(all), Some(s)) = (&mut out.segment_ids, p.segment_ids) {
                all.extend(s);
            }
            out.totals.add(&p.totals);
        }
        out
    }
}
