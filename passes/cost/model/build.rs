//! Preparing a graph for costing ([`Problem::new`]): one walk over the nodes in text order
//! that records where every value's data comes from (its roots: sources, apply outputs, or
//! nothing for generators; views pass their operands' on), one [`ApplyInfo`] per apply with
//! its cost tables and shard layouts, the sources and the sinks; then who reads each apply.

use super::layout::{footprint_bytes, layout, layout_whole, marginal_table, Layout, ShardLayout};
use super::*;
use crate::ir::footprint::full_boxes;
use crate::ir::graph::{Apply, Graph, Node, NodeKind, PadMode, ValueId, View};
use crate::ir::instance::Instance;
use crate::ir::Module;
use crate::passes::cost::machine::Placement;
use crate::verify::GraphFacts;

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
        let mut w = Walk::new(g, facts, machine, max_parts.clamp(1, MAX_PARTS));
        for (ni, node) in g.nodes.iter().enumerate() {
            match &node.kind {
                NodeKind::Source { name, ty, state } => {
                    if *state {
                        w.states.push((name.clone(), w.sources.len()));
                    }
                    w.source(node, name, ty)
                }
                NodeKind::Generator(_) => w.define(node, vec![Root::Free], true),
                NodeKind::Scatter(s) => w.scatter(ni, node, s),
                NodeKind::View(v) => w.view(node, v),
                NodeKind::Sink {
                    value,
                    name,
                    update,
                } => {
                    if *update {
                        w.updates.push((name.clone(), w.sinks.len()));
                    }
                    w.sink(*value)
                }
                NodeKind::Sequence { .. } | NodeKind::Pin { .. } => {}
                NodeKind::Apply(a) => w.apply(ni, node, a)?,
                NodeKind::Grad { .. } => {
                    return Err("a `grad` statement must be lowered first".into())
                }
            }
        }
        if w.machine.len() > 255 {
            return Err("the cost model handles at most 255 nodes".into());
        }
        Ok(w.finish(gi))
    }
}

/// The state of [`Problem::new`]'s walk over a graph in text order.
struct Walk<'a> {
    g: &'a Graph,
    facts: &'a GraphFacts,
    machine: Machine,
    max_parts: usize,
    /// Per value: the roots of its data, and whether it is read directly (not through views).
    roots: Vec<(Vec<Root>, bool)>,
    /// Per value: bytes the copies that materialize it (and the views it is made of) read and
    /// write (see [`copy_bytes`]).
    copies: Vec<f64>,
    /// Per value: the nodes reading it; and whether a sink or sequence point names it.
    users: Vec<Vec<usize>>,
    pinned: Vec<bool>,
    applies: Vec<ApplyInfo>,
    sources: Vec<SourceInfo>,
    sinks: Vec<Input>,
    apply_of_node: HashMap<usize, usize>,
    /// Per apply: the node of the consumer it may be fused into.
    fuse_nodes: Vec<Option<usize>>,
    /// Each state's name and source index, each update's name and sink index.
    states: Vec<(String, usize)>,
    updates: Vec<(String, usize)>,
}

impl<'a> Walk<'a> {
    fn new(g: &'a Graph, facts: &'a GraphFacts, machine: Machine, max_parts: usize) -> Self {
        let (users, pinned) = crate::passes::fuse::select::users_and_pinned(g);
        Walk {
            g,
            facts,
            machine,
            max_parts,
            roots: vec![(vec![], true); g.values.len()],
            copies: vec![0.0; g.values.len()],
            users,
            pinned,
            applies: Vec::new(),
            sources: Vec::new(),
            sinks: Vec::new(),
            apply_of_node: HashMap::new(),
            fuse_nodes: Vec::new(),
            states: Vec::new(),
            updates: Vec::new(),
        }
    }

    /// Every result of `node` comes from `roots` (`exact`: read directly, not through views).
    fn define(&mut self, node: &Node, roots: Vec<Root>, exact: bool) {
        for r in &node.results {
            self.roots[r.index()] = (roots.clone(), exact);
        }
    }

    /// Bytes per element of value `v`.
    fn elem(&self, v: ValueId) -> f64 {
        self.g
            .ty(v)
            .map(|t| t.dtype.size_bytes() as f64)
            .unwrap_or(4.0)
    }

    /// How an apply or sink sees value `v`.
    fn input(&self, v: ValueId) -> Input {
        Input {
            value: v,
            roots: self.roots[v.index()].0.clone(),
            exact: self.roots[v.index()].1,
            elem: self.elem(v),
            copy: self.copies[v.index()],
            elements: self.g.ty(v).map_or(1.0, |t| t.elements().max(1) as f64),
        }
    }

    /// `source @name` of type `ty`, starting where the machine says.
    fn source(&mut self, node: &Node, name: &str, ty: &crate::ir::TensorType) {
        let last = self.machine.len().saturating_sub(1) as u32;
        let place = match self.machine.source(name) {
            Placement::Node(n) => Placement::Node(n.min(last)),
            p => p,
        };
        let index = self.sources.len();
        let shape: Box1 = ty.shape.iter().map(|&d| (0, d)).collect();
        let pieces = match place {
            Placement::Node(n) => vec![(shape.clone(), n as usize)],
            Placement::Shared => vec![],
            Placement::Split if shape.is_empty() => vec![(shape.clone(), 0)],
            Placement::Split => crate::passes::shard::split(shape[0].1, self.machine.len() as i64)
                .into_iter()
                .enumerate()
                .map(|(k, rows)| {
                    let mut b = shape.clone();
                    b[0] = rows;
                    (b, k)
                })
                .collect(),
        };
        self.sources.push(SourceInfo {
            place,
            bytes: ty.bytes() as f64,
            elem: ty.dtype.size_bytes() as f64,
            pieces,
        });
        self.define(node, vec![Root::Source { index }], true);
    }

    /// A view reads the roots of all its operands, through itself; what materializing it
    /// copies is added to what its operands' copies cost.
    fn view(&mut self, node: &Node, v: &View) {
        let mut rs = Vec::new();
        let args = v.args();
        for a in &args {
            for r in &self.roots[a.index()].0 {
                if !rs.contains(r) {
                    rs.push(r.clone());
                }
            }
        }
        let below: f64 = args.iter().map(|a| self.copies[a.index()]).sum();
        let own = copy_bytes(self.g, v, node.results[0], &self.roots, &self.users);
        self.define(node, rs, false);
        for r in &node.results {
            self.copies[r.index()] = below + own;
        }
    }

    fn sink(&mut self, value: ValueId) {
        let input = self.input(value);
        self.sinks.push(input);
    }

    /// The apply `a` at node `ni`: its model, and its results as the roots of their data.
    fn apply(&mut self, ni: usize, node: &Node, a: &Apply) -> Result<(), String> {
        let inst = self
            .facts
            .instances
            .get(&ni)
            .ok_or("cost needs a verified graph")?;
        let ai = self.applies.len();
        self.apply_of_node.insert(ni, ai);
        self.fuse_nodes.push(self.fuse_candidate(node, a, inst));
        let inputs = a.args.iter().map(|&v| self.input(v)).collect();
        for (o, r) in node.results.iter().enumerate() {
            let root = Root::Apply {
                apply: ai,
                output: o,
            };
            self.roots[r.index()] = (vec![root], true);
        }
        let info = self.apply_info(ni, node, a, inst, inputs);
        self.applies.push(info);
        Ok(())
    }

    /// A scatter: a whole task on its `on N` (node 0 when unplaced) that reads its base whole
    /// (every line along the axis), its indices and updates, and writes its result, memory-bound:
    /// its bytes are the base's copy (read and written) plus the indices and updates.
    fn scatter(&mut self, ni: usize, node: &Node, s: &crate::ir::graph::Scatter) {
        let ai = self.applies.len();
        self.apply_of_node.insert(ni, ai);
        self.fuse_nodes.push(None);
        let r = node.results[0];
        let whole = |v: ValueId| -> Box1 {
            self.g
                .ty(v)
                .map_or(vec![], |t| t.shape.iter().map(|&d| (0, d)).collect())
        };
        let operands = s.operands();
        let inputs: Vec<Input> = operands.iter().map(|&v| self.input(v)).collect();
        let bytes = |v: ValueId| self.g.ty(v).map_or(0.0, |t| t.bytes() as f64);
        let out_bytes = bytes(r);
        let traffic = operands.iter().map(|&v| bytes(v)).sum::<f64>() + out_bytes;
        let flops = self.g.ty(s.upd).map_or(0.0, |t| t.elements() as f64);
        let layout = Layout {
            shards: vec![ShardLayout {
                in_boxes: operands.iter().map(|&v| whole(v)).collect(),
                out_boxes: vec![whole(r)],
                out_bytes,
                flops,
                traffic,
            }],
            reduction: false,
            combine_flops: 0.0,
            combine_traffic: 0.0,
            epilogue: vec![],
        };
        self.roots[r.index()] = (
            vec![Root::Apply {
                apply: ai,
                output: 0,
            }],
            true,
        );
        let ty = self.g.ty(r);
        let last_node = self.machine.len().saturating_sub(1) as u32;
        self.applies.push(ApplyInfo {
            class: Class::Elementwise,
            f64: ty.is_some_and(|t| t.dtype == crate::ir::DType::F64),
            node: ni,
            name: self.g.values[r.index()].name.clone(),
            op: "scatter".into(),
            vars: vec![],
            parallel: 0,
            flops,
            bytes: traffic,
            dims: vec![],
            fixed: true,
            pinned_node: s.placement.unwrap_or(0).min(last_node) as u8,
            fuse_into: None,
            table: vec![],
            inputs,
            out_elems: vec![(
                ty.map_or(1.0, |t| t.elements() as f64),
                ty.map_or(4.0, |t| t.dtype.size_bytes() as f64),
            )],
            layouts: HashMap::from([((0u8, 1u8), layout)]),
        });
    }

    /// The node of the consumer the apply may be fused into: its one result is read by exactly
    /// one node, an unsharded apply of a kernel op, and is not pinned; the apply is itself an
    /// unsharded apply of a kernel op.
    fn fuse_candidate(&self, node: &Node, a: &Apply, inst: &Instance) -> Option<usize> {
        let r0 = node.results[0].index();
        let users = &self.users[r0];
        let single = node.results.len() == 1
            && a.range.is_none()
            && inst.stmts.is_some()
            && !self.pinned[r0]
            && !users.is_empty()
            && users.iter().all(|&u| u == users[0]);
        single
            .then(|| users[0])
            .filter(|&u| match &self.g.nodes[u].kind {
                NodeKind::Apply(c) => {
                    c.range.is_none()
                        && self
                            .facts
                            .instances
                            .get(&u)
                            .is_some_and(|i| i.stmts.is_some())
                }
                _ => false,
            })
    }

    /// The model of one apply: its variables, the dimensions it may be sharded along (none for
    /// a shard, which stays where it is placed), its cost table and its shard layouts.
    fn apply_info(
        &self,
        ni: usize,
        node: &Node,
        a: &Apply,
        inst: &Instance,
        inputs: Vec<Input>,
    ) -> ApplyInfo {
        let flops = inst.signature.flops_per_point * inst.points().max(1) as f64;
        // A shard, or an apply placed by a pass (`on N`: the parts of a split reduction or of
        // a split table), stays whole where it is placed.
        let fixed = a.range.is_some() || a.placement.is_some();
        let vars: Vec<(String, i64)> = inst
            .vars
            .iter()
            .map(|v| (v.name.clone(), v.range.1 - v.range.0))
            .collect();
        let dims: Vec<usize> = if fixed || vars.len() > 255 {
            vec![]
        } else {
            (0..vars.len()).filter(|&v| vars[v].1 >= 2).collect()
        };
        let mut layouts = HashMap::new();
        layouts.insert((0u8, 1u8), layout_whole(inst, flops));
        for &v in &dims {
            for p in part_counts((vars[v].1 as usize).min(self.max_parts)) {
                layouts.insert((v as u8 + 1, p as u8), layout(inst, v, p, flops));
            }
        }
        let last_node = self.machine.len().saturating_sub(1) as u32;
        let f64 = inst
            .outputs
            .iter()
            .any(|t| t.dtype == crate::ir::DType::F64);
        ApplyInfo {
            class: class(inst),
            f64,
            node: ni,
            name: self.g.values[node.results[0].index()].name.clone(),
            op: a.op.clone(),
            vars,
            parallel: inst.parallel,
            flops,
            bytes: footprint_bytes(inst, &full_boxes(inst)),
            dims,
            fixed,
            pinned_node: a.placement.unwrap_or(0).min(last_node) as u8,
            fuse_into: None,
            table: marginal_table(inst),
            inputs,
            out_elems: inst
                .outputs
                .iter()
                .map(|t| (t.elements() as f64, t.dtype.size_bytes() as f64))
                .collect(),
            layouts,
        }
    }

    /// The problem: fusion candidates as apply numbers, and who reads each apply.
    fn finish(mut self, gi: usize) -> Problem {
        for (a, f) in self.applies.iter_mut().zip(&self.fuse_nodes) {
            a.fuse_into = f.and_then(|u| self.apply_of_node.get(&u).copied());
        }
        let n = self.applies.len();
        let mut consumers = vec![Vec::new(); n];
        for (ai, a) in self.applies.iter().enumerate() {
            for (apply, _) in a.inputs.iter().flat_map(|i| apply_roots(&i.roots)) {
                if !consumers[apply].contains(&ai) {
                    consumers[apply].push(ai);
                }
            }
        }
        let mut sink_readers = vec![Vec::new(); n];
        for (si, s) in self.sinks.iter().enumerate() {
            for (apply, _) in apply_roots(&s.roots) {
                if !sink_readers[apply].contains(&si) {
                    sink_readers[apply].push(si);
                }
            }
        }
        let pairs: Vec<(usize, usize)> = (self.states.iter())
            .filter_map(|(name, k)| {
                let u = self.updates.iter().find(|(n, _)| n == name)?;
                Some((*k, u.1))
            })
            .collect();
        let inputs: Vec<&[Input]> = self.applies.iter().map(|a| &a.inputs[..]).collect();
        let states = state::states(&pairs, &inputs, &self.sinks, self.sources.len());
        let mut p = Problem {
            graph: gi,
            states,
            applies: self.applies,
            machine: self.machine,
            max_parts: self.max_parts,
            sources: self.sources,
            sinks: self.sinks,
            consumers,
            sink_readers,
            fused_from: vec![],
            views: None,
        };
        p.index_fusion();
        p
    }
}

/// Bytes a materializing view `v` (result `r`) reads and writes when the native backend
/// copies it (`codegen::schedule`): a pad that is not a constant one read only by applies (those
/// are folded into the loads), a repeat, and the operands of a concat or interleave that are
/// not apply outputs written in place; each copies its output (or operand) once, reading and
/// writing it. Strided views (transpose, slice, reverse, broadcast, squeeze, unsqueeze) and
/// reshapes cost nothing (a reshape of a non-contiguous view, which the backend copies, is
/// not told apart).
fn copy_bytes(
    g: &Graph,
    v: &View,
    r: ValueId,
    roots: &[(Vec<Root>, bool)],
    users: &[Vec<usize>],
) -> f64 {
    let bytes = |x: ValueId| g.ty(x).map_or(0.0, |t| t.bytes() as f64);
    match v {
        View::Pad { mode, .. } => {
            let apply_only = !users[r.index()].is_empty()
                && users[r.index()]
                    .iter()
                    .all(|&u| matches!(g.nodes[u].kind, NodeKind::Apply(_)));
            if matches!(mode, PadMode::Constant(_)) && apply_only {
                0.0
            } else {
                2.0 * bytes(r)
            }
        }
        View::Repeat { .. } => 2.0 * bytes(r),
        View::Concat { args, .. } | View::Interleave { args, .. } => args
            .iter()
            .filter(|a| {
                let (rs, exact) = &roots[a.index()];
                !(*exact && matches!(rs.as_slice(), [Root::Apply { .. }]))
            })
            .map(|&a| 2.0 * bytes(a))
            .sum(),
        _ => 0.0,
    }
}

/// The kernel class of `inst`: no reduction variable is elementwise; a reduction of at least
/// two flops per step over two or more inputs (a multiply-add: matmul, convolution, attention
/// scores) is a contraction; any other (sum, max, softmax) a reduction.
fn class(inst: &Instance) -> Class {
    if inst.parallel == inst.vars.len() {
        return Class::Elementwise;
    }
    let steps: f64 = inst.vars[inst.parallel..]
        .iter()
        .map(|v| v.extent().max(1) as f64)
        .product();
    if inst.inputs.len() >= 2 && inst.signature.flops_per_point / steps >= 2.0 {
        Class::Contraction
    } else {
        Class::Reduction
    }
}

/// The (apply, output) roots among `roots`.
fn apply_roots(roots: &[Root]) -> impl Iterator<Item = (usize, usize)> + '_ {
    roots.iter().filter_map(|r| match r {
        Root::Apply { apply, output } => Some((*apply, *output)),
        _ => None,
    })
}
