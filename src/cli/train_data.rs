//! Where `hlatc train`'s batches come from: the synthetic language, a
//! pre-tokenized file sampled at random windows (`--data`), or a corpus
//! streamed through the loader (`--corpus`).

use super::console::note;
use hlatc::data::{Batch, SyntheticData};
use hlatc::loader::{
    LoaderConfig, LoaderPosition, Packing, RawDtype, ReplicaLoaders, SourceFormat, SpecialToken,
};
use hlatc::token_data::TokenData;
use hlatc::train_step::StepConfig;
use hlatc::Error;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct DataArgs {
    /// Train on pre-tokenized data instead of the synthetic language: a
    /// flat stream of token ids (raw little-endian, see --data-dtype, as
    /// nanoGPT and Megatron write it) or a 1-D integer .npy. Windows of the
    /// stream at random offsets become packed rows (implies --packed);
    /// documents end at --eos. The last --eval-fraction is held out
    #[arg(long, value_name = "FILE", conflicts_with = "corpus")]
    data: Option<PathBuf>,
    /// Train on a corpus streamed through hlatc's loader, as HLAT trained:
    /// JSONL (the text in --text-field), plain text (a document a line) or
    /// token ids (.bin/.npy, documents ending at --eos), by each file's
    /// extension unless --corpus-format says. Files or globs
    /// ('data/*.jsonl'), several after one flag or the flag repeated; files
    /// larger than memory stream. Text is tokenized with --tokenizer on a
    /// thread of its own; documents are shuffled through --shuffle-buffer
    /// of them and packed into rows (--packing); each DP replica reads its
    /// own shard of the documents
    #[arg(long, value_name = "PATH|GLOB", num_args = 1..)]
    corpus: Vec<String>,
    /// How every --corpus file holds its documents [default: by extension:
    /// .jsonl/.json JSONL, .bin/.npy token ids, anything else lines]
    #[arg(long, value_enum, value_name = "FORMAT")]
    corpus_format: Option<CorpusFormat>,
    /// A Hugging Face tokenizer.json for --corpus text. Each document is
    /// [BOS] + its ids (without the tokenizer's own special tokens) +
    /// [EOS]; its ids must lie in the model's vocabulary
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// The field of each JSONL record that holds its text
    #[arg(long, value_name = "NAME", default_value = "text")]
    text_field: String,
    /// The token that starts each --corpus text document, or 'none'
    /// [default: the tokenizer's <s>, <|begin_of_text|> or <|startoftext|>]
    #[arg(long, value_name = "TOKEN|none")]
    bos_token: Option<String>,
    /// The token that ends each --corpus text document, or 'none'
    /// [default: the tokenizer's </s>, <|end_of_text|>, <|endoftext|> or <eos>]
    #[arg(long, value_name = "TOKEN|none")]
    eos_token: Option<String>,
    /// How --corpus rows mark their documents: 'segments' numbers them so
    /// attention stays within each (a packed step); 'concat' is plain
    /// concatenation (an unpacked step)
    #[arg(long, value_enum, default_value = "segments")]
    packing: PackingArg,
    /// Documents the --corpus shuffle draws from (1 keeps the corpus' order)
    #[arg(long, value_name = "N", default_value_t = hlatc::loader::DEFAULT_SHUFFLE_BUFFER)]
    shuffle_buffer: usize,
    /// How a raw (non-.npy) token-id file stores each id
    #[arg(long, value_enum, default_value = "u16")]
    data_dtype: DataDtype,
    /// The end-of-text id that ends each document of a token-id file
    /// [default: none: --data is one document, a --corpus file is cut every
    /// 2^20 ids]
    #[arg(long, value_name = "ID")]
    eos: Option<u32>,
    /// Fraction of --data, from its end, held out to report evaluation loss;
    /// 0 turns evaluation off
    #[arg(long, default_value_t = 0.05)]
    pub eval_fraction: f64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DataDtype {
    U16,
    U32,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CorpusFormat {
    /// One JSON object a line
    Jsonl,
    /// Plain text, a document a line
    Lines,
    /// Plain text, documents separated by blank lines
    Paragraphs,
    /// Token ids, raw (--data-dtype) or .npy
    TokenIds,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PackingArg {
    Segments,
    Concat,
}

impl DataArgs {
    /// Whether the step takes segment ids: packed data and --packed.
    pub fn packed(&self, flag: bool) -> Result<bool, Error> {
        if !self.corpus.is_empty() {
            if flag && self.packing == PackingArg::Concat {
                return Err(Error::conflict(
                    "--packed with --packing concat: concatenated rows have no segment ids; \
                     use --packing segments",
                ));
            }
            return Ok(self.packing == PackingArg::Segments);
        }
        Ok(flag || self.data.is_some())
    }

    fn raw_dtype(&self) -> RawDtype {
        match self.data_dtype {
            DataDtype::U16 => RawDtype::U16,
            DataDtype::U32 => RawDtype::U32,
        }
    }

    /// The loader's settings for `cfg`'s batch, each DP replica its rows.
    fn loader_config(&self, cfg: &StepConfig, seed: u64) -> LoaderConfig {
        let replicas = cfg.parallel.dp.max(1);
        let special = |flag: &Option<String>| match flag.as_deref() {
            None => SpecialToken::Detect,
            Some("none") => SpecialToken::None,
            Some(t) => SpecialToken::Named(t.to_string()),
        };
        LoaderConfig {
            format: self.corpus_format.map(|f| match f {
                CorpusFormat::Jsonl => SourceFormat::Jsonl,
                CorpusFormat::Lines => SourceFormat::TextLines,
                CorpusFormat::Paragraphs => SourceFormat::TextParagraphs,
                CorpusFormat::TokenIds => SourceFormat::TokenIds,
            }),
            text_field: self.text_field.clone(),
            tokenizer: self.tokenizer.clone(),
            bos: special(&self.bos_token),
            eos: special(&self.eos_token),
            raw_dtype: self.raw_dtype(),
            eos_id: self.eos,
            packing: match self.packing {
                PackingArg::Segments => Packing::Segments,
                PackingArg::Concat => Packing::Concat,
            },
            shuffle_buffer: self.shuffle_buffer,
            seed,
            ..LoaderConfig::new(
                self.corpus.clone(),
                cfg.model.vocab_size,
                (cfg.batch.batch_size / replicas) as usize,
                cfg.batch.seq_len as usize,
            )
        }
    }

    /// The --tokenizer file, if one was given.
    pub fn tokenizer(&self) -> Option<&std::path::Path> {
        self.tokenizer.as_deref()
    }

    /// The files the run reads (--data's, or --corpus' expanded), `None`
    /// for the synthetic language.
    pub fn files(&self) -> Result<Option<Vec<PathBuf>>, Error> {
        if let Some(path) = &self.data {
            return Ok(Some(vec![path.clone()]));
        }
        if self.corpus.is_empty() {
            return Ok(None);
        }
        Ok(Some(hlatc::loader::sources::expand(&self.corpus)?))
    }

    /// How much of its files the run's identity fingerprints: all of
    /// --data's, which the run reads whole and nothing else records; a
    /// sample of a --corpus, whose loader records the blocks it read.
    pub fn coverage(&self) -> hlatc::run_identity::Coverage {
        match self.data {
            Some(_) => hlatc::run_identity::Coverage::Whole,
            None => hlatc::run_identity::Coverage::Sampled,
        }
    }

    /// Whether each batch is drawn from the seed alone (the synthetic
    /// language, --data), not read by a loader that records its own
    /// position.
    pub fn draws_from_seed(&self) -> bool {
        self.corpus.is_empty()
    }

    /// Flags that only mean something with --corpus, given without it.
    pub fn check(&self) -> Result<(), Error> {
        if self.corpus.is_empty() {
            let stray = [
                ("--tokenizer", self.tokenizer.is_some()),
                ("--corpus-format", self.corpus_format.is_some()),
                ("--bos-token", self.bos_token.is_some()),
                ("--eos-token", self.eos_token.is_some()),
            ];
            if let Some((flag, _)) = stray.iter().find(|(_, given)| *given) {
                return Err(Error::conflict(format!("{flag} needs --corpus")));
            }
        }
        if !(0.0..1.0).contains(&self.eval_fraction) {
            return Err(Error::out_of_range(format!(
                "--eval-fraction must be in [0, 1), got {}",
                self.eval_fraction
            )));
        }
        Ok(())
    }
}

/// The batches of a run.
pub enum TrainData {
    Synthetic { data: SyntheticData, packed: bool },
    Tokens(TokenData),
    Corpus(ReplicaLoaders),
}

impl TrainData {
    /// The data `a` names for `cfg`: a corpus opened at `positions` (from a
    /// checkpoint) or at its start, its files and tokenizer checked now.
    pub fn open(
        a: &DataArgs,
        cfg: &StepConfig,
        seed: u64,
        positions: Option<Vec<LoaderPosition>>,
    ) -> Result<TrainData, Error> {
        if let Some(path) = &a.data {
            let d = TokenData::read(
                path,
                a.raw_dtype(),
                cfg.model.vocab_size,
                a.eos,
                a.eval_fraction,
            )?;
            d.check_fits(cfg.batch.batch_size, cfg.batch.seq_len, path)?;
            return Ok(TrainData::Tokens(d));
        }
        if !a.corpus.is_empty() {
            let replicas = cfg.parallel.dp.max(1) as usize;
            let loaders = ReplicaLoaders::open(&a.loader_config(cfg, seed), replicas, positions)?;
            return Ok(TrainData::Corpus(loaders));
        }
        Ok(TrainData::Synthetic {
            data: SyntheticData::permutation(cfg.model.vocab_size, seed),
            packed: cfg.packed,
        })
    }

    /// The held-out part of --data, if it has one.
    pub fn tokens(&self) -> Option<&TokenData> {
        match self {
            TrainData::Tokens(d) => Some(d),
            _ => None,
        }
    }

    /// The batch of optimizer step `k` (0-based).
    pub fn batch(&mut self, k: u64, seed: u64, cfg: &StepConfig) -> Result<Batch, Error> {
        let (rows, seq) = (cfg.batch.batch_size, cfg.batch.seq_len);
        Ok(match self {
            TrainData::Synthetic { data, packed } => data.step_batch(*packed, k, rows, seq),
            TrainData::Tokens(d) => d.train_batch(k, seed, rows, seq),
            TrainData::Corpus(loaders) => loaders
                .next_batch()?
                .ok_or_else(|| Error::invalid("the corpus loader stopped"))?
                .to_batch(),
        })
    }

    /// The loader's positions (for a checkpoint), if it has one.
    pub fn positions(&self) -> Option<Vec<LoaderPosition>> {
        match self {
            TrainData::Corpus(l) => Some(l.positions()),
            _ => None,
        }
    }

    /// After a run: what the loader packed and how long steps waited for it.
    pub fn report(&self, run_time: Duration) -> Result<(), Error> {
        let TrainData::Corpus(l) = self else {
            return Ok(());
        };
        let t = l.totals();
        let waited = l.waited();
        note!(
            "data: {} tokens in {} rows, {:.2}% of slots filled, {:.2} documents a row; \
             waited {:.1} ms for data ({:.2}% of the run)",
            t.filled,
            t.rows,
            100.0 * t.efficiency(),
            t.documents_per_row(),
            waited.as_secs_f64() * 1e3,
            100.0 * waited.as_secs_f64() / run_time.as_secs_f64().max(1e-9)
        )?;
        Ok(())
    }
}
