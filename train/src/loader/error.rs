//! What the loader fails with: each variant names the file and the place in
//! it (line, column or byte offset), or the setting at fault.

use hlatc_models::option_name::OptionName;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum LoaderError {
    #[error("{pattern}: matches no file")]
    NoMatch { pattern: String },
    #[error("{pattern}: not a valid glob pattern: {message}")]
    BadPattern { pattern: String, message: String },
    #[error("no corpus was given")]
    NoSources,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: malformed JSON: {message}", path.display())]
    MalformedJson {
        path: PathBuf,
        line: u64,
        column: usize,
        message: String,
    },
    #[error("{}:{line}: a JSONL record is an object; this line is {found}", path.display())]
    NotAnObject {
        path: PathBuf,
        line: u64,
        found: &'static str,
    },
    #[error("{}:{line}: the record has no field '{field}' (name the text field with {})", path.display(), OptionName::TextField.named())]
    MissingField {
        path: PathBuf,
        line: u64,
        field: String,
    },
    #[error("{}:{line}: field '{field}' is {found}, not a string", path.display())]
    FieldNotText {
        path: PathBuf,
        line: u64,
        field: String,
        found: &'static str,
    },
    #[error("{}: byte {offset} is not UTF-8 text", path.display())]
    NotUtf8 { path: PathBuf, offset: u64 },
    #[error("{}: {message}", path.display())]
    TokenFile { path: PathBuf, message: String },
    #[error("{}: token {index} is {id}, outside the vocabulary 0..{vocab}", path.display())]
    IdOutsideVocabulary {
        path: PathBuf,
        index: u64,
        id: u64,
        vocab: i64,
    },
    #[error("{}: not a tokenizer hlatc can load: {message}", path.display())]
    Tokenizer { path: PathBuf, message: String },
    /// `tokenizer_vocab` is the ids the tokenizer needs: its highest id
    /// (that of `highest_token`) and one.
    #[error(
        "{}: the tokenizer's highest id is {} ('{highest_token}'), so it needs {tokenizer_vocab} ids, \
         more than the model's vocabulary of {model_vocab}",
        path.display(), tokenizer_vocab - 1
    )]
    TokenizerPastVocabulary {
        path: PathBuf,
        tokenizer_vocab: usize,
        highest_token: String,
        model_vocab: i64,
    },
    /// An id flag (`--eos`) outside the vocabulary.
    #[error("{flag} {id} is outside the model's vocabulary 0..{vocab}")]
    FlagOutsideVocabulary {
        flag: &'static str,
        id: u64,
        vocab: i64,
    },
    /// A corpus or tokenizer path that is not a regular file (a FIFO,
    /// `/dev/stdin`, a device or a directory), refused before it is read:
    /// the loader reads each file again on every pass and seeks into it on
    /// resume.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
    #[error("{}: the tokenizer has no token '{token}' (for {role})", path.display())]
    NoSuchToken {
        path: PathBuf,
        token: String,
        role: &'static str,
    },
    #[error("{}: the tokenizer failed on line {line}: {message}", path.display())]
    Encode {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("{}: text needs a tokenizer (give {})", path.display(), OptionName::Tokenizer.set("tokenizer.json"))]
    NeedsTokenizer { path: PathBuf },
    #[error("the corpus {sources} holds no document{}", shard_note(*shard_index, *shard_count))]
    EmptyCorpus {
        sources: String,
        shard_index: usize,
        shard_count: usize,
    },
    /// A corpus file whose bytes in `start..end` are not the ones the run
    /// read there (edited since the position was saved, or while the run
    /// reads it).
    #[error(
        "{}: bytes {start}..{end} are not the ones this run read there: the file was edited \
         since; a run goes on only with the corpus it read",
        path.display()
    )]
    CorpusChanged { path: PathBuf, start: u64, end: u64 },
    #[error("the loader's saved position does not fit this loader: {reason}")]
    Position { reason: String },
    #[error("{setting} {value}: {reason}")]
    Setting {
        setting: &'static str,
        value: String,
        reason: &'static str,
    },
    #[error("the loader's worker thread stopped without an error")]
    WorkerGone,
}

/// An I/O failure on `path`, for `map_err`.
pub(super) fn io(path: &Path) -> impl Fn(std::io::Error) -> LoaderError + '_ {
    move |source| LoaderError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn shard_note(index: usize, count: usize) -> String {
    if count == 1 {
        String::new()
    } else {
        format!(" for shard {index} of {count}")
    }
}
