//! What the runtime reads of a plugin before it loads it (the flags it
//! defines), and how it makes a client of several devices.

use crate::common::{f32s, runtime};
use hlatc_compiler::formats::text;
use hlatc_runtime::plugin_flags::PluginFlags;
use hlatc_runtime::xla_cpu_flags::settings;
use hlatc_runtime::{compile_options, plugin, Runtime};

fn plugin_in_use() -> std::path::PathBuf {
    runtime().plugin_path().to_path_buf()
}

#[test]
fn a_plugins_flags_are_read_from_its_library() {
    let flags = PluginFlags::read(&plugin_in_use()).unwrap();
    // Flags every XLA CPU plugin hlatc runs on defines.
    for name in [
        "xla_backend_optimization_level",
        "xla_allow_excess_precision",
        "xla_force_host_platform_device_count",
        "xla_cpu_multi_thread_eigen",
    ] {
        assert!(flags.defines(name), "{name}");
    }
    // A name inside another flag's, or none at all, is not a flag.
    assert!(!flags.defines("xla_backend_optimization"));
    assert!(!flags.defines("xla_no_such_flag"));
    // What the runtime leaves out of its compiles is exactly the options
    // the plugin does not define.
    let left_out: Vec<&str> = compile_options::OVERRIDES
        .into_iter()
        .filter(|o| !flags.defines(o))
        .collect();
    assert_eq!(runtime().options_left_out(), left_out.as_slice());
}

#[test]
fn a_file_that_is_no_elf_library_has_no_flags_to_read() {
    let dir = std::env::temp_dir().join(format!("hlatc-plugin-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_elf = dir.join("not_a_plugin.so");
    std::fs::write(&not_elf, vec![0u8; 4096]).unwrap();
    assert!(PluginFlags::read(&not_elf).is_err());
    // And the runtime refuses it by name before dlopen, as it always did.
    let e = Runtime::with_plugin(&not_elf).err().unwrap().to_string();
    assert!(e.contains(&not_elf.display().to_string()), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn flags_are_read_as_xla_reads_xla_flags() {
    assert_eq!(
        settings("--xla_a=1  -xla_b --xla_c=x=y\t--").collect::<Vec<_>>(),
        [("xla_a", "1"), ("xla_b", "true"), ("xla_c", "x=y")]
    );
    assert_eq!(settings("   ").count(), 0);
}

/// A client of N devices shows N, and its collectives meet: the plugin
/// makes more behind them, for threads (`pjrt::with_thread_reserve`).
#[test]
fn a_client_of_several_devices_shows_as_many_and_runs_their_collectives() {
    let path = plugin::find_plugin().unwrap();
    let rt = Runtime::with_plugin_and_devices(&path, 2).unwrap();
    assert_eq!(rt.device_count(), 2);
    let m = text::parse_module(
        "HloModule m, replica_count=2\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\nENTRY e { p = f32[4096] parameter(0)\n ROOT r = f32[4096] all-reduce(p), replica_groups={}, to_apply=add }",
    )
    .unwrap();
    let program = rt.compile(&m).unwrap();
    let x = |v: f32| vec![f32s(&[4096], &vec![v; 4096])];
    // Many launches in a row: each its own run, none waiting on another's.
    for k in 0..20 {
        let out = program.run_replicas(&[x(k as f32), x(1.0)]).unwrap();
        for replica in &out {
            assert!(replica[0].to_f32_vec().iter().all(|&v| v == k as f32 + 1.0));
        }
    }
}
