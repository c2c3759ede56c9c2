//! The analytic cost model: per apply, the marginal cost table per index dimension (rows = index
//! variables, columns = flops and bytes per step), and for a sharding plan (per apply: the
//! dimension, the part count and the node of every shard) the four objectives:
//!
//! - **time**: a list schedule over nodes in graph order. A shard starts when its node is free
//!   and every piece of every input it reads has arrived (producer finish time, plus latency and
//!   bytes / bandwidth when the piece lives on another node); it runs for its flops / the node's
//!   flop/s. A reduction-sharded apply combines its partial results on the machine's sink node.
//!   Sinks are collected on the sink node. Link contention is not modelled.
//! - **flops**: total arithmetic, including the combines of reduction shards.
//! - **bytes**: bytes moved between nodes: for every shard and input, the bytes of the exact
//!   footprint of the shard's index box (from the kernel's loads, or the projections for an
//!   extern op) that do not already live on the shard's node. Sources start where the machine
//!   says (node 0 by default); a shard's output lives on the node that computed it. Inputs
//!   reached through views are approximated: footprint bytes times the remote fraction of the
//!   values the views read. A shard that reads the same remote bytes as another shard on the
//!   same node fetches them again (no caching).
//! - **memory**: peak bytes per node, counted without freeing: resident sources, fetched
//!   inputs and computed outputs.

use super::machine::Machine;
use crate::ir::footprint::{footprint, full_boxes, volume, Box1, Boxes};
use crate::ir::graph::NodeKind;
use crate::ir::instance::Instance;
use crate::ir::Module;
use crate::passes::shard::{split, ApplyPlan};
use crate::verify::GraphFacts;
use std::collections::HashMap;

/// The most shards of one apply a plan may use.
pub const MAX_PARTS: usize = 8;
/// The objectives, in the order of [`Objectives`].
pub const OBJECTIVES: [&str; 4] = ["time", "flops", "bytes", "memory"];
/// `[time (s), flops, bytes moved, peak memory per node (bytes)]`.
pub type Objectives = [f64; 4];

/// How one apply is sharded: `dim` 0 is whole, `d + 1` shards index variable `d` into `parts`;
/// shard `p` runs on node `nodes[p]`. `fused`: the apply's output is fused into its single
/// consumer ([`ApplyInfo::fuse_into`]); only allowed when both are whole on the same node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gene {
    pub dim: u8,
    pub parts: u8,
    pub nodes: [u8; MAX_PARTS],
    pub fused: bool,
}

impl Gene {
    pub fn whole(node: u8) -> Gene {
        let mut nodes = [0; MAX_PARTS];
        nodes[0] = node;
        Gene {
            dim: 0,
            parts: 1,
            nodes,
            fused: false,
        }
    }
    /// Whole on `node`, its output fused into its consumer.
    pub fn fused(node: u8) -> Gene {
        Gene {
            fused: true,
            ..Gene::whole(node)
        }
    }
    pub fn split(var: usize, nodes: &[u8]) -> Gene {
        let mut g = Gene {
            dim: var as u8 + 1,
            parts: nodes.len() as u8,
            nodes: [0; MAX_PARTS],
            fused: false,
        };
        g.nodes[..nodes.len()].copy_from_slice(nodes);
        g
    }
    pub fn is_whole(&self) -> bool {
        self.dim == 0
    }
}

/// One gene per apply, in [`Problem::applies`] order.
pub type Plan = Vec<Gene>;

/// Where the data of a value comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Root {
    Source {
        node: u32,
        bytes: f64,
    },
    Apply {
        apply: usize,
        output: usize,
    },
    /// Generators: available everywhere for free.
    Free,
}

#[derive(Clone, Debug)]
struct Input {
    roots: Vec<Root>,
    /// Read directly (not through views): footprints intersect the producer's pieces exactly.
    exact: bool,
    elem: f64,
}

/// One row of the marginal cost table: the cost of one more step along `dim`.
#[derive(Clone, Debug, PartialEq)]
pub struct MarginalRow {
    pub dim: String,
    pub extent: i64,
    pub reduction: bool,
    pub flops: f64,
    /// Footprint bytes (inputs read + outputs written) added by one more step; `None` for a
    /// dimension of extent 1.
    pub bytes: Option<f64>,
}

#[derive(Clone, Debug)]
struct ShardLayout {
    in_boxes: Vec<Vec<(i64, i64)>>,
    out_boxes: Vec<Vec<(i64, i64)>>,
    out_bytes: f64,
    flops: f64,
}

#[derive(Clone, Debug)]
struct Layout {
    shards: Vec<ShardLayout>,
    reduction: bool,
    combine_flops: f64,
    /// Reduction sharding: per input, what the epilogue (after the combine) reads.
    epilogue: Boxes,
}

/// One apply as the model sees it.
#[derive(Clone, Debug)]
pub struct ApplyInfo {
    /// Node index in the graph.
    pub node: usize,
    /// Name of its first result.
    pub name: String,
    pub op: String,
    /// Every index variable (parallel ones first) and its extent.
    pub vars: Vec<(String, i64)>,
    pub parallel: usize,
    pub flops: f64,
    /// Footprint bytes of the whole apply (inputs read + outputs written).
    pub bytes: f64,
    /// Variables this apply may be sharded along.
    pub dims: Vec<usize>,
    /// Already a shard (or otherwise pinned): stays whole on `pinned_node`.
    pub fixed: bool,
    pub pinned_node: u8,
    /// The apply this one's output may be fused into: its single consumer, reading the output
    /// directly (no view), the output not a sink nor named by a sequence point, both applies
    /// of kernel ops and neither already a shard. [`Problem::restrict_fusion`] narrows it to
    /// the pairs the `fuse` pass actually fuses.
    pub fuse_into: Option<usize>,
    pub table: Vec<MarginalRow>,
    inputs: Vec<Input>,
    out_elems: Vec<(f64, f64)>,
    layouts: HashMap<(u8, u8), Layout>,
}

impl ApplyInfo {
    /// The most parts along variable `v` (bounded by its extent and [`MAX_PARTS`]).
    pub fn max_parts(&self, v: usize, limit: usize) -> usize {
        (self.vars[v].1.max(1) as usize).min(limit).min(MAX_PARTS)
    }
}

/// A graph prepared for costing.
#[derive(Clone, Debug)]
pub struct Problem {
    pub graph: usize,
    pub applies: Vec<ApplyInfo>,
    pub machine: Machine,
    /// Parts a plan may use per apply (≤ [`MAX_PARTS`]).
    pub max_parts: usize,
    sources: Vec<(u32, f64)>,
    sinks: Vec<Input>,
    /// Per apply: the applies reading its outputs (directly or through views).
    consumers: Vec<Vec<usize>>,
    /// Per apply: the sinks reading its outputs.
    sink_readers: Vec<Vec<usize>>,
    /// Per apply: the applies that may fuse into it.
    fused_from: Vec<Vec<usize>>,
}

fn inter(a: &[(i64, i64)], b: &[(i64, i64)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&(l1, h1), &(l2, h2))| (h1.min(h2) - l1.max(l2)).max(0) as f64)
        .product()
}

fn footprint_bytes(inst: &Instance, boxes: &[(i64, i64)]) -> f64 {
    let (ins, _, outs) = footprint(inst, boxes, None);
    let size = |t: &crate::ir::TensorType| t.dtype.size_bytes() as f64;
    ins.iter()
        .zip(&inst.inputs)
        .map(|(b, t)| volume(b) * size(t))
        .sum::<f64>()
        + outs
            .iter()
            .zip(&inst.outputs)
            .map(|(b, t)| volume(b) * size(t))
            .sum::<f64>()
}

/// The marginal cost table of an instance: one row per index variable (parallel, then
/// reduction). Flops per step are the apply's flops over the extent (constant by
/// construction); bytes per step are the footprint of the full box minus that of the box one
/// step shorter along the variable.
pub fn marginal_table(inst: &Instance) -> Vec<MarginalRow> {
    let full = full_boxes(inst);
    let flops = inst.signature.flops_per_point * inst.points().max(1) as f64;
    let total = footprint_bytes(inst, &full);
    inst.vars
        .iter()
        .enumerate()
        .map(|(v, var)| {
            let ext = var.range.1 - var.range.0;
            let bytes = (ext >= 2).then(|| {
                let mut b = full.clone();
                b[v].1 -= 1;
                total - footprint_bytes(inst, &b)
            });
            MarginalRow {
                dim: var.name.clone(),
                extent: ext,
                reduction: v >= inst.parallel,
                flops: flops / ext.max(1) as f64,
                bytes,
            }
        })
        .collect()
}

fn layout(inst: &Instance, v: usize, parts: usize, flops: f64) -> Layout {
    let full = full_boxes(inst);
    let (lo0, hi0) = full[v];
    let ext = hi0 - lo0;
    let reduction = v >= inst.parallel;
    let size = |t: &crate::ir::TensorType| t.dtype.size_bytes() as f64;
    let shards = split(ext, parts as i64)
        .into_iter()
        .map(|(lo, hi)| {
            let mut b = full.clone();
            b[v] = (lo0 + lo, lo0 + hi);
            let (in_boxes, _, mut out_boxes) = footprint(inst, &b, reduction.then_some(v));
            if reduction {
                // Partial results cover the whole output.
                out_boxes = footprint(inst, &full, None).2;
            }
            let out_bytes = out_boxes
                .iter()
                .zip(&inst.outputs)
                .map(|(b, t)| volume(b) * size(t))
                .sum();
            ShardLayout {
                in_boxes,
                out_boxes,
                out_bytes,
                flops: flops * (hi - lo) as f64 / ext.max(1) as f64,
            }
        })
        .collect::<Vec<_>>();
    let out_elems: f64 = inst.outputs.iter().map(|t| t.elements() as f64).sum();
    let combine_flops = if reduction {
        (shards.len() as f64 - 1.0) * out_elems
    } else {
        0.0
    };
    let epilogue = if reduction {
        footprint(inst, &full, Some(v)).1
    } else {
        vec![]
    };
    Layout {
        shards,
        reduction,
        combine_flops,
        epilogue,
    }
}

impl Problem {
    /// Prepares graph `gi` of `m` (verified, with its `facts`) for costing on `machine`, with at
    /// most `max_parts` shards per apply. Every variable of extent ≥ 2 is a candidate dimension;
    /// [`Problem::restrict`] narrows them.
    pub fn new(
        m: &Module,
        gi: usize,
        facts: &GraphFacts,
        machine: Machine,
        max_parts: usize,
    ) -> Result<Problem, String> {
        let g = m.graphs.get(gi).ok_or("no such graph")?;
        let max_parts = max_parts.clamp(1, MAX_PARTS);
        let mut roots: Vec<(Vec<Root>, bool)> = vec![(vec![], true); g.values.len()];
        let mut applies = Vec::new();
        let mut sources = Vec::new();
        let mut sinks = Vec::new();
        let elem_of =
            |v: crate::ir::ValueId| g.ty(v).map(|t| t.dtype.size_bytes() as f64).unwrap_or(4.0);
        // Who reads each value (node indices), and which values are pinned (sinks, sequences).
        let (users, pinned) = crate::passes::fuse::select::users_and_pinned(g);
        let mut apply_of_node: HashMap<usize, usize> = HashMap::new();
        let mut fuse_nodes: Vec<Option<usize>> = Vec::new();
        for (ni, node) in g.nodes.iter().enumerate() {
            match &node.kind {
                NodeKind::Source { name, ty } => {
                    let n = machine
                        .source_node(name)
                        .min(machine.len().saturating_sub(1) as u32);
                    let bytes = ty.bytes() as f64;
                    sources.push((n, bytes));
                    roots[node.results[0].index()] = (vec![Root::Source { node: n, bytes }], true);
                }
                NodeKind::Generator(_) => {
                    for r in &node.results {
                        roots[r.index()] = (vec![Root::Free], true);
                    }
                }
                NodeKind::View(v) => {
                    let mut rs = Vec::new();
                    for a in v.args() {
                        for r in &roots[a.index()].0 {
                            if !rs.contains(r) {
                                rs.push(r.clone());
                            }
                        }
                    }
                    for r in &node.results {
                        roots[r.index()] = (rs.clone(), false);
                    }
                }
                NodeKind::Sink { value, .. } => {
                    let (rs, exact) = roots[value.index()].clone();
                    sinks.push(Input {
                        roots: rs,
                        exact,
                        elem: elem_of(*value),
                    });
                }
                NodeKind::Sequence { .. } | NodeKind::Pin { .. } => {}
                NodeKind::Apply(a) => {
                    let inst = facts
                        .instances
                        .get(&ni)
                        .ok_or("cost needs a verified graph")?;
                    let ai = applies.len();
                    apply_of_node.insert(ni, ai);
                    // A fusion candidate: one result, read by exactly one node, an apply, not
                    // pinned; a kernel op (the consumer's kind is checked below).
                    let r0 = node.results[0].index();
                    let fuse_node = (node.results.len() == 1
                        && a.range.is_none()
                        && inst.stmts.is_some()
                        && !pinned[r0]
                        && !users[r0].is_empty()
                        && users[r0].iter().all(|&u| u == users[r0][0]))
                    .then(|| users[r0][0])
                    .filter(|&u| match &g.nodes[u].kind {
                        NodeKind::Apply(c) => {
                            c.range.is_none()
                                && facts.instances.get(&u).is_some_and(|i| i.stmts.is_some())
                        }
                        _ => false,
                    });
                    fuse_nodes.push(fuse_node);
                    let inputs = a
                        .args
                        .iter()
                        .map(|&v| Input {
                            roots: roots[v.index()].0.clone(),
                            exact: roots[v.index()].1,
                            elem: elem_of(v),
                        })
                        .collect();
                    for (o, r) in node.results.iter().enumerate() {
                        roots[r.index()] = (
                            vec![Root::Apply {
                                apply: ai,
                                output: o,
                            }],
                            true,
                        );
                    }
                    let flops = inst.signature.flops_per_point * inst.points().max(1) as f64;
                    let fixed = a.range.is_some();
                    let vars: Vec<(String, i64)> = inst
                        .vars
                        .iter()
                        .map(|v| (v.name.clone(), v.range.1 - v.range.0))
                        .collect();
                    let dims = if fixed || vars.len() > 255 {
                        vec![]
                    } else {
                        (0..vars.len()).filter(|&v| vars[v].1 >= 2).collect()
                    };
                    let mut layouts = HashMap::new();
                    layouts.insert((0u8, 1u8), layout_whole(inst, flops));
                    for &v in &dims {
                        for p in 2..=(vars[v].1 as usize).min(max_parts) {
                            layouts.insert((v as u8 + 1, p as u8), layout(inst, v, p, flops));
                        }
                    }
                    applies.push(ApplyInfo {
                        node: ni,
                        name: g.values[node.results[0].index()].name.clone(),
                        op: a.op.clone(),
                        vars,
                        parallel: inst.parallel,
                        flops,
                        bytes: footprint_bytes(inst, &full_boxes(inst)),
                        dims,
                        fixed,
                        pinned_node: a
                            .placement
                            .unwrap_or(0)
                            .min(machine.len().saturating_sub(1) as u32)
                            as u8,
                        fuse_into: None,
                        table: marginal_table(inst),
                        inputs,
                        out_elems: inst
                            .outputs
                            .iter()
                            .map(|t| (t.elements() as f64, t.dtype.size_bytes() as f64))
                            .collect(),
                        layouts,
                    });
                }
            }
        }
        if machine.len() > 255 {
            return Err("the cost model handles at most 255 nodes".into());
        }
        for (a, f) in applies.iter_mut().zip(fuse_nodes) {
            a.fuse_into = f.and_then(|u| apply_of_node.get(&u).copied());
        }
        let n = applies.len();
        let mut consumers = vec![Vec::new(); n];
        for (ai, a) in applies.iter().enumerate() {
            for inp in &a.inputs {
                for r in &inp.roots {
                    if let Root::Apply { apply, .. } = r {
                        if !consumers[*apply].contains(&ai) {
                            consumers[*apply].push(ai);
                        }
                    }
                }
            }
        }
        let mut sink_readers = vec![Vec::new(); n];
        for (si, s) in sinks.iter().enumerate() {
            for r in &s.roots {
                if let Root::Apply { apply, .. } = r {
                    if !sink_readers[*apply].contains(&si) {
                        sink_readers[*apply].push(si);
                    }
                }
            }
        }
        let mut p = Problem {
            graph: gi,
            applies,
            machine,
            max_parts,
            sources,
            sinks,
            consumers,
            sink_readers,
            fused_from: vec![],
        };
        p.index_fusion();
        Ok(p)
    }

    fn index_fusion(&mut self) {
        self.fused_from = vec![Vec::new(); self.applies.len()];
        for (ai, a) in self.applies.iter().enumerate() {
            if let Some(c) = a.fuse_into {
                self.fused_from[c].push(ai);
            }
        }
    }

    /// Keeps only the fusion pairs `keep` returns true for (by producer and consumer apply).
    pub fn restrict_fusion(&mut self, mut keep: impl FnMut(usize, usize) -> bool) {
        for (ai, a) in self.applies.iter_mut().enumerate() {
            a.fuse_into = a.fuse_into.filter(|&c| keep(ai, c));
        }
        self.index_fusion();
    }

    /// The fusable pairs in words: `%h into %r`.
    pub fn fusable_pairs(&self) -> Vec<String> {
        self.applies
            .iter()
            .filter_map(|a| {
                a.fuse_into
                    .map(|c| format!("%{} into %{}", a.name, self.applies[c].name))
            })
            .collect()
    }

    /// The applies that may fuse into apply `ai`.
    pub fn fused_from(&self, ai: usize) -> &[usize] {
        &self.fused_from[ai]
    }

    /// The fused pairs of `plan`, as (producer, consumer) apply numbers.
    pub fn fused_pairs(&self, plan: &[Gene]) -> Vec<(usize, usize)> {
        plan.iter()
            .zip(&self.applies)
            .enumerate()
            .filter(|(_, (g, _))| g.fused)
            .filter_map(|(ai, (_, a))| a.fuse_into.map(|c| (ai, c)))
            .collect()
    }

    /// Whether the fusion constraints that involve apply `ai` hold in `plan`: a fused apply and
    /// its consumer are both whole on the same node.
    pub fn fusion_ok(&self, plan: &[Gene], ai: usize) -> bool {
        let pair = |q: usize| -> bool {
            let g = &plan[q];
            if !g.fused {
                return true;
            }
            match self.applies[q].fuse_into {
                Some(c) => g.is_whole() && plan[c].is_whole() && plan[c].nodes[0] == g.nodes[0],
                None => false,
            }
        };
        pair(ai) && self.fused_from[ai].iter().all(|&q| pair(q))
    }

    /// Keeps only the variables `keep` returns true for (by apply number and variable).
    pub fn restrict(&mut self, mut keep: impl FnMut(usize, usize) -> bool) {
        for (ai, a) in self.applies.iter_mut().enumerate() {
            a.dims.retain(|&v| keep(ai, v));
            let dims = a.dims.clone();
            a.layouts
                .retain(|&(d, _), _| d == 0 || dims.contains(&(d as usize - 1)));
        }
    }

    /// The plan that runs everything whole where it is (node 0 unless pinned).
    pub fn unsharded(&self) -> Plan {
        self.applies
            .iter()
            .map(|a| Gene::whole(if a.fixed { a.pinned_node } else { 0 }))
            .collect()
    }

    /// Whether `plan` is in the search space.
    pub fn valid(&self, plan: &[Gene]) -> bool {
        plan.len() == self.applies.len()
            && plan.iter().zip(&self.applies).all(|(g, a)| {
                let n = self.machine.len();
                (g.dim == 0
                    || (!a.fixed
                        && a.layouts.contains_key(&(g.dim, g.parts))
                        && (g.parts as usize) <= self.max_parts))
                    && (g.dim != 0 || g.parts == 1)
                    && (!a.fixed || g.nodes[0] == a.pinned_node)
                    && g.nodes[..g.parts as usize]
                        .iter()
                        .all(|&x| (x as usize) < n)
            })
            && (0..plan.len()).all(|ai| self.fusion_ok(plan, ai))
    }

    /// The four objectives of `plan` (which must be [`valid`](Problem::valid)), costed from
    /// scratch (an [`Evaluator`] with empty caches).
    pub fn evaluate(&self, plan: &[Gene]) -> Objectives {
        Evaluator::new(self).evaluate(plan)
    }

    /// The pieces of apply `j`'s output `o` under gene `g`: (piece number, box, node). A
    /// reduction-sharded apply has one piece, the combined result on the sink node.
    fn pieces<'a>(
        &'a self,
        j: usize,
        o: usize,
        g: &'a Gene,
    ) -> impl Iterator<Item = (usize, &'a Box1, usize)> + 'a {
        let lay = &self.applies[j].layouts[&(g.dim, g.parts)];
        let sink = self.sink_node();
        let n = if lay.reduction { 1 } else { lay.shards.len() };
        (0..n).map(move |p| {
            let node = if lay.reduction {
                sink
            } else {
                g.nodes[p] as usize
            };
            (p, &lay.shards[p].out_boxes[o], node)
        })
    }

    fn sink_node(&self) -> usize {
        (self.machine.sink_node as usize).min(self.machine.len() - 1)
    }

    /// Bytes moved to bring input `inp` at box `bx` to node `n`, the memory it takes there, and
    /// the dependencies of its arrival, pushed to `deps`.
    fn fetch(
        &self,
        plan: &[Gene],
        inp: &Input,
        bx: &[(i64, i64)],
        n: usize,
        deps: &mut Vec<Dep>,
    ) -> f64 {
        let mach = &self.machine;
        if volume(bx) == 0.0 {
            return 0.0;
        }
        if inp.exact && inp.roots.len() == 1 {
            let mut bytes = 0.0f64;
            match &inp.roots[0] {
                Root::Source { node, .. } => {
                    let src = *node as usize;
                    if src != n {
                        bytes = volume(bx) * inp.elem;
                        deps.push(Dep::source(mach.transfer(src, n, bytes)));
                    }
                }
                Root::Apply { apply, output } => {
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = inter(bx, pb) * inp.elem;
                        if b > 0.0 {
                            let t = if pn != n {
                                bytes += b;
                                mach.transfer(pn, n, b)
                            } else {
                                0.0
                            };
                            deps.push(Dep::piece(*apply, piece, t));
                        }
                    }
                }
                Root::Free => {}
            }
            return bytes;
        }
        // Through views: the remote fraction of everything the views read; the data arrives
        // after the latest piece is done.
        let (mut total, mut remote) = (0.0f64, 0.0f64);
        let mut from = n;
        let first = deps.len();
        for r in &inp.roots {
            match r {
                Root::Source { node, bytes: b } => {
                    total += b;
                    if *node as usize != n {
                        remote += b;
                        from = *node as usize;
                    }
                }
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = volume(pb) * elem;
                        total += b;
                        deps.push(Dep::piece(*apply, piece, 0.0));
                        if pn != n {
                            remote += b;
                            from = pn;
                        }
                    }
                }
                Root::Free => {}
            }
        }
        let bytes = if total > 0.0 {
            volume(bx) * inp.elem * remote / total
        } else {
            0.0
        };
        let t = mach.transfer(from, n, bytes);
        for d in &mut deps[first..] {
            d.delay = t;
        }
        deps.push(Dep::source(t));
        bytes
    }

    /// The plan-dependent but time-independent terms of apply `ai`: its shards' nodes,
    /// durations and input dependencies, bytes moved, memory per node and flops. They depend
    /// only on the apply's own gene and on the genes of the applies it reads.
    fn term(&self, plan: &[Gene], ai: usize, t: &mut Term) {
        let a = &self.applies[ai];
        let g = &plan[ai];
        let mach = &self.machine;
        let nn = mach.len();
        let sink = self.sink_node();
        let lay = &a.layouts[&(g.dim, g.parts)];
        t.shards.clear();
        t.deps.clear();
        t.partial.clear();
        t.mem.clear();
        t.mem.resize(nn, 0.0);
        t.moved = 0.0;
        t.flops = 0.0;
        for (p, sh) in lay.shards.iter().enumerate() {
            let n = g.nodes[p] as usize;
            let first = t.deps.len();
            for (inp, bx) in a.inputs.iter().zip(&sh.in_boxes) {
                let b = self.fetch(plan, inp, bx, n, &mut t.deps);
                t.moved += b;
                t.mem[n] += b;
            }
            t.shards
                .push((n, sh.flops / mach.nodes[n].flops, first..t.deps.len()));
            t.flops += sh.flops;
            // A fused output is never materialized.
            if !g.fused {
                t.mem[n] += sh.out_bytes;
            }
            if lay.reduction {
                let d = if n != sink {
                    t.moved += sh.out_bytes;
                    t.mem[sink] += sh.out_bytes;
                    mach.transfer(n, sink, sh.out_bytes)
                } else {
                    0.0
                };
                t.partial.push(d);
            }
        }
        t.combine = None;
        if lay.reduction {
            let first = t.deps.len();
            for (inp, bx) in a.inputs.iter().zip(&lay.epilogue) {
                let b = self.fetch(plan, inp, bx, sink, &mut t.deps);
                t.moved += b;
                t.mem[sink] += b;
            }
            t.combine = Some((
                lay.combine_flops / mach.nodes[sink].flops,
                first..t.deps.len(),
            ));
            t.flops += lay.combine_flops;
            t.mem[sink] += lay.shards[0].out_bytes;
        }
    }

    /// Bytes moved to collect sink `si` on the sink node, and the dependencies of its arrival.
    fn sink_term(&self, plan: &[Gene], si: usize, t: &mut SinkTerm) {
        let mach = &self.machine;
        let sink = self.sink_node();
        t.deps.clear();
        t.moved = 0.0;
        for r in &self.sinks[si].roots {
            match r {
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = if pn != sink { volume(pb) * elem } else { 0.0 };
                        t.moved += b;
                        t.deps
                            .push(Dep::piece(*apply, piece, mach.transfer(pn, sink, b)));
                    }
                }
                Root::Source { node, bytes } => {
                    if *node as usize != sink {
                        t.moved += bytes;
                        t.deps
                            .push(Dep::source(mach.transfer(*node as usize, sink, *bytes)));
                    }
                }
                Root::Free => {}
            }
        }
    }

    /// The plan as `shard::apply_plan` input (keyed by graph node index). A whole apply on a
    /// node other than 0 becomes a single shard placed there.
    pub fn to_apply_plans(&self, plan: &[Gene]) -> HashMap<usize, ApplyPlan> {
        let mut out = HashMap::new();
        for (a, g) in self.applies.iter().zip(plan) {
            if a.fixed {
                continue;
            }
            if g.is_whole() {
                if g.nodes[0] != 0 && a.parallel > 0 {
                    out.insert(
                        a.node,
                        ApplyPlan {
                            dim: a.vars[0].0.clone(),
                            parts: 1,
                            nodes: vec![g.nodes[0] as u32],
                        },
                    );
                }
                continue;
            }
            let v = g.dim as usize - 1;
            out.insert(
                a.node,
                ApplyPlan {
                    dim: a.vars[v].0.clone(),
                    parts: g.parts as i64,
                    nodes: g.nodes[..g.parts as usize]
                        .iter()
                        .map(|&n| n as u32)
                        .collect(),
                },
            );
        }
        out
    }

    /// `plan` in words: `%h: k/2 on [0, 1]; %y: whole on 0`.
    pub fn describe(&self, plan: &[Gene]) -> String {
        self.applies
            .iter()
            .zip(plan)
            .map(|(a, g)| {
                if g.is_whole() {
                    let fused = match (g.fused, a.fuse_into) {
                        (true, Some(c)) => format!(" fused into %{}", self.applies[c].name),
                        _ => String::new(),
                    };
                    format!("%{}: whole on {}{fused}", a.name, g.nodes[0])
                } else {
                    let nodes: Vec<String> = g.nodes[..g.parts as usize]
                        .iter()
                        .map(|n| n.to_string())
                        .collect();
                    format!(
                        "%{}: {}/{} on [{}]",
                        a.name,
                        a.vars[g.dim as usize - 1].0,
                        g.parts,
                        nodes.join(",")
                    )
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn layout_whole(inst: &Instance, flops: f64) -> Layout {
    let full = full_boxes(inst);
    let (in_boxes, _, out_boxes) = footprint(inst, &full, None);
    let out_bytes = out_boxes
        .iter()
        .zip(&inst.outputs)
        .map(|(b, t)| volume(b) * t.dtype.size_bytes() as f64)
        .sum();
    Layout {
        shards: vec![ShardLayout {
            in_boxes,
            out_boxes,
            out_bytes,
            flops,
        }],
        reduction: false,
        combine_flops: 0.0,
        epilogue: vec![],
    }
}

/// What the start of a shard (or a combine, or the sink collection) waits for: piece `piece`
/// of apply `apply` (none for data that is ready at time 0), plus `delay` seconds of transfer.
#[derive(Clone, Copy, Debug)]
struct Dep {
    apply: u32,
    piece: u32,
    delay: f64,
}

impl Dep {
    const NONE: u32 = u32::MAX;
    fn piece(apply: usize, piece: usize, delay: f64) -> Dep {
        Dep {
            apply: apply as u32,
            piece: piece as u32,
            delay,
        }
    }
    fn source(delay: f64) -> Dep {
        Dep {
            apply: Dep::NONE,
            piece: 0,
            delay,
        }
    }
}

/// The cached, time-independent terms of one apply under a plan (see [`Problem::term`]).
#[derive(Clone, Debug, Default)]
struct Term {
    /// Per shard: node, compute seconds, its dependencies in `deps`.
    shards: Vec<(usize, f64, std::ops::Range<usize>)>,
    deps: Vec<Dep>,
    /// Reduction sharding: per shard, the transfer of its partial result to the sink node.
    partial: Vec<f64>,
    /// Reduction sharding: the combine's seconds and its epilogue dependencies in `deps`.
    combine: Option<(f64, std::ops::Range<usize>)>,
    moved: f64,
    mem: Vec<f64>,
    flops: f64,
}

#[derive(Clone, Debug, Default)]
struct SinkTerm {
    deps: Vec<Dep>,
    moved: f64,
}

/// Costs plans incrementally. It keeps, for the last plan it costed, every apply's
/// time-independent terms (shard dependencies with their transfer times, bytes moved, memory
/// per node, flops) and every sink's. Costing the next plan recomputes the terms only of the
/// applies whose gene changed and of the applies and sinks that read them (the affected
/// transfers), then reruns the list schedule (the critical path) over the cached terms and sums
/// the totals in apply order, so the result is exactly that of costing from scratch.
#[derive(Clone, Debug)]
pub struct Evaluator<'p> {
    p: &'p Problem,
    plan: Plan,
    terms: Vec<Term>,
    sinks: Vec<SinkTerm>,
    fins: Vec<Vec<f64>>,
    fresh: bool,
    dirty: Vec<bool>,
    /// Apply terms recomputed so far (for benchmarks).
    pub recomputed: u64,
}

impl<'p> Evaluator<'p> {
    pub fn new(p: &'p Problem) -> Evaluator<'p> {
        Evaluator {
            p,
            plan: Vec::new(),
            terms: vec![Term::default(); p.applies.len()],
            sinks: vec![SinkTerm::default(); p.sinks.len()],
            fins: vec![Vec::new(); p.applies.len()],
            fresh: true,
            dirty: vec![false; p.applies.len()],
            recomputed: 0,
        }
    }

    /// The objectives of `plan` (which must be [`valid`](Problem::valid)).
    pub fn evaluate(&mut self, plan: &[Gene]) -> Objectives {
        let p = self.p;
        let n = p.applies.len();
        if self.fresh || self.plan.len() != n {
            self.plan = plan.to_vec();
            for ai in 0..n {
                p.term(plan, ai, &mut self.terms[ai]);
            }
            for si in 0..p.sinks.len() {
                p.sink_term(plan, si, &mut self.sinks[si]);
            }
            self.recomputed += n as u64;
            self.fresh = false;
        } else {
            // Changed genes, then everything that reads a changed apply.
            let mut any = false;
            for ((d, old), new) in self.dirty.iter_mut().zip(&self.plan).zip(plan) {
                *d = old != new;
                any |= *d;
            }
            if any {
                self.plan.copy_from_slice(plan);
                let mut redo = self.dirty.clone();
                let mut sinks = vec![false; p.sinks.len()];
                for ai in 0..n {
                    if self.dirty[ai] {
                        for &c in &p.consumers[ai] {
                            redo[c] = true;
                        }
                        for &s in &p.sink_readers[ai] {
                            sinks[s] = true;
                        }
                    }
                }
                for (ai, term) in self.terms.iter_mut().enumerate() {
                    if redo[ai] {
                        p.term(plan, ai, term);
                        self.recomputed += 1;
                    }
                }
                for (si, redo) in sinks.into_iter().enumerate() {
                    if redo {
                        p.sink_term(plan, si, &mut self.sinks[si]);
                    }
                }
            }
        }
        self.schedule()
    }

    /// The list schedule over the cached terms, and the totals.
    fn schedule(&mut self) -> Objectives {
        let p = self.p;
        let nn = p.machine.len();
        let sink = p.sink_node();
        let mut ready = vec![0.0f64; nn];
        let mut mem = vec![0.0f64; nn];
        for &(n, b) in &p.sources {
            mem[n as usize] += b;
        }
        let (mut flops, mut moved) = (0.0f64, 0.0f64);
        let fins = &mut self.fins;
        let arrive = |fins: &[Vec<f64>], deps: &[Dep], mut start: f64| -> f64 {
            for d in deps {
                let fin = if d.apply == Dep::NONE {
                    0.0
                } else {
                    fins[d.apply as usize][d.piece as usize]
                };
                start = start.max(fin + d.delay);
            }
            start
        };
        let mut partial: Vec<f64> = Vec::new();
        for (ai, t) in self.terms.iter().enumerate() {
            partial.clear();
            for (n, dur, deps) in &t.shards {
                let start = arrive(fins, &t.deps[deps.clone()], ready[*n]);
                let fin = start + dur;
                ready[*n] = fin;
                partial.push(fin);
            }
            if let Some((dur, deps)) = &t.combine {
                let mut start = ready[sink];
                for (fin, d) in partial.iter().zip(&t.partial) {
                    start = start.max(fin + d);
                }
                let start = arrive(fins, &t.deps[deps.clone()], start);
                let fin = start + dur;
                ready[sink] = fin;
                partial.clear();
                partial.push(fin);
            }
            fins[ai].clear();
            fins[ai].extend_from_slice(&partial);
            flops += t.flops;
            moved += t.moved;
            for (m, x) in mem.iter_mut().zip(&t.mem) {
                *m += x;
            }
        }
        let mut end = ready.iter().cloned().fold(0.0f64, f64::max);
        for s in &self.sinks {
            moved += s.moved;
            end = arrive(fins, &s.deps, end);
        }
        let peak = mem.iter().cloned().fold(0.0f64, f64::max);
        [end, flops, moved, peak]
    }
}
