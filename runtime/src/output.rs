//! Output files written all or nothing: the one writer of sinks (compiled programs, `tapc run`
//! through [`write_sinks`], and, in the distributed runtime, rank 0), of `--trace` files, of
//! `tapc -o OUT` / `--emit` outputs, of `tapc fmt --in-place` and of the files passes write;
//! [`check_out_dir`] refuses a bad `--out-dir` before a run computes anything. What an existing
//! target becomes (replaced, written in place, written through a link, or refused) is the path
//! policy of [`crate::paths`].
//!
//! An [`Outputs`] is a transaction. Each file is first written under its own name into a
//! staging directory `.tapc-PID-RANDOM/n/` created inside its target's directory (same file
//! system, so the final rename is atomic; the staged name is the final one), with
//! `O_EXCL|O_NOFOLLOW`. Nothing in the target directories changes until [`Outputs::commit`],
//! which:
//!
//! 1. takes an exclusive `flock` on every target directory, once per directory and in the order
//!    of their identities (device, inode), so that concurrent commits into one directory
//!    serialize (printing a note while it waits) whatever the spelling of its path: the
//!    directory then holds the *whole set* of whichever run committed last, never a mix;
//! 2. checks every target again against the policy and the inputs, and gives each staged file
//!    the permission bits of the file it replaces;
//! 3. writes the targets that are written in place (devices, FIFOs);
//! 4. inside [`signals::critical`] (a SIGINT/SIGTERM waits for it), hard-links every existing
//!    target into the staging directory's `o/` as a backup (a name no output can have) and
//!    renames every staged file into place; if a rename fails, the targets renamed so far get
//!    their backups back (or are removed);
//! 5. syncs the directories and removes the staging directories.
//!
//! Dropping an uncommitted [`Outputs`] (an error, or a panic) removes its staging directories,
//! and [`signals`] removes them when the process is interrupted: no temporary is left behind.
//! Staging directories left by a process that was killed (SIGKILL) are swept by the next
//! output written into that directory ([`paths::sweep_stale`]). Staging, committing and
//! clean-up take time linear in the number of outputs.

use crate::npy::{self, NpyError, NpyErrorKind};
use crate::paths::{self, shown, FileId, Origin, Place};
use crate::signals;
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Something that can be written as a `.npy` file (a [`Tensor`] or a sink's view of its
/// buffer).
pub trait Npy {
    /// Writes the whole file; an inconsistent value is an `InvalidInput` error.
    fn write_npy(&self, w: &mut dyn Write) -> io::Result<()>;
}

impl Npy for Tensor {
    fn write_npy(&self, w: &mut dyn Write) -> io::Result<()> {
        npy::write_into(w, self)
    }
}

struct Stage {
    /// The target directory.
    dir: PathBuf,
    /// Its identity: the key of its lock and of the order locks are taken in.
    id: FileId,
    /// The staging directory inside it.
    path: PathBuf,
    /// Whether an output is renamed into `dir` (then `dir` is locked while committing).
    locked: bool,
    /// A shared `flock` on the staging directory: it is live (see [`paths::sweep_stale`]).
    _live: File,
    _tracked: signals::Tracked,
}

struct Entry {
    stage: usize,
    /// The file name of its place (in the staging directory's `n/` and `o/`), or its index
    /// (in `p/`) if it is written in place.
    name: OsString,
    /// The path as given.
    target: PathBuf,
    origin: Origin,
    place: Place,
}

/// A set of output files that appear all together or not at all (see the module docs).
#[derive(Default)]
pub struct Outputs {
    stages: Vec<Stage>,
    by_dir: HashMap<FileId, usize>,
    files: Vec<Entry>,
    /// `(stage, name)` of every file: a name given twice is an error.
    names: HashSet<(usize, OsString)>,
    /// The inputs no output may be (by identity), with their paths for messages.
    inputs: HashMap<FileId, PathBuf>,
}

fn dir_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn invalid(target: &Path, msg: String) -> NpyError {
    NpyError::new(target, NpyErrorKind::InvalidArgument, msg)
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    /// Registers `input` (a file the run reads): an output that is the same file (device and
    /// inode) is refused. A path that does not exist is ignored (its reader reports it).
    pub fn protect(&mut self, input: &Path) {
        if let Ok(id) = FileId::follow(input) {
            self.inputs.entry(id).or_insert_with(|| input.to_path_buf());
        }
    }

    /// Where and how `target` would be written (the path policy, and no input is written
    /// over), without staging it.
    pub fn check(&self, target: &Path, origin: Origin) -> Result<Place, NpyError> {
        let refused = |m: String| NpyError::new(target, NpyErrorKind::Io, m);
        let place = paths::place(target, origin).map_err(refused)?;
        if self.inputs.is_empty() {
            return Ok(place);
        }
        let meta = if place.in_place {
            fs::metadata(&place.path)
        } else {
            fs::symlink_metadata(&place.path)
        };
        match meta.ok().and_then(|m| self.inputs.get(&FileId::of(&m))) {
            Some(input) => Err(refused(format!(
                "cannot write {}: it is the input {} (the same file); nothing was written",
                shown(target),
                shown(input)
            ))),
            None => Ok(place),
        }
    }

    /// Reserves `target`, a path the user named, and returns the staged path its content
    /// must be written to (by the caller, e.g. a linker's `-o`). The target's directory must
    /// exist.
    pub fn stage(&mut self, target: &Path) -> Result<PathBuf, NpyError> {
        self.stage_as(target, Origin::User)
    }

    /// [`Outputs::stage`] for a target of `origin` (see [`crate::paths`]).
    pub fn stage_as(&mut self, target: &Path, origin: Origin) -> Result<PathBuf, NpyError> {
        if target.file_name().is_none() {
            let msg = format!("cannot write {}: not a file name", shown(target));
            return Err(invalid(target, msg));
        }
        let place = self.check(target, origin)?;
        let Some(name) = place.path.file_name().map(OsString::from) else {
            let msg = format!("cannot write {}: not a file name", shown(&place.path));
            return Err(invalid(target, msg));
        };
        // What is written in place needs no rename: it is staged in the temporary directory
        // (not in `/dev`, say).
        let dir = match place.in_place {
            true => std::env::temp_dir(),
            false => dir_of(&place.path),
        };
        let id = FileId::follow(&dir).map_err(|e| NpyError::io("cannot write", target, e))?;
        let stage = match self.by_dir.get(&id) {
            Some(&k) => k,
            None => {
                self.stages.push(new_stage(&dir, id, target)?);
                self.by_dir.insert(id, self.stages.len() - 1);
                self.stages.len() - 1
            }
        };
        self.stages[stage].locked |= !place.in_place;
        // What is written in place is staged as `p/K` (K: its index), so two devices of one
        // name (`/dev/null`, `/tmp/null`) and a file of the temporary directory never collide.
        let name = match place.in_place {
            true => OsString::from(self.files.len().to_string()),
            false => name,
        };
        if !place.in_place && !self.names.insert((stage, name.clone())) {
            let msg = format!("cannot write {}: it is given twice", shown(target));
            return Err(invalid(target, msg));
        }
        self.files.push(Entry {
            stage,
            name,
            target: target.to_path_buf(),
            origin,
            place,
        });
        Ok(self.staged(&self.files[self.files.len() - 1]))
    }

    /// Stages `target`, a path the user named, with the bytes `write` produces (flushed and
    /// synced to disk).
    pub fn write(
        &mut self,
        target: &Path,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), NpyError> {
        self.write_as(target, Origin::User, write)
    }

    /// [`Outputs::write`] for a target of `origin` (see [`crate::paths`]).
    pub fn write_as(
        &mut self,
        target: &Path,
        origin: Origin,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), NpyError> {
        let staged = self.stage_as(target, origin)?;
        let r = create_staged(&staged).and_then(|f| {
            let mut w = BufWriter::with_capacity(1 << 20, f);
            write(&mut w)?;
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()
        });
        match r {
            Ok(()) => {
                signals::test_pause("write");
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(invalid(
                target,
                format!("cannot write {}: {e}", shown(target)),
            )),
            Err(e) => Err(NpyError::io("cannot write", target, e)),
        }
    }

    fn staged(&self, e: &Entry) -> PathBuf {
        let sub = if e.place.in_place { "p" } else { "n" };
        self.stages[e.stage].path.join(sub).join(&e.name)
    }

    fn backup(&self, e: &Entry) -> PathBuf {
        self.stages[e.stage].path.join("o").join(&e.name)
    }

    /// Puts every staged file in place, all or nothing; returns the targets in order.
    pub fn commit(self) -> Result<Vec<PathBuf>, NpyError> {
        let mut order: Vec<&Stage> = self.stages.iter().filter(|s| s.locked).collect();
        order.sort_by_key(|s| s.id);
        let mut locks = Vec::with_capacity(order.len());
        for s in order {
            locks.push(lock_dir(s)?);
            signals::test_pause("lock");
        }
        for e in &self.files {
            self.recheck(e)?;
        }
        for e in self.files.iter().filter(|e| e.place.in_place) {
            paths::write_in_place(&self.staged(e), &e.place.path)
                .map_err(|err| NpyError::io("cannot write", &e.target, err))?;
        }
        {
            let _critical = signals::critical();
            self.swap_in()?;
        }
        for s in &self.stages {
            if let Ok(d) = File::open(&s.dir) {
                let _ = d.sync_all();
            }
        }
        drop(locks);
        Ok(self.files.iter().map(|e| e.target.clone()).collect())
    }

    /// Under the directory locks: `e` still goes where it was staged for, is no input, and
    /// its staged file gets the permission bits of the file it replaces.
    fn recheck(&self, e: &Entry) -> Result<(), NpyError> {
        let place = self.check(&e.target, e.origin)?;
        if place != e.place {
            let msg = format!(
                "cannot write {}: it changed while the outputs were written; nothing was written",
                shown(&e.target)
            );
            return Err(NpyError::new(&e.target, NpyErrorKind::Io, msg));
        }
        if e.place.in_place {
            return Ok(());
        }
        match fs::symlink_metadata(&e.place.path) {
            Ok(m) if m.is_file() => {
                let perms = fs::Permissions::from_mode(m.mode() & 0o777);
                fs::set_permissions(self.staged(e), perms)
                    .map_err(|err| NpyError::io("cannot write", &e.target, err))
            }
            _ => Ok(()),
        }
    }

    /// The renames of [`Outputs::commit`], rolled back on failure.
    fn swap_in(&self) -> Result<(), NpyError> {
        let replaced: Vec<&Entry> = self.files.iter().filter(|e| !e.place.in_place).collect();
        // backups[k]: where replaced[k]'s previous content is kept (None: there was none).
        let mut backups: Vec<Option<PathBuf>> = Vec::with_capacity(replaced.len());
        let undo = |backups: &[Option<PathBuf>], done: usize| {
            for (e, b) in replaced[..done].iter().zip(backups) {
                match b {
                    Some(b) => {
                        let _ = fs::rename(b, &e.place.path);
                    }
                    None => {
                        let _ = fs::remove_file(&e.place.path);
                    }
                }
            }
        };
        for (k, e) in replaced.iter().enumerate() {
            let backup = self.backup(e);
            let kept = match fs::hard_link(&e.place.path, &backup) {
                Ok(()) => Some(backup),
                Err(err) if err.kind() == io::ErrorKind::NotFound => None,
                // No hard links here (or too many): move it aside instead.
                Err(_) => match fs::rename(&e.place.path, &backup) {
                    Ok(()) => Some(backup),
                    Err(err) => {
                        undo(&backups, k);
                        return Err(NpyError::io("cannot replace", &e.target, err));
                    }
                },
            };
            backups.push(kept);
            if let Err(err) = fs::rename(self.staged(e), &e.place.path) {
                undo(&backups, k + 1);
                return Err(NpyError::io("cannot rename into place", &e.target, err));
            }
            signals::test_pause("commit");
        }
        Ok(())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for s in &self.stages {
            let _ = fs::remove_dir_all(&s.path);
        }
    }
}

/// Creates the staged file `path` (`O_EXCL|O_NOFOLLOW`), unless a terminating signal is
/// being handled (see [`signals::creating`]).
pub fn create_staged(path: &Path) -> io::Result<File> {
    signals::creating(|| paths::create_new(path))
}

/// Creates `dir` if it is missing (the out dir of sinks).
pub fn ensure_dir(dir: &Path) -> Result<(), NpyError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(NpyError::new(
            dir,
            NpyErrorKind::Io,
            format!(
                "cannot write outputs to {}: expected a directory, found a file",
                shown(dir)
            ),
        )),
        Err(_) => fs::create_dir_all(dir)
            .map_err(|e| NpyError::io("cannot create output directory", dir, e)),
    }
}

/// A fresh staging directory (with its `n/`, `o/` and `p/`) inside `dir`, whose identity is `id`;
/// stale ones there are swept first. `target` (a file to go in `dir`) names errors.
fn new_stage(dir: &Path, id: FileId, target: &Path) -> Result<Stage, NpyError> {
    paths::sweep_stale(dir);
    loop {
        let path = dir.join(paths::staging_name());
        // Tracked before it exists, so a signal right after mkdir still removes it.
        let tracked = signals::track(path.clone());
        let made = signals::creating(|| {
            let mut b = fs::DirBuilder::new();
            b.mode(0o700).create(&path)?;
            b.create(path.join("n"))?;
            b.create(path.join("o"))?;
            b.create(path.join("p"))
        });
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                let _ = fs::remove_dir_all(&path);
                return Err(NpyError::io("cannot write", target, e));
            }
        }
        // Marks it live. A sweeper of another host that took it first makes us start over.
        let live = match paths::lock_dir_nofollow(&path, libc::LOCK_SH) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(NpyError::io("cannot write", target, e)),
        };
        let same = |m: &fs::Metadata| FileId::of(m);
        let ours = (fs::symlink_metadata(&path).ok().map(|m| same(&m)))
            == live.metadata().ok().map(|m| same(&m));
        if ours {
            return Ok(Stage {
                dir: dir.to_path_buf(),
                id,
                path,
                locked: false,
                _live: live,
                _tracked: tracked,
            });
        }
    }
}

/// An exclusive lock on the target directory of `s` (released when the file is closed).
fn lock_dir(s: &Stage) -> Result<File, NpyError> {
    let dir = &s.dir;
    let f = File::open(dir).map_err(|e| NpyError::io("cannot lock", dir, e))?;
    if f.metadata().map(|m| FileId::of(&m)).ok() != Some(s.id) {
        let msg = format!(
            "cannot write outputs to {}: the directory was replaced while they were written",
            shown(dir)
        );
        return Err(NpyError::new(dir, NpyErrorKind::Io, msg));
    }
    let fd = f.as_raw_fd();
    // SAFETY: flock on an open descriptor has no memory-safety preconditions.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(f);
    }
    let _ = writeln!(
        io::stderr(),
        "note: waiting for another run to finish writing its outputs to {}",
        shown(dir)
    );
    loop {
        // SAFETY: as above.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
            return Ok(f);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(NpyError::io("cannot lock", dir, e));
        }
    }
}

/// Checks that `name` can be a sink's file name `NAME.npy`.
fn check_name(dir: &Path, name: &str) -> Result<PathBuf, NpyError> {
    let target = dir.join(format!("{name}.npy"));
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']) {
        return Err(invalid(
            &target,
            format!(
                "cannot write output {name:?} to {}: expected a plain file name (non-empty, no '/', '\\' or NUL)",
                shown(dir)
            ),
        ));
    }
    Ok(target)
}

/// The sink paths `out_dir/NAME.npy` of `names`, checked (plain names, none twice).
pub fn sink_targets<'a>(
    out_dir: &Path,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<PathBuf>, NpyError> {
    let mut seen = HashSet::new();
    let mut targets = Vec::new();
    for name in names {
        let t = check_name(out_dir, name)?;
        if !seen.insert(name) {
            let msg = format!("cannot write {}: output {name:?} is given twice", shown(&t));
            return Err(invalid(&t, msg));
        }
        targets.push(t);
    }
    Ok(targets)
}

/// Stages every `(NAME, value)` as `out_dir/NAME.npy` in `outputs` (not yet committed).
pub fn stage_sinks(
    outputs: &mut Outputs,
    out_dir: &Path,
    sinks: &[(&str, &dyn Npy)],
) -> Result<Vec<PathBuf>, NpyError> {
    let targets = sink_targets(out_dir, sinks.iter().map(|(n, _)| *n))?;
    if sinks.is_empty() {
        return Ok(targets);
    }
    ensure_dir(out_dir)?;
    for ((_, v), t) in sinks.iter().zip(&targets) {
        outputs.write_as(t, Origin::Sink, |w| v.write_npy(w))?;
    }
    Ok(targets)
}

/// Writes every `(NAME, tensor)` to `dir/NAME.npy`, all or nothing: one [`Outputs`]
/// transaction (staged in a directory inside `dir`, renamed into place under a lock on `dir`,
/// rolled back on failure, removed on SIGINT/SIGTERM). `dir` is created if missing; a sink
/// that is one of `inputs` (the same file) is refused. Returns the final paths, in order.
pub fn write_sinks(
    dir: &Path,
    outputs: &[(&str, &Tensor)],
    inputs: &[PathBuf],
) -> Result<Vec<PathBuf>, NpyError> {
    let items: Vec<(&str, &dyn Npy)> = outputs.iter().map(|(n, t)| (*n, *t as &dyn Npy)).collect();
    let mut o = Outputs::new();
    for i in inputs {
        o.protect(i);
    }
    let paths = stage_sinks(&mut o, dir, &items)?;
    o.commit()?;
    Ok(paths)
}

/// [`write_sinks`] with no inputs to protect.
pub fn write_all_atomic(dir: &Path, outputs: &[(&str, &Tensor)]) -> Result<Vec<PathBuf>, NpyError> {
    write_sinks(dir, outputs, &[])
}

/// Fails early (before computing) when the output directory (or the nearest existing
/// ancestor it would be created in) is not a directory, so a bad `--out-dir` costs no run.
pub fn check_out_dir(dir: &Path) -> Result<(), String> {
    let mut p = Some(dir);
    while let Some(d) = p {
        match fs::metadata(d) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(format!(
                    "cannot write outputs to {}: {} is a file, not a directory",
                    shown(dir),
                    shown(d)
                ))
            }
            Err(_) => p = d.parent().filter(|q| !q.as_os_str().is_empty()),
        }
    }
    Ok(())
}
