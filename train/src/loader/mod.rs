//! HLAT's data loader: text (JSONL or plain) or token-id files, read as a
//! stream, shuffled through a document buffer, tokenized with a Hugging
//! Face `tokenizer.json` and packed into rows, on a thread of its own so a
//! step does not wait for it.
//!
//! - [`sources`]: the files and the documents in them;
//!   [`token_ids`]: a token-id file's ids (`train --data` reads them too);
//!   [`doc_stream`]: the corpus as one stream, split into shards;
//! - [`tokenize`]: text to ids, and the BOS/EOS policy;
//! - [`pack`]: documents into rows, with segment ids or concatenated;
//! - [`producer`]: the pipeline; [`position`]: where it is, to resume.
//!
//! The same seed, corpus and settings give the same batches on any
//! machine, and a loader opened at a saved [`LoaderPosition`] gives the
//! batches one that never stopped would have given next.

pub mod doc_stream;
mod error;
pub mod pack;
pub mod position;
mod producer;
pub mod read_digest;
mod row_batch;
pub mod sources;
pub mod token_ids;
pub mod tokenize;

pub use doc_stream::Shard;
pub use error::LoaderError;
pub use pack::Packing;
pub use position::{positions_from_json, positions_to_json, Fingerprint, LoaderPosition, Totals};
pub use row_batch::RowBatch;
pub use sources::SourceFormat;
pub use token_ids::RawDtype;
pub use tokenize::SpecialToken;

use doc_stream::{Cursor, DocStream, ReadBefore};
use hlatc_runtime::inputs::SplitMix64;
use producer::Producer;
use read_digest::{check_records, ReadRecord, Resumed};
use sources::ReadSettings;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokenize::TextTokenizer;

/// Ids made ahead of the step that takes them: a step waits only if the
/// pipeline falls this far behind (on a small model, steps of a few
/// milliseconds share the cores with XLA's own threads), whatever the
/// batch's size, within [`PREFETCH_BATCHES`].
const PREFETCH_IDS: usize = 1 << 20;
/// The fewest and the most batches made ahead.
const PREFETCH_BATCHES: (usize, usize) = (8, 256);

/// Documents the shuffle draws from, by default.
pub const DEFAULT_SHUFFLE_BUFFER: usize = 1024;

/// Everything a loader reads and how it makes rows.
#[derive(Clone, Debug)]
pub struct LoaderConfig {
    /// Files or glob patterns (`data/*.jsonl`), read in the order given,
    /// each glob's matches sorted.
    pub sources: Vec<String>,
    /// `None`: each file's format from its name ([`SourceFormat::of`]).
    pub format: Option<SourceFormat>,
    /// The field of a JSONL record that holds its text.
    pub text_field: String,
    /// A Hugging Face `tokenizer.json`; text sources need one.
    pub tokenizer: Option<PathBuf>,
    pub bos: SpecialToken,
    pub eos: SpecialToken,
    /// How a raw token-id file stores each id.
    pub raw_dtype: RawDtype,
    /// The id that ends a document in a token-id file.
    pub eos_id: Option<u32>,
    /// The model's vocabulary: ids past it are refused.
    pub vocab: i64,
    pub seq_len: usize,
    /// Rows per batch (of this shard).
    pub rows: usize,
    pub packing: Packing,
    pub shuffle_buffer: usize,
    pub seed: u64,
    pub shard: Shard,
    /// Passes over the corpus; `None` goes on for ever.
    pub epochs: Option<u64>,
}

impl LoaderConfig {
    /// A loader of `sources` for rows of `seq_len`, `rows` to a batch, over
    /// a vocabulary of `vocab`, with the defaults: text in `text`, special
    /// tokens found in the tokenizer, segment ids, a buffer of
    /// [`DEFAULT_SHUFFLE_BUFFER`], seed 0, the whole corpus, for ever.
    pub fn new(sources: Vec<String>, vocab: i64, rows: usize, seq_len: usize) -> LoaderConfig {
        LoaderConfig {
            sources,
            format: None,
            text_field: "text".into(),
            tokenizer: None,
            bos: SpecialToken::Detect,
            eos: SpecialToken::Detect,
            raw_dtype: RawDtype::U16,
            eos_id: None,
            vocab,
            seq_len,
            rows,
            packing: Packing::Segments,
            shuffle_buffer: DEFAULT_SHUFFLE_BUFFER,
            seed: 0,
            shard: Shard::WHOLE,
            epochs: None,
        }
    }
}

type Produced = Result<(RowBatch, LoaderPosition), LoaderError>;

/// A loader at work: its pipeline runs on its own thread, up to
/// [`PREFETCH_IDS`] ids ahead.
pub struct Loader {
    receiver: Option<Receiver<Produced>>,
    worker: Option<std::thread::JoinHandle<()>>,
    position: LoaderPosition,
    /// Time spent waiting for a batch that was not ready.
    waited: Duration,
    tokenizer_vocab: Option<usize>,
    finished: bool,
}

impl Loader {
    /// Opens `config`'s corpus and starts the pipeline, at `from` (a
    /// position a loader of the same settings saved) or at the start. The
    /// files, the tokenizer and its vocabulary are checked before this
    /// returns; a document's errors come with the batch that needs it.
    pub fn open(
        config: &LoaderConfig,
        from: Option<LoaderPosition>,
    ) -> Result<Loader, LoaderError> {
        let corpus = Corpus::open(config)?;
        let resumed = check_positions(&corpus, &[(config, from.as_ref())])?;
        Self::start(config, &corpus, from, &resumed)
    }

    fn start(
        config: &LoaderConfig,
        corpus: &Corpus,
        from: Option<LoaderPosition>,
        resumed: &Resumed,
    ) -> Result<Loader, LoaderError> {
        check_settings(config)?;
        let fingerprint = fingerprint(config, corpus);
        let position = match from {
            Some(p) => {
                p.check_fits(&fingerprint)?;
                p
            }
            None => LoaderPosition {
                fingerprint,
                cursor: Cursor::default(),
                epoch_docs: 0,
                rng: shuffle_seed(config.seed, config.shard),
                buffer: Vec::new(),
                pending: Vec::new(),
                carry: None,
                batches: 0,
                totals: Totals::default(),
                read: ReadRecord::default(),
            },
        };
        let settings = ReadSettings {
            format: config.format,
            text_field: config.text_field.clone(),
            raw_dtype: config.raw_dtype,
            eos: config.eos_id,
            vocab: config.vocab,
        };
        let tokenizer = corpus.tokenizer.clone();
        let tokenizer_vocab = tokenizer.as_ref().map(|t| t.vocab_size());
        let sizes: Vec<u64> = corpus.identity.iter().map(|(_, size)| *size).collect();
        let stream = DocStream::new(
            corpus.files.clone(),
            settings,
            config.shard,
            config.seed,
            position.cursor,
            ReadBefore {
                record: &position.read,
                sizes: &sizes,
                resumed,
            },
        );
        let (capacity, packing, rows, epochs) = (
            config.shuffle_buffer,
            config.packing,
            config.rows,
            config.epochs,
        );
        let ahead = (PREFETCH_IDS / (rows * config.seq_len).max(1))
            .clamp(PREFETCH_BATCHES.0, PREFETCH_BATCHES.1);
        let (sender, receiver) = sync_channel::<Produced>(ahead);
        let start = position.clone();
        let worker = std::thread::Builder::new()
            .name(format!("hlatc-loader-{}", config.shard.index))
            .spawn(move || {
                let producer =
                    Producer::resume(stream, tokenizer, capacity, packing, rows, epochs, start);
                let mut producer = match producer {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = sender.send(Err(e));
                        return;
                    }
                };
                loop {
                    let next = match producer.next_batch() {
                        Ok(Some(b)) => Ok((b, producer.position.clone())),
                        Ok(None) => return,
                        Err(e) => Err(e),
                    };
                    let failed = next.is_err();
                    // A closed channel: the loader was dropped.
                    if sender.send(next).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|source| LoaderError::Io {
                path: PathBuf::from("<loader thread>"),
                source,
            })?;
        Ok(Loader {
            receiver: Some(receiver),
            worker: Some(worker),
            position,
            waited: Duration::ZERO,
            tokenizer_vocab,
            finished: false,
        })
    }

    /// The next batch; `None` after the last pass over the corpus (never,
    /// when the loader goes on for ever).
    pub fn next_batch(&mut self) -> Result<Option<RowBatch>, LoaderError> {
        if self.finished {
            return Ok(None);
        }
        let receiver = self.receiver.as_ref().ok_or(LoaderError::WorkerGone)?;
        // Only a batch that is not ready yet counts as waiting.
        let got = match receiver.try_recv() {
            Ok(v) => Some(v),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                let t = Instant::now();
                let v = receiver.recv().ok();
                self.waited += t.elapsed();
                v
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
        };
        match got {
            Some(Ok((batch, position))) => {
                self.position = position;
                Ok(Some(batch))
            }
            Some(Err(e)) => {
                self.finished = true;
                Err(e)
            }
            None => {
                self.finished = true;
                Ok(None)
            }
        }
    }

    /// Where the loader is: after the last batch [`Loader::next_batch`]
    /// gave (a loader opened there gives the same next batch).
    pub fn position(&self) -> &LoaderPosition {
        &self.position
    }

    /// The time [`Loader::next_batch`] has spent waiting for the pipeline.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// How many ids the tokenizer has (`None` without one).
    pub fn tokenizer_vocab(&self) -> Option<usize> {
        self.tokenizer_vocab
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Closing the channel stops the worker at its next batch.
        self.receiver = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// One loader per DP replica, each reading its own shard of the corpus
/// for its own rows; a batch is theirs one after another, as the step's
/// replicas take their rows.
pub struct ReplicaLoaders {
    parts: Vec<Loader>,
}

impl ReplicaLoaders {
    /// `replicas` loaders of `config` (whose `rows` is a replica's rows and
    /// whose shard is ignored), each at its `from` position.
    pub fn open(
        config: &LoaderConfig,
        replicas: usize,
        from: Option<Vec<LoaderPosition>>,
    ) -> Result<ReplicaLoaders, LoaderError> {
        let all: Vec<usize> = (0..replicas).collect();
        Self::open_some(config, replicas, &all, from)
    }

    /// The loaders of replicas `owned` (of `replicas`): a process of a
    /// multi-process run reads only its own replicas' rows.
    pub fn open_some(
        config: &LoaderConfig,
        replicas: usize,
        owned: &[usize],
        from: Option<Vec<LoaderPosition>>,
    ) -> Result<ReplicaLoaders, LoaderError> {
        if from.as_ref().is_some_and(|f| f.len() != owned.len()) {
            return Err(LoaderError::Position {
                reason: format!(
                    "it holds {} replicas' positions, this run has {}",
                    from.as_ref().map_or(0, Vec::len),
                    owned.len()
                ),
            });
        }
        if let Some(&bad) = owned.iter().find(|&&r| r >= replicas) {
            return Err(LoaderError::Setting {
                setting: "replica",
                value: bad.to_string(),
                reason: "a replica index must be below the replica count",
            });
        }
        let corpus = Corpus::open(config)?;
        let configs: Vec<LoaderConfig> = owned
            .iter()
            .map(|&index| LoaderConfig {
                shard: Shard {
                    index,
                    count: replicas,
                },
                ..config.clone()
            })
            .collect();
        let mut from: Vec<Option<LoaderPosition>> = match from {
            Some(f) => f.into_iter().map(Some).collect(),
            None => vec![None; owned.len()],
        };
        // The replicas read the same files: each file is read again once,
        // for all of them.
        let each: Vec<_> = configs
            .iter()
            .zip(from.iter().map(Option::as_ref))
            .collect();
        let resumed = check_positions(&corpus, &each)?;
        let parts = configs
            .iter()
            .zip(from.iter_mut())
            .map(|(config, at)| Loader::start(config, &corpus, at.take(), &resumed))
            .collect::<Result<_, _>>()?;
        Ok(ReplicaLoaders { parts })
    }

    /// The next batch: every replica's rows, in replica order.
    pub fn next_batch(&mut self) -> Result<Option<RowBatch>, LoaderError> {
        let mut parts = Vec::with_capacity(self.parts.len());
        for p in &mut self.parts {
            match p.next_batch()? {
                Some(b) => parts.push(b),
                None => return Ok(None),
            }
        }
        Ok(Some(RowBatch::concat(parts)))
    }

    pub fn positions(&self) -> Vec<LoaderPosition> {
        self.parts.iter().map(|p| p.position().clone()).collect()
    }

    /// Every replica's counts, summed.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in &self.parts {
            t.add(&p.position().totals);
        }
        t
    }

    pub fn waited(&self) -> Duration {
        self.parts.iter().map(Loader::waited).sum()
    }

    pub fn tokenizer_vocab(&self) -> Option<usize> {
        self.parts.first().and_then(Loader::tokenizer_vocab)
    }
}

/// A corpus opened once for all the loaders that read it: its files, what
/// a position names them by, and its tokenizer.
struct Corpus {
    files: Vec<PathBuf>,
    /// Each file's canonical path and size (a position's fingerprint): a
    /// relative and an absolute path to the same file, or another working
    /// directory, name the same corpus.
    identity: Vec<(String, u64)>,
    tokenizer: Option<Arc<TextTokenizer>>,
}

impl Corpus {
    /// `config`'s files and tokenizer, checked: a text file needs a
    /// tokenizer, and the tokenizer's ids must lie in the model's
    /// vocabulary.
    fn open(config: &LoaderConfig) -> Result<Corpus, LoaderError> {
        let files = sources::expand(&config.sources)?;
        let tokenizer = match &config.tokenizer {
            Some(path) => Some(Arc::new(TextTokenizer::open(
                path,
                &config.bos,
                &config.eos,
                config.vocab,
            )?)),
            None => None,
        };
        if tokenizer.is_none() {
            if let Some(text) = files.iter().find(|f| {
                config
                    .format
                    .unwrap_or_else(|| SourceFormat::of(f))
                    .is_text()
            }) {
                return Err(LoaderError::NeedsTokenizer { path: text.clone() });
            }
        }
        let identity = files
            .iter()
            .map(|f| {
                let io = |source| LoaderError::Io {
                    path: f.clone(),
                    source,
                };
                let size = std::fs::metadata(f).map_err(io)?.len();
                let path = std::fs::canonicalize(f).map_err(io)?;
                Ok((path.display().to_string(), size))
            })
            .collect::<Result<_, LoaderError>>()?;
        Ok(Corpus {
            files,
            identity,
            tokenizer,
        })
    }
}

fn check_settings(config: &LoaderConfig) -> Result<(), LoaderError> {
    let setting = |setting, value: usize, reason| LoaderError::Setting {
        setting,
        value: value.to_string(),
        reason,
    };
    if config.seq_len == 0 {
        return Err(setting("seq_len", 0, "a row holds at least one token"));
    }
    if config.rows == 0 {
        return Err(setting("rows", 0, "a batch holds at least one row"));
    }
    if config.shuffle_buffer == 0 {
        return Err(setting(
            "shuffle_buffer",
            0,
            "the shuffle draws from at least one document (1 keeps the corpus' order)",
        ));
    }
    if config.shard.count == 0 || config.shard.index >= config.shard.count {
        return Err(setting(
            "shard",
            config.shard.index,
            "the shard index must be below the shard count",
        ));
    }
    if config.epochs == Some(0) {
        return Err(setting("epochs", 0, "a loader makes at least one pass"));
    }
    token_ids::check_eos(config.eos_id, config.vocab)
}

/// Checks each loader's position (`None`: it starts at the beginning)
/// against its settings, then what the positions say was read of the
/// corpus against the files now: the hashers to go on from.
fn check_positions(
    corpus: &Corpus,
    loaders: &[(&LoaderConfig, Option<&LoaderPosition>)],
) -> Result<Resumed, LoaderError> {
    let mut records = Vec::new();
    for (config, from) in loaders {
        if let Some(p) = from {
            check_settings(config)?;
            p.check_fits(&fingerprint(config, corpus))?;
            records.push(&p.read);
        }
    }
    check_records(&corpus.files, &records)
}

/// The shuffle's first state for a shard: shards shuffle independently.
fn shuffle_seed(seed: u64, shard: Shard) -> u64 {
    SplitMix64::new(seed ^ 0x5348_5546_4C45_u64)
        .next_u64()
        .wrapping_add(shard.index as u64)
}

fn fingerprint(config: &LoaderConfig, corpus: &Corpus) -> Fingerprint {
    let tokenizer = corpus.tokenizer.as_deref();
    Fingerprint {
        files: corpus.identity.clone(),
        format: config.format,
        text_field: config.text_field.clone(),
        // By content: a tokenizer copied elsewhere resumes, one retrained
        // at the same path does not.
        tokenizer: tokenizer.map(|t| t.content_hash.clone()),
        bos: tokenizer.and_then(|t| t.bos),
        eos: tokenizer.and_then(|t| t.eos).or(config.eos_id),
        seq_len: config.seq_len,
        rows: config.rows,
        packing: config.packing,
        shuffle_buffer: config.shuffle_buffer,
        seed: config.seed,
        shard: config.shard,
    }
}
