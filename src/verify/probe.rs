//! Verifying one graph of a module on its own, for callers that changed only that graph: the
//! pass context re-derives a changed graph's facts with it, and the cost pass checks a
//! candidate rewrite of one or two applies by verifying the small graph that holds just them
//! (`passes::rewrite::isolate`), at the cost of the rewrite rather than of the module.

use super::{verify_graph, GraphCx, GraphFacts};
use crate::diag::Diagnostics;
use crate::ir::kernel::OpDef;
use crate::ir::Module;
use std::collections::HashMap;

/// Verifies graph `gi` of `m` against the module's ops, as [`super::verify`] does every graph,
/// filling in its types. Returns its diagnostics, sorted by position, and its facts.
pub fn verify_one(m: &mut Module, gi: usize) -> (Diagnostics, GraphFacts) {
    let mut diags = Diagnostics::default();
    let ops: HashMap<&str, &OpDef> = m.ops.iter().map(|o| (o.name.as_str(), o)).collect();
    let names: Vec<&str> = m.ops.iter().map(|o| o.name.as_str()).collect();
    let cx = GraphCx {
        ops: &ops,
        stubs: &HashMap::new(),
        names: &names,
        spans: &[],
    };
    let facts = match m.graphs.get_mut(gi) {
        Some(g) => verify_graph(&cx, g, &mut diags),
        None => GraphFacts::default(),
    };
    (diags.sorted(), facts)
}
