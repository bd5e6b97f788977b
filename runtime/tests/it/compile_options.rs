//! The `CompileOptionsProto` handed to XLA CPU: replicas, partitions and
//! their device assignment, every rounding as written and the emitters
//! the flags chose.

use hlatc_runtime::compile_options::messages::{CompileOptionsProto, OptionValue};
use hlatc_runtime::compile_options::{
    partitions, replicas, single_device, Overrides, EXCESS_PRECISION_OPTION,
};
use hlatc_runtime::xla_cpu_flags::FUSION_EMITTERS_FLAG;
use hlatc_runtime::Emitters;
use prost::Message;

fn overrides(b: &[u8]) -> Vec<(String, Option<OptionValue>)> {
    CompileOptionsProto::decode(b)
        .unwrap()
        .env_option_overrides
        .into_iter()
        .map(|(k, v)| (k, v.value))
        .collect()
}

#[test]
fn options_carry_replicas_and_partitions() {
    let b = single_device(Overrides::all(Emitters::Fusion));
    // field 3 (message) holding field 1 = -1, field 4 = 1, field 5 = 1
    assert_eq!(b[0], 0x1a);
    assert!(b.windows(2).any(|w| w == [0x20, 0x01]));
    assert!(b.windows(2).any(|w| w == [0x28, 0x01]));
    let build = CompileOptionsProto::decode(b.as_slice())
        .unwrap()
        .executable_build_options
        .unwrap();
    assert_eq!((build.num_replicas, build.num_partitions), (1, 1));
}

#[test]
fn options_state_the_roundings_and_the_emitters() {
    for (emitters, fusion) in [(Emitters::Fusion, true), (Emitters::Legacy, false)] {
        assert_eq!(
            overrides(&single_device(Overrides::all(emitters))),
            [
                (
                    EXCESS_PRECISION_OPTION.to_string(),
                    Some(OptionValue::Bool(false))
                ),
                (
                    FUSION_EMITTERS_FLAG.to_string(),
                    Some(OptionValue::Bool(fusion))
                ),
            ]
        );
        assert_eq!(
            overrides(&replicas(&[0, 1], Overrides::all(emitters))),
            overrides(&single_device(Overrides::all(emitters)))
        );
    }
}

#[test]
fn replicas_carry_a_device_assignment() {
    let b = replicas(&[0, 1, 2, 3], Overrides::all(Emitters::Fusion));
    let o = CompileOptionsProto::decode(b.as_slice()).unwrap();
    let build = o.executable_build_options.unwrap();
    assert_eq!((build.num_replicas, build.num_partitions), (4, 1));
    let d = build.device_assignment.unwrap();
    assert_eq!((d.replica_count, d.computation_count), (4, 1));
    assert_eq!(d.computation_devices[0].replica_device_ids, [0, 1, 2, 3]);
    assert!(!build.use_spmd_partitioning);
}

#[test]
fn partitions_carry_one_device_per_computation() {
    let b = partitions(&[0, 1, 2], Overrides::all(Emitters::Fusion));
    let o = CompileOptionsProto::decode(b.as_slice()).unwrap();
    let build = o.executable_build_options.unwrap();
    assert_eq!((build.num_replicas, build.num_partitions), (1, 3));
    assert!(build.use_spmd_partitioning);
    let d = build.device_assignment.unwrap();
    assert_eq!((d.replica_count, d.computation_count), (1, 3));
    let ids: Vec<Vec<i64>> = d
        .computation_devices
        .iter()
        .map(|c| c.replica_device_ids.clone())
        .collect();
    assert_eq!(ids, [[0], [1], [2]]);
}

#[test]
fn options_a_plugin_does_not_define_are_left_out() {
    // The plugin of jaxlib 0.11 (PJRT C API 0.115) has no emitters flag
    // and refuses a compile that sets it.
    let left_out = [FUSION_EMITTERS_FLAG];
    let without = Overrides {
        emitters: Emitters::Fusion,
        left_out: &left_out,
    };
    let expected = [(
        EXCESS_PRECISION_OPTION.to_string(),
        Some(OptionValue::Bool(false)),
    )];
    assert_eq!(overrides(&single_device(without)), expected);
    assert_eq!(overrides(&replicas(&[0, 1], without)), expected);
    assert_eq!(overrides(&partitions(&[0, 1], without)), expected);
}
