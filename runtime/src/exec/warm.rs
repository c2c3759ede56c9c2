//! A compiled program's cold start (issue 22): while the main thread reads the inputs, the
//! worker threads are started and the big buffers the run allocates first (the sources and
//! constants the inputs are copied into, and the outputs of the tasks that wait for nothing)
//! are mapped and page-faulted in parallel, then kept for the run to take (the executor's spare
//! buffers), so that the run neither waits for a thread to be created nor takes a page fault
//! (a kernel-zeroed 2 MiB page) on the first write of each huge page of those buffers. Their
//! memory is held from the start of the run anyway, so faulting them early adds nothing to the
//! planned peak. A later task's output is first touched by the kernel chunks that write it
//! (or takes a dead buffer's faulted pages, `codegen::share`).
//!
//! Measured (2026-11-28, `perf record -g` of fresh 2-thread runs with the outputs left to
//! their writers): 83% of the samples inside GELU over 8M's kernel, 88% of layernorm
//! 8192×768's and 93% of the outer product 2048×1×2048's were the page faults zeroing their
//! outputs (docs/benchmarks.md, "Cold runs").

use super::{pool, spare, AlignedBuf, HUGE, KEEP_FREED};
use crate::plan::Plan;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

/// Work started by [`WarmStart::begin`]; [`WarmStart::finish`] (or dropping it) waits for it.
pub struct WarmStart {
    faulting: Option<JoinHandle<()>>,
    /// Bytes of buffers faulted ahead.
    bytes: u64,
}

/// The bytes of every buffer [`WarmStart::begin`] faults ahead for `plan`: the big sources,
/// constants and outputs of the first tasks (see the module docs), in buffer order, up to
/// what the executor keeps.
pub fn ahead(plan: &Plan) -> Vec<u64> {
    let (pending, _) = plan.waits();
    let mut first = vec![false; plan.buffers.len()];
    for (b, buf) in plan.buffers.iter().enumerate() {
        first[b] = !matches!(buf.init, crate::plan::Init::Scratch);
    }
    for (t, task) in plan.tasks.iter().enumerate() {
        if pending[t] == 0 {
            for b in task.buffers() {
                first[b as usize] = true;
            }
        }
    }
    // No more than the spare buffers keep (the rest would be unmapped again at once).
    let mut total = 0u64;
    (plan.buffers.iter().zip(first))
        .filter(|(buf, f)| *f && buf.bytes >= HUGE)
        .map(|(buf, _)| buf.bytes)
        .take_while(|&b| {
            total = total.saturating_add(b);
            total <= spare::CAP as u64
        })
        .collect()
}

impl WarmStart {
    /// Starts `threads - 1` pooled helpers and, on a background thread with `threads` workers,
    /// maps and faults the buffers of [`ahead`]. Nothing is faulted when freed buffers are not
    /// kept (a rank of a distributed job gives its memory back at once).
    pub fn begin(plan: &Plan, threads: usize) -> WarmStart {
        let threads = threads.max(1);
        pool::prestart(threads - 1);
        let sizes = if KEEP_FREED.load(Ordering::Relaxed) {
            ahead(plan)
        } else {
            vec![]
        };
        let bytes = sizes.iter().sum();
        let faulting = (!sizes.is_empty())
            .then(|| {
                std::thread::Builder::new()
                    .name("tapc-prefault".into())
                    .spawn(move || {
                        fault(&sizes, threads);
                    })
                    .ok()
            })
            .flatten();
        WarmStart { faulting, bytes }
    }

    /// Waits for the faulting; returns the bytes faulted ahead.
    pub fn finish(mut self) -> u64 {
        if let Some(h) = self.faulting.take() {
            let _ = h.join();
        }
        self.bytes
    }
}

impl Drop for WarmStart {
    fn drop(&mut self) {
        if let Some(h) = self.faulting.take() {
            let _ = h.join();
        }
    }
}

/// A buffer's address that may cross threads (each worker touches its own pages).
#[derive(Clone, Copy)]
struct Addr(usize);

/// Maps each buffer of `sizes`, writes one byte of every page of it (split into `threads`
/// contiguous parts faulted in parallel) and keeps it for the run (among the spare buffers);
/// returns their addresses. A buffer that cannot be allocated (and any after it) is left to
/// the run, which reports it.
pub fn fault(sizes: &[u64], threads: usize) -> Vec<usize> {
    const PAGE: usize = 4096;
    // Held until all are faulted: a buffer dropped into the spare ones at once would be taken
    // again by the next of the same size, which then faulted the same pages twice.
    let mut held = Vec::with_capacity(sizes.len());
    for &bytes in sizes {
        let Ok(buf) = AlignedBuf::new(bytes) else {
            break;
        };
        let (base, len) = (Addr(buf.ptr as usize), buf.layout.size());
        let part = len.div_ceil(threads).next_multiple_of(PAGE);
        std::thread::scope(|s| {
            for w in 0..threads {
                s.spawn(move || {
                    let base = base;
                    let (lo, hi) = ((w * part).min(len), ((w + 1) * part).min(len));
                    for off in (lo..hi).step_by(PAGE) {
                        // SAFETY: inside the fresh mapping, which nothing else uses yet.
                        unsafe { std::ptr::write_volatile((base.0 + off) as *mut u8, 0) };
                    }
                });
            }
        });
        held.push(buf);
    }
    let addrs = held.iter().map(|b| b.ptr as usize).collect();
    // Dropped into the spare buffers (kept: big, and freed buffers are kept).
    drop(held);
    addrs
}

/// The process's minor page faults so far (`--time` reports a run's).
pub(super) fn minor_faults() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_minflt as u64
    }
}
