//! The compiled schedule of one graph: buffers, source and sink bindings, and the DAG of tasks
//! that the [`crate::exec`] executor runs.
//!
//! `tapc` builds a [`Plan`] at compile time and embeds it in the program as bytes
//! ([`Plan::encode`]); the runtime decodes it ([`Plan::decode`]) and checks it
//! ([`Plan::validate`]) before running anything, so a corrupt or mismatched plan is an error
//! message, never a crash. The encoding is a small versioned little-endian format private to
//! tapc (the compiler and the runtime library always come from the same build), sealed by a
//! 64-bit FNV-1a checksum of all the bytes before it: any single changed byte, and nearly any
//! other damage, is "corrupt plan: checksum mismatch" before a field is read.
//!
//! The two integrity checks, also for other runtimes (the distributed one) that receive plans:
//! - [`Plan::decode`] verifies the magic, the version and the checksum, then reads the fields
//!   with every count bounded by the bytes left;
//! - [`Plan::validate`] bounds everything the plan says against what it describes, with
//!   overflow-checked arithmetic: kernel, buffer, source and task indices; each task argument's
//!   byte extent (`lo..hi` around its offset) inside its buffer; ranges, split dimensions and
//!   alignments; sources and sink views inside their buffers; constants inside theirs; the
//!   total of all buffers addressable. What it cannot see (the strides compiled into a kernel)
//!   is covered by the checksum.
//!
//! Every task calls one compiled kernel with the ABI [`crate::exec::KernelFn`]:
//! `i32 kernel(i8** bases, i64* range)` where `bases[k]` points at element 0 of the task's
//! `k`-th tensor view and `range` holds `lo, hi` per index dimension (global coordinates).
//! Strides and shapes are compiled into the kernel.

pub use crate::mpi::dist::{Dist, Leaf, ReduceOp, Reduction, Replica, Transfer, Window};
use crate::tensor::DType;

const MAGIC: &[u8; 8] = b"TAPCPLAN";
const VERSION: u32 = 7;
/// Bytes of the checksum that ends an encoded plan.
const SUM: usize = 8;

/// 64-bit FNV-1a: every step is a bijection of the state, so one changed byte always changes
/// the result.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The bytes `[lo, hi)` relative to element 0 that a view of `shape` with element `strides`
/// and `elem`-byte elements touches (`(0, 0)` when it is empty); `None` on overflow.
pub fn extent(shape: &[i64], strides: &[i64], elem: usize) -> Option<(i64, i64)> {
    if shape.len() != strides.len() || shape.iter().any(|&n| n < 0) {
        return None;
    }
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let (mut lo, mut hi) = (0i64, 0i64);
    for (&n, &st) in shape.iter().zip(strides) {
        let ext = st.checked_mul(n - 1)?;
        lo = lo.checked_add(ext.min(0))?;
        hi = hi.checked_add(ext.max(0))?;
    }
    let elem = i64::try_from(elem).ok()?;
    Some((lo.checked_mul(elem)?, hi.checked_add(1)?.checked_mul(elem)?))
}

/// A whole schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The graph's name (for messages).
    pub graph: String,
    pub buffers: Vec<Buffer>,
    /// In declaration order (the order of positional inputs).
    pub sources: Vec<Source>,
    /// In an order compatible with the dependencies (every dep precedes its task).
    pub tasks: Vec<Task>,
    /// In the order the graph declares them.
    pub sinks: Vec<Sink>,
    /// Placement and transfers of a distributed (`--mpi`) plan; empty otherwise.
    pub dist: Dist,
    /// The graph's state, `(source, sink)` by index: over `--steps N`, the source takes the
    /// sink's value of the step before (docs/teg.md §8, `state` and `update`).
    pub states: Vec<(u32, u32)>,
}

/// One allocation, 64-byte aligned.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub bytes: u64,
    pub init: Init,
}

/// How a buffer gets its contents.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// Written by tasks; allocated when its first task is ready, freed after its last use.
    Scratch,
    /// Holds source `k`'s tensor (C order).
    Source(u32),
    /// Constant bytes, live for the whole run.
    Const(Vec<u8>),
}

/// A source tensor the program reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub buffer: u32,
    /// A *source window* (an `--mpi` plan's dense copy of a box of another source, read from
    /// that source's file; `shape` is the box's): see [`SourceWindow`]. `None`: a declared
    /// source, bound to an input.
    pub window: Option<SourceWindow>,
}

/// The box of source `of` (a declared source, before every window in the plan's list) that a
/// source window holds, dense in C order: its first element is at `origin` and its shape is
/// the window's. A kernel reading a column block of a source reads the window instead, with
/// the window's own strides, so a rank holds only the block (issue 17). A window is never
/// bound to an input of its own and has no state.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceWindow {
    pub of: u32,
    pub origin: Vec<usize>,
}

impl Source {
    /// The declared source whose file this source reads: itself, or a window's `of`.
    pub fn file(&self, k: usize) -> usize {
        self.window.as_ref().map_or(k, |w| w.of as usize)
    }
}

/// A tensor view passed to a kernel: its element 0 lives at `offset` bytes into `buffer`, and
/// the kernel touches the bytes `offset + lo .. offset + hi` of it ([`extent`] of the view).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg {
    pub buffer: u32,
    pub offset: i64,
    pub lo: i64,
    pub hi: i64,
}

/// One node of the DAG: a kernel call over an index box, which the executor may split into
/// chunks along `split`.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// What it computes, e.g. `apply @linear -> %h` (for `--time`, traces and errors).
    pub name: String,
    pub kernel: u32,
    pub args: Vec<Arg>,
    /// Half-open `[lo, hi)` per index dimension.
    pub range: Vec<(i64, i64)>,
    /// A dimension the task may be split along (chunks are independent).
    pub split: Option<u32>,
    /// Chunk boundaries are multiples of this (relative to `lo`) when possible.
    pub align: i64,
    /// Estimated operations; small tasks are never split.
    pub work: f64,
    /// Tasks that must finish first.
    pub deps: Vec<u32>,
}

/// A strided view of a buffer, in elements.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub buffer: u32,
    pub offset: i64,
    pub strides: Vec<i64>,
}

/// A sink: the graph's output `name`, read from `view` once `deps` have finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Sink {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub view: View,
    pub deps: Vec<u32>,
    /// The view's own shape when it is not `shape`: a *blocked* sink (an `--mpi` plan's grid
    /// of blocks, each dense in the buffer: `[R, h, C, w]` for a `[R·h, C·w]` sink), whose C
    /// order is the sink's. `None`: the view has the sink's shape.
    pub blocks: Option<Vec<usize>>,
}

impl Sink {
    /// The shape the view is walked in (C order: the file's order).
    pub fn dims(&self) -> &[usize] {
        self.blocks.as_deref().unwrap_or(&self.shape)
    }
}

impl Task {
    /// The distinct buffers the task touches.
    pub fn buffers(&self) -> Vec<u32> {
        let mut seen: Vec<u32> = self.args.iter().map(|a| a.buffer).collect();
        seen.sort_unstable();
        seen.dedup();
        seen
    }
}

impl Plan {
    /// Per buffer, how many tasks and sinks use it: it can be freed after the last.
    pub fn buffer_refs(&self) -> Vec<usize> {
        let mut refs = vec![0usize; self.buffers.len()];
        for b in self.tasks.iter().flat_map(Task::buffers) {
            refs[b as usize] += 1;
        }
        for s in &self.sinks {
            refs[s.view.buffer as usize] += 1;
        }
        refs
    }

    /// Per task, how many distinct tasks it waits for, and the tasks that wait for it.
    pub fn waits(&self) -> (Vec<usize>, Vec<Vec<usize>>) {
        let mut pending = Vec::with_capacity(self.tasks.len());
        let mut dependents = vec![Vec::new(); self.tasks.len()];
        for (i, t) in self.tasks.iter().enumerate() {
            let mut deps = t.deps.clone();
            deps.sort_unstable();
            deps.dedup();
            pending.push(deps.len());
            for d in deps {
                dependents[d as usize].push(i);
            }
        }
        (pending, dependents)
    }

    /// The plan as bytes (see [`Plan::decode`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(Vec::new());
        w.0.extend_from_slice(MAGIC);
        w.u32(VERSION);
        w.str(&self.graph);
        w.u32(self.buffers.len() as u32);
        for b in &self.buffers {
            w.u64(b.bytes);
            match &b.init {
                Init::Scratch => w.u32(0),
                Init::Source(k) => {
                    w.u32(1);
                    w.u32(*k);
                }
                Init::Const(bytes) => {
                    w.u32(2);
                    w.bytes(bytes);
                }
            }
        }
        w.u32(self.sources.len() as u32);
        for s in &self.sources {
            w.str(&s.name);
            w.dtype(s.dtype);
            w.shape(&s.shape);
            w.u32(s.buffer);
            match &s.window {
                None => w.u32(u32::MAX),
                Some(win) => {
                    w.u32(win.of);
                    w.shape(&win.origin);
                }
            }
        }
        w.u32(self.tasks.len() as u32);
        for t in &self.tasks {
            w.str(&t.name);
            w.u32(t.kernel);
            w.u32(t.args.len() as u32);
            for a in &t.args {
                w.u32(a.buffer);
                w.i64(a.offset);
                w.i64(a.lo);
                w.i64(a.hi);
            }
            w.u32(t.range.len() as u32);
            for &(lo, hi) in &t.range {
                w.i64(lo);
                w.i64(hi);
            }
            w.u32(t.split.map_or(u32::MAX, |d| d));
            w.i64(t.align);
            w.u64(t.work.to_bits());
            w.u32s(&t.deps);
        }
        w.u32(self.sinks.len() as u32);
        for s in &self.sinks {
            w.str(&s.name);
            w.dtype(s.dtype);
            w.shape(&s.shape);
            w.u32(s.view.buffer);
            w.i64(s.view.offset);
            w.u32(s.view.strides.len() as u32);
            for &x in &s.view.strides {
                w.i64(x);
            }
            w.u32s(&s.deps);
            w.u32(u32::from(s.blocks.is_some()));
            if let Some(b) = &s.blocks {
                w.shape(b);
            }
        }
        self.encode_dist(&mut w);
        w.u32(self.states.len() as u32);
        for &(source, sink) in &self.states {
            w.u32(source);
            w.u32(sink);
        }
        let sum = checksum(&w.0);
        w.u64(sum);
        w.0
    }

    /// The distributed part of [`Plan::encode`]: nodes, transfers, broadcasts, windows,
    /// replicas and reductions.
    fn encode_dist(&self, w: &mut W) {
        w.u32s(&self.dist.nodes);
        w.u32(self.dist.transfers.len() as u32);
        for t in &self.dist.transfers {
            w.str(&t.value);
            w.u32s(&[t.from, t.to, t.buffer, t.elem]);
            w.runs(&t.runs);
            w.u32(t.after.unwrap_or(u32::MAX));
            w.u32(t.before.unwrap_or(u32::MAX));
        }
        w.u32(self.dist.broadcasts.len() as u32);
        for g in &self.dist.broadcasts {
            w.u32s(g);
        }
        w.u32(self.dist.windows.len() as u32);
        for x in &self.dist.windows {
            w.u32s(&[x.node, x.buffer, x.elem]);
            w.runs(&x.runs);
        }
        w.u32(self.dist.replicas.len() as u32);
        for r in &self.dist.replicas {
            w.u32s(&[r.task, r.node]);
            w.runs(&[r.rows]);
        }
        w.u32(self.dist.reductions.len() as u32);
        for g in &self.dist.reductions {
            w.str(&g.value);
            w.u32(ReduceOp::ALL.iter().position(|&o| o == g.op).unwrap_or(0) as u32);
            w.dtype(g.dtype);
            w.u32(g.leaves.len() as u32);
            for l in &g.leaves {
                w.u32s(&[l.task, l.buffer]);
                w.runs(&l.runs);
            }
            w.u32s(&g.combines);
            w.u32(g.buffer);
            w.runs(&g.runs);
            w.u32s(&g.targets);
            w.u32(g.scatter.len() as u32);
            for part in &g.scatter {
                w.runs(part);
            }
        }
    }

    /// Decodes bytes made by [`Plan::encode`], verifying their checksum first (then
    /// [`Plan::validate`] before running it).
    pub fn decode(bytes: &[u8]) -> Result<Plan, String> {
        let mut r = R::open(bytes)?;
        let graph = r.str()?;
        let buffers = r.list(R::buffer)?;
        let sources = r.list(R::source)?;
        let tasks = r.list(R::task)?;
        let sinks = r.list(R::sink)?;
        let dist = r.dist()?;
        let states = r.list(R::state)?;
        if r.at != r.b.len() {
            return Err("corrupt plan: trailing bytes".into());
        }
        Ok(Plan {
            graph,
            buffers,
            sources,
            tasks,
            sinks,
            dist,
            states,
        })
    }

    /// Checks every index and that every view stays inside its buffer, so that running the
    /// plan with `kernels` kernels cannot touch memory it does not own (given correct kernels).
    pub fn validate(&self, kernels: usize) -> Result<(), String> {
        let bad = |what: String| Err(format!("corrupt plan: {what}"));
        let mut total = 0u64;
        for (i, b) in self.buffers.iter().enumerate() {
            total = match total.checked_add(b.bytes) {
                Some(t) if t <= isize::MAX as u64 => t,
                _ => return bad(format!("buffer {i} makes the buffers larger than memory")),
            };
            match &b.init {
                Init::Source(k) if *k as usize >= self.sources.len() => {
                    return bad(format!("buffer {i} names source {k}"))
                }
                Init::Const(c) if c.len() as u64 > b.bytes => {
                    return bad(format!("buffer {i} is smaller than its contents"))
                }
                _ => {}
            }
        }
        for (k, s) in self.sources.iter().enumerate() {
            let n = crate::tensor::checked_numel(&s.shape)
                .and_then(|n| n.checked_mul(s.dtype.size_bytes()));
            match (self.buffers.get(s.buffer as usize), n) {
                (Some(b), Some(n)) if n as u64 <= b.bytes && b.init == Init::Source(k as u32) => {}
                _ => return bad(format!("source @{} has no fitting buffer", s.name)),
            }
            if !self.window_fits(k, s) {
                return bad(format!(
                    "source window {k} (@{}) is not a box of a declared source before it",
                    s.name
                ));
            }
        }
        for (i, t) in self.tasks.iter().enumerate() {
            if t.kernel as usize >= kernels {
                return bad(format!("task {i} calls kernel {} of {kernels}", t.kernel));
            }
            for a in &t.args {
                let Some(b) = self.buffers.get(a.buffer as usize) else {
                    return bad(format!("task {i} names a missing buffer"));
                };
                let inside = a.lo <= a.hi
                    && a.offset.checked_add(a.lo).is_some_and(|lo| lo >= 0)
                    && a.offset
                        .checked_add(a.hi)
                        .is_some_and(|hi| hi as u64 <= b.bytes);
                if !inside {
                    return bad(format!("task {i} reaches outside buffer {}", a.buffer));
                }
            }
            if t.deps.iter().any(|&d| d as usize >= i) {
                return bad(format!("task {i} depends on a later task"));
            }
            if let Some(d) = t.split {
                if d as usize >= t.range.len() {
                    return bad(format!("task {i} splits a missing dimension"));
                }
            }
            if t.align < 1 || !t.work.is_finite() || t.work < 0.0 {
                return bad(format!("task {i} has a bad alignment or work estimate"));
            }
            if t.range.iter().any(|&(lo, hi)| {
                lo > hi
                    || hi
                        .checked_sub(lo)
                        .is_none_or(|n| n.checked_add(t.align).is_none())
            }) {
                return bad(format!("task {i} has an inverted or unbounded range"));
            }
        }
        for s in &self.sinks {
            let Some(b) = self.buffers.get(s.view.buffer as usize) else {
                return bad(format!("sink @{} names a missing buffer", s.name));
            };
            let same = s.blocks.as_ref().is_none_or(|b| {
                crate::tensor::checked_numel(b) == crate::tensor::checked_numel(&s.shape)
            });
            if s.view.strides.len() != s.dims().len()
                || !same
                || s.deps.iter().any(|&d| d as usize >= self.tasks.len())
            {
                return bad(format!("sink @{} is malformed", s.name));
            }
            let shape: Option<Vec<i64>> = s.dims().iter().map(|&d| i64::try_from(d).ok()).collect();
            let inside = crate::tensor::checked_numel(&s.shape)
                .and_then(|n| n.checked_mul(s.dtype.size_bytes()))
                .and(shape)
                .and_then(|shape| extent(&shape, &s.view.strides, s.dtype.size_bytes()))
                .and_then(|(lo, hi)| {
                    let at = s.view.offset.checked_mul(s.dtype.size_bytes() as i64)?;
                    Some((at.checked_add(lo)?, at.checked_add(hi)?, lo == hi))
                })
                .is_some_and(|(lo, hi, empty)| empty || (lo >= 0 && hi as u64 <= b.bytes));
            if !inside {
                return bad(format!("sink @{} reads outside its buffer", s.name));
            }
        }
        self.validate_states()?;
        let sizes: Vec<u64> = self.buffers.iter().map(|b| b.bytes).collect();
        self.dist.validate(self.tasks.len(), &sizes)
    }

    /// Whether source `k`, if a window, is a box of a declared source listed before every
    /// window, of its dtype and rank; and a declared source is not listed after a window.
    fn window_fits(&self, k: usize, s: &Source) -> bool {
        let Some(w) = &s.window else {
            return self.sources[..k].iter().all(|p| p.window.is_none());
        };
        let Some(of) = self.sources.get(w.of as usize) else {
            return false;
        };
        let inside = (w.origin.iter().zip(&s.shape).zip(&of.shape))
            .all(|((&o, &n), &m)| o.checked_add(n).is_some_and(|e| e <= m));
        of.window.is_none()
            && (w.of as usize) < k
            && of.dtype == s.dtype
            && w.origin.len() == of.shape.len()
            && s.shape.len() == of.shape.len()
            && inside
            && !self.states.iter().any(|&(j, _)| j as usize == k)
    }

    /// Each state pairs a source and a sink of one type, each in at most one pair.
    fn validate_states(&self) -> Result<(), String> {
        for (i, &(k, j)) in self.states.iter().enumerate() {
            let (Some(src), Some(sink)) =
                (self.sources.get(k as usize), self.sinks.get(j as usize))
            else {
                return Err(format!(
                    "corrupt plan: state {i} names source {k} and sink {j}"
                ));
            };
            let twice = self.states[..i].iter().any(|&(a, b)| a == k || b == j);
            if src.dtype != sink.dtype || src.shape != sink.shape || twice {
                return Err(format!(
                    "corrupt plan: state {i} (@{}) is not one source and its update",
                    src.name
                ));
            }
        }
        Ok(())
    }

    /// The source index that state sink `j` feeds, if it is an update.
    pub fn state_of_sink(&self, j: usize) -> Option<usize> {
        (self.states.iter())
            .find(|&&(_, s)| s as usize == j)
            .map(|&(k, _)| k as usize)
    }
}

struct W(Vec<u8>);

impl W {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn dtype(&mut self, d: DType) {
        self.u32(DType::ALL.iter().position(|x| *x == d).unwrap_or(0) as u32);
    }
    fn shape(&mut self, s: &[usize]) {
        self.u32(s.len() as u32);
        for &d in s {
            self.u64(d as u64);
        }
    }
    fn runs(&mut self, runs: &[(i64, i64)]) {
        self.u32(runs.len() as u32);
        for &(a, n) in runs {
            self.i64(a);
            self.i64(n);
        }
    }
    fn u32s(&mut self, v: &[u32]) {
        self.u32(v.len() as u32);
        for &x in v {
            self.u32(x);
        }
    }
}

struct R<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> R<'a> {
    /// A reader of the body of `bytes` after its magic and version, once they and the
    /// checksum are checked.
    fn open(bytes: &'a [u8]) -> Result<R<'a>, String> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err("the embedded schedule is not a tapc plan".into());
        }
        if bytes.len() < MAGIC.len() + 4 + SUM {
            return Err("corrupt plan: truncated".into());
        }
        let (body, sum) = bytes.split_at(bytes.len() - SUM);
        let mut r = R { b: body, at: 0 };
        if r.take(8)? != MAGIC {
            return Err("the embedded schedule is not a tapc plan".into());
        }
        let v = r.u32()?;
        if v != VERSION {
            return Err(format!(
                "the embedded schedule has format version {v} but this runtime reads version {VERSION}: rebuild the program with the matching tapc"
            ));
        }
        let mut want = [0u8; SUM];
        want.copy_from_slice(sum);
        if checksum(body) != u64::from_le_bytes(want) {
            return Err(
                "corrupt plan: checksum mismatch (the program file is damaged; rebuild it with tapc)"
                    .into(),
            );
        }
        Ok(r)
    }

    /// A count, then that many items read by `item`.
    fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let n = self.count()?;
        (0..n).map(|_| item(self)).collect()
    }

    fn buffer(&mut self) -> Result<Buffer, String> {
        let bytes = self.u64()?;
        let init = match self.u32()? {
            0 => Init::Scratch,
            1 => Init::Source(self.u32()?),
            2 => Init::Const(self.bytes()?),
            k => return Err(format!("corrupt plan: buffer kind {k}")),
        };
        Ok(Buffer { bytes, init })
    }

    fn source(&mut self) -> Result<Source, String> {
        Ok(Source {
            name: self.str()?,
            dtype: self.dtype()?,
            shape: self.shape()?,
            buffer: self.u32()?,
            window: match self.u32()? {
                u32::MAX => None,
                of => Some(SourceWindow {
                    of,
                    origin: self.shape()?,
                }),
            },
        })
    }

    fn arg(&mut self) -> Result<Arg, String> {
        Ok(Arg {
            buffer: self.u32()?,
            offset: self.i64()?,
            lo: self.i64()?,
            hi: self.i64()?,
        })
    }

    fn task(&mut self) -> Result<Task, String> {
        Ok(Task {
            name: self.str()?,
            kernel: self.u32()?,
            args: self.list(R::arg)?,
            // `(lo, hi)` pairs, encoded as runs are.
            range: self.runs()?,
            split: self.optional()?,
            align: self.i64()?,
            work: f64::from_bits(self.u64()?),
            deps: self.u32s()?,
        })
    }

    fn sink(&mut self) -> Result<Sink, String> {
        Ok(Sink {
            name: self.str()?,
            dtype: self.dtype()?,
            shape: self.shape()?,
            view: View {
                buffer: self.u32()?,
                offset: self.i64()?,
                strides: self.list(R::i64)?,
            },
            deps: self.u32s()?,
            blocks: match self.u32()? {
                0 => None,
                _ => Some(self.shape()?),
            },
        })
    }

    fn state(&mut self) -> Result<(u32, u32), String> {
        Ok((self.u32()?, self.u32()?))
    }

    fn dist(&mut self) -> Result<Dist, String> {
        Ok(Dist {
            nodes: self.u32s()?,
            transfers: self.list(R::transfer)?,
            broadcasts: self.list(R::u32s)?,
            windows: self.list(R::window)?,
            replicas: self.list(R::replica)?,
            reductions: self.list(R::reduction)?,
        })
    }

    fn reduction(&mut self) -> Result<Reduction, String> {
        let value = self.str()?;
        let op = (ReduceOp::ALL.get(self.u32()? as usize).copied())
            .ok_or("corrupt plan: bad reduction op")?;
        let dtype = self.dtype()?;
        let leaves = self.list(|r| {
            let [task, buffer] = r.u32s()?[..] else {
                return Err("corrupt plan: bad reduction leaf".into());
            };
            Ok(Leaf {
                task,
                buffer,
                runs: r.runs()?,
            })
        })?;
        Ok(Reduction {
            value,
            op,
            dtype,
            leaves,
            combines: self.u32s()?,
            buffer: self.u32()?,
            runs: self.runs()?,
            targets: self.u32s()?,
            scatter: self.list(R::runs)?,
        })
    }

    fn replica(&mut self) -> Result<Replica, String> {
        let (ids, rows) = (self.u32s()?, self.runs()?);
        let (&[task, node], &[rows]) = (&ids[..], &rows[..]) else {
            return Err("corrupt plan: bad replica".into());
        };
        Ok(Replica { task, node, rows })
    }

    fn transfer(&mut self) -> Result<Transfer, String> {
        let value = self.str()?;
        let [from, to, buffer, elem] = self.u32s()?[..] else {
            return Err("corrupt plan: bad transfer".into());
        };
        Ok(Transfer {
            value,
            from,
            to,
            buffer,
            elem,
            runs: self.runs()?,
            after: self.optional()?,
            before: self.optional()?,
        })
    }

    fn window(&mut self) -> Result<Window, String> {
        let [node, buffer, elem] = self.u32s()?[..] else {
            return Err("corrupt plan: bad input window".into());
        };
        Ok(Window {
            node,
            buffer,
            elem,
            runs: self.runs()?,
        })
    }

    /// A `u32` where `u32::MAX` means none.
    fn optional(&mut self) -> Result<Option<u32>, String> {
        Ok(Some(self.u32()?).filter(|&v| v != u32::MAX))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("corrupt plan: truncated")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(self.u64()? as i64)
    }
    /// A element count, bounded by the bytes left so corrupt counts cannot exhaust memory.
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > self.b.len() - self.at {
            return Err("corrupt plan: bad count".into());
        }
        Ok(n)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| "corrupt plan: bad length")?;
        Ok(self.take(n)?.to_vec())
    }
    fn str(&mut self) -> Result<String, String> {
        String::from_utf8(self.bytes()?).map_err(|_| "corrupt plan: bad text".into())
    }
    fn dtype(&mut self) -> Result<DType, String> {
        let k = self.u32()? as usize;
        DType::ALL
            .get(k)
            .copied()
            .ok_or_else(|| "corrupt plan: bad dtype".into())
    }
    fn shape(&mut self) -> Result<Vec<usize>, String> {
        self.list(|r| usize::try_from(r.u64()?).map_err(|_| "corrupt plan: bad shape".into()))
    }
    /// `(start, length)` pairs, after their count.
    fn runs(&mut self) -> Result<Vec<(i64, i64)>, String> {
        self.list(|r| Ok((r.i64()?, r.i64()?)))
    }
    fn u32s(&mut self) -> Result<Vec<u32>, String> {
        self.list(R::u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Plan {
        Plan {
            graph: "g".into(),
            buffers: vec![
                Buffer {
                    bytes: 24,
                    init: Init::Source(0),
                },
                Buffer {
                    bytes: 4,
                    init: Init::Const(vec![0, 0, 128, 63]),
                },
                Buffer {
                    bytes: 24,
                    init: Init::Scratch,
                },
            ],
            sources: vec![Source {
                name: "x".into(),
                dtype: DType::F32,
                shape: vec![2, 3],
                buffer: 0,
                window: None,
            }],
            tasks: vec![Task {
                name: "apply @f -> %y".into(),
                kernel: 0,
                args: vec![
                    Arg {
                        buffer: 0,
                        offset: 0,
                        lo: 0,
                        hi: 24,
                    },
                    Arg {
                        buffer: 2,
                        offset: 0,
                        lo: 0,
                        hi: 24,
                    },
                ],
                range: vec![(0, 2), (0, 3)],
                split: Some(0),
                align: 1,
                work: 6.0,
                deps: vec![],
            }],
            sinks: vec![Sink {
                name: "y".into(),
                dtype: DType::F32,
                shape: vec![3, 2],
                view: View {
                    buffer: 2,
                    offset: 0,
                    strides: vec![1, 3],
                },
                deps: vec![0],
                blocks: None,
            }],
            dist: Dist::default(),
            states: vec![],
        }
    }

    #[test]
    fn round_trips_and_validates() {
        let p = sample();
        let bytes = p.encode();
        assert_eq!(Plan::decode(&bytes).unwrap(), p);
        p.validate(1).unwrap();
        assert!(p.validate(0).unwrap_err().contains("kernel 0"));
    }

    #[test]
    fn distributed_section_round_trips_and_validates() {
        let mut p = sample();
        p.dist = Dist {
            nodes: vec![1],
            transfers: vec![Transfer {
                value: "%y".into(),
                from: 1,
                to: 0,
                buffer: 2,
                elem: 4,
                runs: vec![(0, 6)],
                after: Some(0),
                before: None,
            }],
            windows: vec![Window {
                node: 1,
                buffer: 0,
                elem: 4,
                runs: vec![(0, 2)],
            }],
            broadcasts: vec![],
            replicas: vec![Replica {
                task: 0,
                node: 2,
                rows: (0, 1),
            }],
            reductions: vec![],
        };
        assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
        p.validate(1).unwrap();
        p.dist.replicas.push(Replica {
            task: 1,
            node: 0,
            rows: (0, 1),
        });
        assert!(p.validate(1).unwrap_err().contains("replica"));
        p.dist.replicas.pop();
        // A broadcast: the same data to two nodes.
        let t = Transfer {
            before: Some(0),
            ..p.dist.transfers[0].clone()
        };
        p.dist.transfers = vec![t.clone(), Transfer { to: 2, ..t }];
        p.dist.broadcasts = vec![vec![0, 1]];
        assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
        p.validate(1).unwrap();
        p.dist.transfers[1].runs = vec![(0, 5)];
        assert!(p.validate(1).unwrap_err().contains("broadcast 0"));
        p.dist.transfers[0].runs = vec![(4, 3)];
        assert!(p.validate(1).unwrap_err().contains("outside its buffer"));
        p.dist.broadcasts.clear();
        p.dist.transfers.truncate(1);
        p.dist.transfers[0].runs = vec![(0, 6)];
        // A reduction group: partials of task 0 on node 1 and of task 0 again (one task
        // here), combined by task 0, read on node 1.
        let leaf = Leaf {
            task: 0,
            buffer: 0,
            runs: vec![(0, 6)],
        };
        p.dist.reductions = vec![Reduction {
            value: "%y".into(),
            op: ReduceOp::Max,
            dtype: DType::F32,
            leaves: vec![leaf.clone(), Leaf { buffer: 2, ..leaf }],
            combines: vec![0],
            buffer: 2,
            runs: vec![(0, 6)],
            targets: vec![1],
            scatter: vec![],
        }];
        assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
        p.validate(1).unwrap();
        p.dist.reductions[0].targets = vec![0];
        assert!(p.validate(1).unwrap_err().contains("reduction group 0"));
        p.dist.reductions[0].targets = vec![1];
        p.dist.reductions[0].dtype = DType::BF16;
        assert!(p.validate(1).unwrap_err().contains("MPI cannot reduce"));
        p.dist.reductions[0].dtype = DType::F32;
        // A reduce-scatter (its one target's part): parts leaving elements 2..4 to nobody,
        // overlapping, or more parts than targets are refused; the whole result passes.
        p.dist.reductions[0].scatter = vec![vec![(0, 2), (4, 2)]];
        assert!(p.validate(1).unwrap_err().contains("each once"));
        p.dist.reductions[0].scatter = vec![vec![(0, 6)]];
        assert_eq!(p.dist.reductions[0].kind().name(), "reduce-scatter");
        assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
        p.validate(1).unwrap();
        p.dist.reductions[0].scatter = vec![vec![(0, 4), (3, 3)]];
        assert!(p.validate(1).unwrap_err().contains("each once"));
        p.dist.reductions[0].scatter = vec![vec![(0, 6)], vec![(0, 1)]];
        assert!(p.validate(1).unwrap_err().contains("each once"));
    }

    #[test]
    fn a_reduce_scatter_packs_each_ranks_part_from_a_leaf_and_counts_its_bytes() {
        use crate::mpi::group::remap;
        // The result is rows 1 and 3 of a 4×5 matrix (a run each), a leaf a dense 2×5 one:
        // the result's elements 8..10 and 15 are the leaf's 3..5 and 5; 9..12 leaves it.
        let (from, to) = (vec![(5, 5), (15, 5)], vec![(0, 5), (5, 5)]);
        assert_eq!(
            remap(&from, &to, &[(8, 2), (15, 1)]),
            Some(vec![(3, 2), (5, 1)])
        );
        assert_eq!(remap(&from, &to, &[(7, 3)]), Some(vec![(2, 3)]));
        assert_eq!(remap(&from, &to, &[(9, 3)]), None);
        // 3 ranks, a 40-byte result, parts of 16, 8 and 16 bytes; rank 0 the root.
        let g = Reduction {
            value: "%y".into(),
            op: ReduceOp::Sum,
            dtype: DType::F32,
            leaves: vec![],
            combines: vec![0],
            buffer: 0,
            runs: vec![(0, 10)],
            targets: vec![0, 1, 2],
            scatter: vec![vec![(0, 4)], vec![(4, 2)], vec![(6, 4)]],
        };
        let parts = [16, 8, 16];
        assert_eq!(g.scatter_traffic(0, &parts), (24, 80));
        assert_eq!(g.scatter_traffic(1, &parts), (40, 8));
        assert_eq!(g.scatter_traffic(2, &parts), (40, 16));
        // Two nodes on one rank: its part is both, sorted.
        assert_eq!(g.part_of(0, |n| n % 2), vec![(0, 4), (6, 4)]);
    }

    #[test]
    fn source_windows_and_blocked_sinks_round_trip_and_are_checked() {
        // Source 1: the box [0..2, 1..3) of source 0 (f32[2, 3]), in buffer 3.
        let mut p = sample();
        p.buffers.push(Buffer {
            bytes: 16,
            init: Init::Source(1),
        });
        p.sources.push(Source {
            name: "x".into(),
            dtype: DType::F32,
            shape: vec![2, 2],
            buffer: 3,
            window: Some(SourceWindow {
                of: 0,
                origin: vec![0, 1],
            }),
        });
        // The sink's [2, 3] read as [1, 2, 1, 3] (one row of blocks).
        p.sinks[0].blocks = Some(vec![1, 2, 1, 3]);
        p.sinks[0].view.strides = vec![6, 3, 6, 1];
        assert_eq!(Plan::decode(&p.encode()).unwrap(), p);
        p.validate(1).unwrap();
        type Corrupt = fn(&mut Plan);
        let cases: [(Corrupt, &str); 5] = [
            (
                |p| p.sources[1].window.as_mut().unwrap().origin = vec![1, 1],
                "window 1",
            ),
            (|p| p.sources[1].window.as_mut().unwrap().of = 1, "window 1"),
            (|p| p.sources[1].dtype = DType::I32, "window 1"),
            (|p| p.sinks[0].blocks = Some(vec![2, 2, 1, 3]), "malformed"),
            (|p| p.sinks[0].view.strides = vec![6, 3, 1], "malformed"),
        ];
        for (corrupt, want) in cases {
            let mut q = p.clone();
            corrupt(&mut q);
            let e = q.validate(1).expect_err(want);
            assert!(e.starts_with("corrupt plan: ") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn corrupt_bytes_are_errors() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Plan::decode(&bytes[..n]).is_err());
        }
        let mut v = bytes.clone();
        v[8] = 9;
        assert!(Plan::decode(&v).unwrap_err().contains("version 9"));
        let mut p = sample();
        p.sinks[0].view.offset = 3;
        assert!(p.validate(1).unwrap_err().contains("outside"));
    }

    #[test]
    fn every_flipped_byte_is_a_checksum_error() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut v = bytes.clone();
                v[i] ^= flip;
                let e = Plan::decode(&v).unwrap_err();
                assert!(
                    e.contains("checksum")
                        || e.contains("version")
                        || e.contains("not a tapc plan"),
                    "byte {i}: {e}"
                );
            }
        }
    }

    #[test]
    fn validation_bounds_offsets_extents_ranges_and_indices() {
        type Corrupt = fn(&mut Plan);
        let cases: [(Corrupt, &str); 12] = [
            (|p| p.tasks[0].args[1].offset = 4, "outside buffer 2"),
            (|p| p.tasks[0].args[1].offset = -1, "outside buffer 2"),
            (|p| p.tasks[0].args[0].hi = 25, "outside buffer 0"),
            (|p| p.tasks[0].args[0].lo = -1, "outside buffer 0"),
            (|p| p.tasks[0].args[1].offset = i64::MAX, "outside buffer 2"),
            (|p| p.tasks[0].range[0] = (i64::MIN, i64::MAX), "range"),
            (|p| p.tasks[0].range[1] = (3, 0), "range"),
            (|p| p.tasks[0].align = 0, "alignment"),
            (|p| p.sinks[0].view.strides[0] = i64::MAX, "outside"),
            (|p| p.sinks[0].view.offset = i64::MAX / 2, "outside"),
            (|p| p.buffers[2].bytes = u64::MAX, "larger than memory"),
            (|p| p.sources[0].buffer = 2, "no fitting buffer"),
        ];
        for (corrupt, want) in cases {
            let mut p = sample();
            corrupt(&mut p);
            let e = p.validate(1).expect_err(want);
            assert!(e.starts_with("corrupt plan: ") && e.contains(want), "{e}");
        }
    }
}
