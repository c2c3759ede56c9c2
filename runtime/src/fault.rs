//! Naming the task that failed: a worker records which task (and which index range of it) it
//! is running, so that a panic or a kernel fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL inside
//! generated code) is reported with that task.
//!
//! - [`Running`] marks a task as running on the current thread (a thread-local, readable from
//!   a signal handler without allocating or locking) until it is dropped, also when the task
//!   unwinds.
//! - [`describe`] is the text every task error uses: ``task `NAME` (index range [0:16, 0:512])``.
//! - [`install_fault_handler`] (compiled programs only, never `tapc` itself) installs a handler
//!   for the fatal signals that prints ``PROG: error: segmentation fault (SIGSEGV) in task
//!   `NAME` (index range [...]); no outputs were written`` with `write(2)` and leaves with
//!   `_exit(1)`: both async-signal-safe, and nothing else is called. Sinks are only written
//!   after the whole schedule has run, so a fault can never leave a partial output. A fault
//!   outside any task restores the default action and re-raises the signal. Each worker gets
//!   an alternate signal stack ([`AltStack`]), so a task that overflows its stack is reported
//!   too.
//! - [`tapc_rt_gather_fault`] is what a compiled kernel calls on an out-of-range gathered index
//!   (before it returns status 2): it keeps the message ([`gather_message`]) for the worker,
//!   which names the task with it ([`take_gather_fault`]); [`tapc_rt_scatter_fault`] does the
//!   same for a scattered index ([`scatter_message`]).
//! - **Test-only hook.** [`TestFault::from_env`] reads `TAPC_RT_TEST_FAULT=KIND:TEXT`, with
//!   `KIND` one of `panic`, `segv`, `bus`, `fpe`, `stack`: every task whose name contains
//!   `TEXT` then panics, raises that signal on its worker thread, or (`stack`) recurses until
//!   it overflows its stack (a real SIGSEGV), just before its kernel is called (while it is
//!   the running task). It exists so that tests can check the reports above on
//!   real compiled programs (`tests/native/native_cli.rs`); it is not a user feature and is unset in
//!   normal runs. The signal kinds need the handler, so they are meant for compiled programs.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The task a worker thread is running: raw parts, so that a signal handler can read them.
#[derive(Clone, Copy)]
struct Current {
    name: *const u8,
    name_len: usize,
    /// `lo, hi` per index dimension.
    range: *const i64,
    range_len: usize,
}

impl Current {
    const NONE: Current = Current {
        name: std::ptr::null(),
        name_len: 0,
        range: std::ptr::null(),
        range_len: 0,
    };
}

thread_local! {
    /// Const-initialised and without a destructor, so reading it from a signal handler
    /// allocates nothing and cannot fail.
    static CURRENT: Cell<Current> = const { Cell::new(Current::NONE) };
}

/// While alive, `name` over `range` is this thread's running task (see [`install_fault_handler`]).
pub struct Running<'a> {
    _borrow: PhantomData<&'a [i64]>,
}

impl<'a> Running<'a> {
    /// Marks the task as running; `range` holds `lo, hi` per index dimension.
    pub fn enter(name: &'a str, range: &'a [i64]) -> Running<'a> {
        CURRENT.with(|c| {
            c.set(Current {
                name: name.as_ptr(),
                name_len: name.len(),
                range: range.as_ptr(),
                range_len: range.len(),
            })
        });
        Running {
            _borrow: PhantomData,
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(Current::NONE));
    }
}

/// ``task `NAME` (index range [lo:hi, ...])`` (without the range for a task with no index
/// dimensions); `range` holds `lo, hi` per dimension.
pub fn describe(name: &str, range: &[i64]) -> String {
    if range.len() < 2 {
        return format!("task `{name}`");
    }
    let dims: Vec<String> = range
        .chunks_exact(2)
        .map(|p| format!("{}:{}", p[0], p[1]))
        .collect();
    format!("task `{name}` (index range [{}])", dims.join(", "))
}

/// The text of a panic payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What the test-only hook does to a matching task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inject {
    Panic,
    Signal(i32),
    Overflow,
}

/// The test-only fault injection of `TAPC_RT_TEST_FAULT` (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestFault {
    inject: Inject,
    task: String,
}

/// The environment variable of the test-only hook.
pub const TEST_FAULT_VAR: &str = "TAPC_RT_TEST_FAULT";

impl TestFault {
    /// Reads `TAPC_RT_TEST_FAULT`; unset or empty is `Ok(None)`, a malformed value an error.
    pub fn from_env() -> Result<Option<TestFault>, String> {
        match std::env::var(TEST_FAULT_VAR) {
            Ok(v) if !v.is_empty() => TestFault::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    fn parse(v: &str) -> Result<TestFault, String> {
        let bad = || {
            format!(
                "{TEST_FAULT_VAR}={v}: expected KIND:TASK with KIND one of panic, segv, bus, fpe, stack (a test-only hook)"
            )
        };
        let (kind, task) = v.split_once(':').ok_or_else(bad)?;
        let inject = match kind {
            "panic" => Inject::Panic,
            "segv" => Inject::Signal(libc::SIGSEGV),
            "bus" => Inject::Signal(libc::SIGBUS),
            "fpe" => Inject::Signal(libc::SIGFPE),
            "stack" => Inject::Overflow,
            _ => return Err(bad()),
        };
        if task.is_empty() {
            return Err(bad());
        }
        Ok(TestFault {
            inject,
            task: task.to_string(),
        })
    }

    /// Panics or raises the signal if `task` matches; call it where the kernel would run.
    pub fn trigger(&self, task: &str) {
        if !task.contains(&self.task) {
            return;
        }
        match self.inject {
            Inject::Panic => panic!("injected by {TEST_FAULT_VAR} (test-only hook)"),
            Inject::Signal(sig) => {
                // SAFETY: raise(3) has no memory-safety preconditions; it delivers `sig` to
                // this thread (the handler, if installed, reports this task and exits).
                unsafe { libc::raise(sig) };
            }
            Inject::Overflow => {
                std::hint::black_box(overflow(0));
            }
        }
    }
}

/// Recurses with 1 KiB frames until the stack overflows (the guard page faults).
fn overflow(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 1024]);
    if depth == u64::MAX {
        return 0;
    }
    overflow(depth + 1).wrapping_add(u64::from(frame[(depth % 1024) as usize]))
}

/// Whether [`install_fault_handler`] ran (in this process).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// An alternate signal stack for the current thread while alive, so that the fault handler can
/// run even when a task has overflowed its stack. Only where the handler is installed.
pub struct AltStack {
    mem: *mut libc::c_void,
    size: usize,
    old: libc::stack_t,
}

impl AltStack {
    /// Sets up the stack, or `None` when there is no handler (or no memory for it).
    pub fn new() -> Option<AltStack> {
        if !INSTALLED.load(Ordering::Relaxed) {
            return None;
        }
        let size = libc::SIGSTKSZ.max(64 << 10);
        // SAFETY: a fresh private anonymous mapping; checked for failure.
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mem == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: zeroed stack_t values are valid; `mem` holds `size` bytes until `drop`
        // restores the previous stack and unmaps it.
        unsafe {
            let mut ss: libc::stack_t = std::mem::zeroed();
            ss.ss_sp = mem;
            ss.ss_size = size;
            let mut old: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(&ss, &mut old) != 0 {
                libc::munmap(mem, size);
                return None;
            }
            Some(AltStack { mem, size, old })
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: restores the stack this thread had before (or none) and unmaps ours, which
        // is no longer in use (we are not in a signal handler).
        unsafe {
            let mut old = self.old;
            if old.ss_sp.is_null() {
                old.ss_flags = libc::SS_DISABLE;
            }
            libc::sigaltstack(&old, std::ptr::null_mut());
            libc::munmap(self.mem, self.size);
        }
    }
}

/// The program name the fault handler prints (leaked once at installation).
static PROG: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static PROG_LEN: AtomicUsize = AtomicUsize::new(0);

const FATAL: [(i32, &[u8]); 4] = [
    (libc::SIGSEGV, b"segmentation fault (SIGSEGV)"),
    (libc::SIGBUS, b"bus error (SIGBUS)"),
    (libc::SIGFPE, b"arithmetic fault (SIGFPE)"),
    (libc::SIGILL, b"illegal instruction (SIGILL)"),
];

/// Writes all of `b` to stderr with write(2) (async-signal-safe).
fn say(b: &[u8]) {
    let mut rest = b;
    while !rest.is_empty() {
        // SAFETY: the buffer is valid for `rest.len()` bytes.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// Writes `v` in decimal without allocating.
fn say_i64(v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut m = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if v < 0 {
        say(b"-");
    }
    say(&buf[i..]);
}

extern "C" fn on_fault(sig: libc::c_int) {
    let cur = CURRENT.try_with(|c| c.get()).unwrap_or(Current::NONE);
    if cur.name.is_null() {
        // Not inside a task: the default action (terminate, core dump) as if never installed.
        // SAFETY: signal(2) and raise(3) are async-signal-safe; the signal is blocked while
        // this handler runs, so it is delivered with the default action once it returns (and
        // a real fault re-executes the faulting instruction anyway).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    // The first fault wins: a second one (another worker, at the same time) waits for the
    // first report to end the process, so the two messages never interleave.
    if REPORTING.swap(true, Ordering::SeqCst) {
        loop {
            // SAFETY: pause(2) is async-signal-safe.
            unsafe { libc::pause() };
        }
    }
    let prog = PROG.load(Ordering::Relaxed);
    if !prog.is_null() {
        // SAFETY: set once from a leaked string of this length.
        say(unsafe { std::slice::from_raw_parts(prog, PROG_LEN.load(Ordering::Relaxed)) });
        say(b": ");
    }
    say(b"error: ");
    let what = FATAL
        .iter()
        .find(|f| f.0 == sig)
        .map_or(&b"fatal signal"[..], |f| f.1);
    say(what);
    say(b" in task `");
    // SAFETY: `Running` keeps the name and range alive while they are current.
    say(unsafe { std::slice::from_raw_parts(cur.name, cur.name_len) });
    say(b"`");
    if cur.range_len >= 2 {
        // SAFETY: as above.
        let range = unsafe { std::slice::from_raw_parts(cur.range, cur.range_len) };
        say(b" (index range [");
        for (k, p) in range.chunks_exact(2).enumerate() {
            if k > 0 {
                say(b", ");
            }
            say_i64(p[0]);
            say(b":");
            say_i64(p[1]);
        }
        say(b"])");
    }
    say(b"; no outputs were written\n");
    // SAFETY: _exit(2) is async-signal-safe and runs no destructors or atexit handlers.
    unsafe { libc::_exit(1) }
}

/// Set by the first fault report (see `on_fault`).
static REPORTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The last out-of-range gathered index a kernel on this thread reported.
    static GATHER_FAULT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The message of an out-of-range gathered index: the access, the input, which index, the bad
/// value and the valid range. The interpreter uses it too, so both say the same.
pub fn gather_message(
    access: &str,
    input: &str,
    d: usize,
    index: &str,
    value: i64,
    size: i64,
) -> String {
    format!(
        "gathered index out of range in `{access}`: index {d} of input `{input}` (`{index}`) is {value}, \
         but that dimension has size {size} (valid: {} to {})",
        size.saturating_neg(),
        size - 1
    )
}

/// The first three lines of the `len` bytes of UTF-8 at `what` (`missing` for absent ones).
///
/// # Safety
/// `what` must point to `len` readable bytes.
unsafe fn lines(what: *const u8, len: i64, missing: &str) -> [String; 3] {
    // SAFETY: a kernel passes a constant string of exactly `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(what, len.max(0) as usize) };
    let text = String::from_utf8_lossy(bytes);
    let mut parts = text.split('\n');
    [(); 3].map(|_| parts.next().unwrap_or(missing).to_string())
}

/// Called by a compiled kernel when a gathered index is out of range, just before it returns
/// status 2. `what` (`len` bytes of UTF-8) is the access, the input and the index text, one per
/// line.
///
/// # Safety
/// `what` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn tapc_rt_gather_fault(
    what: *const u8,
    len: i64,
    d: i64,
    value: i64,
    size: i64,
) {
    // SAFETY: the caller's contract.
    let [access, input, index] = unsafe { lines(what, len, "?") };
    let msg = gather_message(&access, &input, d as usize, &index, value, size);
    GATHER_FAULT.with(|g| *g.borrow_mut() = Some(msg));
}

/// The message of an out-of-range scattered index: the scatter, the index tensor, the
/// coordinate of the bad element in it, its value and the valid range. The interpreter uses it
/// too, so both say the same.
pub fn scatter_message(scatter: &str, idx: &str, coord: &[i64], value: i64, size: i64) -> String {
    let c: Vec<String> = coord.iter().map(|x| x.to_string()).collect();
    format!(
        "scattered index out of range in `{scatter}`: `{idx}[{}]` is {value}, \
         but the scattered dimension has size {size} (valid: {} to {})",
        c.join(", "),
        size.saturating_neg(),
        size - 1
    )
}

/// Called by a compiled scatter kernel when an index is out of range, just before it returns
/// status 2. `what` (`len` bytes of UTF-8) is the scatter's text, the index tensor's name and
/// its shape (sizes separated by spaces), one per line; `pos` is the bad element's row-major
/// position in the index tensor.
///
/// # Safety
/// `what` must point to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn tapc_rt_scatter_fault(
    what: *const u8,
    len: i64,
    pos: i64,
    value: i64,
    size: i64,
) {
    // SAFETY: the caller's contract.
    let [scatter, idx, shape] = unsafe { lines(what, len, "") };
    let shape: Vec<i64> = shape.split(' ').filter_map(|s| s.parse().ok()).collect();
    let mut coord = vec![0; shape.len()];
    let mut rest = pos;
    for d in (0..shape.len()).rev() {
        coord[d] = rest % shape[d].max(1);
        rest /= shape[d].max(1);
    }
    let msg = scatter_message(&scatter, &idx, &coord, value, size);
    GATHER_FAULT.with(|g| *g.borrow_mut() = Some(msg));
}

/// The message of the last out-of-range gathered (or scattered) index reported on this thread.
pub fn take_gather_fault() -> Option<String> {
    GATHER_FAULT.with(|g| g.borrow_mut().take())
}

/// Replaces Rust's panic report (`thread '...' panicked at ...`) with nothing: every panic in
/// the runtime is caught (a task's by its worker, any other by `tapc_rt_main`) and reported as
/// one clean message from its payload. Compiled programs only.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|_| {}));
}

/// Installs the fault handler of compiled programs for SIGSEGV, SIGBUS, SIGFPE and SIGILL;
/// `prog` prefixes its message. Not installed by `tapc run` (the handler is process-wide).
pub fn install_fault_handler(prog: &str) {
    let name: &'static str = Box::leak(prog.to_string().into_boxed_str());
    PROG_LEN.store(name.len(), Ordering::Relaxed);
    PROG.store(name.as_ptr().cast_mut(), Ordering::Relaxed);
    INSTALLED.store(true, Ordering::Relaxed);
    for (sig, _) in FATAL {
        // SAFETY: a zeroed sigaction is a valid starting value; the handler only calls
        // async-signal-safe functions (write, signal, raise, _exit) and reads a const
        // thread-local. SA_ONSTACK uses an alternate signal stack where one is set up.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_ONSTACK;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_tasks_with_and_without_ranges() {
        assert_eq!(
            describe("apply @f -> %y", &[0, 16, 4, 8]),
            "task `apply @f -> %y` (index range [0:16, 4:8])"
        );
        assert_eq!(describe("zeros -> %z", &[]), "task `zeros -> %z`");
    }

    #[test]
    fn running_marks_the_thread_until_dropped() {
        let range = [0i64, 4];
        {
            let _r = Running::enter("t", &range);
            assert_eq!(CURRENT.with(|c| c.get()).name_len, 1);
        }
        assert!(CURRENT.with(|c| c.get()).name.is_null());
    }

    #[test]
    fn test_hook_values_parse_or_are_rejected() {
        assert_eq!(
            TestFault::parse("segv:apply @linear"),
            Ok(TestFault {
                inject: Inject::Signal(libc::SIGSEGV),
                task: "apply @linear".into()
            })
        );
        assert_eq!(
            TestFault::parse("panic:x").map(|f| f.inject),
            Ok(Inject::Panic)
        );
        assert_eq!(
            TestFault::parse("stack:x").map(|f| f.inject),
            Ok(Inject::Overflow)
        );
        for bad in ["segv", "kill:x", "panic:"] {
            let e = TestFault::parse(bad).unwrap_err();
            assert!(e.contains(TEST_FAULT_VAR) && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_test_panic_fires_only_for_matching_tasks() {
        let f = TestFault::parse("panic:@linear").unwrap();
        f.trigger("apply @relu -> %h");
        let p = std::panic::catch_unwind(|| f.trigger("apply @linear -> %y")).unwrap_err();
        assert!(panic_message(&*p).contains(TEST_FAULT_VAR));
    }
}
