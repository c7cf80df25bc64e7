//! The proof file of `cuzk prove --out`: checked before proving, written at the end by a rename.
//!
//! The path is checked before any proving (a bad one fails at once, error 90) without creating
//! anything at it, and the proof is written whole at the end: into a new file beside the target,
//! then renamed onto it (POSIX `rename(2)` is atomic within a directory). So an interrupted or
//! failed run leaves no empty file and never truncates an existing one; a symbolic link is
//! followed (the file it names gets the proof, the link stays). Written in place instead, as a
//! shell's `>` would: `/dev/stdout` (through the process's own standard output, so that `>>`
//! appends), any other path under `/dev` or `/proc`, a path that exists and is not a
//! regular file (a pipe, a device), and an existing file the rename could not replace (its
//! directory takes no new file, or is sticky and neither it nor the file is the caller's).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use cuzk::Error;

/// Links followed at most (Linux's own limit on a path's symbolic links, `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Where the proof goes, checked by [`ProofFile::check`].
pub struct ProofFile {
    /// The path given, for messages.
    given: PathBuf,
    /// The file the proof ends up in: `given` with its symbolic links followed (under `/dev` and
    /// `/proc`, `given` as it is).
    target: PathBuf,
    /// How the proof is written.
    how: How,
}

/// How [`ProofFile::write`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// A new file beside the target, renamed onto it.
    Rename,
    /// The target opened for writing (truncated) and written.
    InPlace,
    /// The process's standard output (`/dev/stdout`, `/proc/self/fd/1`).
    Stdout,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{what} --out {}: {e}", path.display()),
    ))
}

/// `path` with its symbolic links followed (the last component's chain, dangling or not).
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// Whether a process of uid `me` (`None`: unknown) may rename a new file onto an existing one
/// owned by `file_uid` in a directory of mode `dir_mode` owned by `dir_uid`: in a sticky
/// directory (mode bit 0o1000, as `/tmp`) only the file's owner, the directory's owner or root
/// may (POSIX `rename(2)`, EPERM).
fn may_replace(dir_mode: u32, dir_uid: u32, file_uid: u32, me: Option<u32>) -> bool {
    const STICKY: u32 = 0o1000;
    match me {
        _ if dir_mode & STICKY == 0 => true,
        Some(me) => me == 0 || me == file_uid || me == dir_uid,
        None => false,
    }
}

/// Writes `bytes` to the process's standard output and flushes it.
fn to_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush())
}

/// Prints `proof` as one line of hex on standard output (no `--out`, or its fallback).
///
/// # Errors
/// [`Error::Io`] (exit 90) when standard output cannot take it (a closed pipe, a full disk).
pub fn print_hex(proof: &[u8]) -> Result<(), Error> {
    to_stdout(format!("{}\n", cuzk::c1::hex(proof)).as_bytes()).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("writing the proof to standard output: {e}"),
        ))
    })
}

/// Prints `line` and a newline on standard output.
///
/// # Errors
/// [`Error::Io`] (exit 90) when standard output cannot take it.
pub fn print_line(line: &str) -> Result<(), Error> {
    to_stdout(format!("{line}\n").as_bytes()).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("writing to standard output: {e}"),
        ))
    })
}

/// A name beside `target` for the new file, unique to this process and call (short: a target
/// name near the file system's 255-byte limit still gets one).
fn temp_beside(target: &Path, n: u32) -> PathBuf {
    target.with_file_name(format!(".cuzk-{}-{n}.tmp", std::process::id()))
}

impl ProofFile {
    /// Checks `path` before proving: an existing file must be writable (opened for writing
    /// without truncation; a pipe is not opened, as that would wait for its reader), a new one's
    /// directory must take a new file (one is created and removed at once); a path ending in
    /// `/`, a directory, or the C1 input file `input` itself (any name of it) is refused.
    /// Nothing is left at `path`.
    ///
    /// # Errors
    /// [`Error::Io`] (exit 90) naming `path`.
    pub fn check(path: &Path, input: &Path) -> Result<ProofFile, Error> {
        use std::io::ErrorKind;
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let fail = |e| io_error("opening", path, e);
        if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(fail(std::io::Error::new(
                ErrorKind::IsADirectory,
                "names a directory",
            )));
        }
        if path == Path::new("/dev/stdout") || path == Path::new("/proc/self/fd/1") {
            return Ok(ProofFile {
                given: path.to_path_buf(),
                target: path.to_path_buf(),
                how: How::Stdout,
            });
        }
        let system = path.starts_with("/dev") || path.starts_with("/proc");
        let target = if system {
            path.to_path_buf()
        } else {
            follow_links(path).map_err(fail)?
        };
        let meta = match std::fs::metadata(&target) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(fail(e)),
        };
        if let Some(m) = &meta {
            if m.is_dir() {
                return Err(fail(std::io::Error::new(
                    ErrorKind::IsADirectory,
                    "is a directory",
                )));
            }
            let same_file =
                std::fs::metadata(input).is_ok_and(|i| (i.dev(), i.ino()) == (m.dev(), m.ino()));
            if same_file {
                return Err(fail(std::io::Error::new(
                    ErrorKind::InvalidInput,
                    "it is the input file (the proof would replace it)",
                )));
            }
            if !m.file_type().is_fifo() {
                OpenOptions::new().write(true).open(&target).map_err(fail)?;
            }
        }
        let mut how = if system || meta.as_ref().is_some_and(|m| !m.is_file()) {
            How::InPlace
        } else {
            How::Rename
        };
        if how == How::Rename {
            let probe = temp_beside(&target, 0);
            let made = OpenOptions::new().write(true).create_new(true).open(&probe);
            if made.is_ok() {
                let _ = std::fs::remove_file(&probe);
            }
            match (&meta, made) {
                // The existing file is writable (checked above), so where no new file can be
                // made beside it, or the rename would be refused, it is written in place.
                (Some(_), Err(_)) => how = How::InPlace,
                (Some(m), Ok(made)) => {
                    // The new file is the caller's: its owner is the uid the rename runs as.
                    let me = made.metadata().ok().map(|p| p.uid());
                    let dir = target.parent().filter(|p| !p.as_os_str().is_empty());
                    let dir = std::fs::metadata(dir.unwrap_or(Path::new("."))).map_err(fail)?;
                    if !may_replace(dir.mode(), dir.uid(), m.uid(), me) {
                        how = How::InPlace;
                    }
                }
                (None, Err(e)) => return Err(fail(e)),
                (None, Ok(_)) => {}
            }
        }
        Ok(ProofFile {
            given: path.to_path_buf(),
            target,
            how,
        })
    }

    /// Writes `bytes` as the whole file: a new file beside the target, flushed to disk, then
    /// renamed onto it (an existing file's permissions kept, and its owner where the process may
    /// set it); in place, or to standard output, as [`ProofFile::check`] chose. On failure of
    /// the rename route the target is as it was and the new file is removed.
    ///
    /// # Errors
    /// [`Error::Io`] (exit 90) naming the given path.
    pub fn write(&self, bytes: &[u8]) -> Result<(), Error> {
        let io = |e| io_error("writing", &self.given, e);
        match self.how {
            How::Stdout => return to_stdout(bytes).map_err(io),
            How::InPlace => {
                // Without O_CREAT where the file exists: Linux's protected_regular refuses
                // O_CREAT on another user's file in a sticky directory, even a writable one.
                let open = |create| {
                    OpenOptions::new()
                        .write(true)
                        .truncate(true)
                        .create(create)
                        .open(&self.target)
                };
                return open(false)
                    .or_else(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => open(true),
                        _ => Err(e),
                    })
                    .and_then(|mut f| f.write_all(bytes))
                    .map_err(io);
            }
            How::Rename => {}
        }
        let temp = temp_beside(&self.target, 1);
        let r = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)?;
            f.write_all(bytes)?;
            if let Ok(m) = std::fs::metadata(&self.target) {
                use std::os::unix::fs::MetadataExt;
                f.set_permissions(m.permissions())?;
                // Only root may give a file away: elsewhere the owner stays the caller.
                let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
            }
            f.sync_all()?;
            std::fs::rename(&temp, &self.target)
        })();
        if r.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        r.map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    /// A fresh directory holding a C1 input file `c1.json` (`{}`): (directory, input).
    fn dir_with_input(name: &str) -> (PathBuf, PathBuf) {
        let d = std::env::temp_dir().join(format!("cuzk-out-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let input = d.join("c1.json");
        std::fs::write(&input, b"{}").unwrap();
        (d, input)
    }

    /// [`dir_with_input`] with an existing `old.bin` ("old proof"), checked as `--out`:
    /// (directory, input, old.bin, its ProofFile).
    fn old_file_checked(name: &str) -> (PathBuf, PathBuf, PathBuf, ProofFile) {
        let (d, input) = dir_with_input(name);
        let old = d.join("old.bin");
        std::fs::write(&old, b"old proof").unwrap();
        let f = ProofFile::check(&old, &input).unwrap();
        (d, input, old, f)
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A new path: nothing there after the check, the bytes after the write, no file beside; a
    /// long name too; `/dev/null` written in place.
    #[test]
    fn a_new_file_appears_only_when_written() {
        let (d, input) = dir_with_input("new");
        let f = ProofFile::check(&d.join("proof.bin"), &input).unwrap();
        assert_eq!(entries(&d), ["c1.json"]);
        f.write(&[7u8; 192]).unwrap();
        assert_eq!(std::fs::read(d.join("proof.bin")).unwrap(), [7u8; 192]);
        assert_eq!(entries(&d), ["c1.json", "proof.bin"]);
        // A name of 250 bytes, near the file system's limit, still gets its new file beside.
        let long = d.join("p".repeat(250));
        ProofFile::check(&long, &input)
            .unwrap()
            .write(&[8u8; 192])
            .unwrap();
        assert_eq!(std::fs::read(&long).unwrap(), [8u8; 192]);
        // A device is written in place, not replaced.
        let null = ProofFile::check(Path::new("/dev/null"), &input).unwrap();
        assert_eq!(null.how, How::InPlace);
        null.write(&[9u8; 192]).unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// An existing file is untouched by the check and replaced whole by the write; a link,
    /// dangling or not, stays a link and its target gets the bytes.
    #[test]
    fn existing_files_and_links() {
        let (d, input, old, f) = old_file_checked("links");
        assert_eq!(std::fs::read(&old).unwrap(), b"old proof");
        f.write(&[1u8; 192]).unwrap();
        assert_eq!(std::fs::read(&old).unwrap(), [1u8; 192]);
        std::fs::create_dir(d.join("t")).unwrap();
        for (link, to) in [("dangling", "t/missing.bin"), ("to-old", "old.bin")] {
            std::os::unix::fs::symlink(to, d.join(link)).unwrap();
            let f = ProofFile::check(&d.join(link), &input).unwrap();
            f.write(&[2u8; 192]).unwrap();
            assert!(std::fs::symlink_metadata(d.join(link))
                .unwrap()
                .file_type()
                .is_symlink());
            assert_eq!(std::fs::read(d.join(to)).unwrap(), [2u8; 192]);
        }
        assert_eq!(entries(&d.join("t")), ["missing.bin"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A directory, a missing directory, a path ending in `/` and the input file itself (under
    /// another spelling, or a hard link to it) are refused by the check (error 90), and nothing
    /// is created or changed.
    #[test]
    fn bad_paths_are_refused_and_left_alone() {
        let (d, input) = dir_with_input("bad");
        std::fs::hard_link(&input, d.join("same.json")).unwrap();
        let refused = [
            d.clone(),
            d.join("no-such-dir").join("p.bin"),
            d.join("new/"),
            input.clone(),
            d.join(".").join("c1.json"),
            d.join("same.json"),
        ];
        for p in refused {
            let e = ProofFile::check(&p, &input).err().expect("refused");
            assert_eq!(e.code(), 900, "{e}");
            assert!(e.to_string().contains("--out"), "{e}");
        }
        assert_eq!(entries(&d), ["c1.json", "same.json"]);
        assert_eq!(std::fs::read(&input).unwrap(), b"{}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A failed write leaves the existing file as it was and no new file beside it: the new
    /// file cannot be made (its name is taken by a directory), then the target's directory is
    /// gone.
    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let (d, input, old, f) = old_file_checked("fail");
        let taken = temp_beside(&old, 1);
        std::fs::create_dir(&taken).unwrap();
        assert_eq!(f.write(&[3u8; 192]).unwrap_err().code(), 900);
        assert_eq!(std::fs::read(&old).unwrap(), b"old proof");
        std::fs::remove_dir(&taken).unwrap();
        assert_eq!(entries(&d), ["c1.json", "old.bin"]);
        let sub = d.join("sub");
        std::fs::create_dir(&sub).unwrap();
        let f = ProofFile::check(&sub.join("p.bin"), &input).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        assert!(f.write(&[3u8; 192]).is_err());
        assert_eq!(entries(&d), ["c1.json", "old.bin"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The rename is allowed as `rename(2)` allows it: anywhere outside a sticky directory; in
    /// one (mode 0o1777, as `/tmp`), to root, the file's owner and the directory's owner only.
    #[test]
    fn renames_in_sticky_directories() {
        let (plain, sticky) = (0o777, 0o1777);
        assert!(may_replace(plain, 0, 1001, Some(1000)));
        assert!(may_replace(plain, 0, 1001, None));
        assert!(may_replace(sticky, 0, 1000, Some(1000)));
        assert!(may_replace(sticky, 1000, 1001, Some(1000)));
        assert!(may_replace(sticky, 1001, 1001, Some(0)));
        assert!(!may_replace(sticky, 0, 1001, Some(1000)));
        assert!(!may_replace(sticky, 0, 1001, None));
    }
}
