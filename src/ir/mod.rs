//! The TEG intermediate representation.
//!
//! A [`Module`] holds op definitions (kernels or explicit signatures) and graphs. A [`Graph`] is
//! an SSA graph kept as a list of nodes in definition order, with values in an arena.
//!
//! Invariants of a *verified* module (the verifier establishes them; every pass keeps them):
//! - every value is defined by exactly one node, before (above) every use: text order is a
//!   topological order of the data edges, and sequence points add no cycle;
//! - every value has a concrete type (`ValueDef::ty` is `Some`);
//! - every apply names an op of the module and has a valid [`instance::Instance`];
//! - selector attributes are canonical (slices fully explicit, permutations valid);
//! - sinks have unique names and produce no value, so nothing but a sequence point refers to them.
//!
//! Spans never take part in equality ([`crate::diag::Span`]), so `parse(print(m)) == m`.

pub mod footprint;
pub mod graph;
pub mod instance;
pub mod kernel;
pub mod types;

pub use graph::{
    Apply, GenKind, Generator, Graph, Node, NodeKind, PadMode, SeqRef, SliceDim, ValueDef, ValueId,
    View,
};
pub use kernel::{Dim, IExpr, OpBody, OpDef, PortDef};
use std::collections::HashMap;
pub use types::{DType, Literal, TensorType};

/// A whole TEG file.
#[derive(Clone, Default, PartialEq)]
pub struct Module {
    pub ops: Vec<OpDef>,
    pub graphs: Vec<Graph>,
    /// Name → position in `ops`, for [`Module::op`]; filled and repaired by lookups.
    op_index: OpIndex,
}

impl Module {
    /// The op named `name`. Amortized O(1): passes look an op up per apply, and at 100k
    /// applies a scan per lookup made them quadratic.
    pub fn op(&self, name: &str) -> Option<&OpDef> {
        let i = self.op_index.find(&self.ops, name)?;
        Some(&self.ops[i])
    }
}

/// An index over a module's ops that needs no notice of mutations (`ops` is a public field):
/// ops appended since the last lookup are indexed on the next one, a hit is checked against
/// the op's name, and a miss is confirmed by a scan, which rebuilds the index if it finds the
/// op elsewhere (ops replaced or reordered). Only a lookup of a missing name costs a scan.
#[derive(Default)]
struct OpIndex(std::sync::Mutex<(HashMap<String, usize>, usize)>);

impl OpIndex {
    fn find(&self, ops: &[OpDef], name: &str) -> Option<usize> {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (map, indexed) = &mut *guard;
        let hit = |map: &HashMap<String, usize>| {
            map.get(name)
                .copied()
                .filter(|&i| ops.get(i).is_some_and(|o| o.name == name))
        };
        if *indexed > ops.len() {
            *indexed = 0;
            map.clear();
        }
        for (i, o) in ops.iter().enumerate().skip(*indexed) {
            map.entry(o.name.clone()).or_insert(i);
        }
        *indexed = ops.len();
        if let Some(i) = hit(map) {
            return Some(i);
        }
        let i = ops.iter().position(|o| o.name == name)?;
        map.clear();
        for (k, o) in ops.iter().enumerate() {
            map.entry(o.name.clone()).or_insert(k);
        }
        Some(i)
    }
}

impl Clone for OpIndex {
    fn clone(&self) -> OpIndex {
        OpIndex::default()
    }
}

/// A cache: never part of a module's value.
impl PartialEq for OpIndex {
    fn eq(&self, _: &OpIndex) -> bool {
        true
    }
}

/// The module's value only: the index is a cache.
impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("ops", &self.ops)
            .field("graphs", &self.graphs)
            .finish()
    }
}
