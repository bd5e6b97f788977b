//! Files written atomically: replaced whole or not at all, a device
//! written in place, and of several written together the first failure
//! named.

use hlatc_runtime::atomic_file::{check_writable, write_atomic, write_synced_all};
use std::path::Path;

/// `-o /dev/null` writes into the device, and never replaces it with a
/// regular file (which, as root, a rename over it would do).
#[test]
fn a_device_is_written_in_place_not_replaced() {
    let null = Path::new("/dev/null");
    check_writable(null).unwrap();
    write_atomic(null, b"discarded").unwrap();
    let meta = std::fs::metadata(null).unwrap();
    assert!(!meta.is_file(), "/dev/null became a regular file");
    assert_eq!(std::fs::read(null).unwrap(), b"");
}

#[test]
fn a_file_is_replaced_whole() {
    let dir = std::env::temp_dir().join(format!("hlatc-atomic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("out.txt");
    write_atomic(&path, b"first").unwrap();
    write_atomic(&path, b"second").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file is left beside it");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file is written whole; of two that fail, the first in the
/// list is the one named, with the system's reason.
#[test]
fn files_are_written_together_and_the_first_failure_named() {
    let dir = std::env::temp_dir().join(format!("hlatc-atomic-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = [
        (dir.join("a"), vec![1u8; 3000]),
        (dir.join("b"), b"b".to_vec()),
    ];
    write_synced_all(&files).unwrap();
    assert_eq!(std::fs::read(dir.join("a")).unwrap(), vec![1u8; 3000]);
    assert_eq!(std::fs::read(dir.join("b")).unwrap(), b"b");
    let missing = dir.join("missing");
    let failing = [
        (dir.join("c"), b"c".as_slice()),
        (missing.join("x"), b"x".as_slice()),
        (missing.join("y"), b"y".as_slice()),
    ];
    let (path, e) = write_synced_all(&failing).unwrap_err();
    assert_eq!(path, missing.join("x"));
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(std::fs::read(dir.join("c")).unwrap(), b"c");
    let _ = std::fs::remove_dir_all(&dir);
}
