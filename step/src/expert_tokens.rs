//! A mixture of experts' routing over one step, as the step's outputs
//! report it: the token slots each expert was routed, and how many a
//! capacity dropped.

/// Where a mixture of experts' router sent a step's tokens, over its
/// sparse layers and global batch.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpertTokens {
    /// Token slots routed to each expert (a token counts once for each of
    /// the experts it chose), before any capacity drops them.
    pub routed: Vec<f64>,
    /// Of those, the slots a capacity factor dropped.
    pub dropped: f64,
}

impl ExpertTokens {
    /// The share of the routed slots that were dropped (0 when none were
    /// routed).
    pub fn dropped_share(&self) -> f64 {
        let total: f64 = self.routed.iter().sum();
        match total > 0.0 {
            true => self.dropped / total,
            false => 0.0,
        }
    }

    /// The busiest expert's slots over the mean's: 1 at perfect balance,
    /// E when every token chose one expert.
    pub fn imbalance(&self) -> f64 {
        let total: f64 = self.routed.iter().sum();
        let max = self.routed.iter().cloned().fold(0.0, f64::max);
        match total > 0.0 {
            true => max * self.routed.len() as f64 / total,
            false => 1.0,
        }
    }

    /// `counted` (one micro-batch's or tick's, if it reports any) added
    /// into the step's `sum`.
    pub fn add_to(sum: &mut Option<ExpertTokens>, counted: Option<ExpertTokens>) {
        match (sum.as_mut(), counted) {
            (Some(sum), Some(c)) => {
                for (a, b) in sum.routed.iter_mut().zip(&c.routed) {
                    *a += b;
                }
                sum.dropped += c.dropped;
            }
            (None, c) => *sum = c,
            (Some(_), None) => {}
        }
    }
}
