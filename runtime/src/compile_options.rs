//! `CompileOptionsProto` for `PJRT_Client_Compile`.
//!
//! Empty options do not fail cleanly: the CPU plugin aborts the process
//! (`Check failed: replica_count > 0`). So the build options are always set:
//! one replica and one partition, or N replicas of one partition with a
//! device assignment putting replica i on the i-th device given.
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
    #[prost(message, optional, tag = "9")]
    device_assignment: Option<DeviceAssignmentProto>,
}

/// XLA's `DeviceAssignmentProto` (xla_data.proto).
#[derive(Clone, PartialEq, prost::Message)]
struct DeviceAssignmentProto {
    #[prost(int32, tag = "1")]
    replica_count: i32,
    #[prost(int32, tag = "2")]
    computation_count: i32,
    #[prost(message, repeated, tag = "3")]
    computation_devices: Vec<ComputationDevice>,
}

/// `DeviceAssignmentProto.ComputationDevice`: one device id per replica.
#[derive(Clone, PartialEq, prost::Message)]
struct ComputationDevice {
    #[prost(int64, repeated, tag = "1")]
    replica_device_ids: Vec<i64>,
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
    with_build_options(ExecutableBuildOptionsProto {
        device_ordinal: -1,
        num_replicas: 1,
        num_partitions: 1,
        device_assignment: None,
    })
}

/// One replica per id in `devices` (replica i on device `devices[i]`), one
/// partition, every rounding as written. The caller gives at least one id,
/// each a device of the client and none twice (the runtime takes the
/// client's first N devices).
pub fn replicas(devices: &[i64]) -> Vec<u8> {
    let n = devices.len();
    with_build_options(ExecutableBuildOptionsProto {
        device_ordinal: -1,
        num_replicas: n as i64,
        num_partitions: 1,
        device_assignment: Some(DeviceAssignmentProto {
            replica_count: i32::try_from(n).unwrap_or(i32::MAX),
            computation_count: 1,
            computation_devices: vec![ComputationDevice {
                replica_device_ids: devices.to_vec(),
            }],
        }),
    })
}

fn with_build_options(build: ExecutableBuildOptionsProto) -> Vec<u8> {
    CompileOptionsProto {
        executable_build_options: Some(build),
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

    #[test]
    fn replicas_carry_a_device_assignment() {
        use prost::Message;
        let b = super::replicas(&[0, 1, 2, 3]);
        let o = super::CompileOptionsProto::decode(b.as_slice()).unwrap();
        let build = o.executable_build_options.unwrap();
        assert_eq!((build.num_replicas, build.num_partitions), (4, 1));
        let d = build.device_assignment.unwrap();
        assert_eq!((d.replica_count, d.computation_count), (4, 1));
        assert_eq!(d.computation_devices[0].replica_device_ids, [0, 1, 2, 3]);
        assert!(o
            .env_option_overrides
            .contains_key(super::EXCESS_PRECISION_OPTION));
    }
}
