//! The streaming loader: rows packed full, the same batches after a
//! resume, shards that split the documents, every bad input named with
//! its place, and the tail padding of a pass' last row, which trains as a
//! document counting for nothing.

use crate::corpus::word_corpus;
use crate::{scratch, WORD_TOKENIZER};
use hlatc_train::loader::{
    Loader, LoaderConfig, LoaderError, Packing, ReplicaLoaders, RowBatch, Shard, SourceFormat,
};
use std::path::{Path, PathBuf};

fn config(sources: &[&Path], rows: usize, seq: usize) -> LoaderConfig {
    let mut c = LoaderConfig::new(
        sources.iter().map(|p| p.display().to_string()).collect(),
        64,
        rows,
        seq,
    );
    c.tokenizer = Some(PathBuf::from(WORD_TOKENIZER));
    c
}

fn batches(loader: &mut Loader, n: usize) -> Vec<RowBatch> {
    (0..n)
        .map(|_| loader.next_batch().unwrap().unwrap())
        .collect()
}

/// Raw u16 token ids of documents of lengths 1 to 200, each ending in
/// id 1 (the end-of-text id).
fn mixed_length_ids(path: &Path, docs: usize) {
    let mut bytes = Vec::new();
    for d in 0..docs {
        let len = 1 + (d * 37 + d * d) % 200;
        for i in 0..len {
            bytes.extend(((2 + (d + i) % 60) as u16).to_le_bytes());
        }
        bytes.extend(1u16.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn rows_are_packed_full_with_each_document_once_a_row() {
    let dir = scratch("loader-pack");
    let ids = dir.join("mixed.bin");
    mixed_length_ids(&ids, 400);
    let mut c = config(&[&ids], 8, 64);
    c.tokenizer = None;
    c.eos_id = Some(1);
    c.epochs = Some(1);
    let mut loader = Loader::open(&c, None).unwrap();
    let mut total = hlatc_train::loader::Totals::default();
    let mut last = None;
    while let Some(b) = loader.next_batch().unwrap() {
        total.add(&b.totals);
        let segs = b.segment_ids.as_ref().unwrap();
        for row in 0..b.rows {
            let r = &segs[row * 64..(row + 1) * 64];
            let t = &b.tokens[row * 64..(row + 1) * 64];
            let y = &b.targets[row * 64..(row + 1) * 64];
            for i in 0..63 {
                // Within a document, each target is the next token; a
                // document's end (id 1) predicts nothing.
                if r[i] != 0 && r[i + 1] == r[i] {
                    assert_eq!(y[i], t[i + 1], "row {row} col {i}");
                }
                if t[i] == 1 && r[i] != 0 {
                    assert_eq!(y[i], -100, "row {row} col {i}");
                }
            }
        }
        last = Some(b);
    }
    // Every id of the corpus was packed once: 400 documents, their ids and
    // end-of-text ids.
    let corpus_ids: u64 = (0..400u64).map(|d| 2 + (d * 37 + d * d) % 200).sum();
    assert_eq!(total.filled, corpus_ids);
    assert!(
        total.efficiency() >= 0.99,
        "packing filled {:.4} of the slots",
        total.efficiency()
    );
    assert!(total.documents_per_row() > 1.0);
    // The pass ends in padding: segment 0, token 0, targets ignored.
    let last = last.unwrap();
    let segs = last.segment_ids.unwrap();
    assert_eq!(*segs.last().unwrap(), 0);
    assert_eq!(*last.targets.last().unwrap(), -100);
    assert_eq!(loader.next_batch().unwrap(), None);
}

#[test]
fn a_loader_resumed_at_its_position_gives_the_next_batch() {
    let dir = scratch("loader-resume");
    let a = dir.join("a.jsonl");
    let b = dir.join("b.jsonl");
    word_corpus(&a, 120, 4, 1);
    word_corpus(&b, 90, 6, 2);
    let mut c = config(&[&a, &b], 4, 16);
    c.shuffle_buffer = 32;
    c.seed = 7;
    // Enough batches to go round the corpus more than once.
    let mut loader = Loader::open(&c, None).unwrap();
    let all = batches(&mut loader, 60);
    for stop in [1, 17, 45] {
        let mut first = Loader::open(&c, None).unwrap();
        batches(&mut first, stop);
        let position = first.position().clone();
        let text = position.to_json();
        drop(first);
        let position = hlatc_train::loader::LoaderPosition::from_json(&text).unwrap();
        let mut again = Loader::open(&c, Some(position)).unwrap();
        assert_eq!(
            batches(&mut again, 60 - stop),
            all[stop..],
            "resumed after {stop} batches"
        );
        // Its record of what it read too, past the first pass.
        assert_eq!(again.position(), loader.position(), "after {stop}");
    }
    // The same seed gives the same batches; another seed, others.
    let mut same = Loader::open(&c, None).unwrap();
    assert_eq!(batches(&mut same, 3), all[..3]);
    c.seed = 8;
    let mut other = Loader::open(&c, None).unwrap();
    assert_ne!(batches(&mut other, 3), all[..3]);
}

#[test]
fn a_position_is_refused_by_a_loader_set_up_otherwise() {
    let dir = scratch("loader-position");
    let a = dir.join("a.jsonl");
    word_corpus(&a, 50, 3, 1);
    let c = config(&[&a], 2, 16);
    let mut loader = Loader::open(&c, None).unwrap();
    batches(&mut loader, 2);
    let position = loader.position().clone();
    let other = LoaderConfig { seq_len: 8, ..c };
    match Loader::open(&other, Some(position)) {
        Err(LoaderError::Position { reason }) => {
            assert_eq!(reason, "it was saved with seq_len = 16, this loader has 8")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a position of rows of 16 was taken for rows of 8"),
    }
}

#[test]
fn replicas_read_disjoint_shards_of_the_documents() {
    let dir = scratch("loader-shards");
    let a = dir.join("a.jsonl");
    word_corpus(&a, 40, 1, 3);
    let mut c = config(&[&a], 1, 4096);
    c.shuffle_buffer = 1;
    c.epochs = Some(1);
    c.packing = Packing::Concat;
    c.bos = hlatc_train::loader::SpecialToken::None;
    // One row holds the whole shard: its documents in order.
    let shard_tokens = |shard: Shard| {
        let c = LoaderConfig { shard, ..c.clone() };
        let b = Loader::open(&c, None)
            .unwrap()
            .next_batch()
            .unwrap()
            .unwrap();
        b.tokens[..b.totals.filled as usize].to_vec()
    };
    let whole = shard_tokens(Shard::WHOLE);
    let halves = [0, 1].map(|index| shard_tokens(Shard { index, count: 2 }));
    let docs = |ids: &[i32]| -> Vec<Vec<i32>> {
        ids.split_inclusive(|&t| t == 2)
            .map(<[i32]>::to_vec)
            .collect()
    };
    let (all, even, odd) = (docs(&whole), docs(&halves[0]), docs(&halves[1]));
    assert_eq!(all.len(), 40);
    assert_eq!(even, all.iter().step_by(2).cloned().collect::<Vec<_>>());
    assert_eq!(
        odd,
        all.iter().skip(1).step_by(2).cloned().collect::<Vec<_>>()
    );
    // Two replicas' loaders give their rows in replica order.
    let c = LoaderConfig {
        rows: 1,
        ..c.clone()
    };
    let mut both = ReplicaLoaders::open(&c, 2, None).unwrap();
    let b = both.next_batch().unwrap().unwrap();
    assert_eq!(b.rows, 2);
    assert_eq!(&b.tokens[..halves[0].len()], &halves[0][..]);
    assert_eq!(&b.tokens[4096..4096 + halves[1].len()], &halves[1][..]);
}

#[test]
fn token_id_files_and_globs_are_read_as_documents() {
    let dir = scratch("loader-ids");
    for (name, docs) in [("part-1.bin", 30), ("part-0.bin", 20)] {
        mixed_length_ids(&dir.join(name), docs);
    }
    let pattern = format!("{}/part-*.bin", dir.display());
    let mut c = LoaderConfig::new(vec![pattern.clone()], 64, 2, 32);
    c.eos_id = Some(1);
    c.epochs = Some(1);
    let mut loader = Loader::open(&c, None).unwrap();
    let mut filled = 0;
    while let Some(b) = loader.next_batch().unwrap() {
        filled += b.totals.filled;
    }
    let ids = |docs: u64| -> u64 { (0..docs).map(|d| 2 + (d * 37 + d * d) % 200).sum() };
    assert_eq!(filled, ids(30) + ids(20));
    let none = format!("{}/nothing-*.bin", dir.display());
    match Loader::open(&LoaderConfig::new(vec![none.clone()], 64, 2, 32), None) {
        Err(LoaderError::NoMatch { pattern }) => assert_eq!(pattern, none),
        other => panic!("{:?}", other.err()),
    }
    // An id past the vocabulary names the file and the id's place.
    let big = dir.join("big.bin");
    std::fs::write(&big, [3u16, 4, 70, 1].map(u16::to_le_bytes).concat()).unwrap();
    let mut c = LoaderConfig::new(vec![big.display().to_string()], 64, 1, 8);
    c.format = Some(SourceFormat::TokenIds);
    let e = Loader::open(&c, None).unwrap().next_batch().unwrap_err();
    assert!(
        matches!(
            e,
            LoaderError::IdOutsideVocabulary {
                index: 2,
                id: 70,
                vocab: 64,
                ..
            }
        ),
        "{e}"
    );
}

/// The first error of a loader of `text` as a JSONL file.
fn jsonl_error(dir: &Path, name: &str, text: &[u8]) -> (PathBuf, LoaderError) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let c = config(&[&path], 1, 8);
    let e = match Loader::open(&c, None) {
        Err(e) => e,
        Ok(mut l) => l.next_batch().unwrap_err(),
    };
    (path, e)
}

#[test]
fn bad_text_is_named_with_its_file_and_place() {
    let dir = scratch("loader-errors");
    let (path, e) = jsonl_error(
        &dir,
        "bad.jsonl",
        b"{\"text\": \"the cat\"}\n{\"text\": \"a dog\"\n",
    );
    match &e {
        LoaderError::MalformedJson { line, column, .. } => assert_eq!((*line, *column), (2, 16)),
        other => panic!("{other}"),
    }
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2:16: malformed JSON: EOF while parsing an object",
            path.display()
        )
    );
    let (_, e) = jsonl_error(
        &dir,
        "field.jsonl",
        b"{\"text\": \"the cat\"}\n\n{\"body\": \"a dog\"}\n",
    );
    assert!(
        matches!(&e, LoaderError::MissingField { line: 3, field, .. } if field == "text"),
        "{e}"
    );
    let (_, e) = jsonl_error(&dir, "number.jsonl", b"{\"text\": 7}\n");
    assert!(
        matches!(
            &e,
            LoaderError::FieldNotText {
                found: "a number",
                ..
            }
        ),
        "{e}"
    );
    let (_, e) = jsonl_error(
        &dir,
        "utf8.jsonl",
        b"{\"text\": \"the cat\"}\n{\"text\": \"a \xff dog\"}\n",
    );
    assert!(matches!(&e, LoaderError::NotUtf8 { offset: 32, .. }), "{e}");
    let (_, e) = jsonl_error(&dir, "array.jsonl", b"[1, 2]\n");
    assert!(
        matches!(
            &e,
            LoaderError::NotAnObject {
                line: 1,
                found: "an array",
                ..
            }
        ),
        "{e}"
    );
    // A corpus with no document is an error, not an endless wait.
    let (_, e) = jsonl_error(&dir, "empty.jsonl", b"\n  \n");
    assert!(matches!(&e, LoaderError::EmptyCorpus { .. }), "{e}");
}

#[test]
fn a_tokenizer_past_the_vocabulary_is_refused_before_any_batch() {
    let dir = scratch("loader-vocab");
    let corpus = dir.join("c.jsonl");
    word_corpus(&corpus, 4, 1, 1);
    let mut c = config(&[&corpus], 1, 8);
    c.vocab = 32;
    match Loader::open(&c, None) {
        Err(LoaderError::TokenizerPastVocabulary {
            tokenizer_vocab,
            model_vocab,
            ..
        }) => assert_eq!((tokenizer_vocab, model_vocab), (59, 32)),
        other => panic!("{:?}", other.err()),
    }
    c.vocab = 64;
    c.tokenizer = None;
    assert!(matches!(
        Loader::open(&c, None),
        Err(LoaderError::NeedsTokenizer { .. })
    ));
}

/// `bytes` with the byte at `at` changed, its length the same.
fn edited(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    // An id's low byte, to another id of the vocabulary: the file still
    // reads.
    let at = at & !1;
    b[at] = if b[at] == 3 { 4 } else { 3 };
    b
}

#[test]
fn a_resume_refuses_an_edit_anywhere_in_what_the_loader_read_naming_the_block() {
    use hlatc_train::loader::read_digest::BLOCK;
    let dir = scratch("loader-read-digest");
    let ids = dir.join("ids.bin");
    mixed_length_ids(&ids, 60_000);
    let original = std::fs::read(&ids).unwrap();
    assert!(original.len() as u64 > 2 * BLOCK, "{}", original.len());
    let mut c = config(&[&ids], 64, 2048);
    c.tokenizer = None;
    c.eos_id = Some(1);
    let open = |from| ReplicaLoaders::open(&c, 2, from);
    // Into the second block: each replica's rows take every other
    // document, so a batch moves the stream about 2 x 64 x 2048 ids of 2
    // bytes on, and the loader reads up to 1 MiB ahead.
    let mut first = open(None).unwrap();
    for _ in 0..10 {
        first.next_batch().unwrap().unwrap();
    }
    let positions = first.positions();
    drop(first);
    let read = positions[0].read.get(0).unwrap().bytes;
    assert!(
        read > BLOCK + 200_000 && read < original.len() as u64,
        "{read}"
    );
    assert_eq!(positions[0].read.get(0).unwrap().blocks.len(), 2);
    for (at, block) in [(150_000, 0), (BLOCK as usize + 100_000, 1)] {
        std::fs::write(&ids, edited(&original, at)).unwrap();
        match open(Some(positions.clone())) {
            Err(LoaderError::CorpusChanged { path, start, end }) => {
                assert_eq!(path, ids, "byte {at}");
                assert_eq!(start, block * BLOCK, "byte {at}");
                assert_eq!(end, ((block + 1) * BLOCK).min(read), "byte {at}");
            }
            Err(e) => panic!("byte {at}: {e}"),
            Ok(_) => panic!("an edit at byte {at}, which the loader read, resumed"),
        }
    }
    // Bytes it has not read yet it reads as they are now.
    let unread = original.len() - 1000;
    std::fs::write(&ids, edited(&original, unread)).unwrap();
    open(Some(positions.clone()))
        .unwrap()
        .next_batch()
        .unwrap()
        .unwrap();
    // The corpus as it was resumes, the positions' record the same.
    std::fs::write(&ids, &original).unwrap();
    let mut again = open(Some(positions.clone())).unwrap();
    again.next_batch().unwrap().unwrap();
    let mut straight = open(None).unwrap();
    for _ in 0..11 {
        straight.next_batch().unwrap().unwrap();
    }
    assert_eq!(again.positions(), straight.positions());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn after_a_pass_the_whole_corpus_is_checked_at_resume() {
    let dir = scratch("loader-read-digest-pass");
    let a = dir.join("a.jsonl");
    word_corpus(&a, 80, 3, 1);
    let original = std::fs::read(&a).unwrap();
    let mut c = config(&[&a], 4, 16);
    c.shuffle_buffer = 8;
    let mut loader = Loader::open(&c, None).unwrap();
    while loader.position().cursor.epoch == 0 {
        loader.next_batch().unwrap().unwrap();
    }
    let position = loader.position().clone();
    drop(loader);
    let whole = position.read.get(0).unwrap();
    assert_eq!(whole.bytes, original.len() as u64);
    // The last byte's line break, changed to a space: the same length.
    let mut last = original.clone();
    let n = last.len();
    last[n - 1] = b' ';
    std::fs::write(&a, &last).unwrap();
    match Loader::open(&c, Some(position)) {
        Err(LoaderError::CorpusChanged { path, start, end }) => {
            assert_eq!((path, start, end), (a.clone(), 0, n as u64));
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an edit of a file the loader read whole resumed"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A loader resumed where its next batch comes from documents already
/// drawn (its stream not read on yet) records what one that never stopped
/// records: the checkpoints of a resumed run are those of an unbroken one.
#[test]
fn a_resumed_loader_records_the_same_reads_before_it_reads_on() {
    let dir = scratch("loader-read-digest-idle");
    let a = dir.join("a.jsonl");
    // Past the 1 MiB the loader reads at a time: the file is still open
    // when it stops.
    word_corpus(&a, 30_000, 3, 1);
    let size = std::fs::metadata(&a).unwrap().len();
    let c = config(&[&a], 2, 16);
    let mut first = Loader::open(&c, None).unwrap();
    batches(&mut first, 2);
    let position = first.position().clone();
    drop(first);
    let read = position.read.get(0).map(|d| d.bytes);
    assert_eq!(read, Some(1 << 20), "of {size}");
    let mut again = Loader::open(&c, Some(position)).unwrap();
    batches(&mut again, 1);
    let mut straight = Loader::open(&c, None).unwrap();
    batches(&mut straight, 3);
    assert_eq!(again.position(), straight.position());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Padding after a row's last document, in the packed convention of
/// MaxText and T5 (segment id 0 after higher ids, targets ignored), trains
/// as a document that counts for nothing: the same loss and the same
/// updated weights, bit for bit, as the row with its padding numbered as
/// one more document. The loader pads a pass' last row so.
#[test]
fn tail_padding_trains_as_a_document_that_counts_for_nothing() {
    use hlatc_compiler::{ElementType, Literal};
    use hlatc_models::{init::init_params, BatchShape, ModelConfig};
    use hlatc_step::train_step::StepConfig;
    let model = ModelConfig::tiny();
    let cfg = StepConfig {
        model: model.clone(),
        batch: BatchShape {
            batch_size: 2,
            seq_len: 8,
        },
        optimizer: Default::default(),
        precision: hlatc_step::precision::Precision::Fp32,
        packed: true,
        parallel: hlatc_models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    let rt = hlatc_runtime::Runtime::shared().unwrap();
    let params = || -> Vec<Literal> {
        init_params(&model, ElementType::F32, 4)
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    };
    let batch = |pad_segment: i32| {
        let tokens = [5, 6, 7, 8, 9, 10, 0, 0, 11, 12, 13, 14, 15, 16, 17, 0];
        let targets = [
            6, 7, 8, -100, 10, -100, -100, -100, 12, 13, 14, 15, 16, 17, -100, -100,
        ];
        let p = pad_segment;
        let segments = [1, 1, 1, 1, 2, 2, p, p, 1, 1, 1, 1, 1, 1, 1, p];
        let lit = |v: &[i32]| Literal::from_s32(vec![2, 8], v).unwrap();
        hlatc_step::data::Batch {
            tokens: lit(&tokens),
            targets: lit(&targets),
            segment_ids: Some(lit(&segments)),
        }
    };
    let mut padded = crate::cpu_trainers::unoptimized(&rt, &cfg, params()).unwrap();
    let mut numbered = crate::cpu_trainers::unoptimized(&rt, &cfg, params()).unwrap();
    let (a, b) = (batch(0), batch(3));
    let sa = padded.step(&a).unwrap();
    let sb = numbered.step(&b).unwrap();
    assert!(sa.loss.is_finite() && sa.loss > 1.0, "{sa:?}");
    assert_eq!(sa.loss.to_bits(), sb.loss.to_bits());
    assert_eq!(sa.grad_norm.to_bits(), sb.grad_norm.to_bits());
    assert_eq!(padded.params(), numbered.params());
}
