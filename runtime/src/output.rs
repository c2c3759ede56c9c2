//! Output files written all or nothing: the one writer of sinks (compiled programs, `tapc run`
//! through [`write_all_atomic`], and, in the distributed runtime, rank 0), of `--trace` files,
//! and of `tapc -o OUT` / `--emit` outputs; [`check_out_dir`] refuses a bad `--out-dir` before
//! a run computes anything.
//!
//! An [`Outputs`] is a transaction. Each file is first written under its own name into a
//! staging directory `.tapc-PID-N` created inside its target's directory (same file system, so
//! the final rename is atomic; the staged name is as short as the final one). Nothing in the
//! target directories changes until [`Outputs::commit`], which:
//!
//! 1. takes an exclusive `flock` on every target directory, in path order, so that concurrent
//!    commits into one directory serialize (printing a note while it waits): the directory
//!    then holds the *whole set* of whichever run committed last, never a mix;
//! 2. checks no target is a directory;
//! 3. inside [`signals::critical`] (a SIGINT/SIGTERM waits for it), hard-links every existing
//!    target into the staging directory as a backup and renames every staged file into place;
//!    if a rename fails, the targets renamed so far get their backups back (or are removed);
//! 4. syncs the directories and removes the staging directories.
//!
//! Dropping an uncommitted [`Outputs`] (an error, or a panic) removes its staging directories,
//! and [`signals`] removes them when the process is interrupted: no temporary is left behind.

use crate::npy::{self, NpyError, NpyErrorKind};
use crate::signals;
use crate::tensor::Tensor;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// The staging directory inside it.
    path: PathBuf,
    _tracked: signals::Tracked,
}

struct Entry {
    stage: usize,
    staged: PathBuf,
    target: PathBuf,
}

/// A set of output files that appear all together or not at all (see the module docs).
#[derive(Default)]
pub struct Outputs {
    stages: Vec<Stage>,
    files: Vec<Entry>,
}

/// Distinguishes staging directories of one process.
static N: AtomicU64 = AtomicU64::new(0);

fn dir_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    /// Reserves `target` and returns the staged path its content must be written to (by the
    /// caller, e.g. a linker's `-o`). The target's directory must exist.
    pub fn stage(&mut self, target: &Path) -> Result<PathBuf, NpyError> {
        let Some(name) = target.file_name() else {
            return Err(NpyError::new(
                target,
                NpyErrorKind::InvalidArgument,
                format!("cannot write {}: not a file name", target.display()),
            ));
        };
        if self.files.iter().any(|e| e.target == target) {
            return Err(NpyError::new(
                target,
                NpyErrorKind::InvalidArgument,
                format!("cannot write {}: it is given twice", target.display()),
            ));
        }
        let dir = dir_of(target);
        let stage = match self.stages.iter().position(|s| s.dir == dir) {
            Some(k) => k,
            None => {
                self.stages.push(new_stage(&dir, target)?);
                self.stages.len() - 1
            }
        };
        let staged = self.stages[stage].path.join(name);
        self.files.push(Entry {
            stage,
            staged: staged.clone(),
            target: target.to_path_buf(),
        });
        Ok(staged)
    }

    /// Stages `target` with the bytes `write` produces (flushed and synced to disk).
    pub fn write(
        &mut self,
        target: &Path,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<(), NpyError> {
        let staged = self.stage(target)?;
        let r = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staged)
            .and_then(|f| {
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
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Err(NpyError::new(
                target,
                NpyErrorKind::InvalidArgument,
                format!("cannot write {}: {e}", target.display()),
            )),
            Err(e) => Err(NpyError::io("cannot write", target, e)),
        }
    }

    /// Puts every staged file in place, all or nothing; returns the targets in order.
    pub fn commit(self) -> Result<Vec<PathBuf>, NpyError> {
        let mut dirs: Vec<&Stage> = self.stages.iter().collect();
        dirs.sort_by(|a, b| a.dir.cmp(&b.dir));
        let mut locks = Vec::new();
        for s in dirs {
            locks.push(lock_dir(&s.dir)?);
        }
        for e in &self.files {
            if fs::symlink_metadata(&e.target).is_ok_and(|m| m.is_dir()) {
                return Err(NpyError::new(
                    &e.target,
                    NpyErrorKind::Io,
                    format!(
                        "cannot write {}: expected a file or nothing there, found a directory",
                        e.target.display()
                    ),
                ));
            }
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

    /// The renames of [`Outputs::commit`], rolled back on failure.
    fn swap_in(&self) -> Result<(), NpyError> {
        // backups[k]: where target k's previous content is kept (None: there was none).
        let mut backups: Vec<Option<PathBuf>> = Vec::with_capacity(self.files.len());
        let undo = |backups: &[Option<PathBuf>], done: usize| {
            for (e, b) in self.files[..done].iter().zip(backups) {
                match b {
                    Some(b) => {
                        let _ = fs::rename(b, &e.target);
                    }
                    None => {
                        let _ = fs::remove_file(&e.target);
                    }
                }
            }
        };
        for (k, e) in self.files.iter().enumerate() {
            let backup = self.stages[e.stage].path.join(format!("{k}.old"));
            let kept = match fs::hard_link(&e.target, &backup) {
                Ok(()) => Some(backup),
                Err(err) if err.kind() == io::ErrorKind::NotFound => None,
                // No hard links here (or too many): move it aside instead.
                Err(_) => match fs::rename(&e.target, &backup) {
                    Ok(()) => Some(backup),
                    Err(err) => {
                        undo(&backups, k);
                        return Err(NpyError::io("cannot replace", &e.target, err));
                    }
                },
            };
            backups.push(kept);
            if let Err(err) = fs::rename(&e.staged, &e.target) {
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

/// Creates `dir` if it is missing (the out dir of sinks).
fn ensure_dir(dir: &Path) -> Result<(), NpyError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(NpyError::new(
            dir,
            NpyErrorKind::Io,
            format!(
                "cannot write outputs to {}: expected a directory, found a file",
                dir.display()
            ),
        )),
        Err(_) => fs::create_dir_all(dir)
            .map_err(|e| NpyError::io("cannot create output directory", dir, e)),
    }
}

/// A fresh staging directory inside `dir`; `target` (a file to go in `dir`) names errors.
fn new_stage(dir: &Path, target: &Path) -> Result<Stage, NpyError> {
    loop {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".tapc-{}-{n}", std::process::id()));
        // Tracked before it exists, so a signal right after mkdir still removes it.
        let tracked = signals::track(path.clone());
        match fs::create_dir(&path) {
            Ok(()) => {
                return Ok(Stage {
                    dir: dir.to_path_buf(),
                    path,
                    _tracked: tracked,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(NpyError::io("cannot write", target, e)),
        }
    }
}

/// An exclusive lock on `dir` (released when the file is closed).
fn lock_dir(dir: &Path) -> Result<File, NpyError> {
    let f = File::open(dir).map_err(|e| NpyError::io("cannot lock", dir, e))?;
    let fd = f.as_raw_fd();
    // SAFETY: flock on an open descriptor has no memory-safety preconditions.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(f);
    }
    let _ = writeln!(
        io::stderr(),
        "note: waiting for another run to finish writing its outputs to {}",
        dir.display()
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
        return Err(NpyError::new(
            &target,
            NpyErrorKind::InvalidArgument,
            format!(
                "cannot write output {name:?} to {}: expected a plain file name (non-empty, no '/', '\\' or NUL)",
                dir.display()
            ),
        ));
    }
    Ok(target)
}

/// Stages every `(NAME, value)` as `out_dir/NAME.npy` in `outputs` (not yet committed).
pub fn stage_sinks(
    outputs: &mut Outputs,
    out_dir: &Path,
    sinks: &[(&str, &dyn Npy)],
) -> Result<Vec<PathBuf>, NpyError> {
    let mut targets = Vec::with_capacity(sinks.len());
    for (name, _) in sinks {
        let t = check_name(out_dir, name)?;
        if targets.contains(&t) {
            return Err(NpyError::new(
                &t,
                NpyErrorKind::InvalidArgument,
                format!(
                    "cannot write {}: output {name:?} is given twice",
                    t.display()
                ),
            ));
        }
        targets.push(t);
    }
    if sinks.is_empty() {
        return Ok(targets);
    }
    ensure_dir(out_dir)?;
    for ((_, v), t) in sinks.iter().zip(&targets) {
        outputs.write(t, |w| v.write_npy(w))?;
    }
    Ok(targets)
}

/// Writes every `(NAME, tensor)` to `dir/NAME.npy`, all or nothing: one [`Outputs`]
/// transaction (staged in a directory inside `dir`, renamed into place under a lock on `dir`,
/// rolled back on failure, removed on SIGINT/SIGTERM). `dir` is created if missing. Returns the
/// final paths, in order.
pub fn write_all_atomic(dir: &Path, outputs: &[(&str, &Tensor)]) -> Result<Vec<PathBuf>, NpyError> {
    let items: Vec<(&str, &dyn Npy)> = outputs.iter().map(|(n, t)| (*n, *t as &dyn Npy)).collect();
    let mut o = Outputs::new();
    let paths = stage_sinks(&mut o, dir, &items)?;
    o.commit()?;
    Ok(paths)
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
                    dir.display(),
                    d.display()
                ))
            }
            Err(_) => p = d.parent().filter(|q| !q.as_os_str().is_empty()),
        }
    }
    Ok(())
}
