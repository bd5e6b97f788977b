//! `util::input_file`, the one way hlatc opens a file a user named: a
//! device, a FIFO or a directory is refused by name before it is read (or,
//! for a FIFO, opened: its reader would wait for a writer); a regular
//! file reads whole; the operating system's errors keep their kind.

use hlatc_compiler::util::input_file::{self, FileKind, NotRegularFile};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// A reader's error: the operating system's, or the refusal.
#[derive(Debug)]
enum E {
    Io(std::io::ErrorKind),
    Refused(NotRegularFile),
}

impl From<NotRegularFile> for E {
    fn from(e: NotRegularFile) -> E {
        E::Refused(e)
    }
}

fn io(e: std::io::Error) -> E {
    E::Io(e.kind())
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hlatc-compiler-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `input_file::read` of `path` on a thread, waited on for 20 s: a read
/// blocked on a FIFO fails the test instead of hanging it.
fn read_within(path: &Path) -> Result<Vec<u8>, E> {
    let (send, receive) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = send.send(input_file::read(&path, io));
    });
    receive
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the read still waits"))
}

#[test]
fn what_is_not_a_regular_file_is_refused_by_name() {
    let d = scratch("not-regular");
    let mut cases = vec![
        (PathBuf::from("/dev/null"), FileKind::CharDevice),
        (d.clone(), FileKind::Directory),
    ];
    let fifo = d.join("fifo");
    if Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        cases.push((fifo, FileKind::Fifo));
    }
    for (path, kind) in cases {
        let refused = NotRegularFile {
            path: path.clone(),
            kind,
        };
        match read_within(&path) {
            Err(E::Refused(e)) => assert_eq!(e, refused),
            r => panic!("{}: {r:?}", path.display()),
        }
        assert!(matches!(input_file::check(&path, io), Err(E::Refused(e)) if e == refused));
        // A reader whose error is the operating system's alone gets the
        // refusal as that error's source.
        let e = input_file::read_to_string(&path, std::convert::identity).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        let inner = e.get_ref().and_then(|s| s.downcast_ref::<NotRegularFile>());
        assert_eq!(inner, Some(&refused));
    }
}

#[test]
fn a_regular_file_reads_whole_and_errors_keep_their_kind() {
    let d = scratch("regular");
    let file = d.join("f.txt");
    std::fs::write(&file, "four").unwrap();
    assert_eq!(read_within(&file).unwrap(), b"four");
    let (_, len) = input_file::open(&file, io).unwrap();
    assert_eq!(len, 4);
    assert!(matches!(
        input_file::read(&d.join("missing"), io),
        Err(E::Io(std::io::ErrorKind::NotFound))
    ));
    std::fs::write(&file, b"\xff").unwrap();
    assert!(matches!(
        input_file::read_to_string(&file, io),
        Err(E::Io(std::io::ErrorKind::InvalidData))
    ));
    // A symbolic link is followed: to a regular file it reads, to a
    // device it is refused as the device.
    let link = d.join("link");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    assert!(matches!(
        read_within(&link),
        Err(E::Refused(NotRegularFile {
            kind: FileKind::CharDevice,
            ..
        }))
    ));
}
