//! Every rule of the Neuron pre-flight on a module made to trigger exactly
//! it, and on a near miss that is accepted: the finding names the rule's
//! code, the instruction, and the line and column it is written at.

use hlatc_compiler::formats::text::{instruction_positions, parse_module};
use hlatc_passes::neuron_check::{check_module, CheckReport, Chip, Code, Sdk, Severity, RULES};

/// One rule's trigger and near miss.
struct Case {
    rule: &'static str,
    chip: Chip,
    sdk: Sdk,
    severity: Severity,
    /// The instruction the finding names (`None`: the module).
    at: Option<&'static str>,
    /// What the finding's detail says.
    detail: &'static str,
    trigger: &'static str,
    near_miss: &'static str,
}

const T1: Chip = Chip::Trn1;
const T2: Chip = Chip::Trn2;
const T3: Chip = Chip::Trn3;
const V232: Sdk = Sdk::V2_32;
const NEXT: Sdk = Sdk::Next;
const R: Severity = Severity::Refusal;
const W: Severity = Severity::Warning;

const CASES: &[Case] = &[
    Case {
        rule: "mx-before-trn3",
        chip: T2,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "target \"QuantizeMX\"",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  w = bf16[64,16] parameter(1)
  ROOT d = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#,
    },
    Case {
        rule: "quantize-mx-config",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "no backend_config",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-operands",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "2 operands",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x, x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-dim",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "dim 0 of a rank-3 input",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,8,64] parameter(0)
  ROOT q = (u32[4,8,16], u8[4,8,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": 0}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-block-size",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "block_size 16",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1, \"block_size\": 16}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-scale-method",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "scale_method \"MEAN\"",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1, \"scale_method\": \"MEAN\"}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-input",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "f32 input",
        trigger: r#"HloModule m

ENTRY e {
  x = f32[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-malformed",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "dtype \"float8_e4m3\"",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-tuple",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "a tuple of 3",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "quantize-mx-divisible",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("q"),
        detail: "dimension 1 of 30",
        trigger: r#"HloModule m

ENTRY e {
  x = bf16[4,30] parameter(0)
  ROOT q = (u32[4,7], u8[4,1]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  x = bf16[4,64] parameter(0)
  ROOT q = (u32[4,16], u8[4,2]) custom-call(x), custom_call_target="QuantizeMX", backend_config="{\"dtype\": \"float8_e4m3fn\", \"dim\": -1}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-operands",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "3 operands",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-lhs-type",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "bf16 lhs",
        trigger: r#"HloModule m

ENTRY e {
  a = bf16[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-output",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "s32 result",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = s32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-lhs-rank",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "rank-1 lhs",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [0], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-rhs-rank",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "rank-1 rhs",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-batch-sizes",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs batch 2, rhs batch 3",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[2,4,16] parameter(0)
  b = u32[3,16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[2,4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_batch_dimensions\": [0], \"rhs_batch_dimensions\": [0], \"lhs_contracting_dimensions\": [2], \"rhs_contracting_dimensions\": [1]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-config",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs_contracting_dimensions holds \"one\"",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [\"one\"]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-contracting-sizes",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs contracts 16, rhs 8",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[8,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-contracting-batch",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs dimension 0 both contracted and a batch dimension",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[2,4,16] parameter(0)
  b = u32[2,16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_batch_dimensions\": [0], \"rhs_batch_dimensions\": [0], \"lhs_contracting_dimensions\": [0], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-batch-bounds",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs batch dimension 5",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_batch_dimensions\": [5], \"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "block-scaled-dot-contracting-bounds",
        chip: T3,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "lhs contracting dimension 2",
        trigger: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [2], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
        near_miss: r#"HloModule m

ENTRY e {
  a = u32[4,16] parameter(0)
  b = u32[16,16] parameter(1)
  sa = u8[4,2] parameter(2)
  sb = u8[2,16] parameter(3)
  ROOT d = f32[4,16] custom-call(a, b, sa, sb), custom_call_target="__op$block_scaled_dot", backend_config="{\"scaled_dot_backend_config\": {\"lhs_contracting_dimensions\": [1], \"rhs_contracting_dimensions\": [0]}}"
}
"#,
    },
    Case {
        rule: "dynamic-shape",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("d"),
        detail: "dimension of f32 is dynamic",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  n = s32[] constant(4)\n  ROOT d = f32[<=8] set-dimension-size(p, n), dimensions={0}\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT d = f32[8] negate(p)\n}\n",
    },
    Case {
        rule: "complex128",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("p"),
        detail: "c128 result",
        trigger: "HloModule m\n\nENTRY e {\n  ROOT p = c128[2] parameter(0)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  ROOT p = c64[2] parameter(0)\n}\n",
    },
    Case {
        rule: "complex64-op",
        chip: T2,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "copy on c64",
        trigger: "HloModule m\n\nENTRY e {\n  p = c64[2] parameter(0)\n  ROOT c = c64[2] copy(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = c64[2] parameter(0)\n  ROOT c = c64[2] negate(p)\n}\n",
    },
    Case {
        rule: "fp8-fnuz",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "f8e4m3fnuz result",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e4m3fnuz[2] convert(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e4m3[2] convert(p)\n}\n",
    },
    Case {
        rule: "f8e4m3fn",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("c"),
        detail: "f8e4m3fn result",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e4m3fn[2] convert(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e5m2[2] convert(p)\n}\n",
    },
    Case {
        rule: "fp8-other",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "f8e8m0fnu result",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e8m0fnu[2] convert(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f8e5m2[2] convert(p)\n}\n",
    },
    Case {
        rule: "f4e2m1fn",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "f4e2m1fn result",
        trigger: "HloModule m\n\nENTRY e {\n  p = bf16[2] parameter(0)\n  ROOT c = f4e2m1fn[2] convert(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = bf16[2] convert(p)\n}\n",
    },
    Case {
        rule: "f64",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "f64 result",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f64[2] convert(p)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f16[2] convert(p)\n}\n",
    },
    Case {
        rule: "custom-call-target",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "target \"MyKernel\"",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"MyKernel\"\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"AwsNeuronSilu\"\n}\n",
    },
    Case {
        rule: "native-kernel-config",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "its backend_config's JSON has no string 'func_name'",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"AwsNeuronCustomNativeKernel\", backend_config=\"eyJncmlkIjogWzFdfQ==\"\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"AwsNeuronCustomNativeKernel\", backend_config=\"eyJmdW5jX25hbWUiOiAiayIsICJncmlkIjogWzFdfQ==\"\n}\n",
    },
    Case {
        rule: "rng-algorithm",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("r"),
        detail: "rng_three_fry",
        trigger: "HloModule m\n\nENTRY e {\n  s = u64[2] parameter(0)\n  ROOT r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_three_fry\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  s = u64[2] parameter(0)\n  ROOT r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_default\n}\n",
    },
    Case {
        rule: "reduce-window-operands",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("r"),
        detail: "4 operands",
        trigger: "HloModule m\n\nmax2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n  d = f32[] parameter(3)\n  m1 = f32[] maximum(a, c)\n  m2 = f32[] maximum(b, d)\n  ROOT t = (f32[], f32[]) tuple(m1, m2)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  i = f32[] constant(0)\n  ROOT r = (f32[2], f32[2]) reduce-window(x, y, i, i), window={size=2 stride=2}, to_apply=max2\n}\n",
        near_miss: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[2] reduce-window(x, i), window={size=2 stride=2}, to_apply=max1\n}\n",
    },
    Case {
        rule: "reduce-window-base-dilation",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("r"),
        detail: "base dilation 2",
        trigger: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[6] reduce-window(x, i), window={size=2 lhs_dilate=2}, to_apply=max1\n}\n",
        near_miss: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[3] reduce-window(x, i), window={size=2}, to_apply=max1\n}\n",
    },
    Case {
        rule: "reduce-window-window-dilation",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("r"),
        detail: "window dilation 2",
        trigger: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[2] reduce-window(x, i), window={size=2 rhs_dilate=2}, to_apply=max1\n}\n",
        near_miss: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[2] reduce-window(x, i), window={size=3}, to_apply=max1\n}\n",
    },
    Case {
        rule: "convolution-both-dilations",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "lhs_dilate and rhs_dilate",
        trigger: "HloModule m\n\nENTRY e {\n  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n  ROOT c = f32[1,5,1] convolution(x, k), window={size=2 lhs_dilate=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n  ROOT c = f32[1,2,1] convolution(x, k), window={size=2 rhs_dilate=2}, dim_labels=b0f_0io->b0f\n}\n",
    },
    Case {
        rule: "convolution-stride-with-input-dilation",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "stride and lhs_dilate",
        trigger: "HloModule m\n\nENTRY e {\n  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n  ROOT c = f32[1,3,1] convolution(x, k), window={size=2 stride=2 lhs_dilate=2}, dim_labels=b0f_0io->b0f\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n  ROOT c = f32[1,2,1] convolution(x, k), window={size=2 stride=2}, dim_labels=b0f_0io->b0f\n}\n",
    },
    Case {
        rule: "topk-integer",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("t"),
        detail: "s32 operands",
        trigger: "HloModule m\n\nENTRY e {\n  x = s32[1,4] parameter(0)\n  ROOT t = (s32[1,2], s32[1,2]) topk(x), k=2, largest=true\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  x = f32[1,4] parameter(0)\n  ROOT t = (f32[1,2], s32[1,2]) topk(x), k=2, largest=true\n}\n",
    },
    Case {
        rule: "scatter-reduce-pred",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("s"),
        detail: "pred operands",
        trigger: "HloModule m\n\nany {\n  a = pred[] parameter(0)\n  b = pred[] parameter(1)\n  ROOT o = pred[] or(a, b)\n}\n\nENTRY e {\n  x = pred[4] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = pred[2] parameter(2)\n  ROOT s = pred[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=any\n}\n",
        near_miss: "HloModule m\n\nlast {\n  a = pred[] parameter(0)\n  ROOT b = pred[] parameter(1)\n}\n\nENTRY e {\n  x = pred[4] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = pred[2] parameter(2)\n  ROOT s = pred[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=last\n}\n",
    },
    Case {
        rule: "shift-right-arithmetic-width",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("s"),
        detail: "s16 operands",
        trigger: "HloModule m\n\nENTRY e {\n  a = s16[3] parameter(0)\n  b = s16[3] parameter(1)\n  ROOT s = s16[3] shift-right-arithmetic(a, b)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = s32[3] parameter(0)\n  b = s32[3] parameter(1)\n  ROOT s = s32[3] shift-right-arithmetic(a, b)\n}\n",
    },
    Case {
        rule: "integer-dot-32",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("d"),
        detail: "s32 operands",
        trigger: "HloModule m\n\nENTRY e {\n  a = s32[2,3] parameter(0)\n  b = s32[3,2] parameter(1)\n  ROOT d = s32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    },
    Case {
        rule: "integer-dot-64",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("d"),
        detail: "s64 operands",
        trigger: "HloModule m\n\nENTRY e {\n  a = s64[2,3] parameter(0)\n  b = s64[3,2] parameter(1)\n  ROOT d = s64[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    },
    Case {
        rule: "integer-scatter-reduce",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("s"),
        detail: "s32 operands",
        trigger: "HloModule m\n\nadd {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT sum = s32[] add(a, b)\n}\n\nENTRY e {\n  x = s32[4] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = s32[2] parameter(2)\n  ROOT s = s32[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
        near_miss: "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT sum = f32[] add(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2] parameter(2)\n  ROOT s = f32[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
    },
    Case {
        rule: "integer-all-reduce",
        chip: T1,
        sdk: NEXT,
        severity: R,
        at: Some("r"),
        detail: "s32 operands",
        trigger: "HloModule m, replica_count=2\n\nadd {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n\nENTRY e {\n  x = s32[2] parameter(0)\n  ROOT r = s32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n}\n",
        near_miss: "HloModule m, replica_count=2\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add\n}\n",
    },
    Case {
        rule: "integer-power-64",
        chip: T2,
        sdk: NEXT,
        severity: R,
        at: Some("w"),
        detail: "s64 operands",
        trigger: "HloModule m\n\nENTRY e {\n  a = s64[2] parameter(0)\n  b = s64[2] parameter(1)\n  ROOT w = s64[2] power(a, b)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = s32[2] parameter(0)\n  b = s32[2] parameter(1)\n  ROOT w = s32[2] power(a, b)\n}\n",
    },
    Case {
        rule: "integer-reduce-scatter",
        chip: T1,
        sdk: NEXT,
        severity: R,
        at: Some("r"),
        detail: "s32 operands",
        trigger: "HloModule m, replica_count=2\n\nadd {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n\nENTRY e {\n  x = s32[4] parameter(0)\n  ROOT r = s32[2] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add\n}\n",
        near_miss: "HloModule m, replica_count=2\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT r = f32[2] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add\n}\n",
    },
    Case {
        rule: "wide-64-bit-constant",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "value 5000000000",
        trigger: "HloModule m\n\nENTRY e {\n  ROOT c = u64[] constant(5000000000)\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  ROOT c = u64[] constant(4000000000)\n}\n",
    },
    Case {
        rule: "narrowed-64-bit-integer",
        chip: T2,
        sdk: V232,
        severity: W,
        at: Some("i"),
        detail: "s64 result",
        trigger: "HloModule m\n\nENTRY e {\n  ROOT i = s64[8] iota(), iota_dimension=0\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  ROOT i = s32[8] iota(), iota_dimension=0\n}\n",
    },
    Case {
        rule: "replica-id",
        chip: T2,
        sdk: V232,
        severity: W,
        at: Some("r"),
        detail: "",
        trigger: "HloModule m, replica_count=2\n\nENTRY e {\n  ROOT r = u32[] replica-id()\n}\n",
        // The partition form's rank: what JAX lowers a rank to, on Neuron too.
        near_miss: "HloModule m, num_partitions=2\n\nENTRY e {\n  ROOT r = u32[] partition-id()\n}\n",
    },
    Case {
        rule: "gather-iota-out-of-bounds",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("g"),
        detail: "iota indices in [0, 10) with a slice of 1, along operand dimension 0 of 3",
        trigger: "HloModule m\n\nENTRY e {\n  table = f32[3,4] parameter(0)\n  i = s32[10] iota(), iota_dimension=0\n  idx = s32[10,1] reshape(i)\n  ROOT g = f32[10,4] gather(table, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n}\n",
        // Exactly in bounds: the iota as long as the dimension it indexes.
        near_miss: "HloModule m\n\nENTRY e {\n  table = f32[3,4] parameter(0)\n  i = s32[3] iota(), iota_dimension=0\n  idx = s32[3,1] reshape(i)\n  ROOT g = f32[3,4] gather(table, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}\n}\n",
    },
    Case {
        rule: "scatter-iota-out-of-bounds",
        chip: T2,
        sdk: V232,
        severity: R,
        at: Some("sc"),
        detail: "iota indices in [0, 10) with a slice of 1, along operand dimension 0 of 3",
        trigger: "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  o = f32[3,4] parameter(0)\n  i = s32[10] iota(), iota_dimension=0\n  idx = s32[10,1] reshape(i)\n  u = f32[10,4] parameter(1)\n  ROOT sc = f32[3,4] scatter(o, idx, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
        near_miss: "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  o = f32[3,4] parameter(0)\n  i = s32[3] iota(), iota_dimension=0\n  idx = s32[3,1] reshape(i)\n  u = f32[3,4] parameter(1)\n  ROOT sc = f32[3,4] scatter(o, idx, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
    },
    Case {
        rule: "sort-trn2",
        chip: T2,
        sdk: V232,
        severity: R,
        at: Some("s"),
        detail: "",
        trigger: "HloModule m\n\nlt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n\nENTRY e {\n  x = f32[8] parameter(0)\n  ROOT s = f32[8] sort(x), dimensions={0}, to_apply=lt\n}\n",
        // What sort-to-topk makes of a top k: neuronx-cc's own TopK.
        near_miss: "HloModule m\n\nENTRY e {\n  x = f32[1,8] parameter(0)\n  ROOT t = (f32[1,2], s32[1,2]) topk(x), k=2, largest=true\n}\n",
    },
    Case {
        rule: "conditional",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("c"),
        detail: "",
        trigger: "HloModule m\n\nyes {\n  y = f32[] parameter(0)\n  ROOT ny = f32[] negate(y)\n}\n\nno {\n  z = f32[] parameter(0)\n  ROOT az = f32[] abs(z)\n}\n\nENTRY e {\n  b = pred[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT c = f32[] conditional(b, x, x), true_computation=yes, false_computation=no\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  b = pred[] parameter(0)\n  x = f32[] parameter(1)\n  n = f32[] negate(x)\n  a = f32[] abs(x)\n  ROOT c = f32[] select(b, n, a)\n}\n",
    },
    Case {
        rule: "reduce-precision",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("r"),
        detail: "",
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] reduce-precision(p), exponent_bits=5, mantissa_bits=10\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  h = f16[2] convert(p)\n  ROOT r = f32[2] convert(h)\n}\n",
    },
    Case {
        rule: "variadic-reduce",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("r"),
        detail: "2 inputs",
        trigger: "HloModule m\n\npair {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n  d = f32[] parameter(3)\n  m1 = f32[] maximum(a, c)\n  m2 = f32[] minimum(b, d)\n  ROOT t = (f32[], f32[]) tuple(m1, m2)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = (f32[], f32[]) reduce(x, x, i, i), dimensions={0}, to_apply=pair\n}\n",
        near_miss: "HloModule m\n\nmax1 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[] reduce(x, i), dimensions={0}, to_apply=max1\n}\n",
    },
    Case {
        rule: "sort-comparator",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("s"),
        detail: "EQ in comparator by_two_keys",
        trigger: "HloModule m\n\nby_two_keys {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[] parameter(2)\n  d = f32[] parameter(3)\n  eq = pred[] compare(a, b), direction=EQ\n  lt1 = pred[] compare(a, b), direction=LT\n  lt2 = pred[] compare(c, d), direction=LT\n  ROOT r = pred[] select(eq, lt2, lt1)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[4] parameter(1)\n  ROOT s = (f32[4], f32[4]) sort(x, y), dimensions={0}, to_apply=by_two_keys\n}\n",
        near_miss: "HloModule m\n\nless {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT s = f32[4] sort(x), dimensions={0}, to_apply=less\n}\n",
    },
    Case {
        rule: "dynamic-while",
        chip: T1,
        sdk: V232,
        severity: W,
        at: Some("w"),
        detail: "",
        trigger: "HloModule m\n\ncond {\n  cp = (s32[], s32[]) parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n  cn = s32[] get-tuple-element(cp), index=1\n  ROOT lt = pred[] compare(ci, cn), direction=LT\n}\n\nbody {\n  bp = (s32[], s32[]) parameter(0)\n  bi = s32[] get-tuple-element(bp), index=0\n  bn = s32[] get-tuple-element(bp), index=1\n  one = s32[] constant(1)\n  next = s32[] add(bi, one)\n  ROOT bt = (s32[], s32[]) tuple(next, bn)\n}\n\nENTRY e {\n  n = s32[] parameter(0)\n  zero = s32[] constant(0)\n  init = (s32[], s32[]) tuple(zero, n)\n  ROOT w = (s32[], s32[]) while(init), condition=cond, body=body\n}\n",
        near_miss: "HloModule m\n\ncond {\n  cp = (s32[], s32[]) parameter(0)\n  ci = s32[] get-tuple-element(cp), index=0\n  ten = s32[] constant(10)\n  ROOT lt = pred[] compare(ci, ten), direction=LT\n}\n\nbody {\n  bp = (s32[], s32[]) parameter(0)\n  bi = s32[] get-tuple-element(bp), index=0\n  bn = s32[] get-tuple-element(bp), index=1\n  one = s32[] constant(1)\n  next = s32[] add(bi, one)\n  twice = s32[] add(bn, bn)\n  ROOT bt = (s32[], s32[]) tuple(next, twice)\n}\n\nENTRY e {\n  n = s32[] parameter(0)\n  zero = s32[] constant(0)\n  init = (s32[], s32[]) tuple(zero, n)\n  ROOT w = (s32[], s32[]) while(init), condition=cond, body=body\n}\n",
    },
    Case {
        rule: "unsupported-operator",
        chip: T1,
        sdk: V232,
        severity: R,
        at: Some("x"),
        detail: "",
        trigger: "HloModule m\n\nENTRY e {\n  a = f32[2,2] parameter(0)\n  b = f32[2,2] parameter(1)\n  ROOT x = f32[2,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = f32[2,2] parameter(0)\n  b = f32[2,2] parameter(1)\n  ROOT x = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    },
    Case {
        rule: "io-over-hbm",
        chip: T1,
        sdk: V232,
        severity: R,
        at: None,
        detail: "inputs and outputs 40.00 GiB, of trn1's 16.00 GiB per core",
        // 20 GiB in, 20 GiB out.
        trigger: "HloModule m\n\nENTRY e {\n  p = f32[5,1024,1024,1024] parameter(0)\n  ROOT n = f32[5,1024,1024,1024] negate(p)\n}\n",
        // 4 GiB in and 4 out: with as much again of scratch, 16 GiB.
        near_miss: "HloModule m\n\nENTRY e {\n  p = f32[1,1024,1024,1024] parameter(0)\n  ROOT n = f32[1,1024,1024,1024] negate(p)\n}\n",
    },
    Case {
        rule: "io-and-scratch-over-hbm",
        chip: T1,
        sdk: V232,
        severity: W,
        at: None,
        detail: "inputs and outputs 12.00 GiB, twice that 24.00 GiB, of trn1's 16.00 GiB per core",
        // 12 GiB updated in place: the output reuses the input's buffer.
        trigger: "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n\nENTRY e {\n  p = f32[3,1024,1024,1024] parameter(0)\n  ROOT n = f32[3,1024,1024,1024] negate(p)\n}\n",
        near_miss: "HloModule m, input_output_alias={ {}: (0, {}, may-alias) }\n\nENTRY e {\n  p = f32[2,1024,1024,1024] parameter(0)\n  ROOT n = f32[2,1024,1024,1024] negate(p)\n}\n",
    },
    Case {
        rule: "instruction-limit",
        chip: T1,
        sdk: V232,
        severity: W,
        at: None,
        // 288 x 288 x 72 tiles of 128 x 128 x 512; its inputs and output
        // (7.59 GiB, twice that 15.19 GiB) fit a trn1 core.
        detail: "at least 5971968 TensorE instructions, of a limit of 5000000",
        trigger: "HloModule m\n\nENTRY e {\n  a = bf16[36864,36864] parameter(0)\n  b = bf16[36864,36864] parameter(1)\n  ROOT d = bf16[36864,36864] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        near_miss: "HloModule m\n\nENTRY e {\n  a = bf16[16384,16384] parameter(0)\n  b = bf16[16384,16384] parameter(1)\n  ROOT d = bf16[16384,16384] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    },
];

fn check(text: &str, chip: Chip, sdk: Sdk) -> CheckReport {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    hlatc_compiler::verify(&m).unwrap_or_else(|e| panic!("{e}\n{text}"));
    check_module(&m, chip, sdk)
}

/// The 1-based line and column of `name`'s definition, found by reading
/// the text as a person would: the line that starts with `name =` (after
/// indentation and `ROOT`).
fn written_at(text: &str, name: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let (body, root) = match body.strip_prefix("ROOT ") {
            Some(b) => (b, 5),
            None => (body, 0),
        };
        if body.starts_with(&format!("{name} = ")) {
            return (i + 1, indent + root + 1);
        }
    }
    panic!("{name} is not defined in\n{text}")
}

#[test]
fn every_rule_has_a_case() {
    for r in RULES {
        assert!(
            CASES.iter().any(|c| c.rule == r.id),
            "rule {} has no test case",
            r.id
        );
    }
}

#[test]
fn each_rule_fires_on_its_trigger_alone_at_the_instruction() {
    for case in CASES {
        let report = check(case.trigger, case.chip, case.sdk);
        let rule = RULES.iter().find(|r| r.id == case.rule).unwrap();
        // Exactly this rule, once; the only other finding a trigger may
        // have is the narrowing every 64-bit integer gets where it applies.
        let others: Vec<&str> = report
            .findings
            .iter()
            .map(|f| f.rule.id)
            .filter(|id| *id != case.rule && *id != "narrowed-64-bit-integer")
            .collect();
        assert!(others.is_empty(), "{}: also {others:?}", case.rule);
        let found: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule.id == case.rule)
            .collect();
        assert_eq!(found.len(), 1, "{}: {:?}", case.rule, report.findings);
        let f = found[0];
        assert_eq!(f.severity, case.severity, "{}", case.rule);
        assert_eq!(report.refused(), case.severity == Severity::Refusal);
        assert_eq!(f.instruction.as_deref(), case.at, "{}", case.rule);
        assert_eq!(f.detail, case.detail, "{}", case.rule);
        // The line a user sees.
        let positions = instruction_positions(case.trigger).unwrap();
        let line = f.line("m.hlo", Some(&positions));
        let code = match rule.code {
            Code::Ncc(c) => format!("NCC_{c}"),
            Code::Undocumented => format!("[{}]", rule.id),
        };
        let expected_start = match case.at {
            Some(name) => {
                let (l, c) = written_at(case.trigger, name);
                format!("m.hlo:{l}:{c}: instruction %{name}: {code} ")
            }
            None => format!("m.hlo: module: {code} "),
        };
        assert!(
            line.starts_with(&expected_start),
            "{line}\nwanted {expected_start}"
        );
        assert!(line.ends_with(&format!(", {}", rule.advice)), "{line}");
        if case.severity == Severity::Warning {
            assert!(line.contains(&format!("{code} (warning) ")), "{line}");
        }
    }
}

#[test]
fn each_near_miss_is_accepted() {
    for case in CASES {
        let report = check(case.near_miss, case.chip, case.sdk);
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.rule.id == "narrowed-64-bit-integer" && case.rule != f.rule.id),
            "{}: {:?}",
            case.rule,
            report.findings
        );
        assert!(!report.refused(), "{}", case.rule);
    }
}

#[test]
fn integer_downcasts_warn_under_2_32_and_refuse_under_the_next_sdk() {
    let dot = CASES.iter().find(|c| c.rule == "integer-dot-32").unwrap();
    let severity = |chip, sdk| {
        check(dot.trigger, chip, sdk)
            .findings
            .iter()
            .find(|f| f.rule.id == "integer-dot-32")
            .map(|f| f.severity)
    };
    // trn1 multiplies s32 matrices with a warning whatever the flags.
    assert_eq!(severity(Chip::Trn1, Sdk::V2_32), Some(Severity::Warning));
    assert_eq!(severity(Chip::Trn1, Sdk::Next), Some(Severity::Warning));
    assert_eq!(severity(Chip::Trn2, Sdk::V2_32), Some(Severity::Warning));
    assert_eq!(severity(Chip::Trn2, Sdk::Next), Some(Severity::Refusal));
    // 64-bit integers: narrowed on trn1 always, on trn2 until the next SDK
    // runs them natively.
    let iota = CASES
        .iter()
        .find(|c| c.rule == "narrowed-64-bit-integer")
        .unwrap();
    let narrowed = |chip, sdk| !check(iota.trigger, chip, sdk).findings.is_empty();
    assert!(narrowed(Chip::Trn1, Sdk::Next));
    assert!(narrowed(Chip::Trn2, Sdk::V2_32));
    assert!(!narrowed(Chip::Trn2, Sdk::Next));
}

#[test]
fn a_loop_with_a_known_trip_count_in_its_backend_config_is_static() {
    let case = CASES.iter().find(|c| c.rule == "dynamic-while").unwrap();
    let known = case.trigger.replace(
        "body=body\n",
        "body=body, backend_config={\"known_trip_count\":{\"n\":\"4\"}}\n",
    );
    assert_ne!(known, case.trigger);
    assert!(check(&known, Chip::Trn1, Sdk::V2_32).findings.is_empty());
}

/// EVRF056's own example of a misconfigured model: a table of 16
/// positions gathered at the positions of a 32-token sequence, the iota
/// broadcast over the batch and converted as JAX and torch-xla write it.
/// Indices that are not an iota, or a table as long as the sequence, are
/// accepted: the check refuses only what it can prove.
#[test]
fn a_position_table_shorter_than_the_sequence_is_refused() {
    let module = |rows: usize, indices: &str| {
        format!(
            "HloModule m\n\nENTRY e {{\n  table = f32[{rows},8] parameter(0)\n  p = s32[2,32] parameter(1)\n  i = s64[32] iota(), iota_dimension=0\n  b = s64[2,32] broadcast(i), dimensions={{1}}\n  c = s32[2,32] convert(b)\n  idx = s32[2,32,1] reshape({indices})\n  ROOT g = f32[2,32,8] gather(table, idx), offset_dims={{2}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=2, slice_sizes={{1,8}}\n}}\n"
        )
    };
    for chip in [T1, T2] {
        let report = check(&module(16, "c"), chip, V232);
        let found: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.rule.id == "gather-iota-out-of-bounds")
            .collect();
        assert_eq!(found.len(), 1, "{:?}", report.findings);
        assert_eq!(
            found[0].detail,
            "iota indices in [0, 32) with a slice of 1, along operand dimension 0 of 16"
        );
        assert!(report.refused());
        for accepted in [module(32, "c"), module(16, "p")] {
            let report = check(&accepted, chip, V232);
            assert!(
                report
                    .findings
                    .iter()
                    .all(|f| f.rule.id != "gather-iota-out-of-bounds"),
                "{:?}",
                report.findings
            );
        }
    }
}
