//! Kernel points: the ops of the model's graph that have more than one
//! implementation, as RAF's operator dialects give a base op several. The
//! forward builder computes each point by the implementation [`Kernels`]
//! names, and every pass, autodiff, the memory plan and the sharded forms
//! read the program it built.
//!
//! What a user asks for is a [`KernelRequest`] (`attention=blocked:128`);
//! which implementation a target takes when nobody asks, and what happens
//! when a request's constraint does not hold, is the step's choice (the
//! train crate's `kernel_choice`). This module says what each point and
//! implementation is, and when an implementation applies.

use crate::config::{BatchShape, ModelConfig};
use crate::imported_kernel::{ImportedKernel, ImportedKernelError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A place in the model's graph with several implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelPoint {
    /// Attention's core: scores, the causal, sliding-window and document
    /// masks, softmax, times the values; GQA.
    Attention,
    /// Each softmax and softmax backward in the step, chosen late: the
    /// `fuse-softmax` pass finds them in the optimized graph, as RAF's
    /// dialect dispatch finds its base ops.
    Softmax,
    RmsNorm,
    /// The SwiGLU activation, `silu(gate) * up`.
    Swiglu,
    /// Cross-entropy of the logits, the vocabulary-parallel form included.
    CrossEntropy,
}

impl KernelPoint {
    pub const ALL: [KernelPoint; 5] = [
        KernelPoint::Attention,
        KernelPoint::Softmax,
        KernelPoint::RmsNorm,
        KernelPoint::Swiglu,
        KernelPoint::CrossEntropy,
    ];

    /// The name `--kernel` and Python's `kernels=` take.
    pub fn name(self) -> &'static str {
        match self {
            KernelPoint::Attention => "attention",
            KernelPoint::Softmax => "softmax",
            KernelPoint::RmsNorm => "rmsnorm",
            KernelPoint::Swiglu => "swiglu",
            KernelPoint::CrossEntropy => "cross-entropy",
        }
    }

    pub fn from_name(name: &str) -> Option<KernelPoint> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The implementations the point has, in the order `--help` lists them.
    pub fn implementations(self) -> &'static [ImplKind] {
        match self {
            KernelPoint::Attention => &[
                ImplKind::Hlo,
                ImplKind::Blocked,
                ImplKind::Looped,
                ImplKind::Imported,
            ],
            KernelPoint::Softmax => &[ImplKind::Hlo, ImplKind::Fused],
            KernelPoint::RmsNorm | KernelPoint::Swiglu | KernelPoint::CrossEntropy => {
                &[ImplKind::Hlo]
            }
        }
    }
}

impl fmt::Display for KernelPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An implementation, by kind. Each is listed at its point
/// ([`KernelPoint::implementations`]) and made by [`Kernels::with`]; a
/// test holds every kind (`ImplKind::iter`) to both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, strum::EnumIter)]
pub enum ImplKind {
    /// The plain graph: always available, and the reference every other
    /// implementation is checked against.
    Hlo,
    /// Tile by tile, in plain HLO: attention's flash algorithm
    /// ([`BlockedAttention`](hlatc_compiler::graph::blocked_attention::BlockedAttention)).
    Blocked,
    /// Blocked attention with its tile pairs in a `while` loop
    /// ([`LoopedAttention`](hlatc_compiler::graph::looped_attention::LoopedAttention)): the program grows with the layers, not with
    /// the sequence's square.
    Looped,
    /// HLO modules from another stack, forward and backward, with their
    /// calling convention ([`ImportedKernel`]).
    Imported,
    /// One op for the whole computation: softmax's Neuron custom calls.
    Fused,
}

impl ImplKind {
    pub fn name(self) -> &'static str {
        match self {
            ImplKind::Hlo => "hlo",
            ImplKind::Blocked => "blocked",
            ImplKind::Looped => "looped",
            ImplKind::Imported => "imported",
            ImplKind::Fused => "fused",
        }
    }

    /// What the implementation is, for `--help` and `hlatc passes`.
    pub fn summary(self) -> &'static str {
        match self {
            ImplKind::Hlo => "the plain graph; the reference for every other",
            ImplKind::Blocked => {
                "tile by tile (the flash algorithm) in plain HLO: no [S, S] value; \
                 takes a tile size (`blocked:128`), by default the largest power of two \
                 up to 512 that cuts the sequence into two or more tiles"
            }
            ImplKind::Looped => {
                "blocked attention with its tile pairs in a static-trip-count while loop: one \
                 body a layer, whatever the sequence, and the form context parallelism takes \
                 for long sequences; takes a tile size (`looped:512`), by default as blocked"
            }
            ImplKind::Imported => {
                "HLO modules from another stack (a JAX-lowered kernel and its vjp, or \
                 NKI's flash attention custom calls), named by a calling-convention file \
                 (`imported:FILE`)"
            }
            ImplKind::Fused => {
                "softmax and its backward as one op each (the fuse-softmax pass): on neuron \
                 the AwsNeuronSoftmax and AwsNeuronSoftmaxBackward custom calls, on cpu a \
                 call of the same math"
            }
        }
    }
}

/// How attention's core is computed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AttentionKernel {
    /// Scores `[B, H, S, S]`, the mask, softmax, times the values.
    #[default]
    Hlo,
    /// Tile by tile, `tile` rows of queries and keys at a time.
    Blocked { tile: i64 },
    /// Tile by tile in a loop, `tile` rows of queries and keys a trip.
    Looped { tile: i64 },
    /// A kernel brought from another stack.
    Imported(Arc<ImportedKernel>),
}

impl AttentionKernel {
    pub fn kind(&self) -> ImplKind {
        match self {
            AttentionKernel::Hlo => ImplKind::Hlo,
            AttentionKernel::Blocked { .. } => ImplKind::Blocked,
            AttentionKernel::Looped { .. } => ImplKind::Looped,
            AttentionKernel::Imported(_) => ImplKind::Imported,
        }
    }

    /// The kernel brought from another stack, when it is one.
    pub fn imported(&self) -> Option<&Arc<ImportedKernel>> {
        match self {
            AttentionKernel::Imported(k) => Some(k),
            AttentionKernel::Hlo
            | AttentionKernel::Blocked { .. }
            | AttentionKernel::Looped { .. } => None,
        }
    }

    /// How it takes context parallelism's keys and values.
    pub fn context_form(&self) -> ContextForm {
        match *self {
            AttentionKernel::Hlo => ContextForm::Gathered,
            AttentionKernel::Looped { tile } => ContextForm::Tiled { tile },
            AttentionKernel::Blocked { .. } | AttentionKernel::Imported(_) => ContextForm::None,
        }
    }
}

/// How an implementation of attention takes context parallelism's keys
/// and values (the step refuses the others under CP, by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContextForm {
    /// Gathered whole on every CP rank (the plain graph).
    Gathered,
    /// Gathered, or passed round a ring, a tile pair at a time: `tile`
    /// must divide each rank's chunk.
    Tiled { tile: i64 },
    /// Neither: it does not run under context parallelism.
    None,
}

impl fmt::Display for AttentionKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttentionKernel::Hlo => f.write_str("hlo"),
            AttentionKernel::Blocked { tile } => write!(f, "blocked:{tile}"),
            AttentionKernel::Looped { tile } => write!(f, "looped:{tile}"),
            AttentionKernel::Imported(k) => write!(f, "imported:{}", k.path.display()),
        }
    }
}

/// How each softmax and its backward are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SoftmaxKernel {
    /// As one op each ([`ImplKind::Fused`]): what every target has done
    /// since before softmax was a kernel point, so a manifest that does
    /// not name the point means this.
    #[default]
    Fused,
    /// The plain graph: `fuse-softmax` does not run.
    Hlo,
}

impl SoftmaxKernel {
    pub fn kind(self) -> ImplKind {
        match self {
            SoftmaxKernel::Fused => ImplKind::Fused,
            SoftmaxKernel::Hlo => ImplKind::Hlo,
        }
    }
}

/// What each kernel point is computed by. Recorded in a bundle's manifest
/// (`config.kernels`), every point spelled as [`KernelRequest`] reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Kernels {
    pub attention: AttentionKernel,
    pub softmax: SoftmaxKernel,
}

impl Kernels {
    /// Each point with the implementation it takes, in [`KernelPoint::ALL`]
    /// order.
    pub fn chosen(&self) -> Vec<(KernelPoint, String)> {
        KernelPoint::ALL
            .into_iter()
            .map(|p| (p, self.spelled(p)))
            .collect()
    }

    /// What `point` takes, as a request spells it after the `=`.
    pub fn spelled(&self, point: KernelPoint) -> String {
        self.of(point).to_string()
    }

    /// Whether every point takes what it takes when nobody asks (the
    /// plain graph, and softmax fused).
    pub fn all_default(&self) -> bool {
        *self == Kernels::default()
    }

    /// These kernels with `request`'s implementation at its point, if its
    /// constraints hold for `step`; an imported kernel's files are read.
    pub fn with(self, request: &KernelRequest, step: &StepShape) -> Result<Kernels, KernelError> {
        Ok(self.set(Chosen::for_request(request, Some(step))?))
    }

    /// What `point` takes: with [`Kernels::set`], the one place a point
    /// meets its field.
    pub fn of(&self, point: KernelPoint) -> Chosen {
        match point {
            KernelPoint::Attention => Chosen::Attention(self.attention.clone()),
            KernelPoint::Softmax => Chosen::Softmax(self.softmax),
            KernelPoint::RmsNorm | KernelPoint::Swiglu | KernelPoint::CrossEntropy => {
                Chosen::Plain(point)
            }
        }
    }

    /// These kernels with `chosen` at its point.
    fn set(mut self, chosen: Chosen) -> Kernels {
        match chosen {
            Chosen::Attention(a) => self.attention = a,
            Chosen::Softmax(s) => self.softmax = s,
            // The point's only implementation, which it has already.
            Chosen::Plain(_) => {}
        }
        self
    }
}

/// One point's implementation as a step holds it ([`Kernels::of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chosen {
    Attention(AttentionKernel),
    Softmax(SoftmaxKernel),
    /// A point whose only implementation is its plain graph.
    Plain(KernelPoint),
}

impl Chosen {
    /// What `request` asks for: checked against `step` where it is given
    /// (a choice being made), taken as written where not (a choice a
    /// manifest records, whose tile it names). An imported kernel's files
    /// are read either way.
    fn for_request(
        request: &KernelRequest,
        step: Option<&StepShape>,
    ) -> Result<Chosen, KernelError> {
        let tile = || match step {
            Some(step) => blocked_tile(request.tile(), step.batch),
            None => request.tile().ok_or(Unmet::TileNotRecorded),
        };
        Ok(match (request.point, request.kind) {
            (KernelPoint::Attention, ImplKind::Hlo) => Chosen::Attention(AttentionKernel::Hlo),
            (KernelPoint::Attention, ImplKind::Blocked) => {
                Chosen::Attention(AttentionKernel::Blocked { tile: tile()? })
            }
            (KernelPoint::Attention, ImplKind::Looped) => {
                Chosen::Attention(AttentionKernel::Looped { tile: tile()? })
            }
            (KernelPoint::Attention, ImplKind::Imported) => {
                let Some(KernelArg::File(path)) = &request.argument else {
                    return Err(Unmet::NoFile.into());
                };
                let kernel = ImportedKernel::load(path)?;
                if let Some(step) = step {
                    if step.sliding_window {
                        return Err(Unmet::MaskNotApplied("a sliding window").into());
                    }
                    if step.packed {
                        return Err(Unmet::MaskNotApplied("packed documents").into());
                    }
                    if let Some(operand) = &step.attention_operand {
                        kernel.check_operands(operand)?;
                    }
                }
                Chosen::Attention(AttentionKernel::Imported(Arc::new(kernel)))
            }
            (KernelPoint::Softmax, ImplKind::Fused) => Chosen::Softmax(SoftmaxKernel::Fused),
            (KernelPoint::Softmax, ImplKind::Hlo) => Chosen::Softmax(SoftmaxKernel::Hlo),
            (point, ImplKind::Hlo) => Chosen::Plain(point),
            (point, kind) => return Err(Unmet::NotAnImplementation { point, kind }.into()),
        })
    }
}

impl fmt::Display for Chosen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chosen::Attention(a) => write!(f, "{a}"),
            Chosen::Softmax(s) => f.write_str(s.kind().name()),
            Chosen::Plain(_) => f.write_str(ImplKind::Hlo.name()),
        }
    }
}

/// What a kernel's constraints are checked against: the step's batch, its
/// masks, and the shape q, k and v have on a rank (`[batch, heads, seq,
/// head_dim]` in the compute type; `None` where it is not known, and then
/// checked when the step is built).
#[derive(Clone, Debug)]
pub struct StepShape {
    pub batch: BatchShape,
    pub sliding_window: bool,
    pub packed: bool,
    pub attention_operand: Option<hlatc_compiler::ArrayShape>,
}

impl StepShape {
    /// `batch` of `cfg`, its rows packed or not, with no operand shape.
    pub fn of(cfg: &ModelConfig, batch: BatchShape, packed: bool) -> StepShape {
        StepShape {
            batch,
            sliding_window: cfg.sliding_window.is_some_and(|w| w < batch.seq_len),
            packed,
            attention_operand: None,
        }
    }
}

/// Why a request cannot be taken: a constraint that does not hold (the
/// step falls back, and says so), or a kernel file that is wrong (an
/// error).
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(transparent)]
    Unmet(#[from] Unmet),
    #[error(transparent)]
    Imported(#[from] ImportedKernelError),
}

/// The tile blocked attention takes over `batch`'s sequence: `asked`, if
/// it divides it, or the largest power of two up to 512 that cuts it into
/// two or more tiles.
fn blocked_tile(asked: Option<i64>, batch: BatchShape) -> Result<i64, Unmet> {
    let s = batch.seq_len;
    match asked {
        Some(t) if t <= 0 || s % t != 0 => Err(Unmet::TileDoesNotDivide {
            tile: t,
            seq_len: s,
        }),
        Some(t) => Ok(t),
        None => [512, 256, 128, 64, 32, 16, 8, 4, 2]
            .into_iter()
            .find(|&t| t < s && s % t == 0)
            .ok_or(Unmet::NoTile { seq_len: s }),
    }
}

/// A constraint of an implementation that does not hold: the step takes
/// the point's next implementation, and says why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unmet {
    #[error("a tile of {tile} does not cut a sequence of {seq_len} into whole tiles")]
    TileDoesNotDivide { tile: i64, seq_len: i64 },
    #[error("a sequence of {seq_len} has no tile of 2 to 512, a power of two, that cuts it into two or more")]
    NoTile { seq_len: i64 },
    #[error("{point} has no {} implementation", kind.name())]
    NotAnImplementation { point: KernelPoint, kind: ImplKind },
    #[error("imported names no file (imported:FILE)")]
    NoFile,
    #[error("the kernel applies the causal mask alone, and the step has {0}")]
    MaskNotApplied(&'static str),
    #[error("a recorded blocked or looped kernel names its tile (blocked:128)")]
    TileNotRecorded,
}

/// One `--kernel POINT=IMPL[:ARG]`: the implementation asked for at a
/// point, and its argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelRequest {
    pub point: KernelPoint,
    pub kind: ImplKind,
    pub argument: Option<KernelArg>,
}

/// What follows an implementation's `:`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KernelArg {
    /// Blocked attention's tile.
    Tile(i64),
    /// An imported kernel's calling convention.
    File(PathBuf),
}

impl fmt::Display for KernelArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelArg::Tile(t) => write!(f, "{t}"),
            KernelArg::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl KernelRequest {
    /// `point` computed by its plain graph.
    pub const fn plain(point: KernelPoint) -> KernelRequest {
        KernelRequest {
            point,
            kind: ImplKind::Hlo,
            argument: None,
        }
    }

    /// The implementation and its argument, as `--kernel` writes them
    /// after the `=` (`blocked:128`).
    pub fn implementation(&self) -> String {
        match &self.argument {
            Some(a) => format!("{}:{a}", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }

    /// Blocked attention's tile, when one is asked for.
    pub fn tile(&self) -> Option<i64> {
        match self.argument {
            Some(KernelArg::Tile(t)) => Some(t),
            _ => None,
        }
    }

    /// Reads `POINT=IMPL[:ARG]`.
    pub fn parse(text: &str) -> Result<KernelRequest, KernelRequestError> {
        let (point, implementation) = text
            .split_once('=')
            .ok_or_else(|| KernelRequestError::NoEquals(text.to_string()))?;
        let point = KernelPoint::from_name(point.trim()).ok_or_else(|| {
            KernelRequestError::UnknownPoint {
                given: point.to_string(),
            }
        })?;
        let (name, argument) = match implementation.split_once(':') {
            Some((name, arg)) => (name, Some(arg)),
            None => (implementation, None),
        };
        let kind = point
            .implementations()
            .iter()
            .copied()
            .find(|k| k.name() == name.trim())
            .ok_or_else(|| KernelRequestError::UnknownImplementation {
                point,
                given: name.to_string(),
            })?;
        let argument = match (kind, argument) {
            (ImplKind::Imported, None) => {
                return Err(KernelRequestError::BadArgument {
                    point,
                    implementation: kind,
                    given: String::new(),
                    expected: "a calling-convention file (imported:FILE)",
                })
            }
            (_, None) => None,
            (ImplKind::Imported, Some(file)) => Some(KernelArg::File(PathBuf::from(file))),
            (ImplKind::Blocked | ImplKind::Looped, Some(arg)) => Some(KernelArg::Tile(
                arg.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&t| t > 0)
                    .ok_or_else(|| KernelRequestError::BadArgument {
                        point,
                        implementation: kind,
                        given: arg.to_string(),
                        expected: "a tile size, a positive integer",
                    })?,
            )),
            (ImplKind::Hlo | ImplKind::Fused, Some(arg)) => {
                return Err(KernelRequestError::BadArgument {
                    point,
                    implementation: kind,
                    given: arg.to_string(),
                    expected: "nothing: it takes no argument",
                })
            }
        };
        Ok(KernelRequest {
            point,
            kind,
            argument,
        })
    }
}

impl fmt::Display for KernelRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.point, self.implementation())
    }
}

/// The list of names, for messages.
fn listed<T>(items: impl IntoIterator<Item = T>, name: impl Fn(T) -> &'static str) -> String {
    items.into_iter().map(name).collect::<Vec<_>>().join(", ")
}

/// A kernel request that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelRequestError {
    #[error("kernel '{0}' is not POINT=IMPLEMENTATION (for example attention=blocked)")]
    NoEquals(String),
    #[error(
        "unknown kernel point '{given}'; the points are: {}",
        listed(KernelPoint::ALL, KernelPoint::name)
    )]
    UnknownPoint { given: String },
    #[error("kernel point {point} has no implementation '{given}'; it has: {}", listed(point.implementations().iter().copied(), ImplKind::name))]
    UnknownImplementation { point: KernelPoint, given: String },
    #[error("{point}={}: '{given}' is not {expected}", implementation.name())]
    BadArgument {
        point: KernelPoint,
        implementation: ImplKind,
        given: String,
        expected: &'static str,
    },
    #[error("kernel point {0} is chosen twice")]
    Repeated(KernelPoint),
}

impl Serialize for Kernels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(KernelPoint::ALL.len()))?;
        for point in KernelPoint::ALL {
            // An imported kernel's file as an absolute path, so a bundle
            // that records it is read from any directory.
            let spelled = match self.of(point) {
                Chosen::Attention(AttentionKernel::Imported(k)) => {
                    let path = std::path::absolute(&k.path).unwrap_or_else(|_| k.path.clone());
                    format!("{}:{}", ImplKind::Imported.name(), path.display())
                }
                chosen => chosen.to_string(),
            };
            map.serialize_entry(point.name(), &spelled)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Kernels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let map = std::collections::BTreeMap::<String, String>::deserialize(d)?;
        let mut kernels = Kernels::default();
        for (point, spelled) in map {
            let request =
                KernelRequest::parse(&format!("{point}={spelled}")).map_err(D::Error::custom)?;
            // The kernel's files again, as the manifest names them.
            let chosen = Chosen::for_request(&request, None)
                .map_err(|e| D::Error::custom(format!("kernel {request}: {e}")))?;
            kernels = kernels.set(chosen);
        }
        Ok(kernels)
    }
}
