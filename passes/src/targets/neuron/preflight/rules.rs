//! The rule table: what neuronx-cc refuses or warns about that can be
//! seen in the HLO alone, one row per rule, each with the Neuron SDK page
//! it was read from.
//!
//! It is a `const` table of typed rows rather than a data file parsed at
//! run time: a matcher names an [`ElementType`], or an op by its
//! [`Opcode`] (checked against the op table as this table is compiled), so
//! a misspelt type or opcode is a compile error instead of a rule that silently
//! matches nothing, the table costs nothing to load (the check runs on
//! every `compile --target neuron`), and it is still one place, read top
//! to bottom, to change when the SDK changes. How a matcher is evaluated
//! is in `matcher.rs`; nothing here is code.
//!
//! Sources are paths in `aws-neuron/aws-neuron-sdk` at [`SDK_COMMIT`],
//! except where the SDK says nothing and NxD's source is the word
//! (`aws-neuron/neuronx-distributed:PATH`).
//! The wording of `what` and `advice` is hlatc's own.

use super::chip::{Chip, DowncastOp, IntegerFlags, Sdk};
use super::mx_contract::{MxCheck, MX_CUSTOM_CALLS};
use hlatc_compiler::ir::op::ComparisonDirection;
use hlatc_compiler::{ElementType, Opcode};

/// The `aws-neuron/aws-neuron-sdk` commit the rules were read from.
pub const SDK_COMMIT: &str = "81ce03ae261e12925e53437a0f690478e6366155";

/// Whether a finding stops a compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// neuronx-cc would stop with an error: `hlatc check` exits non-zero
    /// and `compile --target neuron` writes nothing.
    Refusal,
    /// neuronx-cc compiles it, saying something is lost (or hlatc cannot
    /// prove it is fine).
    Warning,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Refusal => "refusal",
            Severity::Warning => "warning",
        }
    }
}

/// The code neuronx-cc reports a rule's failure with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// A documented `NCC_` code (`Ncc("EVRF019")` is `NCC_EVRF019`).
    Ncc(&'static str),
    /// Documented as unsupported, on a page that gives no error code.
    Undocumented,
}

impl Code {
    /// As neuronx-cc prints it (`NCC_EVRF019`); `None` where no code is
    /// documented.
    pub fn ncc(self) -> Option<String> {
        match self {
            Code::Ncc(c) => Some(format!("NCC_{c}")),
            Code::Undocumented => None,
        }
    }
}

/// On which chip and under which integer flags a rule applies, and how
/// hard. A rule's first entry that names the chip and whose condition
/// holds decides; none: the rule does not apply there.
#[derive(Clone, Copy, Debug)]
pub struct When {
    pub chips: &'static [Chip],
    pub under: Under,
    pub severity: Severity,
}

/// What of neuronx-cc's integer flags a [`When`] asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Under {
    /// Nothing: whatever the flags.
    AnyFlags,
    /// `--implicit-integer-downcast` permits the rule's op.
    DowncastPermitted,
    /// It does not.
    DowncastRefused,
    /// 64-bit integers are narrowed to 32 bits: always on trn1, elsewhere
    /// without `--native-int64=enabled`.
    Int64Narrowed,
}

impl Under {
    fn holds(self, flags: IntegerFlags, chip: Chip, op: Option<DowncastOp>) -> bool {
        let permitted = || op.is_some_and(|op| flags.downcast.permits(op));
        match self {
            Under::AnyFlags => true,
            Under::DowncastPermitted => permitted(),
            Under::DowncastRefused => !permitted(),
            Under::Int64Narrowed => flags.narrows_int64(chip),
        }
    }
}

/// Ops a rule asks about the types of: those without an integer datapath
/// (run on f32, or narrowed, where `--implicit-integer-downcast` permits,
/// refused where it does not), and others with a type the chip lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypedOp {
    /// `dot`, either operand.
    Dot,
    /// A `scatter` whose update computation combines (add, multiply,
    /// minimum, maximum) rather than overwrites: its operand.
    ScatterWithCompute,
    /// `all-reduce` (and `all-reduce-start`), any operand.
    AllReduce,
    /// `reduce-scatter`, any operand.
    ReduceScatter,
    /// `power`, either operand.
    Power,
    /// `topk`, or a `AwsNeuronTopK` custom call: its input.
    TopK,
    /// `shift-right-arithmetic`: its first operand.
    ShiftRightArithmetic,
}

/// What a rule looks for. Each is evaluated per instruction, except
/// [`Matcher::InstructionLimit`], [`Matcher::IoOverHbm`] and
/// [`Matcher::IoAndScratchOverHbm`], which are the module's.
#[derive(Clone, Copy, Debug)]
pub enum Matcher {
    /// The instruction's result or an operand holds one of these types.
    ElementType(&'static [ElementType]),
    /// A `c64` result or operand of an op outside this list of opcodes.
    ComplexOutside(&'static [Opcode]),
    /// A result shape with a dynamic (`<=N`) or unbounded (`?`) dimension.
    DynamicShape,
    /// The op itself, by its HLO opcode.
    Opcode(Opcode),
    /// A custom call to a target outside these lists.
    CustomCallTargetNotIn(&'static [&'static [&'static str]]),
    /// A custom call to one of these targets.
    CustomCallTargetIn(&'static [&'static str]),
    /// An MX custom call that breaks one condition of its contract (see
    /// `mx_contract.rs`).
    Mx(MxCheck),
    /// An `AwsNeuronCustomNativeKernel` call whose `backend_config` is not
    /// base64 of a JSON object naming its `func_name` (see
    /// `native_kernel.rs`).
    NativeKernelConfigUnreadable,
    /// `rng-bit-generator` with an algorithm other than `rng_default`.
    RngAlgorithmNotDefault,
    /// `reduce-window` with other than one input and one init value.
    ReduceWindowVariadic,
    /// `reduce-window` with a base (input) dilation above 1.
    ReduceWindowBaseDilation,
    /// `reduce-window` with a window dilation above 1.
    ReduceWindowWindowDilation,
    /// `convolution` dilating both its input and its kernel.
    ConvolutionBothDilations,
    /// `convolution` with a stride above 1 and a dilated input.
    ConvolutionStrideWithBaseDilation,
    /// `reduce` of more than one input (a variadic reduction).
    VariadicReduce,
    /// The op on operands of one of these types.
    TypedOp(TypedOp, &'static [ElementType]),
    /// `sort` whose comparator compares in a direction outside this list.
    SortComparatorOutside(&'static [ComparisonDirection]),
    /// `while` whose trip count hlatc cannot find (see `trip_count.rs`).
    WhileWithoutStaticTripCount,
    /// `gather` whose indices are an iota reaching past the operand (see
    /// `index_bounds.rs`).
    GatherIotaOutOfBounds,
    /// `scatter` whose indices are an iota reaching past the operand.
    ScatterIotaOutOfBounds,
    /// An `s64` or `u64` constant with a value outside 32 bits.
    Wide64BitConstant,
    /// A result of type `s64` or `u64` (narrowed to 32 bits).
    Produces64BitInteger,
    /// The module's TensorE instructions, at least (see
    /// `instructions.rs`), above this many.
    InstructionLimit(u64),
    /// The module's input and output tensors (see `hbm.rs`) beyond a
    /// core's HBM.
    IoOverHbm,
    /// The module's input and output tensors within a core's HBM, but not
    /// with as much again of scratchpad.
    IoAndScratchOverHbm,
}

/// One thing neuronx-cc refuses or warns about.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// Stable and unique: what JSON output and tests name a rule by.
    pub id: &'static str,
    pub code: Code,
    pub matcher: Matcher,
    pub when: &'static [When],
    /// What is wrong, completing "instruction %x: ...".
    pub what: &'static str,
    /// What to do instead.
    pub advice: &'static str,
    /// Paths in `aws-neuron/aws-neuron-sdk` the rule was read from.
    pub sources: &'static [&'static str],
}

impl Matcher {
    /// Whether it judges the whole module rather than an instruction.
    pub fn is_module_level(&self) -> bool {
        matches!(
            self,
            Matcher::InstructionLimit(_) | Matcher::IoOverHbm | Matcher::IoAndScratchOverHbm
        )
    }
}

impl Rule {
    /// How hard the rule applies on `chip` under `flags`; `None` where it
    /// does not.
    pub fn severity(&self, chip: Chip, flags: impl Into<IntegerFlags>) -> Option<Severity> {
        let flags = flags.into();
        let op = self.downcast_op();
        self.when
            .iter()
            .find(|w| w.chips.contains(&chip) && w.under.holds(flags, chip, op))
            .map(|w| w.severity)
    }

    /// The op `--implicit-integer-downcast` names for what the rule finds.
    pub fn downcast_op(&self) -> Option<DowncastOp> {
        match self.matcher {
            Matcher::TypedOp(op, _) => match op {
                TypedOp::Dot => Some(DowncastOp::Dot),
                TypedOp::ScatterWithCompute => Some(DowncastOp::Scatter),
                TypedOp::AllReduce => Some(DowncastOp::AllReduce),
                TypedOp::ReduceScatter => Some(DowncastOp::ReduceScatter),
                TypedOp::Power => Some(DowncastOp::Pow),
                TypedOp::TopK | TypedOp::ShiftRightArithmetic => None,
            },
            _ => None,
        }
    }
}

const CHIPS: &[Chip] = &Chip::ALL;
/// trn2 and the chips after it, which share its data types and integer
/// behaviour (the data-types page: trn3 "supports all of the data types
/// available on NeuronCore v3, along with the same ... Integer Type
/// Conversion behaviors").
const TRN2_ON: &[Chip] = &[Chip::Trn2, Chip::Trn3];
const fn everywhere(severity: Severity) -> [When; 1] {
    [When {
        chips: CHIPS,
        under: Under::AnyFlags,
        severity,
    }]
}
const REFUSED: &[When] = &everywhere(Severity::Refusal);
const WARNED: &[When] = &everywhere(Severity::Warning);
/// Refused on trn2 and trn3 whatever the flags; nothing on trn1.
const TRN2_ON_REFUSED: &[When] = &[When {
    chips: TRN2_ON,
    under: Under::AnyFlags,
    severity: Severity::Refusal,
}];
/// Refused on trn1 and trn2; trn3 has the type.
const BEFORE_TRN3_REFUSED: &[When] = &[When {
    chips: &[Chip::Trn1, Chip::Trn2],
    under: Under::AnyFlags,
    severity: Severity::Refusal,
}];
/// `--implicit-integer-downcast`: a warning where it permits the op
/// (2.32's default, `all`), refused where it does not (the next
/// release's `none`).
const DOWNCAST: &[When] = &[
    When {
        chips: CHIPS,
        under: Under::DowncastPermitted,
        severity: Severity::Warning,
    },
    When {
        chips: CHIPS,
        under: Under::DowncastRefused,
        severity: Severity::Refusal,
    },
];
/// A 32-bit integer dot: trn1 multiplies it with a warning whatever the
/// flags; trn2 and later follow `--implicit-integer-downcast`.
const DOT_32: &[When] = &[
    When {
        chips: &[Chip::Trn1],
        under: Under::AnyFlags,
        severity: Severity::Warning,
    },
    When {
        chips: TRN2_ON,
        under: Under::DowncastPermitted,
        severity: Severity::Warning,
    },
    When {
        chips: TRN2_ON,
        under: Under::DowncastRefused,
        severity: Severity::Refusal,
    },
];
/// Where 64-bit integers are narrowed to 32 bits: always on trn1; on trn2
/// and later unless `--native-int64=enabled`, which the next release
/// makes the default.
const fn narrowed(severity: Severity) -> [When; 1] {
    [When {
        chips: CHIPS,
        under: Under::Int64Narrowed,
        severity,
    }]
}
const NARROWED_WARNED: &[When] = &narrowed(Severity::Warning);
const NARROWED_REFUSED: &[When] = &narrowed(Severity::Refusal);

const S32_U32: &[ElementType] = &[ElementType::S32, ElementType::U32];
const S64_U64: &[ElementType] = &[ElementType::S64, ElementType::U64];
const INT_32_64: &[ElementType] = &[
    ElementType::S32,
    ElementType::U32,
    ElementType::S64,
    ElementType::U64,
];

const DATA_TYPES: &str = "about-neuron/arch/neuron-features/data-types.rst";
const JAX_KNOWN_ISSUES: &str = "frameworks/jax/setup/jax-neuronx-known-issues.rst";
const COMPILER_NOTES: &str = "release-notes/components/compiler.rst";
/// The NKI guide to calling a kernel from JAX: its HLO shows the custom
/// call, whose `backend_config` is base64 of a JSON object with the
/// kernel's `func_name`.
const NKI_FRAMEWORK_GUIDE: &str = "nki/guides/framework_custom_op.rst";
const CLI_REFERENCE: &str = "compiler/neuronx-cc/api-reference-guide/index.rst";
/// Trainium3's page: its MX matmuls (MXFP8 and MXFP4 at 2,517 TFLOPS),
/// which Trainium2 does not have.
const TRAINIUM3: &str = "about-neuron/arch/neuron-hardware/trainium3.rst";
/// Where the SDK gives a NeuronCore's HBM: 16 GB on trn1, 24 GB on trn2
/// with LNC=2.
const HBM_PER_CORE: &str = "libraries/nxd-inference/developer_guides/feature-guide.rst";
/// The torch-neuronx page that says neuronx-cc does not support `sort`.
const TORCH_NEURONX_TRACE: &str =
    "frameworks/torch/torch-neuronx/api-reference-guide/inference/api-torch-neuronx-trace.rst";
/// Not a page of the SDK: a public report of `sort` refused by neuronx-cc
/// (on trn1, before 2.18 supported it there); trn2's own message, "[NCC_EVRF029]
/// Operation sort is not supported on trn2", has no page.
// Public for the crate's tests (tests/it/neuron_check.rs).
#[doc(hidden)]
pub const SORT_REPORT: &str = "https://github.com/aws-neuron/aws-neuron-sdk/issues/868";
/// Not a page of the SDK: NxD's `SPMDRank`, whose docstring is the one
/// public word on `replica-id` in a program every rank runs.
// Public for the crate's tests (tests/it/neuron_check.rs).
#[doc(hidden)]
pub const NXD_SPMD_RANK: &str =
    "aws-neuron/neuronx-distributed:src/neuronx_distributed/parallel_layers/layers.py";

/// The custom-call targets neuronx-cc recognizes (the list on the
/// EHCA005 and EVRF015 pages, the same on both).
pub const RECOGNIZED_CUSTOM_CALLS: &[&str] = &[
    "AwsNeuronErf",
    "AwsNeuronGelu",
    "AwsNeuronGeluApprxTanh",
    "AwsNeuronGeluBackward",
    "AwsNeuronSilu",
    "AwsNeuronSiluBackward",
    "AwsNeuronRmsNorm",
    "AwsNeuronSoftmax",
    "AwsNeuronSoftmaxBackward",
    "AwsNeuronCollectiveMatmul",
    "AwsNeuronIntMatmult",
    "AwsNeuronArgMax",
    "AwsNeuronArgMin",
    "AwsNeuronTopK",
    "AwsNeuronDropoutMaskV1",
    "AwsNeuronCustomNativeKernel",
    "AwsNeuronCustomOp",
    "AwsNeuronDevicePrint",
    "ResizeNearest",
    "ResizeBilinear",
    "ResizeNearestGrad",
    "AwsNeuronLNCShardingConstraint",
    "AwsNeuronTransferWithStaticRing",
    "AwsNeuronModuleMarkerStart-Forward",
    "AwsNeuronModuleMarkerStart-Backward",
    "AwsNeuronModuleMarkerEnd-Forward",
    "AwsNeuronModuleMarkerEnd-Backward",
    "NeuronBoundaryMarker-Start",
    "NeuronBoundaryMarker-End",
];

/// The ops 2.32 compiles on `complex64` (its release notes' list, in HLO
/// opcodes), and the ones that only pass a value on, which any program
/// holding a complex value has.
const COMPLEX64_OPS: &[Opcode] = &[
    Opcode::new("add"),
    Opcode::new("subtract"),
    Opcode::new("multiply"),
    Opcode::new("divide"),
    Opcode::new("compare"),
    Opcode::new("abs"),
    Opcode::new("exponential"),
    Opcode::new("sine"),
    Opcode::new("cosine"),
    Opcode::new("reshape"),
    Opcode::new("complex"),
    Opcode::new("real"),
    Opcode::new("imag"),
    Opcode::new("dot"),
    Opcode::new("broadcast"),
    Opcode::new("iota"),
    Opcode::new("negate"),
    Opcode::new("power"),
    Opcode::new("log"),
    Opcode::new("log-plus-one"),
    Opcode::new("exponential-minus-one"),
    Opcode::new("sqrt"),
    Opcode::new("rsqrt"),
    Opcode::new("tan"),
    Opcode::new("tanh"),
    Opcode::new("logistic"),
    Opcode::new("sign"),
    Opcode::new("select"),
    Opcode::new("transpose"),
    Opcode::new("reverse"),
    Opcode::new("slice"),
    Opcode::new("dynamic-slice"),
    Opcode::new("dynamic-update-slice"),
    Opcode::new("concatenate"),
    Opcode::new("pad"),
    Opcode::new("parameter"),
    Opcode::new("constant"),
    Opcode::new("tuple"),
    Opcode::new("get-tuple-element"),
];

/// The limit on instructions per module that EVRF007 reports. Not stated
/// on the SDK's pages (they say only "exceeds the limit"); 5,000,000 is
/// neuronx-cc's default as hlatc has known it, which is why the rule only
/// warns.
pub const INSTRUCTION_LIMIT: u64 = 5_000_000;

macro_rules! page {
    ($code:literal) => {
        concat!("compiler/error-codes/", $code, ".rst")
    };
}

/// Every rule, in the order findings are reported within an instruction.
pub const RULES: &[Rule] = &[
    Rule {
        id: "dynamic-shape",
        code: Code::Ncc("EMOD025"),
        matcher: Matcher::DynamicShape,
        when: REFUSED,
        what: "has a dynamic dimension; neuronx-cc compiles static shapes only",
        advice: "pad or bucket the input to a fixed size so every dimension is static",
        sources: &[page!("EMOD025")],
    },
    Rule {
        id: "complex128",
        code: Code::Ncc("EVRF004"),
        matcher: Matcher::ElementType(&[ElementType::C128]),
        when: REFUSED,
        what: "holds c128; Neuron has no complex128",
        advice: "keep the real and imaginary parts as two f32 arrays, or do this part on the host",
        sources: &[page!("EVRF004"), JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "complex64-op",
        code: Code::Ncc("EVRF004"),
        matcher: Matcher::ComplexOutside(COMPLEX64_OPS),
        when: REFUSED,
        what: "computes on c64 with an op outside the ones SDK 2.32 supports for complex64",
        advice: "split the value into real and imaginary f32 parts for this op",
        sources: &[page!("EVRF004"), COMPILER_NOTES],
    },
    Rule {
        id: "fp8-fnuz",
        code: Code::Ncc("EVRF005"),
        matcher: Matcher::ElementType(&[
            ElementType::F8E4M3FNUZ,
            ElementType::F8E4M3B11FNUZ,
            ElementType::F8E5M2FNUZ,
        ]),
        when: REFUSED,
        what: "holds an FNUZ 8-bit float type, which Neuron does not support",
        advice: "use f8e4m3 or f8e5m2, or a 16-bit float",
        sources: &[page!("EVRF005"), JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "f8e4m3fn",
        code: Code::Ncc("EVRF051"),
        matcher: Matcher::ElementType(&[ElementType::F8E4M3FN]),
        when: BEFORE_TRN3_REFUSED,
        what: "holds f8e4m3fn, which trn1 and trn2 do not support (trn3 does)",
        advice: "use f8e4m3 (neuronx-cc's --experimental-unsafe-fp8e4m3fn-as-fp8e4m3 converts it) or a 16-bit float",
        sources: &[page!("EVRF051")],
    },
    Rule {
        id: "fp8-other",
        code: Code::Ncc("ESPP047"),
        matcher: Matcher::ElementType(&[ElementType::F8E8M0FNU]),
        when: REFUSED,
        what: "holds f8e8m0fnu; of the 8-bit floats Neuron supports only f8e4m3 and f8e5m2 (and f8e3m4 on NeuronCore-v2)",
        advice: "convert to a supported 8-bit or 16-bit float",
        sources: &[page!("ESPP047"), JAX_KNOWN_ISSUES, DATA_TYPES],
    },
    Rule {
        id: "f4e2m1fn",
        code: Code::Ncc("ESPP004"),
        matcher: Matcher::ElementType(&[ElementType::F4E2M1FN]),
        when: REFUSED,
        what: "holds f4e2m1fn, which neuronx-cc cannot generate code for",
        advice: "use bf16 or another supported type",
        sources: &[page!("ESPP004")],
    },
    Rule {
        id: "f64",
        code: Code::Undocumented,
        matcher: Matcher::ElementType(&[ElementType::F64]),
        when: REFUSED,
        what: "holds f64, which is not among the types Trainium supports",
        advice: "compute in f32 (for hlatc compile: --precision fp32 or a bf16 preset)",
        sources: &[DATA_TYPES],
    },
    Rule {
        id: "custom-call-target",
        code: Code::Ncc("EHCA005"),
        matcher: Matcher::CustomCallTargetNotIn(&[RECOGNIZED_CUSTOM_CALLS, MX_CUSTOM_CALLS]),
        when: REFUSED,
        what: "calls a custom-call target neuronx-cc does not recognize",
        advice: "use one of the recognized AwsNeuron* targets, or write the computation in plain HLO",
        sources: &[page!("EHCA005"), page!("EVRF015")],
    },
    Rule {
        id: "mx-before-trn3",
        code: Code::Ncc("EVRF051"),
        matcher: Matcher::CustomCallTargetIn(MX_CUSTOM_CALLS),
        when: BEFORE_TRN3_REFUSED,
        what: "is an MX custom call, which needs Trainium3 (trn1 and trn2 refuse F8E4M3FN for QuantizeMX, and neither has an MX matmul)",
        advice: "compile for trn3 (--chip trn3), or multiply in bf16 or f8e4m3 with plain dots",
        sources: &[page!("EVRF051"), TRAINIUM3],
    },
    Rule {
        id: "quantize-mx-config",
        code: Code::Ncc("EVRF036"),
        matcher: Matcher::Mx(MxCheck::QuantizeConfig),
        when: REFUSED,
        what: "is a QuantizeMX whose backend_config is missing or not JSON",
        advice: "give backend_config a JSON object: {\"dtype\": \"float8_e4m3fn\", \"dim\": -1, \"block_size\": 32, \"scale_method\": \"EMAX\"}",
        sources: &[page!("EVRF036")],
    },
    Rule {
        id: "quantize-mx-operands",
        code: Code::Ncc("EVRF037"),
        matcher: Matcher::Mx(MxCheck::QuantizeOperands),
        when: REFUSED,
        what: "is a QuantizeMX without exactly one operand",
        advice: "quantize one tensor per call",
        sources: &[page!("EVRF037")],
    },
    Rule {
        id: "quantize-mx-dim",
        code: Code::Ncc("EVRF038"),
        matcher: Matcher::Mx(MxCheck::QuantizeDim),
        when: REFUSED,
        what: "is a QuantizeMX along a dimension other than the last or the one before it",
        advice: "quantize along dim -1 or -2 (transpose the input first)",
        sources: &[page!("EVRF038")],
    },
    Rule {
        id: "quantize-mx-block-size",
        code: Code::Ncc("EVRF039"),
        matcher: Matcher::Mx(MxCheck::QuantizeBlockSize),
        when: REFUSED,
        what: "is a QuantizeMX with a block size other than 32, the OCP MX block",
        advice: "use block_size 32",
        sources: &[page!("EVRF039")],
    },
    Rule {
        id: "quantize-mx-scale-method",
        code: Code::Ncc("EVRF040"),
        matcher: Matcher::Mx(MxCheck::QuantizeScaleMethod),
        when: REFUSED,
        what: "is a QuantizeMX with a scale method other than EMAX",
        advice: "use scale_method EMAX",
        sources: &[page!("EVRF040")],
    },
    Rule {
        id: "quantize-mx-input",
        code: Code::Ncc("EVRF041"),
        matcher: Matcher::Mx(MxCheck::QuantizeInput),
        when: REFUSED,
        what: "is a QuantizeMX of an input that is neither bf16 nor f16",
        advice: "convert the input to bf16 first",
        sources: &[page!("EVRF041")],
    },
    Rule {
        id: "quantize-mx-malformed",
        code: Code::Ncc("EVRF042"),
        matcher: Matcher::Mx(MxCheck::QuantizeMalformed),
        when: REFUSED,
        what: "is a QuantizeMX whose dtype is not float8_e5m2 or float8_e4m3fn, or whose data is not u32 of the input's shape with the quantized dimension divided by four",
        advice: "name a supported dtype and declare the data u32, four 8-bit values to an element",
        sources: &[page!("EVRF042")],
    },
    Rule {
        id: "quantize-mx-tuple",
        code: Code::Ncc("EVRF057"),
        matcher: Matcher::Mx(MxCheck::QuantizeTuple),
        when: REFUSED,
        what: "is a QuantizeMX whose result is not a tuple of two (the data and the scales)",
        advice: "declare the result (data, scales)",
        sources: &[page!("EVRF057")],
    },
    Rule {
        id: "quantize-mx-divisible",
        code: Code::Ncc("EVRF058"),
        matcher: Matcher::Mx(MxCheck::QuantizeDivisible),
        when: REFUSED,
        what: "is a QuantizeMX whose quantized dimension is not divisible by four",
        advice: "pad the quantized dimension to a multiple of four",
        sources: &[page!("EVRF058")],
    },
    Rule {
        id: "block-scaled-dot-operands",
        code: Code::Ncc("EVRF043"),
        matcher: Matcher::Mx(MxCheck::DotOperands),
        when: REFUSED,
        what: "is a block-scaled dot without its four operands (lhs, rhs, lhs scales, rhs scales)",
        advice: "pass the data and the scales of both QuantizeMX calls",
        sources: &[page!("EVRF043")],
    },
    Rule {
        id: "block-scaled-dot-lhs-type",
        code: Code::Ncc("EVRF044"),
        matcher: Matcher::Mx(MxCheck::DotLhsType),
        when: REFUSED,
        what: "is a block-scaled dot whose lhs is not QuantizeMX's packed u32 data",
        advice: "pass the u32 data QuantizeMX returns",
        sources: &[page!("EVRF044")],
    },
    Rule {
        id: "block-scaled-dot-output",
        code: Code::Ncc("EVRF045"),
        matcher: Matcher::Mx(MxCheck::DotOutput),
        when: REFUSED,
        what: "is a block-scaled dot whose result is neither f32 nor bf16",
        advice: "declare the result f32 or bf16",
        sources: &[page!("EVRF045")],
    },
    Rule {
        id: "block-scaled-dot-lhs-rank",
        code: Code::Ncc("EVRF046"),
        matcher: Matcher::Mx(MxCheck::DotLhsRank),
        when: REFUSED,
        what: "is a block-scaled dot whose lhs has fewer than two dimensions",
        advice: "reshape the lhs to a matrix",
        sources: &[page!("EVRF046")],
    },
    Rule {
        id: "block-scaled-dot-rhs-rank",
        code: Code::Ncc("EVRF047"),
        matcher: Matcher::Mx(MxCheck::DotRhsRank),
        when: REFUSED,
        what: "is a block-scaled dot whose rhs has fewer than two dimensions",
        advice: "reshape the rhs to a matrix",
        sources: &[page!("EVRF047")],
    },
    Rule {
        id: "block-scaled-dot-batch-sizes",
        code: Code::Ncc("EVRF048"),
        matcher: Matcher::Mx(MxCheck::DotBatchSizes),
        when: REFUSED,
        what: "is a block-scaled dot whose batch dimensions hold different numbers of elements on its two sides",
        advice: "make the products of the batch sizes equal",
        sources: &[page!("EVRF048")],
    },
    Rule {
        id: "block-scaled-dot-config",
        code: Code::Ncc("EVRF049"),
        matcher: Matcher::Mx(MxCheck::DotConfig),
        when: REFUSED,
        what: "is a block-scaled dot whose backend_config is not JSON with integer dimension lists",
        advice: "write scaled_dot_backend_config with integer lists, or leave backend_config empty",
        sources: &[page!("EVRF049")],
    },
    Rule {
        id: "block-scaled-dot-contracting-sizes",
        code: Code::Ncc("EVRF050"),
        matcher: Matcher::Mx(MxCheck::DotContractingSizes),
        when: REFUSED,
        what: "is a block-scaled dot whose contracting dimensions differ in size",
        advice: "contract dimensions of the same size",
        sources: &[page!("EVRF050")],
    },
    Rule {
        id: "block-scaled-dot-contracting-batch",
        code: Code::Ncc("EVRF053"),
        matcher: Matcher::Mx(MxCheck::DotContractingIsBatch),
        when: REFUSED,
        what: "is a block-scaled dot that contracts one of its batch dimensions",
        advice: "keep batch and contracting dimensions apart",
        sources: &[page!("EVRF053")],
    },
    Rule {
        id: "block-scaled-dot-batch-bounds",
        code: Code::Ncc("EVRF054"),
        matcher: Matcher::Mx(MxCheck::DotBatchBounds),
        when: REFUSED,
        what: "is a block-scaled dot with a batch dimension outside its operand's rank",
        advice: "name batch dimensions within the rank",
        sources: &[page!("EVRF054")],
    },
    Rule {
        id: "block-scaled-dot-contracting-bounds",
        code: Code::Ncc("EVRF055"),
        matcher: Matcher::Mx(MxCheck::DotContractingBounds),
        when: REFUSED,
        what: "is a block-scaled dot with a contracting dimension outside its operand's rank",
        advice: "name a contracting dimension within the rank",
        sources: &[page!("EVRF055")],
    },
    Rule {
        id: "native-kernel-config",
        code: Code::Undocumented,
        matcher: Matcher::NativeKernelConfigUnreadable,
        when: REFUSED,
        what: "calls an NKI kernel whose backend_config is not the base64 JSON that NKI writes",
        advice: "bring the kernel as NKI lowers it (on a Neuron machine, jax.jit(f).lower(...) of a function that calls the @nki.jit kernel), not a hand-edited config",
        sources: &[NKI_FRAMEWORK_GUIDE],
    },
    Rule {
        id: "rng-algorithm",
        code: Code::Ncc("EVRF006"),
        matcher: Matcher::RngAlgorithmNotDefault,
        when: REFUSED,
        what: "asks rng-bit-generator for an algorithm other than rng_default",
        advice: "leave the algorithm to the default (in JAX, the rbg PRNG implementation)",
        sources: &[page!("EVRF006"), JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "reduce-window-operands",
        code: Code::Ncc("EVRF019"),
        matcher: Matcher::ReduceWindowVariadic,
        when: REFUSED,
        what: "reduces windows of several inputs at once; neuronx-cc takes one input and one init value",
        advice: "split it into one reduce-window per input",
        sources: &[page!("EVRF019")],
    },
    Rule {
        id: "reduce-window-base-dilation",
        code: Code::Ncc("EVRF017"),
        matcher: Matcher::ReduceWindowBaseDilation,
        when: REFUSED,
        what: "has a base dilation above 1, which neuronx-cc does not support",
        advice: "dilate the input explicitly (pad with interior padding) and use base dilation 1",
        sources: &[page!("EVRF017")],
    },
    Rule {
        id: "reduce-window-window-dilation",
        code: Code::Ncc("EVRF018"),
        matcher: Matcher::ReduceWindowWindowDilation,
        when: REFUSED,
        what: "has a window dilation above 1, which neuronx-cc does not support",
        advice: "use window dilation 1 (gather the dilated elements with strided slices first)",
        sources: &[page!("EVRF018")],
    },
    Rule {
        id: "convolution-both-dilations",
        code: Code::Ncc("EVRF010"),
        matcher: Matcher::ConvolutionBothDilations,
        when: REFUSED,
        what: "dilates both its input and its kernel, which neuronx-cc does not support",
        advice: "dilate only one of them",
        sources: &[page!("EVRF010")],
    },
    Rule {
        id: "convolution-stride-with-input-dilation",
        code: Code::Ncc("EVRF011"),
        matcher: Matcher::ConvolutionStrideWithBaseDilation,
        when: REFUSED,
        what: "strides over a dilated input, which neuronx-cc does not support",
        advice: "drop the stride or the input dilation, or upsample and downsample in separate steps",
        sources: &[page!("EVRF011")],
    },
    Rule {
        id: "topk-integer",
        code: Code::Ncc("EVRF013"),
        matcher: Matcher::TypedOp(TypedOp::TopK, INT_32_64),
        when: REFUSED,
        what: "takes the top k of an integer tensor; neuronx-cc's TopK takes floats",
        advice: "convert the input to a float type first",
        sources: &[page!("EVRF013")],
    },
    Rule {
        id: "scatter-reduce-pred",
        code: Code::Ncc("EVRF016"),
        matcher: Matcher::TypedOp(TypedOp::ScatterWithCompute, &[ElementType::Pred]),
        when: REFUSED,
        what: "scatters with a reduction into a pred tensor; scatter-with-compute works on floats",
        advice: "convert the operand and updates to a float type (f32 or bf16)",
        sources: &[page!("EVRF016")],
    },
    Rule {
        id: "shift-right-arithmetic-width",
        code: Code::Ncc("EVRF022"),
        matcher: Matcher::TypedOp(
            TypedOp::ShiftRightArithmetic,
            &[
                ElementType::S2,
                ElementType::S4,
                ElementType::S8,
                ElementType::S16,
                ElementType::S64,
                ElementType::U2,
                ElementType::U4,
                ElementType::U8,
                ElementType::U16,
                ElementType::U64,
            ],
        ),
        when: REFUSED,
        what: "shifts right arithmetically on a type that is not 32 bits wide",
        advice: "convert the first operand to s32, u32 or f32",
        sources: &[page!("EVRF022")],
    },
    Rule {
        id: "integer-dot-32",
        code: Code::Ncc("EVRF035"),
        matcher: Matcher::TypedOp(TypedOp::Dot, S32_U32),
        when: DOT_32,
        what: "multiplies 32-bit integer matrices, which run in f32 (exact only below 2^24)",
        advice: "where its sums provably stay below 2^24, pass integer-dot-to-f32 (in `hlatc opt --target neuron`) computes it exactly in f32; otherwise convert the operands to a float type, or pass --implicit-integer-downcast=dot to accept the f32 product",
        sources: &[page!("EVRF035"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "integer-dot-64",
        code: Code::Ncc("EVRF035"),
        matcher: Matcher::TypedOp(TypedOp::Dot, S64_U64),
        when: DOWNCAST,
        what: "multiplies 64-bit integer matrices, which run in f32 (exact only below 2^24)",
        advice: "where its sums provably stay below 2^24, pass integer-dot-to-f32 (in `hlatc opt --target neuron`) computes it exactly in f32; otherwise convert the operands to a float type, or pass --implicit-integer-downcast=dot to accept the f32 product",
        sources: &[page!("EVRF035"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "integer-scatter-reduce",
        code: Code::Ncc("EVRF060"),
        matcher: Matcher::TypedOp(TypedOp::ScatterWithCompute, INT_32_64),
        when: DOWNCAST,
        what: "scatters with a reduction into an integer tensor, which runs in f32 (exact only below 2^24)",
        advice: "scatter floats, or pass --implicit-integer-downcast=scatter to accept f32",
        sources: &[page!("EVRF060"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "integer-all-reduce",
        code: Code::Ncc("EVRF061"),
        matcher: Matcher::TypedOp(TypedOp::AllReduce, INT_32_64),
        when: DOWNCAST,
        what: "all-reduces integers, which the collective engine sums in f32 (exact only below 2^24)",
        advice: "all-reduce floats, or pass --implicit-integer-downcast=all_reduce to accept f32",
        sources: &[page!("EVRF061"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "integer-power-64",
        code: Code::Ncc("EVRF062"),
        matcher: Matcher::TypedOp(TypedOp::Power, S64_U64),
        when: DOWNCAST,
        what: "raises 64-bit integers to a power, which runs on 32-bit integers",
        advice: "compute the power in s32 or a float type, or pass --implicit-integer-downcast=pow to accept s32",
        sources: &[page!("EVRF062"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "integer-reduce-scatter",
        code: Code::Ncc("EVRF063"),
        matcher: Matcher::TypedOp(TypedOp::ReduceScatter, INT_32_64),
        when: DOWNCAST,
        what: "reduce-scatters integers, which the collective engine sums in f32 (exact only below 2^24)",
        advice: "reduce-scatter floats, or pass --implicit-integer-downcast=reduce_scatter to accept f32",
        sources: &[page!("EVRF063"), COMPILER_NOTES, CLI_REFERENCE],
    },
    Rule {
        id: "wide-64-bit-constant",
        code: Code::Ncc("ESFH002"),
        matcher: Matcher::Wide64BitConstant,
        when: NARROWED_REFUSED,
        what: "is a 64-bit integer constant with a value outside 32 bits, which narrowing to 32 bits cannot keep",
        advice: "keep constants within 32 bits (u32 or s32), or restructure to avoid the large value",
        sources: &[page!("ESFH002"), DATA_TYPES],
    },
    Rule {
        id: "narrowed-64-bit-integer",
        code: Code::Undocumented,
        matcher: Matcher::Produces64BitInteger,
        when: NARROWED_WARNED,
        what: "is a 64-bit integer, which neuronx-cc narrows to 32 bits (values beyond 2^31 are lost)",
        advice: "use s32 where the values fit; on trn2, --native-int64=enabled keeps 64 bits",
        sources: &[DATA_TYPES, CLI_REFERENCE],
    },
    Rule {
        id: "replica-id",
        code: Code::Undocumented,
        matcher: Matcher::Opcode(Opcode::new("replica-id")),
        when: WARNED,
        what: "reads the rank from replica-id, which is not known to compile in one program for every rank: NxD feeds the rank as an input instead (SPMDRank, \"to be replaced with ReplicaID in HLO once compiler adds support\")",
        advice: "compile with --rank-source input (the default for --target neuron): each rank is fed its number as the s32[1] input `rank`",
        sources: &[NXD_SPMD_RANK],
    },
    Rule {
        id: "gather-iota-out-of-bounds",
        code: Code::Ncc("EVRF056"),
        matcher: Matcher::GatherIotaOutOfBounds,
        when: REFUSED,
        what: "gathers at indices from an iota that run past the operand's dimension",
        advice: "make the iota no longer than the dimension it indexes (a position table needs max_position_embeddings >= the sequence length)",
        sources: &[page!("EVRF056")],
    },
    Rule {
        id: "scatter-iota-out-of-bounds",
        code: Code::Ncc("EVRF031"),
        matcher: Matcher::ScatterIotaOutOfBounds,
        when: REFUSED,
        what: "scatters at indices from an iota that run past the operand's dimension",
        advice: "make the iota (and the updates) no longer than the dimension it indexes",
        sources: &[page!("EVRF031")],
    },
    Rule {
        id: "sort-trn2",
        code: Code::Undocumented,
        matcher: Matcher::Opcode(Opcode::new("sort")),
        when: TRN2_ON_REFUSED,
        what: "is a sort, which neuronx-cc does not support on trn2 (it reports NCC_EVRF029, a code without a page); trn3 is held to the same, as it shares trn2's code generator (2.31's notes)",
        advice: "a top k of a descending sort becomes AwsNeuronTopK with `hlatc opt --target neuron` (pass sort-to-topk); otherwise sort on the host or with an NKI kernel",
        sources: &[TORCH_NEURONX_TRACE, SORT_REPORT, COMPILER_NOTES],
    },
    Rule {
        id: "conditional",
        code: Code::Undocumented,
        matcher: Matcher::Opcode(Opcode::new("conditional")),
        when: REFUSED,
        what: "is a conditional, which Neuron does not support",
        advice: "compute both branches and choose with select, or branch on the host",
        sources: &[JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "reduce-precision",
        code: Code::Undocumented,
        matcher: Matcher::Opcode(Opcode::new("reduce-precision")),
        when: REFUSED,
        what: "is a reduce-precision, which Neuron does not support",
        advice: "convert to the narrower type and back instead",
        sources: &[JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "variadic-reduce",
        code: Code::Undocumented,
        matcher: Matcher::VariadicReduce,
        when: REFUSED,
        what: "reduces several inputs at once (a variadic reduction), which Neuron does not support",
        advice: "reduce each input on its own (an argmax becomes a max, then a compare and a min over indices)",
        sources: &[JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "sort-comparator",
        code: Code::Undocumented,
        matcher: Matcher::SortComparatorOutside(&[
            ComparisonDirection::Lt,
            ComparisonDirection::Le,
            ComparisonDirection::Gt,
            ComparisonDirection::Ge,
        ]),
        when: REFUSED,
        what: "sorts with a comparator that compares for equality; Neuron's sort takes LT, LE, GT and GE comparisons only",
        advice: "sort by one key with a single ordering comparison",
        sources: &[JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "dynamic-while",
        code: Code::Undocumented,
        matcher: Matcher::WhileWithoutStaticTripCount,
        when: WARNED,
        what: "is a while loop whose trip count hlatc cannot find; Neuron runs only loops with a static trip count",
        advice: "loop over a counter from a constant to a constant (a scan or fori_loop), or unroll it",
        sources: &[JAX_KNOWN_ISSUES],
    },
    Rule {
        id: "unsupported-operator",
        code: Code::Ncc("EUOC002"),
        matcher: Matcher::Opcode(Opcode::new("triangular-solve")),
        when: REFUSED,
        what: "is a triangular-solve, an operator neuronx-cc does not support",
        advice: "multiply by the inverse instead (slower, same result), or solve on the host",
        sources: &[page!("EUOC002"), page!("EVRF001")],
    },
    Rule {
        id: "io-over-hbm",
        code: Code::Ncc("EOOM001"),
        matcher: Matcher::IoOverHbm,
        when: REFUSED,
        what: "needs more device memory for its input and output tensors alone than a NeuronCore has",
        advice: "divide it over more cores (hlatc compile --tp, --dp, --zero1) or lower the batch or sequence length",
        sources: &[page!("EOOM001"), page!("EOOM002"), HBM_PER_CORE],
    },
    Rule {
        id: "io-and-scratch-over-hbm",
        code: Code::Ncc("EOOM002"),
        matcher: Matcher::IoAndScratchOverHbm,
        when: WARNED,
        what: "fits its input and output tensors in a NeuronCore's memory, but not with as much again of scratchpad, the budget compiled modules are observed to need",
        advice: "divide it over more cores (hlatc compile --tp, --dp, --zero1) or lower the batch or sequence length; this is an estimate, which neuronx-cc decides",
        sources: &[page!("EOOM001"), page!("EOOM002"), HBM_PER_CORE],
    },
    Rule {
        id: "instruction-limit",
        code: Code::Ncc("EVRF007"),
        matcher: Matcher::InstructionLimit(INSTRUCTION_LIMIT),
        when: WARNED,
        what: "needs more TensorE instructions than neuronx-cc's per-module limit",
        advice: "shard it (raise --tp), or lower the batch size or sequence length",
        sources: &[page!("EVRF007")],
    },
];

/// A rule by its id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// The rule table as Markdown, for the book: code, id, how hard it
/// applies per chip under each SDK's defaults, what it finds, and its
/// sources.
pub fn markdown_table() -> String {
    let columns: Vec<(Chip, Sdk)> = Chip::ALL
        .into_iter()
        .flat_map(|c| Sdk::ALL.into_iter().map(move |v| (c, v)))
        .collect();
    let heads: Vec<String> = columns.iter().map(|(c, v)| format!("{c} {v}")).collect();
    let mut out = format!(
        "| code | rule | {} | finds an instruction that | sources |\n| --- | --- | {}--- | --- |\n",
        heads.join(" | "),
        "--- | ".repeat(columns.len())
    );
    for r in RULES {
        let code = r
            .code
            .ncc()
            .map_or_else(|| "none documented".to_string(), |c| format!("`{c}`"));
        let cells: Vec<&str> = columns
            .iter()
            .map(|&(c, v)| r.severity(c, v).map_or("", Severity::name))
            .collect();
        let sources: Vec<String> = r.sources.iter().map(|s| format!("`{s}`")).collect();
        out.push_str(&format!(
            "| {code} | `{}` | {} | {} | {} |\n",
            r.id,
            cells.join(" | "),
            r.what,
            sources.join(", ")
        ));
    }
    out
}
