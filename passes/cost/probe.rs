//! The search space the cost pass searches: [`problem`] builds the model of a graph and keeps
//! only the (apply, variable) pairs `shard` really splits and the producer→consumer pairs
//! `fuse` really fuses. Each candidate is tried on the applies alone: the apply (or the pair)
//! is isolated in a small module of its own (`rewrite::isolate`, its operands as sources), the
//! pass's own rewrite runs there, and the applies it made are verified
//! (`verify::verify_one`). A probe costs as much as the rewrite, not as the module.

use super::model::Problem;
use super::Config;
use crate::ir::graph::NodeKind;
use crate::ir::Module;
use crate::passes::fuse::select::fuse_pairs;
use crate::passes::rewrite::isolate;
use crate::passes::shard::{apply_plan, ApplyPlan};
use crate::verify::{verify_one, GraphFacts};
use std::collections::{HashMap, HashSet};

/// Builds the problem of graph `gi` of `m` (verified, with `facts`), keeping only the
/// (apply, variable) pairs that `shard::apply_plan` splits into applies that verify and the
/// fusion pairs that `fuse::select::fuse_pairs` fuses into an apply that verifies.
pub fn problem(m: &Module, gi: usize, facts: &GraphFacts, cfg: &Config) -> Result<Problem, String> {
    let mut p = Problem::new(m, gi, facts, cfg.machine.clone(), cfg.max_parts)?;
    let shardable: HashSet<(usize, usize)> = p
        .applies
        .iter()
        .enumerate()
        .flat_map(|(ai, a)| a.dims.iter().map(move |&v| (ai, v)))
        .filter(|&(ai, v)| {
            let a = &p.applies[ai];
            shards(m, gi, facts, a.node, &a.vars[v].0)
        })
        .collect();
    p.restrict(|ai, v| shardable.contains(&(ai, v)));
    let fusable: HashSet<usize> = p
        .applies
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            a.fuse_into
                .is_some_and(|c| fuses(m, gi, facts, a.node, p.applies[c].node))
        })
        .map(|(ai, _)| ai)
        .collect();
    p.restrict_fusion(|ai, _| fusable.contains(&ai));
    Ok(p)
}

/// Whether `shard` splits the apply at node `node` along variable `var` in two parts into
/// applies that verify.
fn shards(m: &Module, gi: usize, facts: &GraphFacts, node: usize, var: &str) -> bool {
    let Some((mut iso, iso_facts, at)) = isolated(m, gi, facts, &[node]) else {
        return false;
    };
    let plan = ApplyPlan {
        dim: var.to_string(),
        parts: 2,
        nodes: vec![0, 0],
    };
    apply_plan(&mut iso, 0, &iso_facts, &HashMap::from([(at[0], plan)])).is_ok()
        && !verify_one(&mut iso, 0).0.has_errors()
}

/// Whether `fuse` fuses the apply at node `producer` into the one at node `consumer` (which
/// reads it) into an apply that verifies.
fn fuses(m: &Module, gi: usize, facts: &GraphFacts, producer: usize, consumer: usize) -> bool {
    let Some((mut iso, iso_facts, at)) = isolated(m, gi, facts, &[producer, consumer]) else {
        return false;
    };
    fuse_pairs(&mut iso, 0, &iso_facts, &[(at[0], at[1])]).is_ok_and(|left| left.is_empty())
        && !verify_one(&mut iso, 0).0.has_errors()
}

/// The applies at `nodes` (text order) of graph `gi` alone in a module of their own, with
/// their facts and their node indices there. The module holds the ops their rewrites may use:
/// their own, and the ones a rewrite reuses by name when they exist (`@op.partial.k`,
/// `@op.epilogue.k`, the combines `@tapc.sum.f32`, ...).
fn isolated(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    nodes: &[usize],
) -> Option<(Module, GraphFacts, Vec<usize>)> {
    let g = m.graphs.get(gi)?;
    let (iso_graph, at) = isolate(g, nodes)?;
    let mut instances = HashMap::new();
    let mut bases = Vec::new();
    for (&n, &i) in nodes.iter().zip(&at) {
        let NodeKind::Apply(a) = &g.nodes[n].kind else {
            return None;
        };
        instances.insert(i, facts.instances.get(&n)?.clone());
        bases.push((a.op.as_str(), format!("{}.", a.op)));
    }
    let used = |name: &str| {
        name.starts_with("tapc.")
            || bases
                .iter()
                .any(|(op, derived)| name == *op || name.starts_with(derived.as_str()))
    };
    let mut iso = Module::default();
    iso.ops = m.ops.iter().filter(|o| used(&o.name)).cloned().collect();
    iso.graphs = vec![iso_graph];
    Some((iso, GraphFacts { instances }, at))
}
