//! Preparing a graph for costing ([`Problem::new`]): one walk over the nodes in text order
//! that records where every value's data comes from (its roots: sources, apply outputs, or
//! nothing for generators; views pass their operands' on), one [`ApplyInfo`] per apply with
//! its cost tables and shard layouts, the sources and the sinks; then who reads each apply.

use super::layout::{footprint_bytes, layout, layout_whole, marginal_table};
use super::*;
use crate::ir::footprint::full_boxes;
use crate::ir::graph::{Apply, Graph, Node, NodeKind, ValueId};
use crate::ir::instance::Instance;
use crate::ir::Module;
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
                NodeKind::Source { name, ty } => w.source(node, name, ty.bytes() as f64),
                NodeKind::Generator(_) => w.define(node, vec![Root::Free], true),
                NodeKind::View(v) => w.view(node, &v.args()),
                NodeKind::Sink { value, .. } => w.sink(*value),
                NodeKind::Sequence { .. } | NodeKind::Pin { .. } => {}
                NodeKind::Apply(a) => w.apply(ni, node, a)?,
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
    /// Per value: the nodes reading it; and whether a sink or sequence point names it.
    users: Vec<Vec<usize>>,
    pinned: Vec<bool>,
    applies: Vec<ApplyInfo>,
    sources: Vec<(u32, f64)>,
    sinks: Vec<Input>,
    apply_of_node: HashMap<usize, usize>,
    /// Per apply: the node of the consumer it may be fused into.
    fuse_nodes: Vec<Option<usize>>,
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
            users,
            pinned,
            applies: Vec::new(),
            sources: Vec::new(),
            sinks: Vec::new(),
            apply_of_node: HashMap::new(),
            fuse_nodes: Vec::new(),
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
            roots: self.roots[v.index()].0.clone(),
            exact: self.roots[v.index()].1,
            elem: self.elem(v),
        }
    }

    /// `source @name` of `bytes` bytes, starting on the node the machine says.
    fn source(&mut self, node: &Node, name: &str, bytes: f64) {
        let n = self
            .machine
            .source_node(name)
            .min(self.machine.len().saturating_sub(1) as u32);
        self.sources.push((n, bytes));
        self.define(node, vec![Root::Source { node: n, bytes }], true);
    }

    /// A view reads the roots of all its operands, through itself.
    fn view(&mut self, node: &Node, args: &[ValueId]) {
        let mut rs = Vec::new();
        for a in args {
            for r in &self.roots[a.index()].0 {
                if !rs.contains(r) {
                    rs.push(r.clone());
                }
            }
        }
        self.define(node, rs, false);
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
        let fixed = a.range.is_some();
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
            for p in 2..=(vars[v].1 as usize).min(self.max_parts) {
                layouts.insert((v as u8 + 1, p as u8), layout(inst, v, p, flops));
            }
        }
        let last_node = self.machine.len().saturating_sub(1) as u32;
        ApplyInfo {
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
        let mut p = Problem {
            graph: gi,
            applies: self.applies,
            machine: self.machine,
            max_parts: self.max_parts,
            sources: self.sources,
            sinks: self.sinks,
            consumers,
            sink_readers,
            fused_from: vec![],
        };
        p.index_fusion();
        p
    }
}

/// The (apply, output) roots among `roots`.
fn apply_roots(roots: &[Root]) -> impl Iterator<Item = (usize, usize)> + '_ {
    roots.iter().filter_map(|r| match r {
        Root::Apply { apply, output } => Some((*apply, *output)),
        _ => None,
    })
}
