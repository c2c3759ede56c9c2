//! Fusion of chosen producer→consumer pairs only (the entry point of the `cost` pass).
//!
//! [`fuse_pairs`] runs the same producer→consumer rewrite as the `fuse` pass (same candidates,
//! same composition, same print-verify-compare check in `commit`), but only for the pairs it is
//! given, by graph node index: no view folding and no other producer is touched. Consumers are
//! visited in text order, so a chain `a → b → c` given as `(a, b), (b, c)` ends as one apply of
//! `@a.b.c`. A pair that cannot be fused (the producer's value escapes or is pinned, it has
//! several outputs, the two are placed differently, or no candidate verifies) is returned, and
//! the graph keeps the pair as it was; nothing else changes.

use super::*;

/// Fuses each `(producer node, consumer node)` pair of graph `gi` of `m`, whose verification
/// facts are `facts`. Returns the pairs that were not fused (in the order given).
pub fn fuse_pairs(
    m: &mut Module,
    gi: usize,
    facts: &GraphFacts,
    pairs: &[(usize, usize)],
) -> Result<Vec<(usize, usize)>, Diagnostic> {
    if pairs.is_empty() {
        return Ok(vec![]);
    }
    let g = m
        .graphs
        .get_mut(gi)
        .ok_or_else(|| fail("fuse_pairs: no such graph"))?;
    if g.values.iter().any(|v| v.ty.is_none()) {
        return Err(fail("fuse_pairs needs a verified graph"));
    }
    let n = g.nodes.len();
    let mut ops = OpTable::new(std::mem::take(&mut m.ops));
    let mut st = State::new(&mut m.graphs[gi], facts.clone());
    let mut order: Vec<(usize, usize)> = pairs.to_vec();
    order.sort_by_key(|&(p, c)| (c, p));
    let mut left = Vec::new();
    for &(pn, ci) in &order {
        if pn >= n || ci >= n || !st.fuse_one(pn, ci, &mut ops) {
            left.push((pn, ci));
        }
    }
    let changed = left.len() < pairs.len();
    if changed {
        compact(st.g, &st.dead);
    }
    m.ops = ops.finish(&m.graphs);
    Ok(pairs.iter().copied().filter(|p| left.contains(p)).collect())
}

/// Per value: the nodes reading it (once per operand occurrence), and whether a pin, a sink or
/// a sequence point names it (pinned: never fused away). `fuse` uses the same facts.
pub fn users_and_pinned(g: &Graph) -> (Vec<Vec<usize>>, Vec<bool>) {
    let mut users = vec![Vec::new(); g.values.len()];
    let mut pinned = vec![false; g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for v in node.kind.operands() {
            users[v.index()].push(i);
        }
        match &node.kind {
            NodeKind::Sink { value, .. } | NodeKind::Pin { value } => pinned[value.index()] = true,
            NodeKind::Sequence { before, after } => {
                for r in before.iter().chain(after) {
                    if let SeqRef::Value(v) = r {
                        pinned[v.index()] = true;
                    }
                }
            }
            _ => {}
        }
    }
    (users, pinned)
}

impl State<'_> {
    /// The producer rewrite of [`State::rewrite`] for one operand: the value of node `pn` into
    /// the apply at node `ci`; only when that value does not escape `ci` and is not pinned.
    fn fuse_one(&mut self, pn: usize, ci: usize, ops: &mut OpTable) -> bool {
        if self.dead[pn] || self.dead[ci] || self.g.nodes[pn].results.len() != 1 {
            return false;
        }
        let v = self.g.nodes[pn].results[0];
        if self.pinned[v.index()] || self.users[v.index()].other_than(ci) {
            return false;
        }
        let Some(a) = self.live_apply(ci, ops) else {
            return false;
        };
        a.args.contains(&v) && self.fuse_producer(ci, &a, pn, v, false, ops)
    }
}
