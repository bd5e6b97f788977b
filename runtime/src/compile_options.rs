//! `CompileOptionsProto` for `PJRT_Client_Compile`.
//!
//! Empty options do not fail cleanly: the CPU plugin aborts the process
//! (`Check failed: replica_count > 0`). So the build options are always set.

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

#[derive(Clone, PartialEq, prost::Message)]
struct CompileOptionsProto {
    #[prost(message, optional, tag = "3")]
    executable_build_options: Option<ExecutableBuildOptionsProto>,
}

/// One replica, one partition, default device.
pub fn single_device() -> Vec<u8> {
    CompileOptionsProto {
        executable_build_options: Some(ExecutableBuildOptionsProto {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
        }),
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
    }
}
