//! The path policy of every writer (sinks, `--trace`, `tapc FILE -o OUT`, `--emit`, `tapc fmt
//! --in-place`, the files passes write): what becomes of a target that already exists, how
//! messages show paths, the identity of files and directories, and the names and clean-up of
//! staging directories. docs/teg.md §14 states the policy for users:
//!
//! - A target that does not exist, or is a regular file, is *replaced*: written into a staging
//!   directory beside it and renamed over it ([`crate::output`]); the new file keeps the old
//!   one's permission bits.
//! - A target that is a character device or a FIFO (`/dev/null`, a terminal, the pipe behind
//!   `/dev/stdout`) is written *in place*, never replaced. A directory, a block device or a
//!   socket is refused.
//! - A symbolic link at a path the user named ([`Origin::User`], [`Origin::Edit`]: `-o`,
//!   `--trace`, the file of `fmt --in-place`) is written *through*: the rules above apply to the
//!   file it points at, and the link stays. A link to nothing is refused. A symbolic link at a
//!   sink's path `OUT/NAME.npy` ([`Origin::Sink`], a name the graph chose) is replaced by the
//!   sink, never followed, so a planted link cannot redirect a write.
//! - `fmt --in-place` keeps hard links: a file with several links is rewritten in place.
//! - An output that is the same file (device and inode) as an input is refused before anything
//!   is written ([`crate::output::Outputs::protect`]).
//!
//! Paths stay bytes (`OsStr`) from `argv` to the system call; [`shown`] escapes the bytes that
//! are not UTF-8 as `\xNN` in messages.

use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A path as messages show it: UTF-8 as it is, every other byte as `\xNN`.
pub struct Shown<'a>(&'a OsStr);

/// `p` for a message (see [`Shown`]).
pub fn shown<P: AsRef<Path> + ?Sized>(p: &P) -> Shown<'_> {
    Shown(p.as_ref().as_os_str())
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.as_bytes().utf8_chunks() {
            f.write_str(chunk.valid())?;
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// An I/O error's text without the trailing ` (os error N)`.
pub fn io_message(err: &io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// The identity of a file or directory: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(m: &Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    /// The identity of what `p` names, following symbolic links.
    pub fn follow(p: &Path) -> io::Result<FileId> {
        fs::metadata(p).map(|m| FileId::of(&m))
    }
}

/// Who chose an output's path, which decides what a symbolic link there means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A sink `OUT/NAME.npy`: a link there is replaced, never followed.
    Sink,
    /// A path the user named (`-o`, `--trace`, a pass's file): a link is written through.
    User,
    /// The file `fmt --in-place` rewrites: written through links, keeping hard links.
    Edit,
}

/// Where an output goes and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The path written: the target, or the file a user-named link points at.
    pub path: PathBuf,
    /// Written in place (a device, a FIFO, a file whose hard links are kept) rather than
    /// replaced by a rename.
    pub in_place: bool,
}

/// Decides where and how `target` is written (see the module docs), or why it cannot be.
pub fn place(target: &Path, origin: Origin) -> Result<Place, String> {
    let meta = match fs::symlink_metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Place {
                path: target.to_path_buf(),
                in_place: false,
            })
        }
        Err(e) => return Err(cannot(target, &io_message(&e))),
    };
    if !meta.file_type().is_symlink() {
        return classify(target, &meta, origin);
    }
    if origin == Origin::Sink {
        return Ok(Place {
            path: target.to_path_buf(),
            in_place: false,
        });
    }
    match fs::metadata(target) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(cannot(
            target,
            "it is a symbolic link to nothing (a link is written through, never replaced)",
        )),
        Err(e) => Err(cannot(target, &io_message(&e))),
        Ok(m) if m.is_file() => {
            let real = fs::canonicalize(target).map_err(|e| cannot(target, &io_message(&e)))?;
            classify(&real, &m, origin)
        }
        // A device behind a link (`/dev/stdout`) is written through the link.
        Ok(m) => classify(target, &m, origin),
    }
}

fn cannot(target: &Path, why: &str) -> String {
    format!("cannot write {}: {why}", shown(target))
}

/// The place of an existing `path` that is not a symbolic link (`meta` is its metadata).
fn classify(path: &Path, meta: &Metadata, origin: Origin) -> Result<Place, String> {
    let ft = meta.file_type();
    let in_place = if ft.is_file() {
        origin == Origin::Edit && meta.nlink() > 1
    } else if ft.is_char_device() || ft.is_fifo() {
        true
    } else {
        return Err(cannot(path, &refused(meta)));
    };
    Ok(Place {
        path: path.to_path_buf(),
        in_place,
    })
}

/// Why an existing file of this kind is never written.
fn refused(meta: &Metadata) -> String {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "expected a file or nothing there, found a directory".into();
    }
    let what = if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    format!(
        "it is {what}; outputs replace regular files and are written in place only into character devices and FIFOs"
    )
}

/// Writes the staged file `from` into `to` in place: a character device, a FIFO (which must
/// have a reader: a FIFO nobody reads is an error, not a hang), or a regular file (truncated
/// first, synced after).
pub fn write_in_place(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::metadata(to)?;
    let fifo = meta.file_type().is_fifo();
    let mut flags = libc::O_NOCTTY | libc::O_CLOEXEC;
    if fifo {
        flags |= libc::O_NONBLOCK;
    }
    let mut out = OpenOptions::new()
        .write(true)
        .truncate(meta.is_file())
        .custom_flags(flags)
        .open(to)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) if fifo => io::Error::other("it is a FIFO that nobody reads"),
            _ => e,
        })?;
    if fifo {
        let fd = out.as_raw_fd();
        // SAFETY: fcntl on an open descriptor has no memory-safety preconditions.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    io::copy(&mut File::open(from)?, &mut out)?;
    if meta.is_file() {
        out.sync_all()?;
    }
    Ok(())
}

/// Creates the new file `path` for writing: `O_EXCL|O_NOFOLLOW` (never an existing file,
/// never through a link), mode 0666 less the umask.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// 64 bits from the system's random source (the standard library's randomly keyed hasher if
/// `getrandom` fails).
fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is valid for 8 bytes of writes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// The prefix of every staging directory's name.
const STAGING: &str = ".tapc-";

/// A fresh, unpredictable staging directory name: `.tapc-PID-RANDOM`.
pub fn staging_name() -> String {
    format!("{STAGING}{}-{:016x}", std::process::id(), random_u64())
}

/// The process id in a staging directory's name `.tapc-PID-...`.
fn staging_pid(name: &OsStr) -> Option<i32> {
    let rest = name.as_bytes().strip_prefix(STAGING.as_bytes())?;
    let end = rest.iter().position(|&b| b == b'-')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// Opens the directory `p` itself (not through a link) and takes a `flock` on it.
pub fn lock_dir_nofollow(p: &Path, op: libc::c_int) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)?;
    loop {
        // SAFETY: flock on an open descriptor has no memory-safety preconditions.
        if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
            return Ok(f);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Removes the staging directories in `dir` that their processes left behind (killed by
/// SIGKILL, or a crash): a live owner holds a shared `flock` on its staging directory until it
/// exits, so a directory `.tapc-PID-*` whose PID is not a live process here and on which an
/// exclusive lock can be taken has no owner. Best effort: errors are ignored.
pub fn sweep_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id() as i32;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = staging_pid(&name) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks that the process exists.
        let alive = pid == me || pid <= 0 || unsafe { libc::kill(pid, 0) } == 0 || {
            io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        };
        if alive {
            continue;
        }
        let p = dir.join(&name);
        if let Ok(_held) = lock_dir_nofollow(&p, libc::LOCK_EX | libc::LOCK_NB) {
            let _ = fs::remove_dir_all(&p);
        }
    }
}
