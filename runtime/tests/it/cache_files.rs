//! The executable cache's files, without a plugin: which processor a file
//! is for, and a damaged or foreign file refused with its reason (the
//! cache itself, over XLA CPU, is `executable_cache.rs`).

use hlatc_runtime::executable_cache::{check_file, cpu_identity, MAGIC};
use sha2::{Digest, Sha256};

fn file(key: &[u8; 32], payload: &[u8]) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(key);
    b.extend_from_slice(&Sha256::digest(payload));
    b.extend_from_slice(payload);
    b
}

#[test]
fn the_processor_is_its_first_entrys_model_and_flags() {
    let info = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\nflags\t\t: fpu avx2\ncpu MHz\t\t: 2100.0\n\nprocessor\t: 1\nflags\t\t: other\n";
    assert_eq!(
        cpu_identity(info).as_deref(),
        Some("vendor_id\t: GenuineIntel\nmodel name\t: Xeon\nflags\t\t: fpu avx2")
    );
    assert_eq!(cpu_identity("nothing: here\n"), None);
}

#[test]
fn a_whole_file_gives_its_payload() {
    let key = [7; 32];
    assert_eq!(check_file(&file(&key, b"exe"), &key), Ok(&b"exe"[..]));
}

#[test]
fn a_damaged_file_is_refused() {
    let key = [7; 32];
    let good = file(&key, b"executable bytes");
    let truncated = &good[..good.len() - 1];
    assert_eq!(check_file(truncated, &key), Err("checksum mismatch"));
    assert!(check_file(&good[..10], &key).is_err());
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(check_file(&flipped, &key), Err("checksum mismatch"));
    assert_eq!(check_file(&good, &[8; 32]), Err("written for another key"));
    let mut other = good;
    other[0] = b'X';
    assert!(check_file(&other, &key).is_err());
}
