//! The one way hlatc opens a file a user named: only a regular file, whose
//! size is known before it is read. A device (`/dev/zero`), a FIFO, a
//! socket or a directory is refused by name before it is opened, so no
//! reader reads without bound or blocks on a pipe with no writer; a
//! regular file is read only up to the size it had when it was opened.
//!
//! Each reader keeps its own error for what the operating system refuses
//! (`io`, given the [`std::io::Error`]) and wraps [`NotRegularFile`] in a
//! variant of that name, so every refusal has the same last code; one
//! whose error is an [`std::io::Error`] alone gets it as that error's
//! source (`std::convert::identity` as `io`).

use std::fmt;
use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A file named to be read that is not a regular file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}: is {kind}, not a regular file; hlatc reads only regular files, whose size is known \
     before they are read (write the stream to a file first)",
    path.display()
)]
pub struct NotRegularFile {
    pub path: PathBuf,
    pub kind: FileKind,
}

/// For a reader whose error is the operating system's alone (a lock, a
/// cache, a yes-or-no look at a file): [`std::io::ErrorKind::InvalidInput`],
/// the refusal its source.
impl From<NotRegularFile> for std::io::Error {
    fn from(e: NotRegularFile) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}

/// What a path that is not a regular file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    /// Anything else the platform has.
    Other,
}

impl FileKind {
    /// `None` for a regular file.
    pub fn of(meta: &Metadata) -> Option<FileKind> {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        Some(if t.is_file() {
            return None;
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_char_device() {
            FileKind::CharDevice
        } else if t.is_block_device() {
            FileKind::BlockDevice
        } else if t.is_socket() {
            FileKind::Socket
        } else {
            FileKind::Other
        })
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a pipe (FIFO)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a file",
        })
    }
}

/// `path`'s metadata (symbolic links followed), refused unless it is a
/// regular file; `io` makes the reader's error of what the operating
/// system refuses (a missing file keeps its [`std::io::ErrorKind`]).
pub fn check<E: From<NotRegularFile>>(
    path: &Path,
    io: impl Fn(std::io::Error) -> E,
) -> Result<Metadata, E> {
    let meta = std::fs::metadata(path).map_err(&io)?;
    refuse_unless_regular(path, &meta)?;
    Ok(meta)
}

fn refuse_unless_regular(path: &Path, meta: &Metadata) -> Result<(), NotRegularFile> {
    match FileKind::of(meta) {
        None => Ok(()),
        Some(kind) => Err(NotRegularFile {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

/// `path` opened for reading, with its length, if it is a regular file:
/// checked before it is opened (opening a FIFO waits for a writer) and
/// again once open (in case another file took its place).
pub fn open<E: From<NotRegularFile>>(
    path: &Path,
    io: impl Fn(std::io::Error) -> E,
) -> Result<(File, u64), E> {
    check(path, &io)?;
    let file = File::open(path).map_err(&io)?;
    let meta = file.metadata().map_err(&io)?;
    refuse_unless_regular(path, &meta)?;
    Ok((file, meta.len()))
}

/// The bytes of the regular file `path`, no more than its length when it
/// was opened (see [`open`]).
pub fn read<E: From<NotRegularFile>>(
    path: &Path,
    io: impl Fn(std::io::Error) -> E,
) -> Result<Vec<u8>, E> {
    let (file, len) = open(path, &io)?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| {
            io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("{len} bytes cannot be held in memory"),
            ))
        })?;
    file.take(len).read_to_end(&mut bytes).map_err(&io)?;
    Ok(bytes)
}

/// [`read`], as UTF-8 text (otherwise an [`std::io::ErrorKind::InvalidData`]
/// error, as [`std::fs::read_to_string`] gives).
pub fn read_to_string<E: From<NotRegularFile>>(
    path: &Path,
    io: impl Fn(std::io::Error) -> E,
) -> Result<String, E> {
    let bytes = read(path, &io)?;
    String::from_utf8(bytes).map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}
