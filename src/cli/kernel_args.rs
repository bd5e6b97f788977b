//! `--kernel POINT=IMPL[:ARG]`, shared by the commands that build a step.

use super::console::note;
use hlatc::models::kernels::{KernelPoint, KernelRequest};
use hlatc::Error;

#[derive(clap::Args)]
pub(super) struct KernelArgs {
    /// Compute a kernel point by this implementation (repeatable). Points:
    /// attention (its core: scores, masks, softmax, times v), softmax,
    /// rmsnorm, swiglu, cross-entropy. Implementations: hlo, the plain
    /// graph, which every point has and every target takes by default but
    /// softmax's; fused (softmax only, the default), each softmax and its
    /// backward as one op by the fuse-softmax pass (on neuron its custom
    /// calls); blocked
    /// (attention only), the flash algorithm tile by tile in plain HLO, so
    /// no [S, S] value exists: `attention=blocked` takes the largest power
    /// of two up to 512 that cuts the sequence into two or more tiles,
    /// `attention=blocked:128` tiles of 128; imported (attention only), HLO
    /// modules another stack lowered (a JAX kernel and its vjp, or NKI's
    /// flash attention custom calls, which XLA CPU runs by hlatc's
    /// references), named by a calling-convention file:
    /// `attention=imported:kernel.json`. A request whose constraint
    /// does not hold (a tile that does not divide the sequence) falls back
    /// to the target's default, with the reason printed. The manifest
    /// records what each point took (config.kernels)
    #[arg(long = "kernel", value_name = "POINT=IMPL[:ARG]", value_parser = parse_kernel)]
    pub kernels: Vec<KernelRequest>,
}

impl KernelArgs {
    /// The attention point's request, what `hlatc plan` prices every
    /// layout's programs with (the plain graph unless asked). The other
    /// points have their plain graph alone, which a request can only name.
    pub fn attention(&self) -> Result<KernelRequest, Error> {
        Ok(hlatc::kernel_choice::attention_request(&self.kernels)?)
    }
}

/// Says each request that fell back, on standard error.
pub(super) fn report_fallbacks(
    fallbacks: &[hlatc::kernel_choice::KernelFallback],
) -> Result<(), Error> {
    for f in fallbacks {
        note!("note: {f}")?;
    }
    Ok(())
}

fn parse_kernel(s: &str) -> Result<KernelRequest, String> {
    KernelRequest::parse(s).map_err(|e| e.to_string())
}

/// Every point and its implementations, for `hlatc passes`.
pub(super) fn points() -> impl Iterator<Item = (KernelPoint, Vec<&'static str>)> {
    KernelPoint::ALL
        .into_iter()
        .map(|p| (p, p.implementations().iter().map(|k| k.name()).collect()))
}
