//! The analytic cost model: per apply, the marginal cost table per index dimension (rows = index
//! variables, columns = flops and bytes per step), and for a sharding plan (per apply: the
//! dimension, the part count and the node of every shard) the four objectives:
//!
//! - **time**: a list schedule over nodes in graph order. A shard starts when its node is free
//!   and every piece of every input it reads has arrived (producer finish time, plus latency and
//!   bytes / bandwidth when the piece lives on another node, plus packing a computed value's
//!   runs on its node, a read and a write of each byte at that node's memory bandwidth; a
//!   source's window is sent in place; a piece one apply's shards fetch on three or more nodes
//!   arrives by a binomial-tree broadcast, `Machine::broadcast`); it runs, after unpacking
//!   what it received (a read and a write of each byte), for the roofline time: the larger of its flops over the node's rate for the apply's kernel
//!   class and dtype and its memory traffic (footprint bytes read and written, plus its share of
//!   the copies of materialized views it reads) over the node's memory bandwidth. A
//!   reduction-sharded apply combines its partial results on the machine's sink node. Sinks are
//!   gathered on the sink node (unless the machine's sinks are distributed). Link contention is
//!   not modelled.
//! - **flops**: total arithmetic, including the combines of reduction shards.
//! - **bytes**: bytes moved between nodes: for every shard and input, the bytes of the exact
//!   footprint of the shard's index box (from the kernel's loads, or the projections for an
//!   extern op) that do not already live on the shard's node. Sources start where the machine
//!   says (node 0 by default; or split by rows over the nodes; or on shared storage, from which
//!   every node reads its windows and nothing moves); a shard's output lives on the node that
//!   computed it. Inputs reached through views are approximated: footprint bytes times the
//!   remote fraction of the values the views read. A shard that reads the same remote bytes as
//!   another shard on the same node fetches them again (no caching).
//! - **memory**: peak bytes per node, counted without freeing, of what each node holds: the
//!   sources (or source rows) that start on it, the windows its shards fetch or read from shared
//!   storage, the windows they write, and the sinks gathered on the sink node.
//!
//! This file holds the model's types and its plan space (validity, fusion constraints, the
//! plan as `shard` input, descriptions); `build` prepares a graph's problem, `layout` the
//! per-apply cost tables and shard layouts, `eval` the costing of a plan.

mod build;
mod eval;
mod layout;
mod state;
mod views;

pub use eval::Evaluator;
pub use layout::marginal_table;

use super::machine::{Class, Machine, Placement};
use crate::ir::footprint::{Box1, Boxes};
use crate::passes::shard::ApplyPlan;
use layout::Layout;
use std::collections::HashMap;

/// The most shards of one apply a plan may use.
pub const MAX_PARTS: usize = 64;

/// The part counts a plan may split a variable of at most `most` parts into: every count up to
/// 8, then only the powers of two and `most` itself, so that the layouts prepared per apply and
/// the choices of a mutation stay few at 64 nodes.
pub fn part_counts(most: usize) -> Vec<usize> {
    (2..=most.min(MAX_PARTS))
        .filter(|&p| p <= 8 || p.is_power_of_two() || p == most)
        .collect()
}
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
    /// Source number `index` of [`Problem`]'s sources.
    Source {
        index: usize,
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
    /// The value read.
    value: crate::ir::graph::ValueId,
    roots: Vec<Root>,
    /// Read directly (not through views): footprints intersect the producer's pieces exactly.
    exact: bool,
    elem: f64,
    /// Bytes the copies materializing the views it is read through read and write (0 when
    /// read directly or through strided views only).
    copy: f64,
    /// Elements of the value read (a reader of part of it is charged that part of `copy`).
    elements: f64,
}

/// A source: where it starts, its bytes, its whole box and bytes per element.
#[derive(Clone, Debug)]
struct SourceInfo {
    place: Placement,
    bytes: f64,
    elem: f64,
    /// (box, node) of each piece: one whole on its node, the rows split over all nodes, or
    /// none for a shared source.
    pieces: Vec<(Box1, usize)>,
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
    /// Its kernel class and whether it computes in f64 (which node throughput applies).
    pub class: Class,
    pub f64: bool,
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
    /// The part counts variable `v` may be split into ([`part_counts`] of [`Self::max_parts`]).
    pub fn part_counts(&self, v: usize, limit: usize) -> Vec<usize> {
        part_counts(self.max_parts(v, limit))
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
    sources: Vec<SourceInfo>,
    sinks: Vec<Input>,
    /// Per apply: the applies reading its outputs (directly or through views).
    consumers: Vec<Vec<usize>>,
    /// Per apply: the sinks reading its outputs.
    sink_readers: Vec<Vec<usize>>,
    /// Per apply: the applies that may fuse into it.
    fused_from: Vec<Vec<usize>>,
    /// Inputs read through views priced exactly ([`Problem::with_exact_views`], which the
    /// cost pass uses); `None` for a problem from [`Problem::new`] alone (the probes, the bench).
    views: Option<std::sync::Arc<views::Views>>,
    /// Who reads and who updates each state (`state.rs`).
    states: state::States,
}

impl Problem {
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

    /// Every apply that can be split along its first parallel variable split into `parts` (or as
    /// many as that variable allows) on nodes `0, 1, …`, the rest as [`Problem::unsharded`]: the
    /// data-parallel plan. Consecutive applies split alike line up, so a single mutation, which
    /// splits one apply and moves its neighbours' data, rarely reaches such a plan by itself.
    pub fn aligned(&self, parts: usize) -> Plan {
        let mut plan = self.unsharded();
        for (g, a) in plan.iter_mut().zip(&self.applies) {
            let Some(&v) = a.dims.first().filter(|&&v| v < a.parallel) else {
                continue;
            };
            let counts = a.part_counts(v, self.max_parts);
            if let Some(&k) = counts.iter().rev().find(|&&k| k <= parts) {
                *g = Gene::split(v, &(0..k as u8).collect::<Vec<_>>());
            }
        }
        plan
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
