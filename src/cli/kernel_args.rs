//! What the commands say of `--kernel POINT=IMPL[:ARG]` (the option
//! table's `Kernel` row reads the flag): the requests that fell back, and
//! every point's implementations for `hlatc passes`.

use super::console::note;
use hlatc::models::kernels::KernelPoint;
use hlatc::Error;

/// Says each request that fell back, on standard error.
pub(super) fn report_fallbacks(
    fallbacks: &[hlatc::kernel_choice::KernelFallback],
) -> Result<(), Error> {
    for f in fallbacks {
        note!("note: {f}")?;
    }
    Ok(())
}

/// Every point and its implementations, for `hlatc passes`.
pub(super) fn points() -> impl Iterator<Item = (KernelPoint, Vec<&'static str>)> {
    KernelPoint::ALL
        .into_iter()
        .map(|p| (p, p.implementations().iter().map(|k| k.name()).collect()))
}
