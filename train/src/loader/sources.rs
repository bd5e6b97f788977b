//! The documents of a corpus, read as a stream: JSONL records, plain text
//! lines or paragraphs, or token-id files cut at an end-of-text id. A file
//! is never read whole; each document is found by its place in its file
//! (a [`DocRef`]), from which it can be read again alone, which is how a
//! saved loader position names the documents it holds.

use super::error::io;
use super::read_digest::{BlockHasher, FileDigest, HashedFile, READ_AHEAD};
use super::token_ids::{IdReader, RawDtype};
use super::LoaderError;
use hlatc_compiler::util::input_file;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// How a file holds its documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceFormat {
    /// One JSON object a line, its text in a named field.
    #[serde(rename = "jsonl")]
    Jsonl,
    /// Plain text, a document a line (Hugging Face's `text` datasets).
    #[serde(rename = "lines")]
    TextLines,
    /// Plain text, documents separated by blank lines.
    #[serde(rename = "paragraphs")]
    TextParagraphs,
    /// Token ids, raw little-endian (`.bin`) or a 1-D `.npy`.
    #[serde(rename = "token-ids")]
    TokenIds,
}

impl SourceFormat {
    pub const ALL: [SourceFormat; 4] = [
        SourceFormat::Jsonl,
        SourceFormat::TextLines,
        SourceFormat::TextParagraphs,
        SourceFormat::TokenIds,
    ];

    /// The name `hlatc train --corpus-format` and Python's `format=` take
    /// (and a position records).
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Jsonl => "jsonl",
            SourceFormat::TextLines => "lines",
            SourceFormat::TextParagraphs => "paragraphs",
            SourceFormat::TokenIds => "token-ids",
        }
    }

    pub fn from_name(name: &str) -> Option<SourceFormat> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format a file's name says: `.jsonl`/`.json` JSONL, `.bin` and
    /// `.npy` token ids, anything else plain text (a document a line).
    pub fn of(path: &Path) -> SourceFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "json" | "ndjson") => SourceFormat::Jsonl,
            Some("bin" | "npy") => SourceFormat::TokenIds,
            _ => SourceFormat::TextLines,
        }
    }

    pub fn is_text(self) -> bool {
        self != SourceFormat::TokenIds
    }
}

/// A document's place: its file (index into the corpus' files), the byte
/// (or, in a token-id file, id) offset where it starts, and its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocRef {
    pub file: u32,
    pub offset: u64,
    pub line: u64,
}

/// A document as read: text still to tokenize, or ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DocBody {
    Text(String),
    Ids(Vec<u32>),
}

/// How to read the documents of every file.
#[derive(Clone, Debug)]
pub struct ReadSettings {
    /// `None`: each file's from its name ([`SourceFormat::of`]).
    pub format: Option<SourceFormat>,
    pub text_field: String,
    pub raw_dtype: RawDtype,
    /// The id that ends a document in a token-id file (it stays in the
    /// document). Without it a file is cut every [`MAX_DOC_IDS`] ids.
    pub eos: Option<u32>,
    /// Ids at or past this are refused.
    pub vocab: i64,
}

/// The byte-order mark some editors start a UTF-8 file with.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The longest document a token-id file without an end-of-text id is cut
/// into: documents are held whole while they are packed.
pub const MAX_DOC_IDS: usize = 1 << 20;

/// The files of `patterns` (paths or globs), each glob's matches sorted:
/// the same corpus is read in the same order on every machine.
pub fn expand(patterns: &[String]) -> Result<Vec<PathBuf>, LoaderError> {
    if patterns.is_empty() {
        return Err(LoaderError::NoSources);
    }
    let mut files = Vec::new();
    for pattern in patterns {
        let is_glob = pattern.contains(['*', '?', '[']);
        if !is_glob {
            let path = PathBuf::from(pattern);
            input_file::check(&path, io(&path))?;
            files.push(path);
            continue;
        }
        let matches = glob::glob(pattern).map_err(|e| LoaderError::BadPattern {
            pattern: pattern.clone(),
            message: e.to_string(),
        })?;
        let mut found: Vec<PathBuf> = matches
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect();
        if found.is_empty() {
            return Err(LoaderError::NoMatch {
                pattern: pattern.clone(),
            });
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Reads one file's documents from a place in it onwards.
pub struct FileReader {
    path: PathBuf,
    file: u32,
    format: SourceFormat,
    stream: Stream,
    /// The next unread byte (text) or id (token ids).
    offset: u64,
    /// The line of `offset` (1-based; 0 for token ids).
    line: u64,
    line_buf: Vec<u8>,
}

/// A text file's bytes, or a token-id file's ids.
enum Stream {
    Text(BufReader<HashedFile>),
    Ids(IdReader),
}

impl FileReader {
    /// `path` (corpus file number `file`), from `at` (the start: offset 0,
    /// line 1).
    pub fn open(
        path: &Path,
        file: u32,
        settings: &ReadSettings,
        at: Option<(u64, u64)>,
    ) -> Result<FileReader, LoaderError> {
        Self::open_hashed(path, file, settings, at, None)
    }

    /// [`FileReader::open`], hashing the file's bytes into `hasher` as
    /// they are read (the loader's record of what it read).
    pub fn open_hashed(
        path: &Path,
        file: u32,
        settings: &ReadSettings,
        at: Option<(u64, u64)>,
        hasher: Option<BlockHasher>,
    ) -> Result<FileReader, LoaderError> {
        let format = settings.format.unwrap_or_else(|| SourceFormat::of(path));
        let (offset, line) = at.unwrap_or((0, if format.is_text() { 1 } else { 0 }));
        let stream = if format.is_text() {
            let (f, _) = input_file::open(path, io(path))?;
            let f = HashedFile::open(f, path, offset, hasher)?;
            Stream::Text(BufReader::with_capacity(READ_AHEAD, f))
        } else {
            Stream::Ids(IdReader::open_hashed(
                path,
                settings.raw_dtype,
                settings.vocab,
                offset,
                hasher,
            )?)
        };
        Ok(FileReader {
            path: path.to_path_buf(),
            file,
            format,
            stream,
            offset,
            line,
            line_buf: Vec::new(),
        })
    }

    /// The digest of the bytes read so far, if they are hashed.
    pub fn digest(&self) -> Option<FileDigest> {
        match &self.stream {
            Stream::Text(r) => r.get_ref().digest(),
            Stream::Ids(ids) => ids.digest(),
        }
    }

    /// Reads the rest of the file: the whole file's digest, if it is
    /// hashed.
    pub fn finish(self) -> Result<Option<FileDigest>, LoaderError> {
        match self.stream {
            Stream::Text(r) => r.into_inner().finish(&self.path),
            Stream::Ids(ids) => ids.finish(),
        }
    }

    /// The place of the next document (or of the end).
    pub fn at(&self) -> (u64, u64) {
        (self.offset, self.line)
    }

    /// The next document's place, without reading it: `None` at the end.
    /// `skip` reads past it without parsing (a document another shard
    /// owns); otherwise it is returned.
    pub fn next_doc(
        &mut self,
        settings: &ReadSettings,
        skip: bool,
    ) -> Result<Option<(DocRef, Option<DocBody>)>, LoaderError> {
        match (&mut self.stream, self.format) {
            (Stream::Ids(ids), _) => {
                let doc = next_ids(ids, self.file, settings, skip);
                self.offset = ids.at();
                doc
            }
            (Stream::Text(_), SourceFormat::TextParagraphs) => self.next_paragraph(skip),
            (Stream::Text(_), _) => self.next_line_doc(settings, skip),
        }
    }

    /// Reads the next line into `line_buf` (without its line break);
    /// `None` at the end. Returns the line's byte offset.
    fn read_line(&mut self) -> Result<Option<u64>, LoaderError> {
        self.line_buf.clear();
        // A token-id file has no lines.
        let Stream::Text(reader) = &mut self.stream else {
            return Ok(None);
        };
        let n = reader
            .read_until(b'\n', &mut self.line_buf)
            .map_err(io(&self.path))?;
        if n == 0 {
            return Ok(None);
        }
        let start = self.offset;
        self.offset += n as u64;
        self.line += 1;
        while matches!(self.line_buf.last(), Some(b'\n' | b'\r')) {
            self.line_buf.pop();
        }
        // A UTF-8 byte-order mark (Windows editors write one) is not text.
        if start == 0 && self.line_buf.starts_with(UTF8_BOM) {
            self.line_buf.drain(..UTF8_BOM.len());
        }
        Ok(Some(start))
    }

    /// The current line as text, or where it stops being UTF-8.
    fn line_text(&self, start: u64) -> Result<&str, LoaderError> {
        std::str::from_utf8(&self.line_buf).map_err(|e| LoaderError::NotUtf8 {
            path: self.path.clone(),
            offset: start + e.valid_up_to() as u64,
        })
    }

    fn next_line_doc(
        &mut self,
        settings: &ReadSettings,
        skip: bool,
    ) -> Result<Option<(DocRef, Option<DocBody>)>, LoaderError> {
        loop {
            let Some(start) = self.read_line()? else {
                return Ok(None);
            };
            if self.line_buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let doc = DocRef {
                file: self.file,
                offset: start,
                line: self.line - 1,
            };
            if skip {
                return Ok(Some((doc, None)));
            }
            let text = self.line_text(start)?;
            let body = match self.format {
                SourceFormat::Jsonl => json_text(&self.path, doc.line, text, &settings.text_field)?,
                _ => text.to_string(),
            };
            return Ok(Some((doc, Some(DocBody::Text(body)))));
        }
    }

    fn next_paragraph(
        &mut self,
        skip: bool,
    ) -> Result<Option<(DocRef, Option<DocBody>)>, LoaderError> {
        let mut doc: Option<DocRef> = None;
        let mut text = String::new();
        while let Some(start) = self.read_line()? {
            let blank = self.line_buf.iter().all(u8::is_ascii_whitespace);
            match (blank, doc.is_some()) {
                (true, true) => break,
                (true, false) => continue,
                (false, _) => {}
            }
            doc.get_or_insert(DocRef {
                file: self.file,
                offset: start,
                line: self.line - 1,
            });
            if !skip {
                let line = self.line_text(start)?;
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(line);
            }
        }
        Ok(doc.map(|d| (d, (!skip).then_some(DocBody::Text(text)))))
    }
}

/// A token-id file's next document: its ids up to and with the end-of-text
/// id, or [`MAX_DOC_IDS`] of them; `None` at the end.
fn next_ids(
    ids: &mut IdReader,
    file: u32,
    settings: &ReadSettings,
    skip: bool,
) -> Result<Option<(DocRef, Option<DocBody>)>, LoaderError> {
    let doc = DocRef {
        file,
        offset: ids.at(),
        line: 0,
    };
    let mut body = Vec::new();
    while body.len() < MAX_DOC_IDS {
        let Some(id) = ids.next_id()? else { break };
        body.push(id);
        if Some(id) == settings.eos {
            break;
        }
    }
    if body.is_empty() {
        return Ok(None);
    }
    Ok(Some((doc, (!skip).then_some(DocBody::Ids(body)))))
}

/// The text field `field` of the JSONL record `line` of `path`.
fn json_text(path: &Path, line: u64, record: &str, field: &str) -> Result<String, LoaderError> {
    let value: serde_json::Value =
        serde_json::from_str(record).map_err(|e| LoaderError::MalformedJson {
            path: path.to_path_buf(),
            line,
            column: e.column(),
            message: json_message(&e),
        })?;
    let serde_json::Value::Object(mut map) = value else {
        return Err(LoaderError::NotAnObject {
            path: path.to_path_buf(),
            line,
            found: json_kind(&value),
        });
    };
    match map.remove(field) {
        Some(serde_json::Value::String(text)) => Ok(text),
        Some(other) => Err(LoaderError::FieldNotText {
            path: path.to_path_buf(),
            line,
            field: field.to_string(),
            found: json_kind(&other),
        }),
        None => Err(LoaderError::MissingField {
            path: path.to_path_buf(),
            line,
            field: field.to_string(),
        }),
    }
}

/// serde_json's message without the " at line L column C" it appends (the
/// loader's error puts the place first, in the file's own numbering).
fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Reads document `doc` of `files` again, alone.
pub fn read_doc(
    files: &[PathBuf],
    settings: &ReadSettings,
    doc: DocRef,
) -> Result<DocBody, LoaderError> {
    let path = files
        .get(doc.file as usize)
        .ok_or_else(|| LoaderError::Position {
            reason: format!("it names file {} of a corpus of {}", doc.file, files.len()),
        })?;
    let mut r = FileReader::open(path, doc.file, settings, Some((doc.offset, doc.line)))?;
    match r.next_doc(settings, false)? {
        Some((found, Some(body))) if found == doc => Ok(body),
        _ => Err(LoaderError::Position {
            reason: format!(
                "{} holds no document at offset {} (line {}): the file changed",
                path.display(),
                doc.offset,
                doc.line
            ),
        }),
    }
}
