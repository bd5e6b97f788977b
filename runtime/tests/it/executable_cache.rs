//! The on-disk executable cache (`HLATC_XLA_CACHE_DIR`): a second compile
//! of the same program loads what the first stored, and computes the same
//! bits; a cache file of no use is compiled past, never an error.

use crate::common::*;
use hlatc_compiler::{formats::text, Literal, Module};
use hlatc_runtime::{CacheOutcome, CacheStats, ExecutableCache, Runtime};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An empty directory of its own for `test`, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("hlatc-xla-cache-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cached_runtime(dir: &Path) -> (Runtime, Arc<ExecutableCache>) {
    let cache = Arc::new(ExecutableCache::new(dir));
    (runtime().with_executable_cache(Some(cache.clone())), cache)
}

/// A program with a dot, a transcendental and a reduction: enough machine
/// code that a wrong executable would not pass for the right one.
fn program() -> (Module, Vec<Literal>) {
    let m = text::parse_module(
        "HloModule cached\n\
         add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n\
         ENTRY e {\n\
           x = f32[4,8] parameter(0)\n\
           w = f32[8,3] parameter(1)\n\
           d = f32[4,3] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n\
           t = f32[4,3] tanh(d)\n\
           z = f32[] constant(0)\n\
           r = f32[4] reduce(t, z), dimensions={1}, to_apply=add\n\
           ROOT o = (f32[4,3], f32[4]) tuple(t, r)\n\
         }",
    )
    .unwrap();
    let x: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let w: Vec<f32> = (0..24).map(|i| (i as f32 * 0.11).cos()).collect();
    (m, vec![f32s(&[4, 8], &x), f32s(&[8, 3], &w)])
}

/// Outputs as their shapes and bytes, to compare bit for bit.
fn bits(out: &[Literal]) -> Vec<(String, Vec<u8>)> {
    out.iter()
        .map(|l| (l.shape.to_string(), l.bytes().to_vec()))
        .collect()
}

/// The cache's executables and any temporary left, without the plugin's
/// digest (`*.plugin-sha256`, see `plugin_digest_files`).
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    files_where(dir, |p| !is_plugin_digest(p))
}

fn plugin_digest_files(dir: &Path) -> Vec<PathBuf> {
    files_where(dir, is_plugin_digest)
}

fn is_plugin_digest(p: &Path) -> bool {
    p.to_string_lossy().ends_with(".plugin-sha256")
}

/// What `dir` holds that `keep` keeps, sorted.
fn files_where(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| keep(p))
        .collect();
    files.sort();
    files
}

#[test]
fn a_second_compile_is_a_hit_that_computes_the_same_bits() {
    let dir = TempDir::new("hit");
    let (rt, cache) = cached_runtime(&dir.0);
    let (m, inputs) = program();

    let first = rt.compile(&m).unwrap();
    assert!(
        matches!(first.cache_outcome(), CacheOutcome::Miss),
        "{:?}",
        first.cache_outcome()
    );
    let files = cache_files(&dir.0);
    assert_eq!(
        files.len(),
        1,
        "one whole file, no temporary left: {files:?}"
    );

    let second = rt.compile(&m).unwrap();
    assert!(
        second.cache_outcome().is_hit(),
        "{:?}",
        second.cache_outcome()
    );
    assert_eq!(
        cache.stats(),
        CacheStats {
            hits: 1,
            misses: 1,
            fallbacks: 0,
            store_failures: 0
        }
    );
    assert_eq!(
        bits(&first.run(&inputs).unwrap()),
        bits(&second.run(&inputs).unwrap())
    );
    assert_eq!(
        first.memory_stats().unwrap(),
        second.memory_stats().unwrap()
    );

    // Without the cache, the same program compiles to the same bits.
    let plain = runtime().with_executable_cache(None).compile(&m).unwrap();
    assert!(matches!(plain.cache_outcome(), CacheOutcome::Off));
    assert_eq!(
        bits(&plain.run(&inputs).unwrap()),
        bits(&second.run(&inputs).unwrap())
    );
}

/// A loaded executable runs on the devices its compile options name: a
/// program of two replicas, each on its own device, from the cache.
#[test]
fn a_replicated_program_is_loaded_for_its_devices() {
    let dir = TempDir::new("replicas");
    let (rt, cache) = cached_runtime(&dir.0);
    let m = text::parse_module(
        "HloModule m, replica_count=2\n\
         add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n\
         ENTRY e { p = f32[2] parameter(0)\n r = f32[2] all-reduce(p), replica_groups={}, to_apply=add\n\
         i = u32[] replica-id()\n ROOT t = (f32[2], u32[]) tuple(r, i) }",
    )
    .unwrap();
    let x = |v: f32| vec![f32s(&[2], &[v, -v])];
    let lists = [x(1.5), x(2.25)];
    let first = rt.compile(&m).unwrap();
    let second = rt.compile(&m).unwrap();
    assert!(
        second.cache_outcome().is_hit(),
        "{:?}",
        second.cache_outcome()
    );
    assert_eq!(cache.stats().hits, 1);
    let (a, b) = (
        first.run_replicas(&lists).unwrap(),
        second.run_replicas(&lists).unwrap(),
    );
    for (replica, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_eq!(bits(a), bits(b), "replica {replica}");
    }
    assert_eq!(b[1][0].to_f32_vec(), vec![3.75, -3.75]);
    assert_eq!(b[1][1].bytes(), 1u32.to_le_bytes());
}

#[test]
fn an_unusable_cache_file_falls_back_to_compiling() {
    let dir = TempDir::new("corrupt");
    let (rt, cache) = cached_runtime(&dir.0);
    let (m, inputs) = program();
    let expected = bits(&rt.compile(&m).unwrap().run(&inputs).unwrap());
    let [file] = cache_files(&dir.0).try_into().unwrap();
    let whole = std::fs::read(&file).unwrap();

    // Magic (8 bytes), key (32), sha256 of the payload (32), payload.
    let (header, payload) = whole.split_at(72);
    let mut flipped = whole.clone();
    *flipped.last_mut().unwrap() ^= 0x40;
    // Whole and checksummed, but no executable: the plugin refuses it.
    let garbage = b"not an executable the plugin wrote".repeat(8);
    let mut refused = header[..40].to_vec();
    refused.extend_from_slice(&Sha256::digest(&garbage));
    refused.extend_from_slice(&garbage);
    let damaged: [(&str, Vec<u8>); 5] = [
        ("truncated", whole[..whole.len() / 2].to_vec()),
        ("a flipped bit", flipped),
        ("empty", Vec::new()),
        ("header only", header.to_vec()),
        ("refused by the plugin", refused),
    ];
    assert!(!payload.is_empty());
    for (what, bytes) in damaged {
        std::fs::write(&file, &bytes).unwrap();
        let p = rt.compile(&m).unwrap();
        assert!(
            matches!(p.cache_outcome(), CacheOutcome::Fallback(_)),
            "{what}: {:?}",
            p.cache_outcome()
        );
        assert_eq!(bits(&p.run(&inputs).unwrap()), expected, "{what}");
        // The compile wrote the file whole again: the next is a hit.
        let again = rt.compile(&m).unwrap();
        assert!(
            again.cache_outcome().is_hit(),
            "{what}: {:?}",
            again.cache_outcome()
        );
        assert_eq!(bits(&again.run(&inputs).unwrap()), expected, "{what}");
    }
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.fallbacks, stats.hits), (1, 5, 5));

    // A directory where the file should be: unreadable, and not
    // writable either; compiling is all that is left, and it works.
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let p = rt.compile(&m).unwrap();
    assert!(matches!(p.cache_outcome(), CacheOutcome::Fallback(_)));
    assert_eq!(bits(&p.run(&inputs).unwrap()), expected);
    assert_eq!(cache.stats().store_failures, 1);
}

/// A cache in a directory that is gone costs nothing but the compile.
#[test]
fn a_missing_cache_directory_only_compiles() {
    let dir = TempDir::new("missing");
    let gone = dir.0.join("gone");
    let (rt, cache) = cached_runtime(&gone);
    let (m, inputs) = program();
    let p = rt.compile(&m).unwrap();
    assert!(matches!(p.cache_outcome(), CacheOutcome::Miss));
    assert_eq!(p.run(&inputs).unwrap().len(), 2);
    assert_eq!(cache.stats().store_failures, 1);
    assert!(!gone.exists());
}

/// The plugin is named in the key by its contents: a copy of the same file
/// at another path (each clone fetches its own) loads what the first
/// compiled. A hard link is another path to the same build, and loading
/// it does not load a second copy of XLA into the process.
#[test]
fn the_same_plugin_at_another_path_finds_the_executables_it_compiled() {
    let dir = TempDir::new("plugin-path");
    let (rt, _) = cached_runtime(&dir.0);
    let (m, inputs) = program();
    let first = rt.compile(&m).unwrap();
    assert!(matches!(first.cache_outcome(), CacheOutcome::Miss));
    let [memo] = plugin_digest_files(&dir.0).try_into().unwrap();
    let plugin = std::fs::read(rt.plugin_path()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&memo).unwrap(),
        hex(&Sha256::digest(&plugin)),
        "the memo holds the plugin file's sha256"
    );

    let link = dir.0.join("linked_xla_cpu_pjrt.so");
    std::fs::hard_link(rt.plugin_path(), &link).unwrap();
    let cache = Arc::new(ExecutableCache::new(&dir.0));
    let linked = Runtime::with_plugin_and_devices(&link, hlatc_runtime::SHARED_DEVICES)
        .unwrap()
        .with_executable_cache(Some(cache.clone()));
    let again = linked.compile(&m).unwrap();
    assert!(
        again.cache_outcome().is_hit(),
        "{:?}",
        again.cache_outcome()
    );
    assert_eq!(
        bits(&again.run(&inputs).unwrap()),
        bits(&first.run(&inputs).unwrap())
    );
    assert_eq!(
        plugin_digest_files(&dir.0).len(),
        2,
        "each path's digest is kept under its own name"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `XLA_FLAGS` is in the key as XLA reads it: whitespace around the flags
/// changes nothing (a script's `"-a ${XLA_FLAGS:-}"` finds what `-a`
/// compiled), another flag changes the key.
#[test]
fn flags_that_differ_only_by_surrounding_whitespace_share_executables() {
    let dir = TempDir::new("flags-whitespace");
    let (m, _) = program();
    let outcome = |flags: Option<&str>| {
        let cache = ExecutableCache::with_xla_flags(&dir.0, flags.map(Into::into));
        let rt = runtime().with_executable_cache(Some(Arc::new(cache)));
        rt.compile(&m).unwrap().cache_outcome().clone()
    };
    let flag = "--xla_cpu_enable_fast_math=false";
    assert!(matches!(outcome(Some(flag)), CacheOutcome::Miss));
    assert!(outcome(Some(&format!(" {flag} \n"))).is_hit());
    assert!(matches!(
        outcome(Some("--xla_cpu_enable_fast_min_max=false")),
        CacheOutcome::Miss
    ));
    // Unset and blank are one: XLA reads no flag from either.
    assert!(matches!(outcome(None), CacheOutcome::Miss));
    assert!(outcome(Some("  ")).is_hit());
}
