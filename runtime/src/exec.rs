//! The schedule executor: runs a [`Plan`]'s task DAG on a pool of worker threads.
//!
//! A task becomes ready when the tasks it depends on have finished; ready tasks that are big
//! enough are split into chunks along their split dimension, and every chunk is one job on a
//! shared queue that `threads` workers drain. Buffers are allocated 64-byte aligned when the
//! first task that touches them becomes ready and freed after the last task (or sink) that
//! uses them; the bytes live at once are tracked, and their peak reported. Each job can be
//! timed and recorded for a Chrome/Perfetto trace. A kernel that reports failure or panics
//! stops the run with a message naming the task and the index range it was running
//! ([`crate::fault`], which also reports kernel faults in compiled programs); workers stop
//! taking jobs, and no sink is returned.

use crate::fault::{describe, panic_message, AltStack, Running, TestFault};
use crate::memory::human_bytes;
use crate::plan::{Init, Plan};
use crate::tensor::{checked_numel, DType, Data, Tensor};
use std::alloc::{alloc, dealloc, Layout};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod owned;
mod pool;
mod report;
mod warm;

pub use owned::{execute_owned, OwnedBuffer, SinkData};
pub use pool::Event;
pub use warm::{ahead as faulted_ahead, fault as fault_ahead, WarmStart};

/// A compiled kernel: `bases[k]` points at element 0 of the task's `k`-th view, `range`
/// holds `lo, hi` per index dimension. Returns 0 on success, 1 if it could not allocate its
/// temporaries. The C calling convention; `C-unwind` only so that a kernel written in Rust
/// (the tests') that panics unwinds into the worker's `catch_unwind` instead of aborting.
pub type KernelFn = unsafe extern "C-unwind" fn(*const *mut u8, *const i64) -> i32;

/// Work (estimated operations, see [`crate::plan::Task::work`]) every chunk of a split task
/// gets at least: some 20 µs of one core, so that handing a chunk to another worker (a queue
/// lock and, if it sleeps, a wake-up) costs far less than the chunk saves. A smaller task runs
/// as one job.
pub const MIN_CHUNK_WORK: f64 = 2.0e6;

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Record one event per job (needed for `--time` and `--trace`).
    pub record: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            threads: default_threads(),
            record: false,
        }
    }
}

/// The number of cores available to this process.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub wall: Duration,
    /// Most bytes of buffers live at once (sources, scratch and constants).
    pub peak_bytes: u64,
    /// The plan's peak ([`crate::memory::peak`], what the pre-run memory check uses), when
    /// [`Options::record`] is set; 0 otherwise.
    pub planned_bytes: u64,
    pub threads: usize,
    pub task_names: Vec<String>,
    /// Every job, when [`Options::record`] is set.
    pub events: Vec<Event>,
    /// The address of each source's buffer during the run, in source order: an embedder can
    /// check that an [`Input::Borrowed`] was read in place.
    pub source_addrs: Vec<usize>,
    /// The process's minor page faults during the run (all threads; `getrusage`).
    pub faults: u64,
}

/// The value of one source: a tensor, copied into an aligned buffer of the run, or caller
/// memory read in place.
#[derive(Clone, Copy)]
pub enum Input<'a> {
    Tensor(&'a Tensor),
    Borrowed(Borrowed<'a>),
    /// A buffer read straight from the input file, handed over: it becomes the source's
    /// buffer (no copy) and is freed after its last use, like any buffer of the run.
    Owned(Owned<'a>),
}

/// A zeroed, aligned buffer of the executor's own kind, filled by the caller (a rank reads its
/// source windows straight into one) and then handed to a run as an [`Input::Owned`].
pub struct SourceBuf {
    buf: AlignedBuf,
    bytes: usize,
}

// SAFETY: the buffer is owned memory that only its holder touches.
unsafe impl Send for SourceBuf {}

impl SourceBuf {
    /// `bytes` zeroed bytes (what a piece holds where nothing is read into it).
    pub fn zeroed(bytes: u64) -> Result<SourceBuf, String> {
        let buf = AlignedBuf::new(bytes)?;
        let n = usize::try_from(bytes).map_err(|_| "buffer too large".to_string())?;
        // SAFETY: the allocation holds at least `bytes` bytes.
        unsafe { std::ptr::write_bytes(buf.ptr, 0, n) };
        Ok(SourceBuf { buf, bytes: n })
    }

    /// `bytes` bytes of unspecified content (zero, or the bytes of an earlier buffer of the
    /// run), for a caller that writes all of them before reading any (MPI receives into it).
    /// Unlike [`SourceBuf::zeroed`] a big one is not written here, so its pages are faulted in
    /// by that first write, as 2 MiB huge pages like every big buffer of the executor (4 KiB
    /// pages for a `Vec`: 4,096 faults per 16 MiB message).
    pub fn unfilled(bytes: u64) -> Result<SourceBuf, String> {
        let buf = AlignedBuf::new(bytes)?;
        let n = usize::try_from(bytes).map_err(|_| "buffer too large".to_string())?;
        if bytes < HUGE {
            // SAFETY: the allocation holds at least `bytes` bytes (small: from `alloc`, which
            // does not initialise them).
            unsafe { std::ptr::write_bytes(buf.ptr, 0, n) };
        }
        Ok(SourceBuf { buf, bytes: n })
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Its first byte, for a caller that writes through it (MPI).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.ptr
    }

    /// Its bytes, to fill.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `bytes` initialised bytes of a live allocation, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr, self.bytes) }
    }
}

/// A [`SourceBuf`] of `dtype` and `shape` for one run to take over (the slot is empty after).
#[derive(Clone, Copy)]
pub struct Owned<'a> {
    pub buf: &'a Mutex<Option<SourceBuf>>,
    pub dtype: DType,
    pub shape: &'a [usize],
}

/// C-order elements of `dtype` and `shape` at `ptr`, read in place (a `bool` is one byte 0 or
/// 1, as numpy stores it).
#[derive(Clone, Copy)]
pub struct Borrowed<'a> {
    ptr: *const u8,
    dtype: DType,
    shape: &'a [usize],
}

impl<'a> Borrowed<'a> {
    /// # Safety
    /// `ptr` must point at `numel(shape) * dtype.size_bytes()` readable bytes, aligned to the
    /// element size, that nothing writes while a run reads them. The program never writes a
    /// source's buffer.
    pub unsafe fn new(ptr: *const u8, dtype: DType, shape: &'a [usize]) -> Borrowed<'a> {
        Borrowed { ptr, dtype, shape }
    }
}

impl Input<'_> {
    fn dtype(&self) -> DType {
        match self {
            Input::Tensor(t) => t.dtype(),
            Input::Borrowed(b) => b.dtype,
            Input::Owned(o) => o.dtype,
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Input::Tensor(t) => &t.shape,
            Input::Borrowed(b) => b.shape,
            Input::Owned(o) => o.shape,
        }
    }
}

struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
    /// False for caller memory read in place ([`Input::Borrowed`]): never freed here.
    owned: bool,
}

/// Buffers at least this big are aligned to (and advised as) transparent huge pages: one page
/// fault per 2 MiB instead of per 4 KiB when a kernel first writes them.
const HUGE: u64 = 4 << 20;

#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, len: usize) {
    extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    const MADV_HUGEPAGE: i32 = 14;
    // SAFETY: the range is one live allocation; the advice is only a hint.
    unsafe {
        madvise(ptr.cast(), len, MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_: *mut u8, _: usize) {}

impl AlignedBuf {
    /// The layout of a buffer of `bytes`: rounded up to whole 64-byte lines, so no access of
    /// a non-empty view can leave the allocation even when it reads a full element of a tiny
    /// (or empty) buffer; big ones to whole huge pages.
    fn layout(bytes: u64) -> Result<Layout, String> {
        let align = if bytes >= HUGE { 2 << 20 } else { 64 };
        let size = usize::try_from(bytes.max(1).div_ceil(align).saturating_mul(align))
            .map_err(|_| "buffer too large".to_string())?;
        Layout::from_size_align(size, align as usize)
            .map_err(|_| format!("cannot allocate {bytes} bytes"))
    }

    fn new(bytes: u64) -> Result<AlignedBuf, String> {
        let layout = AlignedBuf::layout(bytes)?;
        let size = layout.size();
        if bytes >= HUGE {
            if let Some(ptr) = spare::take(layout) {
                return Ok(AlignedBuf {
                    ptr,
                    layout,
                    owned: true,
                });
            }
        }
        // Not zeroed: every element a task or sink reads was written by an earlier task (and
        // zeroing would touch every page of big buffers up front, before any kernel runs).
        let ptr = if bytes >= HUGE {
            big::map(layout)
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc(layout) }
        };
        if ptr.is_null() {
            return Err(format!("out of memory allocating {bytes} bytes"));
        }
        if bytes >= HUGE {
            advise_huge(ptr, size);
        }
        Ok(AlignedBuf {
            ptr,
            layout,
            owned: true,
        })
    }
}

/// Big buffers are mappings of their own, so freeing one gives its pages back to the system at
/// once: through malloc, a freed buffer can stay in the heap (glibc raises its mmap threshold
/// after a big free), and a rank's resident memory then depends on the order tasks ran in.
mod big {
    use std::alloc::Layout;

    /// A private anonymous mapping of `layout` (aligned by mapping an alignment more and
    /// unmapping the ends), or null.
    pub(super) fn map(layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let Some(len) = size.checked_add(align) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a fresh mapping, checked for failure; only its unused ends are unmapped.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            let start = raw as usize;
            let head = start.next_multiple_of(align) - start;
            if head > 0 {
                libc::munmap(raw, head);
            }
            let tail = len - head - size;
            if tail > 0 {
                libc::munmap((start + head + size) as *mut libc::c_void, tail);
            }
            (start + head) as *mut u8
        }
    }

    /// Unmaps a buffer from [`map`].
    pub(super) fn unmap(ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` is the start of a mapping of `layout.size()` bytes made by `map`.
        unsafe {
            libc::munmap(ptr.cast(), layout.size());
        }
    }
}

/// Whether freed big buffers are kept for reuse ([`keep_freed_buffers`]).
static KEEP_FREED: AtomicBool = AtomicBool::new(true);

/// Whether big buffers freed by a run are kept for a later allocation of the same layout (the
/// default; see `spare`). A rank of a distributed job turns it off: its memory plan promises
/// that freed buffers are given back, and kept ones would stay resident beside the next.
pub fn keep_freed_buffers(on: bool) {
    KEEP_FREED.store(on, Ordering::Relaxed);
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let keep = KEEP_FREED.load(Ordering::Relaxed) && self.layout.size() as u64 >= HUGE;
        if keep && spare::keep(self.ptr, self.layout) {
            return;
        }
        if self.layout.size() as u64 >= HUGE {
            return big::unmap(self.ptr, self.layout);
        }
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Big buffers freed by one run, kept for the next run in the same process (a caching
/// allocator, as in PyTorch): a fresh big buffer costs a page fault and a kernel-zeroed page
/// per 2 MiB on first write, which serialises on the address space and caps the speedup of
/// threads on memory-bound graphs. A compiled program runs once and gains nothing; the JIT
/// (`tapc run`, benchmarks, embedders running a graph repeatedly) does.
mod spare {
    use std::alloc::Layout;
    use std::sync::Mutex;

    /// At most this many bytes are kept.
    pub(super) const CAP: usize = 1 << 30;

    struct Spare {
        bufs: Vec<(usize, Layout)>,
        bytes: usize,
    }

    static SPARE: Mutex<Spare> = Mutex::new(Spare {
        bufs: Vec::new(),
        bytes: 0,
    });

    /// A kept buffer of exactly `layout`, if any.
    pub(super) fn take(layout: Layout) -> Option<*mut u8> {
        let mut s = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        let i = s.bufs.iter().position(|&(_, l)| l == layout)?;
        let (ptr, _) = s.bufs.swap_remove(i);
        s.bytes -= layout.size();
        Some(ptr as *mut u8)
    }

    /// Keeps `ptr` (allocated with `layout`) for a later [`take`]; false if over the cap.
    pub(super) fn keep(ptr: *mut u8, layout: Layout) -> bool {
        let mut s = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if s.bytes + layout.size() > CAP {
            return false;
        }
        s.bytes += layout.size();
        s.bufs.push((ptr as usize, layout));
        true
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_kept_buffer_is_taken_once_by_its_exact_layout() {
            // An odd alignment no executor buffer uses, so parallel tests cannot interfere.
            let layout = Layout::from_size_align(3 << 20, 1 << 12).unwrap();
            let other = Layout::from_size_align(3 << 20, 1 << 13).unwrap();
            // SAFETY: non-zero size; freed below.
            let ptr = unsafe { std::alloc::alloc(layout) };
            assert!(keep(ptr, layout));
            assert_eq!(take(other), None);
            assert_eq!(take(layout), Some(ptr));
            assert_eq!(take(layout), None);
            let huge = Layout::from_size_align(CAP + 1, 1 << 12).unwrap();
            assert!(!keep(ptr, huge), "over the cap");
            // SAFETY: allocated above with `layout`.
            unsafe { std::alloc::dealloc(ptr, layout) };
        }
    }
}

// SAFETY: the buffer is plain memory; the schedule's dependencies order every access to it.
unsafe impl Send for AlignedBuf {}

#[derive(Clone, Copy)]
struct Job {
    task: usize,
    lo: i64,
    hi: i64,
}

struct State {
    queue: VecDeque<Job>,
    pending: Vec<usize>,
    chunks_left: Vec<usize>,
    bufs: Vec<Option<AlignedBuf>>,
    refs: Vec<usize>,
    live: u64,
    peak: u64,
    finished: usize,
    error: Option<String>,
}

struct Shared<'a> {
    plan: &'a Plan,
    kernels: &'a [KernelFn],
    threads: usize,
    dependents: Vec<Vec<usize>>,
    state: Mutex<State>,
    cv: Condvar,
    /// Bumped (under `state`) whenever `cv` is notified, so an idle worker can spin on it.
    signal: AtomicU64,
    t0: Instant,
}

/// A raw pointer that may cross threads (the schedule orders every access).
#[derive(Clone, Copy)]
struct P(*mut u8);
// SAFETY: see above.
unsafe impl Send for P {}

/// Runs `plan` with its `kernels` on `inputs` (one tensor per source, in order); returns the
/// sinks by name, in order, and what the run measured.
pub fn execute(
    plan: &Plan,
    kernels: &[KernelFn],
    inputs: &[&Tensor],
    opts: &Options,
) -> Result<(Vec<(String, Tensor)>, Report), String> {
    execute_with(plan, kernels, inputs, opts, |views| {
        views
            .iter()
            .map(|v| Ok((v.name.to_string(), v.to_tensor()?)))
            .collect()
    })
}

/// A sink read in place from its buffer, valid while the callback of [`execute_with`] runs:
/// written to a file straight from there, with no copy of the whole tensor.
pub struct SinkView<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [usize],
    base: *const u8,
    offset: i64,
    strides: &'a [i64],
    /// The shape the view is walked in (`plan::Sink::dims`: a blocked sink's grid).
    dims: &'a [usize],
}

impl SinkView<'_> {
    /// The number of elements (validated against the buffer by [`Plan::validate`]).
    fn numel(&self) -> usize {
        checked_numel(self.shape).unwrap_or(0)
    }

    /// A C-order copy, allocated fallibly (an error names the sink).
    pub fn to_tensor(&self) -> Result<Tensor, String> {
        let n = self.numel();
        let data = copy_out(
            self.dtype,
            n,
            self.dims,
            self.base,
            self.offset,
            self.strides,
        )
        .map_err(|bytes| {
            format!(
                "out of memory: cannot allocate {} for sink @{}",
                human_bytes(bytes),
                self.name
            )
        })?;
        Tensor::new(self.shape.to_vec(), data)
    }
}

impl crate::output::Npy for SinkView<'_> {
    fn write_npy(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&crate::npy::header_bytes(self.dtype, self.shape))?;
        self.write_data(w)
    }
}

impl SinkView<'_> {
    /// Writes the elements in C order as `.npy` data (no header): what a rank of a
    /// distributed job writes of a sink at the sink's place in the file.
    pub fn write_data(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let size = self.dtype.size_bytes();
        let mut chunk: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut result = Ok(());
        runs(
            self.numel(),
            self.dims,
            self.offset,
            self.strides,
            |off, len, step| {
                if result.is_err() {
                    return;
                }
                // SAFETY: the plan's validation checked that every element of the view is in
                // its buffer, which is alive while the callback runs.
                unsafe {
                    let p = self.base.offset(off as isize * size as isize);
                    if step == 1 && self.dtype != DType::Bool {
                        result = w.write_all(std::slice::from_raw_parts(p, len * size));
                        return;
                    }
                    for k in 0..len {
                        let e = p.offset(k as isize * step as isize * size as isize);
                        if self.dtype == DType::Bool {
                            chunk.push(u8::from(*e != 0));
                        } else {
                            chunk.extend_from_slice(std::slice::from_raw_parts(e, size));
                        }
                        if chunk.len() >= 1 << 16 {
                            result = w.write_all(&chunk);
                            chunk.clear();
                            if result.is_err() {
                                return;
                            }
                        }
                    }
                }
            },
        );
        result?;
        w.write_all(&chunk)
    }
}

/// Runs `plan` like [`execute`], then hands the sinks, read in place from their buffers, to
/// `sinks` (which typically writes them to files) before any buffer is freed.
pub fn execute_with<T>(
    plan: &Plan,
    kernels: &[KernelFn],
    inputs: &[&Tensor],
    opts: &Options,
    sinks: impl FnOnce(&[SinkView]) -> Result<T, String>,
) -> Result<(T, Report), String> {
    let inputs: Vec<Input> = inputs.iter().map(|t| Input::Tensor(t)).collect();
    execute_inputs(plan, kernels, &inputs, opts, sinks)
}

/// [`execute_with`] on [`Input`]s: borrowed ones are read in place, not copied.
pub fn execute_inputs<T>(
    plan: &Plan,
    kernels: &[KernelFn],
    inputs: &[Input],
    opts: &Options,
    sinks: impl FnOnce(&[SinkView]) -> Result<T, String>,
) -> Result<(T, Report), String> {
    execute_core(plan, kernels, inputs, opts, |bufs| {
        sinks(&sink_views(plan, bufs)?)
    })
}

/// Runs `plan`, then hands the run's buffers (indexed like the plan's) to `finish` before
/// they are freed.
fn execute_core<T>(
    plan: &Plan,
    kernels: &[KernelFn],
    inputs: &[Input],
    opts: &Options,
    finish: impl FnOnce(&mut [Option<AlignedBuf>]) -> Result<T, String>,
) -> Result<(T, Report), String> {
    plan.validate(kernels.len())?;
    if inputs.len() != plan.sources.len() {
        return Err(format!(
            "graph @{} has {} source(s) but {} input(s) were given",
            plan.graph,
            plan.sources.len(),
            inputs.len()
        ));
    }
    let threads = opts.threads.max(1);
    if threads > 1 && parallel(plan, threads) {
        pool::nudge();
    }
    let test_fault = TestFault::from_env()?;
    let nt = plan.tasks.len();
    let (bufs, live) = initial_buffers(plan, inputs)?;
    let source_addrs = (plan.sources.iter())
        .map(|s| {
            bufs[s.buffer as usize]
                .as_ref()
                .map_or(0, |b| b.ptr as usize)
        })
        .collect();
    let (pending, dependents) = plan.waits();
    let shared = Shared {
        plan,
        kernels,
        threads,
        dependents,
        state: Mutex::new(State {
            queue: VecDeque::new(),
            pending,
            chunks_left: vec![0; nt],
            bufs,
            refs: plan.buffer_refs(),
            live,
            peak: live,
            finished: 0,
            error: None,
        }),
        cv: Condvar::new(),
        signal: AtomicU64::new(0),
        t0: Instant::now(),
    };
    let faults0 = warm::minor_faults();
    shared.start();
    let helpers = if shared.parallel() { threads - 1 } else { 0 };
    let work = |w: usize| shared.work(w, opts.record, test_fault.as_ref());
    let mut events = pool::run(helpers, &work, &|e| shared.fail(e));
    let wall = shared.t0.elapsed();
    let faults = warm::minor_faults().saturating_sub(faults0);
    let mut st = shared.state.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = st.error.take() {
        return Err(e);
    }
    if st.finished != nt {
        return Err("the schedule did not finish (a dependency cycle?)".into());
    }
    let sinks = finish(&mut st.bufs)?;
    events.sort_by_key(|e: &Event| e.start);

    let report = Report {
        wall,
        peak_bytes: st.peak,
        planned_bytes: if opts.record {
            crate::memory::peak(plan).0
        } else {
            0
        },
        threads,
        task_names: plan.tasks.iter().map(|t| t.name.clone()).collect(),
        events,
        source_addrs,
        faults,
    };
    Ok((sinks, report))
}

/// The buffers that live from the start (constants and sources, filled) and their bytes.
fn initial_buffers(
    plan: &Plan,
    inputs: &[Input],
) -> Result<(Vec<Option<AlignedBuf>>, u64), String> {
    let mut bufs: Vec<Option<AlignedBuf>> = (0..plan.buffers.len()).map(|_| None).collect();
    let mut live = 0u64;
    for (i, b) in plan.buffers.iter().enumerate() {
        let buf = match &b.init {
            Init::Scratch => continue,
            Init::Const(bytes) => {
                let buf = AlignedBuf::new(b.bytes)?;
                // SAFETY: the buffer holds at least `bytes.len()` bytes (validated).
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.ptr, bytes.len()) };
                buf
            }
            Init::Source(k) => {
                let (src, t) = (&plan.sources[*k as usize], &inputs[*k as usize]);
                if t.dtype() != src.dtype || t.shape() != src.shape {
                    return Err(format!(
                        "input for source @{}: expected {}, found {}",
                        src.name,
                        crate::tensor::type_string(src.dtype, &src.shape),
                        crate::tensor::type_string(t.dtype(), t.shape())
                    ));
                }
                source_buffer(t, b.bytes)?
            }
        };
        live += b.bytes;
        bufs[i] = Some(buf);
    }
    Ok((bufs, live))
}

/// The buffer of a source bound to `input`: a copy in a fresh buffer of `bytes`, the handed-over
/// buffer itself, or the
/// borrowed memory itself.
fn source_buffer(input: &Input, bytes: u64) -> Result<AlignedBuf, String> {
    match input {
        Input::Tensor(t) => {
            let buf = AlignedBuf::new(bytes)?;
            copy_in(&t.data, buf.ptr);
            Ok(buf)
        }
        Input::Borrowed(b) => Ok(AlignedBuf {
            ptr: b.ptr as *mut u8,
            layout: Layout::new::<u8>(),
            owned: false,
        }),
        Input::Owned(o) => {
            let taken = o.buf.lock().unwrap_or_else(|e| e.into_inner()).take();
            let s = taken.ok_or_else(|| "an owned input was given to two runs".to_string())?;
            if (s.bytes as u64) < bytes {
                return Err(format!(
                    "an owned input holds {} bytes, not {bytes}",
                    s.bytes
                ));
            }
            Ok(s.buf)
        }
    }
}

/// Every sink read in place from its (computed) buffer.
fn sink_views<'p>(
    plan: &'p Plan,
    bufs: &[Option<AlignedBuf>],
) -> Result<Vec<SinkView<'p>>, String> {
    let view = |s: &'p crate::plan::Sink| {
        // A sink with no elements reads nothing: its buffer may never have been allocated
        // (a zero-size concat has no task that writes it).
        let base = match &bufs[s.view.buffer as usize] {
            Some(buf) => buf.ptr as *const u8,
            None if s.shape.contains(&0) => {
                std::ptr::NonNull::<u128>::dangling().as_ptr() as *const u8
            }
            None => return Err(format!("sink @{} was never computed", s.name)),
        };
        Ok(SinkView {
            name: &s.name,
            dtype: s.dtype,
            shape: &s.shape,
            base,
            offset: s.view.offset,
            strides: &s.view.strides,
            dims: s.dims(),
        })
    };
    plan.sinks.iter().map(view).collect()
}

fn lock<'a>(m: &'a Mutex<State>) -> MutexGuard<'a, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared<'_> {
    fn fail(&self, msg: String) {
        let mut st = lock(&self.state);
        st.error.get_or_insert(msg);
        self.notify(&st);
    }

    /// Wakes the idle workers; `_st` proves the state lock is held.
    fn notify(&self, _st: &State) {
        self.signal.fetch_add(1, Ordering::AcqRel);
        self.cv.notify_all();
    }

    fn parallel(&self) -> bool {
        parallel(self.plan, self.threads)
    }

    /// Allocates the task's buffers and queues its chunks.
    /// Makes every task that waits for nothing ready.
    fn start(&self) {
        let mut st = lock(&self.state);
        for i in 0..self.plan.tasks.len() {
            if st.pending[i] == 0 {
                self.make_ready(&mut st, i);
            }
        }
    }

    fn make_ready(&self, st: &mut State, i: usize) {
        let t = &self.plan.tasks[i];
        for a in &t.args {
            let b = a.buffer as usize;
            if st.bufs[b].is_none() {
                match AlignedBuf::new(self.plan.buffers[b].bytes) {
                    Ok(buf) => {
                        st.bufs[b] = Some(buf);
                        st.live += self.plan.buffers[b].bytes;
                        st.peak = st.peak.max(st.live);
                    }
                    Err(e) => {
                        st.error.get_or_insert(format!("task `{}`: {e}", t.name));
                        return;
                    }
                }
            }
        }
        let chunks = self.chunks(i);
        st.chunks_left[i] = chunks.len();
        st.queue.extend(chunks);
    }

    fn chunks(&self, i: usize) -> Vec<Job> {
        let t = &self.plan.tasks[i];
        let n = chunk_count(t, self.threads);
        let Some(d) = t.split.filter(|_| n > 1) else {
            return vec![Job {
                task: i,
                lo: 0,
                hi: 0,
            }];
        };
        let (lo, hi) = t.range[d as usize];
        let align = t.align.max(1);
        let blocks = (hi - lo + align - 1) / align;
        (0..n)
            .map(|k| Job {
                task: i,
                lo: (lo + blocks * k / n * align).min(hi),
                hi: (lo + blocks * (k + 1) / n * align).min(hi),
            })
            .filter(|j| j.lo < j.hi)
            .collect()
    }

    /// Runs jobs until the schedule finishes or fails. A panic outside any kernel call (in
    /// this bookkeeping: a runtime bug) still stops the run with a message instead of leaving
    /// the other workers waiting.
    fn work(&self, worker: usize, record: bool, test_fault: Option<&TestFault>) -> Vec<Event> {
        // Where the fault handler is installed: lets it report a task that overflows its stack.
        let _alt_stack = AltStack::new();
        let mut events = Vec::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            self.work_loop(worker, record, test_fault, &mut events)
        }));
        if let Err(p) = r {
            self.fail(format!(
                "worker {worker} panicked outside any task (a tapc runtime bug): {}",
                panic_message(&*p)
            ));
        }
        events
    }

    fn work_loop(
        &self,
        worker: usize,
        record: bool,
        test_fault: Option<&TestFault>,
        events: &mut Vec<Event>,
    ) {
        loop {
            let (job, bases) = {
                let mut st = lock(&self.state);
                loop {
                    if st.error.is_some() || st.finished == self.plan.tasks.len() {
                        return;
                    }
                    if let Some(j) = st.queue.pop_front() {
                        let bases: Vec<P> = self.plan.tasks[j.task]
                            .args
                            .iter()
                            .map(|a| {
                                let b = st.bufs[a.buffer as usize]
                                    .as_ref()
                                    .map_or(std::ptr::null_mut(), |b| b.ptr);
                                P(b.wrapping_offset(a.offset as isize))
                            })
                            .collect();
                        break (j, bases);
                    }
                    // Spin briefly before sleeping: the next chunk or task is usually a few
                    // microseconds away, and a futex wake-up costs more than that.
                    let seen = self.signal.load(Ordering::Acquire);
                    drop(st);
                    pool::spin_until(|| self.signal.load(Ordering::Acquire) != seen);
                    st = lock(&self.state);
                    if self.signal.load(Ordering::Acquire) == seen {
                        st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                }
            };
            let t = &self.plan.tasks[job.task];
            let mut range: Vec<i64> = t.range.iter().flat_map(|&(lo, hi)| [lo, hi]).collect();
            if let Some(d) = t.split {
                if job.lo < job.hi {
                    range[2 * d as usize] = job.lo;
                    range[2 * d as usize + 1] = job.hi;
                }
            }
            let ptrs: Vec<*mut u8> = bases.iter().map(|p| p.0).collect();
            let kernel = self.kernels[t.kernel as usize];
            let start = self.t0.elapsed();
            let result = {
                // The running task, for the fault handler (cleared on return and on unwind).
                let _running = Running::enter(&t.name, &range);
                catch_unwind(AssertUnwindSafe(|| {
                    if let Some(f) = test_fault {
                        f.trigger(&t.name);
                    }
                    // SAFETY: the plan was validated and the kernel was compiled for exactly
                    // these views; the dependencies guarantee its inputs are complete and
                    // nobody else writes its outputs' regions.
                    unsafe { kernel(ptrs.as_ptr(), range.as_ptr()) }
                }))
            };
            let duration = self.t0.elapsed() - start;
            if record {
                events.push(Event {
                    task: job.task,
                    worker,
                    start,
                    duration,
                });
            }
            match result {
                Ok(0) => {}
                Ok(code) => {
                    self.fail(format!(
                        "{} failed: {}",
                        describe(&t.name, &range),
                        match code {
                            1 => "could not allocate its temporaries".to_string(),
                            2 => crate::fault::take_gather_fault()
                                .unwrap_or_else(|| "a gathered index is out of range".into()),
                            c => format!("kernel returned status {c}"),
                        }
                    ));
                    return;
                }
                Err(p) => {
                    self.fail(format!(
                        "{} panicked: {}",
                        describe(&t.name, &range),
                        panic_message(&*p)
                    ));
                    return;
                }
            }
            let mut st = lock(&self.state);
            st.chunks_left[job.task] -= 1;
            if st.chunks_left[job.task] == 0 {
                self.complete(&mut st, job.task);
            }
            self.notify(&st);
        }
    }

    fn complete(&self, st: &mut State, i: usize) {
        st.finished += 1;
        for b in self.plan.tasks[i].buffers() {
            let b = b as usize;
            st.refs[b] -= 1;
            if st.refs[b] == 0 && st.bufs[b].take().is_some() {
                st.live -= self.plan.buffers[b].bytes;
            }
        }
        for &d in &self.dependents[i] {
            st.pending[d] -= 1;
            if st.pending[d] == 0 {
                self.make_ready(st, d);
            }
        }
    }
}

/// Whether more than one of `threads` workers can help run `plan`: some task splits, or
/// several tasks add up to more than one chunk's work.
fn parallel(plan: &Plan, threads: usize) -> bool {
    let tasks = &plan.tasks;
    tasks.iter().any(|t| chunk_count(t, threads) > 1)
        || (tasks.len() > 1 && tasks.iter().map(|t| t.work).sum::<f64>() >= 2.0 * MIN_CHUNK_WORK)
}

/// How many jobs task `t` runs as on `threads` workers: up to two per thread (so one slow
/// chunk does not idle the other thread), never more than its split dimension has aligned
/// blocks, and none below [`MIN_CHUNK_WORK`].
pub fn chunk_count(t: &crate::plan::Task, threads: usize) -> i64 {
    let Some(d) = t.split else { return 1 };
    let (lo, hi) = t.range[d as usize];
    let align = t.align.max(1);
    let blocks = (hi - lo + align - 1) / align;
    let by_work = (t.work / MIN_CHUNK_WORK) as i64;
    if threads <= 1 {
        return 1;
    }
    (2 * threads as i64).min(blocks).min(by_work).max(1)
}

pub(crate) fn copy_in(data: &Data, dst: *mut u8) {
    // SAFETY: `dst` holds at least the tensor's bytes (checked against the plan).
    // A bool is stored as one byte 0 or 1; every other element is stored as its own bytes.
    unsafe {
        match data {
            Data::Bool(v) => {
                for (k, &b) in v.iter().enumerate() {
                    *dst.add(k) = u8::from(b);
                }
            }
            other => crate::with_data!(other, v => {
                std::ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), dst, std::mem::size_of_val(&v[..]))
            }),
        }
    }
}

/// Visits the element offsets of a view in C order, a contiguous innermost run at a time:
/// `f(offset, run length, step)`, in elements.
pub(crate) fn runs(
    n: usize,
    shape: &[usize],
    offset: i64,
    strides: &[i64],
    mut f: impl FnMut(i64, usize, i64),
) {
    if n == 0 {
        return;
    }
    let r = shape.len();
    let (inner, step) = if r == 0 {
        (1, 1)
    } else {
        (shape[r - 1], strides[r - 1])
    };
    let outer = &shape[..r.saturating_sub(1)];
    let mut idx = vec![0usize; outer.len()];
    let mut off = offset;
    loop {
        f(off, inner, step);
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < outer[d] {
                break;
            }
            off -= strides[d] * outer[d] as i64;
            idx[d] = 0;
        }
    }
}

/// Gathers the strided view into a C-order buffer of `n` elements; `Err(bytes)` when that
/// buffer cannot be allocated.
fn copy_out(
    dtype: DType,
    n: usize,
    shape: &[usize],
    base: *const u8,
    offset: i64,
    strides: &[i64],
) -> Result<Data, u64> {
    fn gather<T: Copy>(
        n: usize,
        shape: &[usize],
        base: *const T,
        offset: i64,
        strides: &[i64],
    ) -> Result<Vec<T>, u64> {
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| (n as u64).saturating_mul(std::mem::size_of::<T>() as u64))?;
        runs(n, shape, offset, strides, |off, len, step| {
            // SAFETY: the plan's validation checked that every offset of the view is in
            // its buffer.
            unsafe {
                let p = base.offset(off as isize);
                if step == 1 {
                    out.extend_from_slice(std::slice::from_raw_parts(p, len));
                } else {
                    out.extend((0..len).map(|k| *p.offset(k as isize * step as isize)));
                }
            }
        });
        Ok(out)
    }
    Ok(match dtype {
        DType::Bool => {
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| n as u64)?;
            runs(n, shape, offset, strides, |off, len, step| {
                // SAFETY: as above.
                unsafe {
                    let p = base.offset(off as isize);
                    v.extend((0..len).map(|k| *p.offset(k as isize * step as isize) != 0));
                }
            });
            Data::Bool(v)
        }
        // Every bit pattern of the other element types is a value of the type.
        d => crate::data_of!(d, T => gather(n, shape, base as *const T, offset, strides)?),
    })
}
