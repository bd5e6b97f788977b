//! Softmax as the forward graph builds it wherever it needs one (attention,
//! the experts' router): autodiff takes its gradient in closed form rather
//! than through the exponentials and the sum.

use hlatc_compiler::graph::autodiff::{Composite, CompositeRule, GradHints};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::InstrId;

/// Softmax over `x`'s last dimension, differentiated in closed form; its
/// max is a constant shift.
pub(crate) fn softmax_last(
    b: &mut Builder,
    hints: &mut GradHints,
    x: InstrId,
) -> Result<InstrId, BuildError> {
    let last = b.dims(x).len() as i64 - 1;
    let (y, m) = b.softmax(x, last)?;
    hints.stop.push(m);
    hints.composites.push(Composite {
        inputs: vec![x],
        output: y,
        rule: CompositeRule::Softmax { axis: last },
        residuals: Vec::new(),
        backward_call: None,
    });
    Ok(y)
}
