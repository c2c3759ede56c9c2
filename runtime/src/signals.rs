//! Signals of processes that write outputs (compiled programs and `tapc` itself), so that an
//! interrupted run leaves all of its outputs or none:
//!
//! - SIGINT, SIGTERM and SIGHUP remove the temporaries registered with [`track`] (staging
//!   directories of unfinished outputs), then the process dies of the signal as if it had no
//!   handler. A commit in progress (inside [`critical`]: the renames that put outputs in place)
//!   is finished first, so a signal never leaves a mix of new and old outputs. Temporaries are
//!   created through [`creating`], which the clean-up waits for and then shuts: nothing is
//!   created in a staging directory while or after it is removed.
//! - SIGXFSZ is ignored, so a file-size limit (`ulimit -f`) makes the write fail with EFBIG: an
//!   error message and the usual cleanup instead of a silent death.
//! - SIGPIPE is ignored, so a closed stdout does not kill a program that wrote its outputs.
//!
//! [`install`] must run before the process starts any thread: it blocks the three signals in
//! the calling thread (every thread started later inherits the mask) and starts one thread that
//! waits for them with `sigwait`, so the cleanup runs as ordinary code rather than in a signal
//! handler. Without [`install`] (libraries, tests running in-process) nothing changes: the
//! registry is kept but signals have their default action.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The signals that clean up and then terminate the process.
const TERMINATING: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static TEMPS: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
static CRITICAL: Mutex<()> = Mutex::new(());
static CREATE: Mutex<()> = Mutex::new(());
/// Set when a terminating signal is being handled: no temporary may be created any more.
static DYING: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// A path removed (recursively) if a terminating signal arrives while this guard lives.
/// Dropping the guard only forgets the path; the owner removes it on its normal paths.
#[must_use]
pub struct Tracked(u64);

/// Registers `path` for removal on SIGINT/SIGTERM/SIGHUP (call before creating it).
pub fn track(path: PathBuf) -> Tracked {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    TEMPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, path));
    Tracked(id)
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut t = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|(id, _)| *id != self.0);
    }
}

/// Held while outputs are renamed into place: a terminating signal waits for it.
pub fn critical() -> MutexGuard<'static, ()> {
    CRITICAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `create`, which creates a temporary (a staging directory or a file in one). The
/// clean-up of a terminating signal waits for a creation in progress and then shuts out later
/// ones: a thread that comes too late waits here until the signal ends the process, so the
/// process dies of the signal (not of an error about a vanished staging directory).
pub fn creating<T>(create: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let g = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    if DYING.load(Ordering::SeqCst) {
        drop(g);
        loop {
            std::thread::park();
        }
    }
    create()
}

fn signal_set(sigs: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set; sigaddset only writes into it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Installs the behaviour described in the module documentation (once per process). Call it
/// first thing in `main`, before any thread exists.
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: setting dispositions to SIG_IGN and blocking signals has no memory-safety
    // preconditions.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let set = signal_set(&TERMINATING);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let spawned = std::thread::Builder::new()
        .name("tapc-signals".into())
        .stack_size(64 << 10)
        .spawn(wait_for_signals);
    if spawned.is_err() {
        // No thread to clean up: better the default action than ignoring ^C.
        let set = signal_set(&TERMINATING);
        // SAFETY: as above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    }
}

fn wait_for_signals() {
    let set = signal_set(&TERMINATING);
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` and `sig` are valid for the call.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            break;
        }
    }
    // Let a creation in progress finish and shut out later ones, let a commit in progress
    // finish (it is short: renames), then remove what is unfinished.
    DYING.store(true, Ordering::SeqCst);
    let _create = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    let _commit = critical();
    let temps = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    for (_, p) in temps.iter() {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(p);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(p);
            }
            Err(_) => {}
        }
    }
    // Die of the signal, as without a handler (the exit status tells the shell what happened).
    // SAFETY: restoring the default action, unblocking and raising have no memory-safety
    // preconditions; `_exit` is the fallback if the signal somehow does not terminate us.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let one = signal_set(&[sig]);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

/// Test-only hook: `TAPC_RT_TEST_PAUSE=PHASE:MS` makes output writing print
/// `tapc-test-pause PHASE` to stderr and sleep `MS` milliseconds at each step of `PHASE`
/// (`write`: after each staged file; `lock`: after each directory lock of a commit; `commit`:
/// after each rename into place; on a rank of a distributed job, `run`: the sinks staged,
/// before computing, and `sinks`: after writing its windows of the sinks), so that tests
/// can deliver signals or start concurrent runs at a known phase. Unset in normal runs.
pub const TEST_PAUSE_VAR: &str = "TAPC_RT_TEST_PAUSE";

/// Pauses if the test hook asks for `phase` (see [`TEST_PAUSE_VAR`]).
pub fn test_pause(phase: &str) {
    let Ok(v) = std::env::var(TEST_PAUSE_VAR) else {
        return;
    };
    let Some((p, ms)) = v.split_once(':') else {
        return;
    };
    if p == phase {
        if let Ok(ms) = ms.parse::<u64>() {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "tapc-test-pause {phase}");
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}
