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

pub mod graph;
pub mod instance;
pub mod kernel;
pub mod types;

pub use graph::{
    Apply, GenKind, Generator, Graph, Node, NodeKind, PadMode, SeqRef, SliceDim, ValueDef, ValueId,
    View,
};
pub use kernel::{Dim, IExpr, OpBody, OpDef, PortDef};
pub use types::{DType, Literal, TensorType};

/// A whole TEG file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    pub ops: Vec<OpDef>,
    pub graphs: Vec<Graph>,
}

impl Module {
    pub fn op(&self, name: &str) -> Option<&OpDef> {
        self.ops.iter().find(|o| o.name == name)
    }
}
