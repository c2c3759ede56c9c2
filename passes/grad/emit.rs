//! Where the `grad` pass writes: the graph being rebuilt (a [`Builder`]), the ops it generates,
//! and fresh, readable op names (`@mlp_grad_w1`).

use super::kernel::ScatterPiece;
use crate::diag::Span;
use crate::ir::graph::{
    Apply, GenKind, Generator, NodeKind, Scatter, ScatterReduce, ValueId, View,
};
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

    /// The scatter-add of a gathered load's adjoint `d` into zeros of `x`'s type: the
    /// coordinates from `sp.idx` applied to `args`, both reshaped to `sp.shape`.
    pub fn scatter_add(
        &mut self,
        d: ValueId,
        sp: ScatterPiece,
        args: Vec<ValueId>,
        x: ValueId,
        name: &str,
    ) -> ValueId {
        let mut op = sp.idx.op;
        op.name = self.op_name(&format!("grad_at_{}", self.name(x)));
        let at = self.apply(op, args, &[format!("{name}.at")])[0];
        let xt = self.ty(x);
        let [upd, idx] = [d, at].map(|v| {
            let t = TensorType::new(self.ty(v).dtype, sp.shape.clone());
            if self.ty(v) == t {
                return v;
            }
            let r = View::Reshape {
                arg: v,
                shape: sp.shape.clone(),
            };
            self.view(r, &format!("{name}.rows"), t)
        });
        let zeros = Generator {
            kind: GenKind::Zeros,
            ty: xt.clone(),
        };
        let base = self.b.emit(
            NodeKind::Generator(zeros),
            &format!("{name}.zero"),
            xt.clone(),
            self.span,
        );
        let s = Scatter {
            base,
            idx,
            upd,
            axis: sp.axis,
            reduce: ScatterReduce::Add,
            placement: None,
        };
        self.b.emit(NodeKind::Scatter(s), name, xt, self.span)
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
