//! The contract of `AwsNeuronCustomNativeKernel`, the custom call an NKI
//! kernel becomes in HLO: its `backend_config` is base64 of a JSON object
//! that NKI writes, naming the compiled kernel (`func_name`, and with it
//! `grid`, `mac_count`, the kernel's binary and its arguments). hlatc
//! never writes one; it reads them, for the pre-flight (a config neuronx-cc
//! could not read) and for `lower-neuron-calls` (which reference computes
//! the kernel on XLA CPU).

use hlatc_compiler::{Instruction, Op};

pub const NATIVE_KERNEL_TARGET: &str = "AwsNeuronCustomNativeKernel";

/// What a native kernel's `backend_config` says, as far as hlatc reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeKernelConfig {
    /// The kernel's Python function (`flash_fwd`, `flash_attn_bwd`, ...).
    pub func_name: String,
    /// The whole object, for the keys a reference reads.
    pub fields: serde_json::Map<String, serde_json::Value>,
}

// Why a config cannot be read is a pass failure's case, so it is defined
// beside `PassError`, which `infra` keeps free of any pass.
pub use crate::infra::pass::NativeKernelConfigError;

impl NativeKernelConfig {
    /// The config of `instr` if it is a native kernel's custom call.
    pub fn of(instr: &Instruction) -> Option<Result<NativeKernelConfig, NativeKernelConfigError>> {
        match &instr.op {
            Op::CustomCall(cc) if cc.target == NATIVE_KERNEL_TARGET => {
                Some(NativeKernelConfig::read(&instr.backend_config))
            }
            _ => None,
        }
    }

    /// Reads a `backend_config` string.
    pub fn read(config: &str) -> Result<NativeKernelConfig, NativeKernelConfigError> {
        let config = config.trim();
        if config.is_empty() {
            return Err(NativeKernelConfigError::Empty);
        }
        let bytes = decode_base64(config)?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| NativeKernelConfigError::NotJson {
                problem: e.to_string(),
            })?;
        let serde_json::Value::Object(fields) = value else {
            return Err(NativeKernelConfigError::NotJson {
                problem: "the JSON is not an object".into(),
            });
        };
        let func_name = match fields.get("func_name") {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(NativeKernelConfigError::NoFuncName),
        };
        Ok(NativeKernelConfig { func_name, fields })
    }

    /// A boolean the config holds under `key`, if it holds one.
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.fields.get(key)?.as_bool()
    }

    /// A number the config holds under `key`, if it holds one.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.fields.get(key)?.as_f64()
    }
}

/// Standard base64 (RFC 4648, `+` and `/`, `=` padding optional).
fn decode_base64(text: &str) -> Result<Vec<u8>, NativeKernelConfigError> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0;
    let body = text.trim_end_matches('=');
    for (offset, byte) in body.bytes().enumerate() {
        let v = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => {
                return Err(NativeKernelConfigError::NotBase64 {
                    offset,
                    byte: byte as char,
                })
            }
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // A single character left over carries fewer than 8 bits: not base64.
    if body.len() % 4 == 1 {
        return Err(NativeKernelConfigError::NotBase64 {
            offset: body.len() - 1,
            byte: body.as_bytes()[body.len() - 1] as char,
        });
    }
    Ok(out)
}
