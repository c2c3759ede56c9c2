//! Worker threads kept alive between runs of a schedule.
//!
//! Spawning (and joining) a thread per worker on every run costs tens of microseconds, more
//! than a whole small schedule; the helpers are spawned once per process instead and parked
//! between runs, after a short spin so that back-to-back runs wake them cheaply. One run
//! uses the pool at a time; a run that finds it busy (runs on several threads of an embedder,
//! parallel tests) spawns scoped threads as before.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// One executed job: a chunk of a task on a worker (what each worker's work records and the
/// pool hands back).
#[derive(Clone, Debug)]
pub struct Event {
    pub task: usize,
    pub worker: usize,
    pub start: Duration,
    pub duration: Duration,
}

/// One run's work for worker `w` (1.. for helpers); returns the events it recorded.
pub(super) type Work<'a> = dyn Fn(usize) -> Vec<Event> + Sync + 'a;

/// How long an idle thread polls before it sleeps: long enough to catch the next job of a
/// running schedule (or the next run of a benchmark loop), short enough not to steal a busy
/// machine's core for long.
pub(super) const SPIN: Duration = Duration::from_micros(50);

/// Polls `changed` for up to [`SPIN`]; true as soon as it holds. Yields between rounds: on
/// a machine with fewer free cores than threads, the thread that would make `changed` true
/// may be waiting for this core.
pub(super) fn spin_until(changed: impl Fn() -> bool) -> bool {
    spin_for(SPIN, changed)
}

/// How long a parked helper woken by [`nudge`] polls for the run that is about to start:
/// long enough to cover copying big inputs in, bounded so that a run that never comes (an
/// input error) costs little.
const NUDGE_SPIN: Duration = Duration::from_millis(10);

/// Polls `changed` for up to `d` (see [`spin_until`]).
fn spin_for(d: Duration, changed: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        for _ in 0..64 {
            if changed() {
                return true;
            }
            std::hint::spin_loop();
        }
        if t0.elapsed() > d {
            return changed();
        }
        std::thread::yield_now();
    }
}

struct Slot {
    /// The current run's work, lifetime erased: valid until `left` reaches 0 (the run waits
    /// for that before it returns, see [`run`]).
    work: Option<&'static Work<'static>>,
    /// Helpers 1..=`want` take part in the current run.
    want: usize,
    /// Helpers that have begun the current run's work.
    started: usize,
    events: Vec<Event>,
    spawned: usize,
}

struct Pool {
    /// Held by the run using the pool.
    busy: Mutex<()>,
    slot: Mutex<Slot>,
    /// Bumped (under `slot`) when a run starts.
    epoch: AtomicU64,
    /// Helpers of the current run that have not finished (changed under `slot`).
    left: AtomicUsize,
    /// Helpers asleep on `start` (changed under `slot`).
    parked: AtomicUsize,
    /// Bumped (under `slot`) by [`nudge`].
    nudges: AtomicU64,
    start: Condvar,
    done: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        busy: Mutex::new(()),
        slot: Mutex::new(Slot {
            work: None,
            want: 0,
            started: 0,
            events: Vec::new(),
            spawned: 0,
        }),
        epoch: AtomicU64::new(0),
        left: AtomicUsize::new(0),
        parked: AtomicUsize::new(0),
        nudges: AtomicU64::new(0),
        start: Condvar::new(),
        done: Condvar::new(),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `work(0)` on the calling thread and `work(1..helpers)` on pooled threads (or, when
/// the pool is in use, on scoped threads); returns every worker's events, or an error when a
/// thread could not be started (the calling thread's work has still run: `on_error` is called
/// first so that it can stop the run).
pub(super) fn run(helpers: usize, work: &Work, on_error: &dyn Fn(String)) -> Vec<Event> {
    if helpers == 0 {
        return work(0);
    }
    let p = pool();
    let Ok(_busy) = p.busy.try_lock() else {
        return scoped(helpers, work, on_error);
    };
    {
        let mut s = lock(&p.slot);
        if let Err(e) = spawn_upto(p, &mut s, helpers) {
            drop(s);
            on_error(e);
            return work(0);
        }
        // SAFETY: only the lifetime is erased; `Wait` below keeps `work` borrowed until every
        // helper of this run has returned from it, also when `work(0)` unwinds.
        let erased: &'static Work<'static> = unsafe { std::mem::transmute(work) };
        s.work = Some(erased);
        s.want = helpers;
        s.started = 0;
        p.left.store(helpers, Ordering::Release);
        s.events.clear();
        p.epoch.fetch_add(1, Ordering::AcqRel);
        p.start.notify_all();
    }
    struct Wait<'p>(&'p Pool);
    impl Drop for Wait<'_> {
        fn drop(&mut self) {
            let p = self.0;
            // Helpers that have not woken up yet (a busy machine) are not waited for: the
            // calling thread has done their share, and they skip a closed run.
            let mut s = lock(&p.slot);
            s.work = None;
            p.left.fetch_sub(s.want - s.started, Ordering::AcqRel);
            drop(s);
            spin_until(|| p.left.load(Ordering::Acquire) == 0);
            let mut s = lock(&p.slot);
            while p.left.load(Ordering::Acquire) > 0 {
                s = p.done.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
    let wait = Wait(p);
    let mut events = work(0);
    drop(wait);
    events.append(&mut lock(&p.slot).events);
    events
}

/// Spawns pooled helpers until there are `helpers` of them.
fn spawn_upto(p: &Pool, s: &mut Slot, helpers: usize) -> Result<(), String> {
    while s.spawned < helpers {
        let w = s.spawned + 1;
        let seen = p.epoch.load(Ordering::Acquire);
        std::thread::Builder::new()
            .name(format!("tapc-worker-{w}"))
            .spawn(move || helper(w, seen))
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        s.spawned += 1;
    }
    Ok(())
}

/// Starts `helpers` pooled threads ahead of the first run (a compiled program does so while
/// it reads its inputs), so that the run's first chunks do not wait for a thread to be
/// created and scheduled. Best effort: a thread that cannot be started now is tried again
/// (and reported) by the run.
pub(super) fn prestart(helpers: usize) {
    let p = pool();
    let mut s = lock(&p.slot);
    let _ = spawn_upto(p, &mut s, helpers);
}

/// Wakes the parked helpers to poll for a run about to start (called before a run copies its
/// inputs in): waking a thread whose core is idle takes long on a virtual machine (the
/// hypervisor must schedule the idle virtual CPU again), tens to hundreds of microseconds, a
/// large part of a memory-bound run of a few milliseconds. Costs one atomic load when no
/// helper is parked.
pub(super) fn nudge() {
    let p = pool();
    if p.parked.load(Ordering::Acquire) == 0 {
        return;
    }
    let _s = lock(&p.slot);
    p.nudges.fetch_add(1, Ordering::AcqRel);
    p.start.notify_all();
}

/// A pooled helper thread: runs its share of every run it is wanted in, forever.
fn helper(w: usize, mut seen: u64) {
    let p = pool();
    loop {
        spin_until(|| p.epoch.load(Ordering::Acquire) != seen);
        let work = {
            let mut s = lock(&p.slot);
            while p.epoch.load(Ordering::Acquire) == seen {
                let nudges = p.nudges.load(Ordering::Acquire);
                p.parked.fetch_add(1, Ordering::AcqRel);
                s = p.start.wait(s).unwrap_or_else(|e| e.into_inner());
                p.parked.fetch_sub(1, Ordering::AcqRel);
                if p.epoch.load(Ordering::Acquire) == seen
                    && p.nudges.load(Ordering::Acquire) != nudges
                {
                    drop(s);
                    spin_for(NUDGE_SPIN, || p.epoch.load(Ordering::Acquire) != seen);
                    s = lock(&p.slot);
                }
            }
            seen = p.epoch.load(Ordering::Acquire);
            // Not wanted, or woken after the run closed.
            let Some(work) = s.work.filter(|_| w <= s.want) else {
                continue;
            };
            s.started += 1;
            work
        };
        // `work` catches every panic of a job (see `Shared::work`); one escaping here would
        // leave the run waiting, so it is caught too.
        let ev = std::panic::catch_unwind(AssertUnwindSafe(|| work(w))).unwrap_or_default();
        let mut s = lock(&p.slot);
        s.events.extend(ev);
        if p.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            p.done.notify_all();
        }
    }
}

/// Helpers on fresh scoped threads (the pool is busy with another run).
fn scoped(helpers: usize, work: &Work, on_error: &dyn Fn(String)) -> Vec<Event> {
    let mut events = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..=helpers)
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("tapc-worker-{w}"))
                    .spawn_scoped(s, move || work(w))
            })
            .collect();
        events.extend(work(0));
        for h in handles {
            match h {
                Ok(h) => match h.join() {
                    Ok(ev) => events.extend(ev),
                    Err(_) => on_error("a worker thread panicked".into()),
                },
                Err(e) => on_error(format!("cannot start a worker thread: {e}")),
            }
        }
    });
    events
}
