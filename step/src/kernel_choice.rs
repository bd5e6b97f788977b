//! Which implementation computes each kernel point of a step: the one
//! asked for (`--kernel`, Python's `kernels=`) where its constraints hold,
//! otherwise the target's first by priority, and a request that does not
//! apply is said aloud ([`KernelFallback`]), never dropped in silence.

use hlatc_compiler::ElementType;
use hlatc_models::imported_kernel::{
    attention_operand, ImportedKernel, ImportedKernelError, KernelModule,
};
use hlatc_models::kernels::{
    ImplKind, KernelError, KernelPoint, KernelRequest, KernelRequestError, SoftmaxKernel,
    StepShape, Unmet,
};
use hlatc_models::{AttentionKernel, BatchShape, Kernels, ModelConfig, Parallelism};
use hlatc_passes::{FuseSoftmax, LowerNeuronCalls, PassError, Pipeline, Target};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A point's implementations on `target`, first the one it takes when
/// nobody asks. The plain graph leads everywhere but softmax: blocked
/// attention is proven on XLA CPU, but neuronx-cc has not compiled it
/// here, so no target takes it unasked.
pub fn priority(target: Target, point: KernelPoint) -> &'static [ImplKind] {
    match (target, point) {
        (Target::Neuron | Target::Cpu, KernelPoint::Attention) => {
            &[ImplKind::Hlo, ImplKind::Blocked]
        }
        // Fused as before softmax was a point: on neuron its custom calls
        // (public evidence), on cpu the call of the same math that runs in
        // their place, so the structure is exercised where it can be run.
        (Target::Neuron | Target::Cpu, KernelPoint::Softmax) => &[ImplKind::Fused, ImplKind::Hlo],
        (Target::Neuron | Target::Cpu, _) => &[ImplKind::Hlo],
    }
}

/// A request whose constraint did not hold, and what the point took
/// instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFallback {
    pub request: KernelRequest,
    pub reason: Unmet,
    /// The implementation the point takes, spelled as a request reads it.
    pub instead: String,
}

impl fmt::Display for KernelFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {} does not apply ({}); {} takes {}",
            self.request, self.reason, self.request.point, self.instead
        )
    }
}

/// What a step's kernel points take, and the requests that fell back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelChoice {
    pub kernels: Kernels,
    pub fallbacks: Vec<KernelFallback>,
}

impl KernelChoice {
    /// Each point's implementation on `target` over `batch`: the request's
    /// if it names the point and applies, else the first of
    /// [`priority`] that applies. A point asked for twice is refused.
    pub fn choose(
        requests: &[KernelRequest],
        target: Target,
        step: &StepShape,
    ) -> Result<KernelChoice, KernelChoiceError> {
        refuse_repeats(requests)?;
        let mut kernels = Kernels::default();
        let mut fallbacks = Vec::new();
        for point in KernelPoint::ALL {
            let asked = requests.iter().find(|r| r.point == point);
            if let Some(request) = asked {
                match kernels.clone().with(request, step) {
                    Ok(k) => {
                        kernels = k;
                        continue;
                    }
                    Err(KernelError::Imported(e)) => return Err(e.into()),
                    Err(KernelError::Unmet(reason)) => {
                        kernels = by_priority(kernels, target, point, step);
                        let instead = kernels.spelled(point);
                        fallbacks.push(KernelFallback {
                            request: request.clone(),
                            reason,
                            instead,
                        });
                        continue;
                    }
                }
            }
            kernels = by_priority(kernels, target, point, step);
        }
        let kernels = runnable_on(kernels, target)?;
        Ok(KernelChoice { kernels, fallbacks })
    }
}

/// The attention point's request among `requests` (its plain graph when
/// none names it): what `hlatc plan` prices every layout with. A point
/// asked for twice is refused, and so is any other point: the planner's
/// layouts take its target's default.
pub fn attention_request(requests: &[KernelRequest]) -> Result<KernelRequest, KernelChoiceError> {
    refuse_repeats(requests)?;
    // A choice the search would not carry into the layouts it prices is
    // refused, not dropped.
    if let Some(request) = requests.iter().find(|k| k.point != KernelPoint::Attention) {
        return Err(KernelChoiceError::NotPriced {
            request: request.clone(),
        });
    }
    Ok(requests
        .iter()
        .find(|k| k.point == KernelPoint::Attention)
        .cloned()
        .unwrap_or(KernelRequest::plain(KernelPoint::Attention)))
}

/// Refuses a point asked for twice.
pub fn refuse_repeats(requests: &[KernelRequest]) -> Result<(), KernelRequestError> {
    for (k, r) in requests.iter().enumerate() {
        if requests[..k].iter().any(|o| o.point == r.point) {
            return Err(KernelRequestError::Repeated(r.point));
        }
    }
    Ok(())
}

/// `kernels` with `point` computed by the first of its implementations on
/// `target` that applies over `batch` (the plain graph always does).
fn by_priority(kernels: Kernels, target: Target, point: KernelPoint, step: &StepShape) -> Kernels {
    priority(target, point)
        .iter()
        .find_map(|&kind| {
            let request = KernelRequest {
                point,
                kind,
                argument: None,
            };
            kernels.clone().with(&request, step).ok()
        })
        .unwrap_or(kernels)
}

/// `kernels` as `target` runs them: on cpu, an imported kernel's Neuron
/// custom calls (an NKI kernel's) are replaced by the references hlatc
/// has for them, since XLA CPU runs none of Neuron's; on neuron they stay.
fn runnable_on(kernels: Kernels, target: Target) -> Result<Kernels, KernelChoiceError> {
    let Some(kernel) = kernels.attention.imported() else {
        return Ok(kernels);
    };
    if target != Target::Cpu {
        return Ok(kernels);
    }
    let lowered = |m: &KernelModule| -> Result<Option<KernelModule>, KernelChoiceError> {
        let mut module = m.module.clone();
        let changed = LowerNeuronCalls::lower(&mut module).map_err(|source| {
            KernelChoiceError::NoCpuForm {
                path: m.path.clone(),
                source: Box::new(source),
            }
        })?;
        match changed {
            true => Ok(Some(m.with_module(module)?)),
            false => Ok(None),
        }
    };
    let forward = lowered(&kernel.forward)?;
    let backward = lowered(&kernel.backward)?;
    if forward.is_none() && backward.is_none() {
        return Ok(kernels);
    }
    let kernel = ImportedKernel {
        forward: forward.unwrap_or_else(|| kernel.forward.clone()),
        backward: backward.unwrap_or_else(|| kernel.backward.clone()),
        ..(**kernel).clone()
    };
    Ok(Kernels {
        attention: AttentionKernel::Imported(Arc::new(kernel)),
        ..kernels
    })
}

/// `target`'s default pipeline for a step of `kernels`, without the passes
/// in `disabled`: the softmax point is `fuse-softmax`, which runs only
/// where softmax is fused.
pub fn step_pipeline<S: AsRef<str>>(
    target: Target,
    kernels: &Kernels,
    disabled: &[S],
) -> Result<Pipeline, PassError> {
    let mut disabled: Vec<&str> = disabled.iter().map(|d| d.as_ref()).collect();
    if kernels.softmax == SoftmaxKernel::Hlo {
        disabled.push(FuseSoftmax::NAME);
    }
    hlatc_passes::default_pipeline(target, &disabled)
}

/// The softmax point as `pipeline` computes it: fused where it runs
/// `fuse-softmax`, the plain graph where it does not (`--disable-pass`,
/// `--passes`). A request the pipeline contradicts is refused.
pub fn softmax_as_run(
    requests: &[KernelRequest],
    pipeline: &Pipeline,
) -> Result<SoftmaxKernel, KernelChoiceError> {
    let runs = pipeline.pass_names().contains(&FuseSoftmax::NAME);
    let asked = requests.iter().find(|r| r.point == KernelPoint::Softmax);
    match asked {
        Some(r) if (r.kind == ImplKind::Fused) != runs => Err(KernelChoiceError::SoftmaxPass {
            request: r.clone(),
            runs,
        }),
        _ => Ok(match runs {
            true => SoftmaxKernel::Fused,
            false => SoftmaxKernel::Hlo,
        }),
    }
}

/// A choice that cannot be made: a point asked for twice, or a kernel
/// file that is wrong.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum KernelChoiceError {
    #[error(transparent)]
    Request(#[from] KernelRequestError),
    #[error(transparent)]
    Imported(#[from] ImportedKernelError),
    /// An imported module's custom call XLA CPU cannot be given in place
    /// of (an NKI kernel without a reference, or one of the wrong shape).
    #[error("{}: on cpu, {source}", .path.display())]
    NoCpuForm {
        path: PathBuf,
        #[source]
        source: Box<PassError>,
    },
    /// A softmax request the step's passes contradict.
    #[error("kernel {request} is computed by the fuse-softmax pass, which the step's passes {}", if *.runs { "run" } else { "leave out" })]
    SoftmaxPass { request: KernelRequest, runs: bool },
    /// A kernel choice the planner does not carry into the layouts it
    /// prices: it prices attention's implementation alone.
    #[error("kernel {request}: the planner prices attention's implementation alone, and every layout it prices computes {} by the target's default; leave {} out of the plan's kernels (compile takes it)", .request.point, .request.point)]
    NotPriced { request: KernelRequest },
}

/// What a step's kernels are checked against: `batch` of `cfg` (the
/// global batch), its rows packed or not, divided by `parallel` and into
/// `micro_batches`, computing in `ty`.
pub fn step_shape(
    cfg: &ModelConfig,
    batch: BatchShape,
    packed: bool,
    parallel: Parallelism,
    micro_batches: i64,
    ty: ElementType,
) -> StepShape {
    let rows = batch.batch_size / parallel.dp.max(1) / micro_batches.max(1);
    let heads = cfg.num_attention_heads / parallel.tp.max(1);
    let dims = [rows, heads, batch.seq_len, cfg.head_dim()];
    StepShape {
        attention_operand: Some(attention_operand(ty, dims)),
        ..StepShape::of(cfg, batch, packed)
    }
}
