//! `CompileOptionsProto` for `PJRT_Client_Compile`.
//!
//! Empty options do not fail cleanly: the CPU plugin aborts the process
//! (`Check failed: replica_count > 0`). So the build options are always set.
//!
//! XLA may by default skip roundings a module asks for
//! (`xla_allow_excess_precision`): it drops `f32 -> bf16 -> f32` convert
//! pairs and keeps chains of bf16 ops in f32. hlatc runs a program on CPU
//! to see the numbers the device will produce, so every rounding written
//! must happen: the option is overridden to false. It is set through
//! `env_option_overrides`, which XLA applies on top of its defaults; a
//! `debug_options` message would replace every default with zero.

use prost::Message;

#[derive(Clone, PartialEq, prost::Message)]
struct ExecutableBuildOptionsProto {
    #[prost(int64, tag = "1")]
    device_ordinal: i64,
    #[prost(int64, tag = "4")]
    num_replicas: i64,
    #[prost(int64, tag = "5")]
    num_partitions: i64,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum OptionValue {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionOverrideProto {
    #[prost(oneof = "OptionValue", tags = "1, 2")]
    value: Option<OptionValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CompileOptionsProto {
    #[prost(message, optional, tag = "3")]
    executable_build_options: Option<ExecutableBuildOptionsProto>,
    #[prost(btree_map = "string, message", tag = "7")]
    env_option_overrides: std::collections::BTreeMap<String, OptionOverrideProto>,
}

/// The debug option that lets XLA skip requested roundings.
pub const EXCESS_PRECISION_OPTION: &str = "xla_allow_excess_precision";

/// One replica, one partition, default device, every rounding as written.
pub fn single_device() -> Vec<u8> {
    CompileOptionsProto {
        executable_build_options: Some(ExecutableBuildOptionsProto {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
        }),
        env_option_overrides: [(
            EXCESS_PRECISION_OPTION.to_string(),
            OptionOverrideProto {
                value: Some(OptionValue::Bool(false)),
            },
        )]
        .into_iter()
        .collect(),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    #[test]
    fn options_carry_replicas_and_partitions() {
        let b = super::single_device();
        // field 3 (message) holding field 1 = -1, field 4 = 1, field 5 = 1
        assert_eq!(b[0], 0x1a);
        assert!(b.windows(2).any(|w| w == [0x20, 0x01]));
        assert!(b.windows(2).any(|w| w == [0x28, 0x01]));
        // field 7 (map entry) naming the option, its bool_field (2) = 0
        let name = super::EXCESS_PRECISION_OPTION.as_bytes();
        assert!(b.windows(name.len()).any(|w| w == name));
        assert!(b.ends_with(&[0x10, 0x00]));
    }
}
