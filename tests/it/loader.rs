//! The loader as `hlatc train` and a run see it: corpus flags refused by
//! name, and tail padding that trains as a document counting for nothing
//! (the loader's own tests are the train crate's, `train/tests/it`).

use crate::corpus::word_corpus;
use crate::support::{hlatc, scratch, stderr, WORD_TOKENIZER};

#[test]
fn train_refuses_bad_corpus_flags_by_name() {
    let dir = scratch("loader-cli");
    let corpus = dir.join("c.jsonl");
    word_corpus(&corpus, 20, 2, 1);
    let c = corpus.display().to_string();
    let o = hlatc(&["train", "--steps", "2", "--tokenizer", WORD_TOKENIZER]);
    assert_eq!(crate::support::error_code(&o), "usage.conflict");
    let o = hlatc(&["train", "--steps", "2", "--corpus", &c]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim(),
        format!("error[loader.needs_tokenizer]: {c}: text needs a tokenizer (give --tokenizer tokenizer.json)")
    );
    let o = hlatc(&[
        "train",
        "--steps",
        "2",
        "--corpus",
        &c,
        "--tokenizer",
        WORD_TOKENIZER,
        "--eos-token",
        "<end>",
    ]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim(),
        format!("error[loader.no_such_token]: {WORD_TOKENIZER}: the tokenizer has no token '<end>' (for EOS)")
    );
}

/// Padding after a row's last document, in the packed convention of
/// MaxText and T5 (segment id 0 after higher ids, targets ignored), trains
/// as a document that counts for nothing: the same loss and the same
/// updated weights, bit for bit, as the row with its padding numbered as
/// one more document. The loader pads a pass' last row so.
#[test]
fn tail_padding_trains_as_a_document_that_counts_for_nothing() {
    use hlatc::compiler::{ElementType, Literal};
    use hlatc::models::{init::init_params, BatchShape, ModelConfig};
    use hlatc::train_step::StepConfig;
    let model = ModelConfig::tiny();
    let cfg = StepConfig {
        model: model.clone(),
        batch: BatchShape {
            batch_size: 2,
            seq_len: 8,
        },
        optimizer: Default::default(),
        precision: hlatc::precision::Precision::Fp32,
        packed: true,
        parallel: hlatc::models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    let rt = hlatc::runtime::Runtime::shared().unwrap();
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
        hlatc::data::Batch {
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
