//! Writing a document to a path the user named (`-o`, the chart beside it, `merge -o`,
//! `--hdr-log`) without destroying what is there:
//!
//! - `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: an open descriptor of
//!   this process; the document is written to it (no file is opened, so a redirect target is
//!   neither truncated nor replaced).
//! - a path that exists and is not a regular file (character or block device, FIFO, socket),
//!   after following symlinks: opened for writing and written through, never renamed over or
//!   removed. A FIFO blocks until a reader opens it, as a shell redirect does.
//! - a regular file or a missing path, after following symlinks (chains and a dangling link
//!   included): a new temp file beside the final target, fsync, rename over the target. A link
//!   stays a link; a kill at any moment leaves the old document or the whole new one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a path leads, decided once per write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// An open descriptor of this process (1 standard output, 2 standard error).
    Fd(i32),
    /// Exists and is not a regular file: written through.
    Through(PathBuf),
    /// A regular file or nothing yet: the final target of any symlinks, replaced atomically.
    Replace(PathBuf),
}

/// Linux gives up after 40 links; so do we (a loop otherwise never ends).
const MAX_LINKS: usize = 40;

impl Dest {
    /// Follows `path` to what it names. Fails on a directory or a symlink loop.
    pub fn of(path: &Path) -> io::Result<Dest> {
        let mut p = path.to_path_buf();
        for _ in 0..=MAX_LINKS {
            if let Some(fd) = fd_path(&p) {
                return Ok(Dest::Fd(fd));
            }
            let meta = match std::fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return missing(p),
                Err(e) => return Err(e),
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                let to = std::fs::read_link(&p)?;
                // A relative target is relative to the directory holding the link.
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            } else if kind.is_file() {
                return Ok(Dest::Replace(p));
            } else if kind.is_dir() {
                return Err(io::Error::other("is a directory"));
            } else {
                return Ok(Dest::Through(p));
            }
        }
        Err(io::Error::other("too many levels of symbolic links"))
    }

    /// Standard output: the caller prints the document there instead of its text report.
    pub fn is_stdout(&self) -> bool {
        *self == Dest::Fd(1)
    }

    /// A file of our own: it may be rewritten as results come in, and a chart may go beside it.
    pub fn is_file(&self) -> bool {
        matches!(self, Dest::Replace(_))
    }

    /// Writes the whole document.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Dest::Fd(1) => {
                let mut o = io::stdout().lock();
                o.write_all(bytes).and_then(|_| o.flush())
            }
            Dest::Fd(2) => io::stderr().lock().write_all(bytes),
            Dest::Fd(fd) => dup(*fd)?.write_all(bytes),
            Dest::Through(p) => OpenOptions::new().write(true).open(p)?.write_all(bytes),
            Dest::Replace(p) => replace(p, bytes),
        }
    }

    /// Opens for a stream written as it goes (`--hdr-log`): a regular file is truncated in place
    /// (a crash keeps what was written), anything else is written through.
    pub fn open_stream(&self) -> io::Result<File> {
        match self {
            Dest::Fd(fd) => dup(*fd),
            Dest::Through(p) => OpenOptions::new().write(true).open(p),
            Dest::Replace(p) => File::create(p),
        }
    }
}

/// A path not there yet is made in its directory, which must exist: a typo in a directory
/// name must not leave new directories behind.
fn missing(p: PathBuf) -> io::Result<Dest> {
    match p.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(io::Error::other(format!(
                "directory {} does not exist: create it or name another path",
                dir.display()
            )))
        }
        _ => Ok(Dest::Replace(p)),
    }
}

/// Writes `bytes` to `path` as described at the top of this file.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    Dest::of(path)?.write(bytes)
}

/// The chart's path beside a result at `path` (`x.json` -> `x.svg`; never the result itself).
pub fn beside(path: &Path, ext: &str) -> PathBuf {
    let p = path.with_extension(ext);
    if p == path {
        path.with_extension(format!("chart.{ext}"))
    } else {
        p
    }
}

/// The descriptor a path names without opening anything: `-` and the fd links of `/dev` and
/// `/proc` (opening those would truncate, or rename over, whatever a shell redirected them to).
fn fd_path(p: &Path) -> Option<i32> {
    let s = p.to_str()?;
    match s {
        "-" | "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        "/dev/stdin" => return Some(0),
        _ => {}
    }
    let own = format!("/proc/{}/fd/", std::process::id());
    let n = [
        "/dev/fd/",
        "/proc/self/fd/",
        "/proc/thread-self/fd/",
        own.as_str(),
    ]
    .iter()
    .find_map(|pre| s.strip_prefix(pre))?;
    n.parse().ok()
}

/// A new handle on one of our descriptors (fails when it is not open).
fn dup(fd: i32) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl only reads `fd`; the descriptor it returns is new and owned by the File.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(new) })
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Temp file beside `target` (never an existing one), fsync, rename over `target`.
fn replace(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::other("not a file name"))?
        .to_string_lossy()
        .into_owned();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp, mut f) = loop {
        let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => continue,
            Err(e) => return Err(e),
        }
    };
    let done = (|| {
        // Keep the mode of the file being replaced (a 0600 result stays 0600).
        if let Ok(m) = std::fs::metadata(target) {
            f.set_permissions(m.permissions())?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done?;
    // The rename itself survives a power cut only once the directory is synced; best effort.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TempDir;
    use std::os::unix::fs::{symlink, FileTypeExt};

    fn tempdir(tag: &str) -> TempDir {
        TempDir::new(&format!("loadgen-output-unit-{tag}"))
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn fd_paths_name_descriptors() {
        assert_eq!(Dest::of(Path::new("-")).unwrap(), Dest::Fd(1));
        assert_eq!(Dest::of(Path::new("/dev/stdout")).unwrap(), Dest::Fd(1));
        assert_eq!(Dest::of(Path::new("/dev/stderr")).unwrap(), Dest::Fd(2));
        assert_eq!(Dest::of(Path::new("/dev/fd/7")).unwrap(), Dest::Fd(7));
        assert_eq!(Dest::of(Path::new("/proc/self/fd/1")).unwrap(), Dest::Fd(1));
        assert!(Dest::Fd(1).is_stdout() && !Dest::Fd(2).is_stdout());
        // A link to /dev/stdout is standard output too, not whatever it is redirected to.
        let d = tempdir("fd");
        symlink("/dev/stdout", d.join("out")).unwrap();
        assert_eq!(Dest::of(&d.join("out")).unwrap(), Dest::Fd(1));
    }

    #[test]
    fn regular_file_is_replaced_and_leaves_no_temp_file() {
        let d = tempdir("file");
        let p = d.join("r.json");
        write(&p, b"one").unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(entries(&d), ["r.json"]);
        // A missing directory is refused, never made (the caller makes its default results/).
        let deep = d.join("a/b/c.json");
        let e = write(&deep, b"x").unwrap_err();
        assert!(e.to_string().contains("a/b does not exist"), "{e}");
        assert!(!d.join("a").exists());
    }

    #[test]
    fn symlink_chain_replaces_the_final_target() {
        let d = tempdir("link");
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/t.json"), b"old").unwrap();
        symlink("real/t.json", d.join("l1")).unwrap(); // relative to the link's directory
        symlink(d.join("l1"), d.join("l2")).unwrap();
        assert_eq!(
            Dest::of(&d.join("l2")).unwrap(),
            Dest::Replace(d.join("real/t.json"))
        );
        write(&d.join("l2"), b"new").unwrap();
        for l in ["l1", "l2"] {
            let m = std::fs::symlink_metadata(d.join(l)).unwrap();
            assert!(m.file_type().is_symlink(), "{l} is still a link");
        }
        assert_eq!(std::fs::read(d.join("real/t.json")).unwrap(), b"new");
        assert_eq!(entries(&d.join("real")), ["t.json"]);
        // Dangling: the target is created, the link kept.
        symlink("real/new.json", d.join("dangling")).unwrap();
        write(&d.join("dangling"), b"made").unwrap();
        assert!(std::fs::symlink_metadata(d.join("dangling"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(d.join("real/new.json")).unwrap(), b"made");
        // A loop is an error, not a hang.
        symlink("loop2", d.join("loop1")).unwrap();
        symlink("loop1", d.join("loop2")).unwrap();
        assert!(write(&d.join("loop1"), b"x").is_err());
    }

    #[test]
    fn fifo_is_written_through() {
        let d = tempdir("fifo");
        let f = d.join("f");
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let f = f.clone();
            std::thread::spawn(move || std::fs::read(f).unwrap())
        };
        assert_eq!(Dest::of(&f).unwrap(), Dest::Through(f.clone()));
        assert!(!Dest::of(&f).unwrap().is_file());
        write(&f, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::symlink_metadata(&f).unwrap().file_type().is_fifo());
        assert_eq!(entries(&d), ["f"]);
    }

    #[test]
    fn a_directory_is_refused() {
        let d = tempdir("dir");
        assert!(Dest::of(&d).is_err());
    }

    #[test]
    fn the_chart_never_takes_the_result_path() {
        assert_eq!(beside(Path::new("r/x.json"), "svg"), Path::new("r/x.svg"));
        assert_eq!(beside(Path::new("x.svg"), "svg"), Path::new("x.chart.svg"));
        assert_eq!(beside(Path::new("x"), "svg"), Path::new("x.svg"));
    }
}
