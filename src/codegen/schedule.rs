//! From a verified graph to a runtime [`Plan`] plus the kernels its tasks call.
//!
//! Every value lives in a strided view of a buffer (element offset and strides). Sources get a
//! buffer each; `zeros`/`ones`/`full` are one constant element seen through all-zero strides;
//! `iota`/`rand` are computed by generator kernels. Strided-representable selectors
//! (transpose, slice, reverse, broadcast, squeeze, unsqueeze, and a reshape whose merged dims
//! are contiguous among themselves, such as splitting the heads of a column slice) only change
//! the view; the others (concat, interleave, repeat, pad, other reshapes) are materialized by gather kernels. An apply output (or a concat result, or a scatter's)
//! that feeds a concat/interleave is *placed* into its region of the assembled buffer, so a
//! sharded apply writes its shard straight into the concatenated result (zero-copy concat):
//! regions of one buffer are disjoint by construction, which is what licenses `noalias` on
//! every kernel argument (until [`super::reuse`] lets a task write its output in place of an
//! input, compiling that pair as one pointer). Sequence points order nothing observable here (all sinks are
//! written together after the run) and are ignored.

use super::kernel::plan::{plan as kernel_plan, KernelPlan};
use super::scatter::ScatterSpec;
pub use super::view::{row_major, Padding, SView};
use crate::diag::{codes, Diagnostic};
use crate::ir::footprint::volume;
use crate::ir::graph::{Apply, GenKind, Generator, NodeKind, PadMode, Scatter, SliceDim, View};
use crate::ir::instance::{walk, CKind, Instance, Scalar};
use crate::ir::{DType, Graph, Module, TensorType, ValueId};
use crate::verify::GraphFacts;
use std::collections::HashMap;
use tapc_runtime::mpi::dist::region_runs;
use tapc_runtime::plan::{self, Arg, Buffer, Init, Plan, Task};

/// How one output coordinate of a gather maps to its source coordinate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DimMap {
    Same,
    /// `src = c - lo`; outside `[0, n)` the element is the fill value.
    Shift {
        lo: i64,
        n: i64,
    },
    /// `src = c - lo`, mirrored at both ends (numpy's `reflect`).
    Reflect {
        lo: i64,
        n: i64,
    },
    /// `src = c mod n`.
    Mod {
        n: i64,
    },
}

/// One kernel to compile.
#[derive(Clone, Debug)]
pub enum KernelSpec {
    /// An apply: inputs then outputs. `alias`: argument `k` is written in place of argument
    /// `j` (`reuse::in_place`; the kernel is compiled knowing they are one pointer).
    Apply {
        inst: Box<Instance>,
        inputs: Vec<SView>,
        outputs: Vec<SView>,
        plan: KernelPlan,
        alias: Option<(usize, usize)>,
    },
    /// `out[c] = src[map(c)]` (or `fill`): args are source, then output.
    Gather {
        out: SView,
        src_strides: Vec<i64>,
        maps: Vec<DimMap>,
        fill: Option<Scalar>,
    },
    /// `out[c] = gen(c)`.
    Generate { out: SView, kind: GenKind },
    /// `scatter`: args are base, indices, updates, then the result.
    Scatter(Box<super::scatter::ScatterSpec>),
}

/// A plan and the kernels its tasks call (task `kernel` indexes `kernels`).
#[derive(Clone, Debug)]
pub struct Schedule {
    pub plan: Plan,
    pub kernels: Vec<KernelSpec>,
    /// A readable name per kernel (also its symbol suffix).
    pub names: Vec<String>,
    /// Per task: its node and the regions it reads and writes (for `--mpi` transfers).
    pub access: Vec<TaskAccess>,
    /// Per sink: the region it reads.
    pub sink_reads: Vec<Region>,
}

/// Where a task runs (`on N` of its apply; `None`: unplaced) and the strided regions of
/// buffers it reads and writes: the footprints `distribute` plans transfers from.
#[derive(Clone, Debug, Default)]
pub struct TaskAccess {
    pub node: Option<u32>,
    pub reads: Vec<Region>,
    pub writes: Vec<Region>,
}

/// A strided region of a buffer, in elements: `offset + Σ i_d * strides[d]`, `i_d < shape[d]`.
#[derive(Clone, Debug)]
pub struct Region {
    /// The value it belongs to, e.g. `%h`.
    pub value: String,
    pub buffer: u32,
    pub offset: i64,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub elem: u32,
}

#[derive(Clone, Debug)]
struct Loc {
    buffer: u32,
    offset: i64,
    strides: Vec<i64>,
    shape: Vec<i64>,
    dtype: DType,
    producers: Vec<u32>,
    pad: Option<Padding>,
}

impl Loc {
    fn sview(&self) -> SView {
        SView {
            dtype: self.dtype,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            pad: self.pad.clone(),
        }
    }
    fn arg(&self) -> Arg {
        let size = self.dtype.size_bytes();
        // The plan's validation bounds this extent against the buffer (the checksum covers it).
        // A folded pad's kernel reads only the part of the unpadded tensor its view can reach,
        // at the tensor's own offset and strides.
        let (start, shape) = match &self.pad {
            Some(p) => {
                let bx = p.readable(&self.shape);
                let start: i64 = bx.iter().zip(&self.strides).map(|((l, _), s)| l * s).sum();
                (start, bx.iter().map(|&(l, h)| h - l).collect())
            }
            None => (0, self.shape.clone()),
        };
        let (lo, hi) = plan::extent(&shape, &self.strides, size).unwrap_or((0, i64::MAX));
        let at = start * size as i64;
        Arg {
            buffer: self.buffer,
            offset: self.offset * size as i64,
            lo: if hi > lo { lo + at } else { 0 },
            hi: if hi > lo { hi + at } else { 0 },
        }
    }
    fn elements(&self) -> i64 {
        self.shape.iter().product()
    }
    /// The part of this view that the box `[lo, hi)` per dimension covers.
    fn region(&self, value: String, bx: &[(i64, i64)]) -> Region {
        let inner;
        let bx = match &self.pad {
            Some(p) => {
                inner = p.inner_box(bx);
                &inner[..]
            }
            None => bx,
        };
        let start: i64 = bx.iter().zip(&self.strides).map(|((l, _), s)| l * s).sum();
        Region {
            value,
            buffer: self.buffer,
            offset: self.offset + start,
            shape: bx.iter().map(|&(l, h)| (h - l).max(0)).collect(),
            strides: self.strides.clone(),
            elem: self.dtype.size_bytes() as u32,
        }
    }
    fn whole(&self, value: String) -> Region {
        let bx: Vec<(i64, i64)> = self.shape.iter().map(|&n| (0, n)).collect();
        self.region(value, &bx)
    }
}

/// The strides that show a view of `shape`/`strides` as `new` (same elements, row-major
/// order) without a copy, or `None` when some merged group of dims is not contiguous within
/// itself (numpy's no-copy reshape rule).
pub fn reshape_strides(shape: &[i64], strides: &[i64], new: &[i64]) -> Option<Vec<i64>> {
    if shape.contains(&0) || new.contains(&0) {
        return Some(row_major(new));
    }
    let (os, ot): (Vec<i64>, Vec<i64>) = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .unzip();
    let mut out = vec![0; new.len()];
    let (mut oi, mut ni) = (0, 0);
    while oi < os.len() {
        // The smallest groups old[oi..oj] and new[ni..nj] with equal element counts.
        let (mut oj, mut nj) = (oi + 1, ni + 1);
        let (mut op, mut np) = (os[oi], *new.get(ni)?);
        while op != np {
            if np < op {
                np *= *new.get(nj)?;
                nj += 1;
            } else {
                op *= *os.get(oj)?;
                oj += 1;
            }
        }
        if (oi..oj - 1).any(|k| ot[k] != ot[k + 1] * os[k + 1]) {
            return None;
        }
        out[nj - 1] = ot[oj - 1];
        for k in (ni + 1..nj).rev() {
            out[k - 1] = out[k] * new[k];
        }
        (oi, ni) = (oj, nj);
    }
    // Trailing size-1 dims (any stride reads the one element).
    Some(out)
}

/// Operations that take as long as moving one byte to or from memory (a core does some 50
/// GFLOP/s and streams some 10 GB/s): a task's `work` counts both, so that the executor splits a
/// memory-bound task as readily as a compute-bound one of the same length.
const WORK_PER_BYTE: f64 = 4.0;

/// Elements in a footprint box.
/// The little-endian bytes of `s` as a `dtype` element.
pub fn scalar_bytes(s: Scalar, dtype: DType) -> Vec<u8> {
    let n = dtype.size_bytes();
    match s.cast(dtype) {
        Scalar::F(v) if dtype == DType::F32 => (v as f32).to_le_bytes().to_vec(),
        Scalar::F(v) if dtype == DType::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        Scalar::F(v) if dtype == DType::BF16 => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        Scalar::F(v) => v.to_le_bytes().to_vec(),
        // The low `n` bytes of the (wrapped) value, little-endian.
        Scalar::I(v) => v.to_le_bytes()[..n].to_vec(),
        Scalar::B(b) => vec![u8::from(b)],
    }
}

struct Builder<'a> {
    g: &'a Graph,
    lanes: u32,
    plan: Plan,
    kernels: Vec<KernelSpec>,
    names: Vec<String>,
    locs: Vec<Option<Loc>>,
    /// Values placed into a region of a concat/interleave result: (consumer node, operand).
    placed: HashMap<ValueId, (usize, usize)>,
    access: Vec<TaskAccess>,
    sink_reads: Vec<Region>,
    /// Each distinct kernel spec (by its full `Debug` form) and its index: structurally
    /// identical kernels (a chain of the same op at the same shapes) compile once.
    kernel_ids: HashMap<String, u32>,
    /// Per value: read only by kernels (so a constant `pad` of it can be folded into them).
    kernel_only: Vec<bool>,
    /// Whether column blocks of sources become source windows (`--mpi` plans).
    windowed: bool,
    /// The graph's sources: plan sources `0..declared`; the windows follow them.
    declared: u32,
    /// The source windows made so far (appended to the plan's sources at the end).
    windows: Vec<plan::Source>,
    /// Concat results laid out as grids of dense blocks (`grid.rs`), read only by sinks:
    /// the shape and strides of their blocked view.
    blocked: HashMap<ValueId, (Vec<i64>, Vec<i64>)>,
}

/// Per value of `g`: used, and only as an apply's argument (not one it gathers from: a gathered
/// load does not fold a pad) or through unit-step slices whose results are (recursively) used
/// so. A sharded reader sees a pad through the slice of its shard, so folding through slices
/// turns a materialised pad into halo reads.
fn kernel_only(g: &Graph, facts: &GraphFacts) -> Vec<bool> {
    let mut ok: Vec<Option<bool>> = vec![None; g.values.len()]; // None: no use seen yet
    for (i, n) in g.nodes.iter().enumerate().rev() {
        let gathered = facts
            .instances
            .get(&i)
            .map(gathered_inputs)
            .unwrap_or_default();
        let by_kernel = |k: usize| match &n.kind {
            NodeKind::Apply(_) => !gathered.contains(&k),
            NodeKind::View(View::Slice { dims, .. }) => {
                dims.iter().all(|d| d.step.unwrap_or(1) == 1)
                    && n.results.iter().all(|r| ok[r.index()] == Some(true))
            }
            _ => false,
        };
        let uses: Vec<bool> = (0..n.kind.operands().len()).map(by_kernel).collect();
        for (v, by) in n.kind.operands().into_iter().zip(uses) {
            let u = &mut ok[v.index()];
            *u = Some(u.unwrap_or(true) && by);
        }
    }
    ok.into_iter().map(|u| u == Some(true)).collect()
}

/// Each `state` source of `g` with its `update` sink, as plan indices.
fn states(g: &Graph, plan: &Plan) -> Vec<(u32, u32)> {
    let source = |name: &str| plan.sources.iter().position(|s| s.name == name);
    let sink = |name: &str| plan.sinks.iter().position(|s| s.name == name);
    (g.updates())
        .filter_map(|(name, _)| Some((source(name)? as u32, sink(name)? as u32)))
        .collect()
}

/// The inputs an instance gathers from.
fn gathered_inputs(inst: &Instance) -> Vec<usize> {
    let mut out = Vec::new();
    for st in inst.stmts.iter().flatten() {
        walk(
            &st.value,
            &mut |e, _| {
                if let CKind::Gather(g) = &e.kind {
                    out.push(g.input);
                }
            },
            &mut vec![],
        );
    }
    out
}

/// Builds the schedule of graph `g` of `m`; `lanes` is the kernels' vector width.
pub fn build(
    m: &Module,
    g: &Graph,
    facts: &GraphFacts,
    lanes: u32,
) -> Result<Schedule, Diagnostic> {
    build_for(m, g, facts, lanes, false)
}

/// [`build`]; with `windowed` (a distributed plan), a kernel reading a column block of a
/// source reads a source window ([`plan::SourceWindow`]) instead.
pub fn build_for(
    m: &Module,
    g: &Graph,
    facts: &GraphFacts,
    lanes: u32,
    windowed: bool,
) -> Result<Schedule, Diagnostic> {
    let _ = m;
    let mut b = Builder {
        g,
        lanes,
        plan: Plan {
            graph: g.name.clone(),
            buffers: vec![],
            sources: vec![],
            tasks: vec![],
            sinks: vec![],
            dist: Default::default(),
            states: vec![],
        },
        kernels: vec![],
        names: vec![],
        locs: vec![None; g.values.len()],
        placed: HashMap::new(),
        kernel_ids: HashMap::new(),
        kernel_only: kernel_only(g, facts),
        access: vec![],
        sink_reads: vec![],
        windowed,
        declared: (g.nodes.iter())
            .filter(|n| matches!(n.kind, NodeKind::Source { .. }))
            .count() as u32,
        windows: vec![],
        blocked: HashMap::new(),
    };
    b.place_regions();
    if windowed {
        b.block_grids();
    }
    for (i, n) in g.nodes.iter().enumerate() {
        b.node(i, &n.kind, facts)?;
    }
    b.plan.sources.append(&mut b.windows);
    b.plan.states = states(g, &b.plan);
    Ok(Schedule {
        plan: b.plan,
        kernels: b.kernels,
        names: b.names,
        access: b.access,
        sink_reads: b.sink_reads,
    })
}

impl Builder<'_> {
    fn ty(&self, v: ValueId) -> Result<&TensorType, Diagnostic> {
        self.g.ty(v).ok_or_else(|| {
            Diagnostic::error(
                codes::NOT_AVAILABLE,
                format!(
                    "value %{} has no type (the graph did not verify)",
                    self.g.value(v).name
                ),
            )
        })
    }

    fn loc(&self, v: ValueId) -> Loc {
        self.locs[v.index()]
            .clone()
            .expect("values are defined before use in a verified graph")
    }

    fn new_buffer(&mut self, bytes: i64, init: Init) -> u32 {
        self.plan.buffers.push(Buffer {
            bytes: bytes.max(0) as u64,
            init,
        });
        (self.plan.buffers.len() - 1) as u32
    }

    fn fresh(&mut self, v: ValueId) -> Result<Loc, Diagnostic> {
        let t = self.ty(v)?.clone();
        let buffer = self.new_buffer(t.bytes(), Init::Scratch);
        Ok(Loc {
            buffer,
            offset: 0,
            strides: row_major(&t.shape),
            shape: t.shape,
            dtype: t.dtype,
            producers: vec![],
            pad: None,
        })
    }

    /// Walks the graph backwards giving every concat/interleave result a buffer (or a region of
    /// an enclosing one) and placing apply outputs and nested concats into their regions.
    fn place_regions(&mut self) {
        for i in (0..self.g.nodes.len()).rev() {
            let n = &self.g.nodes[i];
            let NodeKind::View(v @ (View::Concat { .. } | View::Interleave { .. })) = &n.kind
            else {
                continue;
            };
            let r = n.results[0];
            if self.locs[r.index()].is_none() {
                let Ok(l) = self.fresh(r) else { continue };
                self.locs[r.index()] = Some(l);
            }
            let whole = self.loc(r);
            let args = v.operands();
            let mut start = 0;
            // Operands already seen (a value used twice is placed once); a set keeps this linear.
            let mut seen = std::collections::HashSet::new();
            for (k, &a) in args.iter().enumerate() {
                let Some(at) = self.g.ty(a).cloned() else {
                    return;
                };
                let region = operand_region(&whole, v, k, start, at.shape.clone());
                if let View::Concat { axis, .. } = v {
                    start += at.shape[*axis];
                }
                let def = &self.g.nodes[self.g.value(a).node].kind;
                let placeable = matches!(
                    def,
                    NodeKind::Apply(_)
                        | NodeKind::Scatter(_)
                        | NodeKind::View(View::Concat { .. } | View::Interleave { .. })
                );
                if placeable && self.locs[a.index()].is_none() && seen.insert(a) {
                    let region = if region.elements() == 0 {
                        Loc {
                            offset: 0,
                            ..region
                        }
                    } else {
                        region
                    };
                    self.locs[a.index()] = Some(region);
                    self.placed.insert(a, (i, k));
                }
            }
        }
    }

    /// Lays out every grid of blocks ([`super::grid`]) dense, block by block, in its
    /// concat's buffer, and gives the concat its blocked view (for its sinks).
    fn block_grids(&mut self) {
        for i in 0..self.g.nodes.len() {
            let Some(rows) = super::grid::grid(self.g, &self.placed, i) else {
                continue;
            };
            let r = self.g.nodes[i].results[0];
            let Some(whole) = self.locs[r.index()].clone() else {
                continue;
            };
            let (nr, nc) = (rows.len() as i64, rows[0].len() as i64);
            let (h, w) = (whole.shape[0] / nr, whole.shape[1] / nc);
            for (bi, row) in (0..).zip(&rows) {
                for (bj, &v) in (0..).zip(row) {
                    let Some(l) = self.locs[v.index()].as_mut() else {
                        continue;
                    };
                    l.offset = whole.offset + (bi * nc + bj) * h * w;
                    l.strides = vec![w, 1];
                }
            }
            (self.blocked).insert(r, super::grid::blocked_view(nr, nc, h, w));
        }
    }

    /// The index of `spec`'s kernel, added unless an identical one exists (the key is the
    /// whole spec: a kernel's code depends on nothing else, its buffers are task arguments).
    fn add_kernel(&mut self, spec: KernelSpec, name: String) -> u32 {
        let key = format!("{spec:?}");
        if let Some(&k) = self.kernel_ids.get(&key) {
            return k;
        }
        let k = self.kernels.len() as u32;
        self.kernels.push(spec);
        self.names.push(name);
        self.kernel_ids.insert(key, k);
        k
    }

    #[allow(clippy::too_many_arguments)]
    fn add_task(
        &mut self,
        name: String,
        kernel: u32,
        args: Vec<Arg>,
        range: Vec<(i64, i64)>,
        split: Option<u32>,
        align: i64,
        work: f64,
        deps: Vec<u32>,
    ) -> u32 {
        let mut deps = deps;
        deps.sort_unstable();
        deps.dedup();
        self.plan.tasks.push(Task {
            name,
            kernel,
            args,
            range,
            split,
            align,
            work,
            deps,
        });
        self.access.push(TaskAccess::default());
        (self.plan.tasks.len() - 1) as u32
    }

    /// A gather task writing `out` from `src`.
    fn gather(
        &mut self,
        name: String,
        src: &Loc,
        out: &Loc,
        maps: Vec<DimMap>,
        fill: Option<Scalar>,
    ) -> u32 {
        let spec = KernelSpec::Gather {
            out: out.sview(),
            src_strides: src.strides.clone(),
            maps,
            fill,
        };
        let k = self.add_kernel(spec, name.clone());
        let range = out.shape.iter().map(|&n| (0, n)).collect::<Vec<_>>();
        let split = (!range.is_empty()).then_some(0);
        let t = self.add_task(
            name.clone(),
            k,
            vec![src.arg(), out.arg()],
            range,
            split,
            1,
            WORK_PER_BYTE * (out.elements() * 2 * out.dtype.size_bytes() as i64) as f64,
            src.producers.clone(),
        );
        self.access[t as usize] = TaskAccess {
            node: None,
            reads: vec![src.whole(name.clone())],
            writes: vec![out.whole(name)],
        };
        t
    }

    /// `%name` of value `v`, for kernel and task names.
    fn vname(&self, v: ValueId) -> String {
        format!("%{}", self.g.value(v).name)
    }

    /// Schedules node `i` (one function per kind of node).
    fn node(&mut self, i: usize, kind: &NodeKind, facts: &GraphFacts) -> Result<(), Diagnostic> {
        let results = &self.g.nodes[i].results;
        match kind {
            NodeKind::Source { name, ty, .. } => {
                let loc = self.source(name, ty);
                self.locs[results[0].index()] = Some(loc);
            }
            NodeKind::Generator(gen) => {
                let loc = self.generator(gen, results[0])?;
                self.locs[results[0].index()] = Some(loc);
            }
            NodeKind::View(v) => {
                let loc = self.view(i, v, results[0])?;
                self.locs[results[0].index()] = Some(loc);
            }
            NodeKind::Apply(a) => self.apply(i, a, facts)?,
            NodeKind::Sink { name, value, .. } => self.sink(name, *value),
            NodeKind::Sequence { .. } | NodeKind::Pin { .. } => {}
            NodeKind::Grad { .. } => {
                return Err(crate::diag::grad_not_lowered(self.g.nodes[i].span))
            }
            NodeKind::Scatter(s) => {
                let loc = self.scatter(s, results[0])?;
                self.locs[results[0].index()] = Some(loc);
            }
        }
        Ok(())
    }

    /// A source: a buffer of its own, filled from the input.
    fn source(&mut self, name: &str, ty: &TensorType) -> Loc {
        let k = self.plan.sources.len() as u32;
        let buffer = self.new_buffer(ty.bytes(), Init::Source(k));
        self.plan.sources.push(plan::Source {
            name: name.to_string(),
            dtype: ty.dtype,
            shape: ty.shape.iter().map(|&d| d as usize).collect(),
            buffer,
            window: None,
        });
        Loc {
            buffer,
            offset: 0,
            strides: row_major(&ty.shape),
            shape: ty.shape.clone(),
            dtype: ty.dtype,
            producers: vec![],
            pad: None,
        }
    }

    /// A generator: one constant element seen through all-zero strides, or a generator task.
    fn generator(&mut self, gen: &Generator, r: ValueId) -> Result<Loc, Diagnostic> {
        let ty = &gen.ty;
        let constant = match gen.kind {
            GenKind::Zeros => Scalar::I(0),
            GenKind::Ones => Scalar::I(1),
            GenKind::Full(l) => Scalar::from(l),
            GenKind::Iota { .. } | GenKind::Rand { .. } => return self.generate(gen.kind, r),
        };
        let bytes = scalar_bytes(constant, ty.dtype);
        let buffer = self.new_buffer(bytes.len() as i64, Init::Const(bytes));
        Ok(Loc {
            buffer,
            offset: 0,
            strides: vec![0; ty.rank()],
            shape: ty.shape.clone(),
            dtype: ty.dtype,
            producers: vec![],
            pad: None,
        })
    }

    /// A scatter task computing `r`: over the updates' index space, split along its first
    /// dimension other than the axis (each part owns whole lines of the result).
    fn scatter(&mut self, s: &Scatter, r: ValueId) -> Result<Loc, Diagnostic> {
        // Placed into its region of a concat (a split scatter's part), or a buffer of its own.
        let mut l = match &self.locs[r.index()] {
            Some(l) => l.clone(),
            None => self.fresh(r)?,
        };
        let [base, idx, upd] = s.operands().map(|v| self.loc(v));
        let text = crate::print::scatter_text(self.g, s);
        let shape: Vec<String> = idx.shape.iter().map(|n| n.to_string()).collect();
        let spec = ScatterSpec {
            base: base.sview(),
            idx: idx.sview(),
            upd: upd.sview(),
            out: l.sview(),
            axis: s.axis,
            reduce: s.reduce,
            text: format!("{text}\n{}\n{}", self.vname(s.idx), shape.join(" ")),
        };
        let name = format!("{text} -> {}", self.vname(r));
        let k = self.add_kernel(KernelSpec::Scatter(Box::new(spec)), name.clone());
        let range: Vec<(i64, i64)> = upd.shape.iter().map(|&n| (0, n)).collect();
        let split = (0..range.len()).find(|&d| d != s.axis).map(|d| d as u32);
        let bytes = (l.elements() * 2 + upd.elements() * 3) * l.dtype.size_bytes() as i64;
        let work = WORK_PER_BYTE * bytes as f64;
        let ins = [&base, &idx, &upd];
        let deps = ins.iter().flat_map(|x| x.producers.clone()).collect();
        let args = vec![base.arg(), idx.arg(), upd.arg(), l.arg()];
        let t = self.add_task(name.clone(), k, args, range, split, 1, work, deps);
        let reads = ins.iter().map(|x| x.whole(name.clone())).collect();
        self.access[t as usize] = TaskAccess {
            node: s.placement,
            reads,
            writes: vec![l.whole(self.vname(r))],
        };
        l.producers = vec![t];
        Ok(l)
    }

    /// A generator task computing `r` from its coordinates (`iota`, `rand`).
    fn generate(&mut self, kind: GenKind, r: ValueId) -> Result<Loc, Diagnostic> {
        let mut l = self.fresh(r)?;
        let name = format!("{} -> {}", kind.name(), self.vname(r));
        let k = self.add_kernel(
            KernelSpec::Generate {
                out: l.sview(),
                kind,
            },
            name.clone(),
        );
        let range = l.shape.iter().map(|&n| (0, n)).collect::<Vec<_>>();
        let split = (!range.is_empty()).then_some(0);
        let bytes = (l.elements() * l.dtype.size_bytes() as i64) as f64;
        let work = 8.0 * l.elements() as f64 + WORK_PER_BYTE * bytes;
        let t = self.add_task(name, k, vec![l.arg()], range, split, 1, work, vec![]);
        self.access[t as usize].writes = vec![l.whole(self.vname(r))];
        l.producers = vec![t];
        Ok(l)
    }

    /// An apply: one kernel (shared by identical applies) and one task over its range.
    fn apply(&mut self, i: usize, a: &Apply, facts: &GraphFacts) -> Result<(), Diagnostic> {
        let inst = compiled_instance(a, facts.instances.get(&i))?;
        let results = &self.g.nodes[i].results;
        let ins: Vec<Loc> = a.args.iter().map(|&v| self.loc(v)).collect();
        let mut outs = Vec::new();
        for &r in results {
            let l = match &self.locs[r.index()] {
                Some(l) => l.clone(),
                None => self.fresh(r)?,
            };
            outs.push(l);
        }
        let inputs: Vec<SView> = ins.iter().map(Loc::sview).collect();
        let outputs: Vec<SView> = outs.iter().map(Loc::sview).collect();
        let kplan = kernel_plan(inst, &outputs, self.lanes);
        let name = self.apply_name(a, results);
        let (split, align) = (kplan.split, kplan.align);
        let k = self.add_kernel(
            KernelSpec::Apply {
                inst: Box::new(inst.clone()),
                inputs,
                outputs,
                plan: kplan,
                alias: None,
            },
            name.clone(),
        );
        let args = ins.iter().chain(&outs).map(Loc::arg).collect();
        let deps = ins.iter().flat_map(|l| l.producers.clone()).collect();
        let (work, access) = self.apply_access(inst, a, results, &ins, &outs);
        let split = split.map(|s| s as u32);
        let t = self.add_task(name, k, args, inst.range(), split, align, work, deps);
        self.access[t as usize] = access;
        for (r, mut l) in results.iter().zip(outs) {
            l.producers = vec![t];
            self.locs[r.index()] = Some(l);
        }
        Ok(())
    }

    /// `apply @op @[range] -> %results`.
    fn apply_name(&self, a: &Apply, results: &[ValueId]) -> String {
        let range = match &a.range {
            Some(r) => format!(
                " @[{}]",
                r.iter()
                    .map(|(l, h)| format!("{l}:{h}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        };
        let results: Vec<String> = results.iter().map(|&r| self.vname(r)).collect();
        format!("apply @{}{range} -> {}", a.op, results.join(", "))
    }

    /// An apply task's work and the regions it reads and writes (its footprints).
    fn apply_access(
        &self,
        inst: &Instance,
        a: &Apply,
        results: &[ValueId],
        ins: &[Loc],
        outs: &[Loc],
    ) -> (f64, TaskAccess) {
        let (in_boxes, out_boxes) = crate::ir::footprint::io_boxes(inst);
        let flops = inst.points().max(1) as f64 * inst.signature.flops_per_point.max(1.0);
        let bytes: f64 = ins
            .iter()
            .zip(&in_boxes)
            .chain(outs.iter().zip(&out_boxes))
            .map(|(l, bx)| l.dtype.size_bytes() as f64 * volume(bx))
            .sum();
        // A memory-bound apply (few flops per element) is as long as its traffic.
        let work = flops + WORK_PER_BYTE * bytes;
        let regions = |locs: &[Loc], values: &[ValueId], boxes: &[Vec<(i64, i64)>]| {
            locs.iter()
                .zip(values)
                .zip(boxes)
                .map(|((l, &v), bx)| l.region(self.vname(v), bx))
                .collect()
        };
        let access = TaskAccess {
            node: Some(a.placement.unwrap_or(0)),
            reads: regions(ins, &a.args, &in_boxes),
            writes: regions(outs, results, &out_boxes),
        };
        (work, access)
    }

    /// A sink: reads its value's view once everything that writes it has run.
    fn sink(&mut self, name: &str, value: ValueId) {
        let mut l = self.loc(value);
        let shape = l.shape.iter().map(|&d| d as usize).collect();
        let blocks = self.blocked.get(&value).map(|(dims, strides)| {
            (l.shape, l.strides) = (dims.clone(), strides.clone());
            dims.iter().map(|&d| d as usize).collect()
        });
        self.plan.sinks.push(plan::Sink {
            name: name.to_string(),
            dtype: l.dtype,
            shape,
            view: plan::View {
                buffer: l.buffer,
                offset: l.offset,
                strides: l.strides.clone(),
            },
            deps: l.producers.clone(),
            blocks,
        });
        self.sink_reads.push(l.whole(format!("@{name}")));
    }

    /// Selector `v` (result `r`, node `i`): a strided view of its operand where it can be one,
    /// else gathered.
    fn view(&mut self, i: usize, v: &View, r: ValueId) -> Result<Loc, Diagnostic> {
        let out_ty = self.ty(r)?.clone();
        let name = format!("{} -> %{}", v.name(), self.g.value(r).name);
        let a0 = self.loc(v.operands()[0]);
        let mut l = match v {
            View::Concat { .. } | View::Interleave { .. } => {
                return Ok(self.assemble(i, v, r, &name))
            }
            View::Repeat { axis, .. } => return self.repeat(&a0, r, *axis, name),
            View::Pad { widths, mode, .. } => return self.pad(&a0, r, widths, mode, name),
            View::Reshape { .. } => self.reshape(&a0, &out_ty, &name),
            View::Slice { dims, .. } => match self.window(&a0, v, dims, &out_ty) {
                Some(w) => w,
                None => strided(v, &a0, &out_ty),
            },
            _ => strided(v, &a0, &out_ty),
        };
        if out_ty.elements() == 0 {
            l.offset = 0;
        }
        Ok(l)
    }

    /// Under `--mpi`, a unit-step slice of a whole declared source (not a state) that is not
    /// one run of it, such as a column block: a source window, a dense buffer of its own that
    /// the ranks reading it fill from the source's file, so a rank holds only the block and
    /// its kernels are compiled with the block's own strides.
    fn window(
        &mut self,
        a0: &Loc,
        v: &View,
        dims: &[SliceDim],
        out_ty: &TensorType,
    ) -> Option<Loc> {
        let Init::Source(k) = self.plan.buffers[a0.buffer as usize].init else {
            return None;
        };
        let whole = a0.offset == 0 && a0.pad.is_none() && a0.strides == row_major(&a0.shape);
        let unit = dims.iter().all(|d| d.step.unwrap_or(1) == 1);
        if !self.windowed || !whole || !unit || k >= self.declared || out_ty.elements() == 0 {
            return None;
        }
        let src = self.plan.sources[k as usize].clone();
        if self.g.updates().any(|(name, _)| name == src.name) {
            return None;
        }
        let view = strided(v, a0, out_ty);
        let runs = region_runs(view.offset, &view.shape, &view.strides);
        if runs.len() <= 1 {
            return None;
        }
        // `offset = Σ start_d · stride_d` with every `start_d < shape_d`.
        let origin = (a0.strides.iter().zip(&a0.shape))
            .map(|(&st, &n)| ((view.offset / st.max(1)) % n.max(1)) as usize)
            .collect();
        let index = self.declared + self.windows.len() as u32;
        let buffer = self.new_buffer(out_ty.bytes(), Init::Source(index));
        self.windows.push(plan::Source {
            name: src.name.clone(),
            dtype: src.dtype,
            shape: out_ty.shape.iter().map(|&d| d as usize).collect(),
            buffer,
            window: Some(plan::SourceWindow { of: k, origin }),
        });
        Some(Loc {
            buffer,
            offset: 0,
            strides: row_major(&out_ty.shape),
            shape: out_ty.shape.clone(),
            dtype: a0.dtype,
            producers: vec![],
            pad: None,
        })
    }

    /// A reshape: a strided view when the merged dims are contiguous among themselves (or
    /// the operand is a broadcast constant), else a row-major copy of the operand.
    fn reshape(&mut self, a0: &Loc, out_ty: &TensorType, name: &str) -> Loc {
        let mut l = Loc {
            shape: out_ty.shape.clone(),
            ..a0.clone()
        };
        if a0.strides.iter().all(|&s| s == 0) {
            l.strides = vec![0; out_ty.rank()];
            return l;
        }
        if let Some(strides) = reshape_strides(&a0.shape, &a0.strides, &out_ty.shape) {
            // e.g. [T, D] column slice → [T, H, E] heads: still a strided view.
            l.strides = strides;
            return l;
        }
        let bytes = a0.elements() * a0.dtype.size_bytes() as i64;
        let mut copy = Loc {
            buffer: self.new_buffer(bytes, Init::Scratch),
            offset: 0,
            strides: row_major(&a0.shape),
            ..a0.clone()
        };
        let maps = vec![DimMap::Same; a0.shape.len()];
        let t = self.gather(format!("{name} (copy)"), a0, &copy, maps, None);
        copy.producers = vec![t];
        Loc {
            strides: row_major(&out_ty.shape),
            shape: out_ty.shape.clone(),
            ..copy
        }
    }

    /// A concat or interleave result: every operand not placed into its region already is
    /// gathered there.
    fn assemble(&mut self, i: usize, v: &View, r: ValueId, name: &str) -> Loc {
        let mut whole = self.loc(r);
        let args = v.operands();
        let mut producers = Vec::new();
        let mut start = 0;
        for (k, &a) in args.iter().enumerate() {
            let src = self.loc(a);
            let region = operand_region(&whole, v, k, start, src.shape.clone());
            if let View::Concat { axis, .. } = v {
                start += src.shape[*axis];
            }
            if self.placed.get(&a) == Some(&(i, k)) {
                producers.extend(src.producers.clone());
                continue;
            }
            if region.elements() == 0 {
                continue;
            }
            let maps = vec![DimMap::Same; src.shape.len()];
            let t = self.gather(format!("{name} [operand {k}]"), &src, &region, maps, None);
            producers.push(t);
        }
        whole.producers = producers;
        whole
    }

    /// A repeat: gathered, its axis read modulo the operand's size.
    fn repeat(
        &mut self,
        a0: &Loc,
        r: ValueId,
        axis: usize,
        name: String,
    ) -> Result<Loc, Diagnostic> {
        let mut out = self.fresh(r)?;
        let mut maps = vec![DimMap::Same; out.shape.len()];
        maps[axis] = DimMap::Mod { n: a0.shape[axis] };
        let t = self.gather(name, a0, &out, maps, None);
        out.producers = vec![t];
        Ok(out)
    }

    /// A pad: a constant pad read only by kernels (directly or through unit-step slices) is
    /// folded into their loads (bounds-guarded), never copied; any other pad is gathered.
    fn pad(
        &mut self,
        a0: &Loc,
        r: ValueId,
        widths: &[(i64, i64)],
        mode: &PadMode,
        name: String,
    ) -> Result<Loc, Diagnostic> {
        if let (PadMode::Constant(c), true) = (mode, self.kernel_only[r.index()]) {
            let foldable = a0.pad.is_none()
                && a0.elements() > 0
                && (0..a0.shape.len())
                    .all(|d| a0.strides[d] != 0 || (a0.shape[d] == 1 && widths[d] == (0, 0)));
            if foldable {
                return Ok(Loc {
                    shape: self.ty(r)?.shape.clone(),
                    pad: Some(Padding {
                        lo: widths.iter().map(|w| w.0).collect(),
                        inner: a0.shape.clone(),
                        fill: Scalar::from(*c),
                    }),
                    ..a0.clone()
                });
            }
        }
        let mut out = self.fresh(r)?;
        let maps = widths
            .iter()
            .zip(&a0.shape)
            .map(|(&(lo, hi), &n)| match mode {
                _ if lo == 0 && hi == 0 => DimMap::Same,
                PadMode::Constant(_) => DimMap::Shift { lo, n },
                PadMode::Reflect => DimMap::Reflect { lo, n },
            })
            .collect();
        let fill = match mode {
            PadMode::Constant(c) => Some(Scalar::from(*c)),
            PadMode::Reflect => None,
        };
        let t = self.gather(name, a0, &out, maps, fill);
        out.producers = vec![t];
        Ok(out)
    }
}

/// The instance of apply `a`, which must have a kernel to compile.
fn compiled_instance<'f>(
    a: &Apply,
    inst: Option<&'f Instance>,
) -> Result<&'f Instance, Diagnostic> {
    let Some(inst) = inst else {
        return Err(Diagnostic::error(
            codes::NOT_AVAILABLE,
            format!("apply of `@{}` has no verified instance", a.op),
        )
        .primary(a.op_span, "here"));
    };
    if inst.stmts.is_none() {
        return Err(Diagnostic::error(
            codes::NO_KERNEL,
            format!("`@{}` is an extern op without a reference kernel", a.op),
        )
        .primary(a.op_span, "cannot be compiled")
        .note("add kernel statements to the extern op so the backend can compile it"));
    }
    Ok(inst)
}

/// Operand `k` of concat/interleave `v` inside its result `whole`: a concat operand starts
/// `start` elements along the axis; interleaved operands take every `n`-th element.
fn operand_region(whole: &Loc, v: &View, k: usize, start: i64, shape: Vec<i64>) -> Loc {
    let mut l = whole.clone();
    l.shape = shape;
    match v {
        View::Concat { axis, .. } => l.offset += start * l.strides[*axis],
        View::Interleave { axis, args } => {
            l.offset += k as i64 * l.strides[*axis];
            l.strides[*axis] *= args.len() as i64;
        }
        _ => unreachable!("only concat and interleave have operand regions"),
    }
    l
}

/// The selectors that only change the view of their operand `a0`: new strides (and offset).
fn strided(v: &View, a0: &Loc, out_ty: &TensorType) -> Loc {
    let mut l = Loc {
        shape: out_ty.shape.clone(),
        ..a0.clone()
    };
    let empty = out_ty.elements() == 0;
    match v {
        View::Transpose { perm, .. } => l.strides = perm.iter().map(|&p| a0.strides[p]).collect(),
        View::Reverse { dims, .. } => {
            for &d in dims {
                if !empty {
                    l.offset += (a0.shape[d] - 1) * a0.strides[d];
                }
                l.strides[d] = -a0.strides[d];
            }
        }
        View::Slice { dims, .. } if a0.pad.is_some() => {
            // Unit steps (see `kernel_only`): the view moves over the padded tensor while the
            // inner tensor stays where it is.
            let p = l.pad.as_mut().expect("a folded pad");
            for (d, s) in dims.iter().enumerate() {
                p.lo[d] -= s.start.unwrap_or(0);
            }
        }
        View::Slice { dims, .. } => {
            for (d, s) in dims.iter().enumerate() {
                if !empty {
                    l.offset += s.start.unwrap_or(0) * a0.strides[d];
                }
                l.strides[d] = a0.strides[d] * s.step.unwrap_or(1);
            }
        }
        View::Squeeze { dims, .. } => {
            l.strides = (0..a0.shape.len())
                .filter(|d| !dims.contains(d))
                .map(|d| a0.strides[d])
                .collect();
        }
        View::Unsqueeze { dims, .. } => {
            let mut it = a0.strides.iter();
            l.strides = (0..out_ty.rank())
                .map(|d| {
                    if dims.contains(&d) {
                        0
                    } else {
                        *it.next().unwrap_or(&0)
                    }
                })
                .collect();
        }
        View::Broadcast { .. } => l.strides = broadcast_strides(a0, out_ty.rank()),
        _ => unreachable!("the other selectors are not plain strided views"),
    }
    l
}

/// A broadcast's strides: 0 along new leading dims and along dims of size 1.
fn broadcast_strides(a0: &Loc, rank: usize) -> Vec<i64> {
    let lead = rank - a0.shape.len();
    (0..rank)
        .map(|d| {
            if d < lead || a0.shape[d - lead] == 1 {
                0
            } else {
                a0.strides[d - lead]
            }
        })
        .collect()
}
