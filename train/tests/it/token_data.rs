//! Pre-tokenized streams (`train --data`) read as nanoGPT and numpy write
//! them, packed into rows by document, and refused in the words a
//! `--corpus` loader refuses the same file with. Training on them through
//! the CLI is the root crate's (`tests/it/training.rs`).

use hlatc_train::loader::{Loader, LoaderConfig, SourceFormat};
use hlatc_train::token_data::{RawDtype, TokenData};
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn u16_file(name: &str, ids: &[u16]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(
        &p,
        ids.iter()
            .flat_map(|t| t.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    p
}

/// A version-1 `.npy` of `<i8` ids, as `numpy.save` writes one.
fn npy_file(name: &str, descr: &str, shape: &str, data: Vec<u8>) -> PathBuf {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn rows_follow_documents() {
    // Two documents ending in the end-of-text id 9, then a third.
    let p = u16_file("docs.bin", &[1, 2, 9, 3, 4, 5, 9, 6, 7, 8, 1]);
    let d = TokenData::read(&p, RawDtype::U16, 10, Some(9), 0.0).unwrap();
    d.check_fits(1, 10, &p).unwrap();
    let b = d.train_batch(0, 0, 1, 10);
    let tokens = b.tokens.to_i64_vec();
    let start = [1, 2, 9, 3, 4, 5, 9, 6, 7, 8, 1]
        .windows(10)
        .position(|w| w.iter().map(|&x| x as i64).eq(tokens.iter().copied()))
        .expect("a window of the stream");
    assert_eq!(start, 0, "with one possible offset, the window starts at 0");
    assert_eq!(
        b.targets.to_i64_vec(),
        vec![2, 9, -100, 4, 5, 9, -100, 7, 8, 1]
    );
    assert_eq!(
        b.segment_ids.unwrap().to_i64_vec(),
        vec![1, 1, 1, 2, 2, 2, 2, 3, 3, 3]
    );
}

#[test]
fn npy_and_raw_read_the_same_and_bad_files_are_named() {
    let ids: Vec<u16> = (0..40).map(|i| (i * 7 % 10) as u16).collect();
    let raw = u16_file("a.bin", &ids);
    let data: Vec<u8> = ids.iter().flat_map(|&t| (t as i64).to_le_bytes()).collect();
    let npy = npy_file("a.npy", "<i8", "(40,)", data);
    let a = TokenData::read(&raw, RawDtype::U16, 10, None, 0.0).unwrap();
    let b = TokenData::read(&npy, RawDtype::U16, 10, None, 0.0).unwrap();
    assert_eq!(
        a.train_batch(3, 1, 2, 8).tokens,
        b.train_batch(3, 1, 2, 8).tokens
    );
    let err = |r: Result<TokenData, hlatc_train::Error>| r.err().expect("refused").to_string();
    let e = err(TokenData::read(&raw, RawDtype::U16, 5, None, 0.0));
    assert!(
        e.ends_with("a.bin: token 1 is 7, outside the vocabulary 0..5"),
        "{e}"
    );
    let e = err(TokenData::read(
        &u16_file("odd.bin", &[1]).with_extension("bin"),
        RawDtype::U32,
        10,
        None,
        0.0,
    ));
    assert!(
        e.ends_with("2 bytes is not a whole number of 4-byte ids"),
        "{e}"
    );
    let two_d = npy_file("b.npy", "<i8", "(4, 10)", vec![0; 320]);
    let e = err(TokenData::read(&two_d, RawDtype::U16, 10, None, 0.0));
    assert!(
        e.ends_with("the .npy array has shape (4, 10); token data is 1-D"),
        "{e}"
    );
    let floats = npy_file("c.npy", "<f4", "(2,)", vec![0; 8]);
    assert!(err(TokenData::read(&floats, RawDtype::U16, 10, None, 0.0))
        .contains("'f4' is not an integer type"));
    let short = TokenData::read(&raw, RawDtype::U16, 10, None, 0.5).unwrap();
    let e = short.check_fits(4, 8, &raw).unwrap_err().to_string();
    assert!(
        e.contains("40 ids (20 for training, 20 held out) are too few"),
        "{e}"
    );
}

/// `--data`'s refusal of `path`, and a `--corpus` loader's.
fn both_refusals(path: &std::path::Path, raw: RawDtype, vocab: i64) -> (String, String) {
    let data = TokenData::read(path, raw, vocab, None, 0.0)
        .err()
        .expect("--data refuses it")
        .to_string();
    let mut c = LoaderConfig::new(vec![path.display().to_string()], vocab, 1, 4);
    c.format = Some(SourceFormat::TokenIds);
    c.raw_dtype = raw;
    let corpus = match Loader::open(&c, None) {
        Err(e) => e,
        Ok(mut l) => l.next_batch().expect_err("--corpus refuses it"),
    };
    (data, corpus.to_string())
}

#[test]
fn data_and_corpus_refuse_a_bad_token_file_in_the_same_words() {
    let ids: Vec<u8> = [3i32, 4, -2, 1]
        .iter()
        .flat_map(|t| t.to_le_bytes())
        .collect();
    let negative = npy_file("neg.npy", "<i4", "(4,)", ids.clone());
    let short = npy_file("short.npy", "<i4", "(5,)", ids);
    let big = u16_file("big.bin", &[3, 4, 70, 1]);
    let odd = u16_file("odd3.bin", &[1, 2, 3]);
    for (path, raw, ends) in [
        (
            &negative,
            RawDtype::U16,
            "neg.npy: token 2 is negative".to_string(),
        ),
        (
            &short,
            RawDtype::U16,
            "short.npy: the .npy header says 5 ids of 4 bytes, the file holds 16 bytes of data"
                .to_string(),
        ),
        (
            &big,
            RawDtype::U16,
            "big.bin: token 2 is 70, outside the vocabulary 0..64".to_string(),
        ),
        (
            &odd,
            RawDtype::U32,
            "odd3.bin: 6 bytes is not a whole number of 4-byte ids".to_string(),
        ),
    ] {
        let (data, corpus) = both_refusals(path, raw, 64);
        assert_eq!(data, corpus);
        assert!(data.ends_with(&ends), "{data}");
    }
    // An end-of-text id past the vocabulary, in --corpus's words too
    // (the root crate's tests/it/run_identity.rs), before the file is read.
    let e = TokenData::read(&big, RawDtype::U16, 64, Some(99999), 0.0)
        .err()
        .expect("refused")
        .to_string();
    assert_eq!(e, "--eos 99999 is outside the model's vocabulary 0..64");
}
