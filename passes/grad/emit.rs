//! Where the `grad` pass writes: the graph being rebuilt (a [`Builder`]), the ops it generates,
//! and fresh, readable op names (`@mlp_grad_w1`).

use crate::diag::Span;
use crate::ir::graph::{Apply, NodeKind, ValueId, View};
use crate::ir::{OpDef, TensorType};
use crate::passes::fuse::emit::Names;
use crate::passes::rewrite::Builder;

pub struct Emitter<'a> {
    pub b: Builder<'a>,
    /// Ops generated so far, appended to the module at the end.
    pub ops: Vec<OpDef>,
    /// Every op name of the module and of `ops`.
    pub taken: Names,
    /// The span generated nodes carry (the `grad` statement's, or the split apply's).
    pub span: Span,
}

impl Emitter<'_> {
    /// `@{graph}_{base}` made an identifier, with a number appended when taken.
    pub fn op_name(&mut self, base: &str) -> String {
        let want = format!("{}_{base}", self.b.new.name);
        self.taken.fresh(&want)
    }

    /// The type of a value of the graph being built.
    pub fn ty(&self, v: ValueId) -> TensorType {
        self.b
            .new
            .ty(v)
            .cloned()
            .expect("the rebuilt graph's values are typed")
    }

    pub fn name(&self, v: ValueId) -> String {
        self.b.new.value(v).name.clone()
    }

    pub fn view(&mut self, v: View, name: &str, ty: TensorType) -> ValueId {
        self.b.emit(NodeKind::View(v), name, ty, self.span)
    }

    /// An apply of the generated `op` (added to the module) to `args`, one result per output.
    pub fn apply(&mut self, op: OpDef, args: Vec<ValueId>, names: &[String]) -> Vec<ValueId> {
        let results: Vec<(String, TensorType)> = op
            .outputs
            .iter()
            .zip(names)
            .map(|(p, n)| (n.clone(), port_type(p)))
            .collect();
        let kind = NodeKind::Apply(Apply {
            op: op.name.clone(),
            params: vec![],
            args,
            range: None,
            placement: None,
            op_span: self.span,
        });
        self.ops.push(op);
        self.b.emit_multi(kind, &results, self.span)
    }
}

/// The concrete type of a port whose dims are integers (every port the pass generates).
fn port_type(p: &crate::ir::PortDef) -> TensorType {
    let shape = p
        .dims
        .iter()
        .map(|d| match d {
            crate::ir::Dim::Expr(crate::ir::IExpr::Int(n, _)) => *n,
            _ => unreachable!("generated ports have concrete dims"),
        })
        .collect();
    TensorType::new(p.dtype, shape)
}
