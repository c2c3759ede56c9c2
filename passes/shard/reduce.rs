//! Sharding a reduction variable: `y = epilogue(reduce[k](body))` becomes per-k-range partial
//! reductions (a new op `@OP.partial.k` over slices of the inputs), a combine with the
//! reduction's monoid (`@tapc.sum.f32`, ...), and the epilogue applied once (`@OP.epilogue.k`).
//! Float sums and products are reassociated by this, so results differ in the last bits;
//! max and min are exact.

use super::kexpr::{find_reduce, reads, replace, with_extents};
use super::{err, Assembled, Config};
use crate::diag::{Diagnostic, Span};
use crate::ir::graph::*;
use crate::ir::instance::{CExpr, CKind, Instance, Src};
use crate::ir::kernel::*;
use crate::ir::{DType, Module, TensorType};
use crate::passes::rewrite::Builder;
use crate::verify::{instantiate, visit_loads, Site};

/// The dtype of the lowered reduction over variable number `v`.
fn reduce_dtype(e: &CExpr, v: usize) -> Option<DType> {
    match &e.kind {
        CKind::Reduce { vars, .. } if vars.contains(&v) => Some(e.dtype),
        CKind::Reduce { body, .. } | CKind::Unary(_, body) => reduce_dtype(body, v),
        CKind::Call(_, args) => args.iter().find_map(|a| reduce_dtype(a, v)),
        CKind::Binary(_, a, b) => reduce_dtype(a, v).or_else(|| reduce_dtype(b, v)),
        _ => None,
    }
}

fn fresh_port(op: &OpDef, base: &str) -> String {
    (0..)
        .map(|k| {
            if k == 0 {
                base.to_string()
            } else {
                format!("{base}{k}")
            }
        })
        .find(|n| !op.ports().any(|p| p.name == *n))
        .expect("a free name")
}

fn index_of(v: &IndexVar) -> Index {
    match v {
        IndexVar::Var(n, s) => Index::Expr(IExpr::Name(n.clone(), *s)),
        IndexVar::Variadic(n, s) => Index::Variadic(n.clone(), *s),
    }
}

pub(super) fn add_op(m: &mut Module, op: OpDef) {
    if m.op(&op.name).is_none() {
        m.ops.push(op);
    }
}

/// `@tapc.sum.f32` etc.: the elementwise combine of two partial results.
pub(super) fn combine_op(m: &mut Module, kind: Reduction, dtype: DType, span: Span) -> String {
    let name = format!("tapc.{}.{}", kind.name(), dtype.name());
    let port = |n: &str| PortDef {
        name: n.into(),
        dtype,
        dims: vec![Dim::Variadic("S".into(), span)],
        span,
    };
    let at = |n: &str| KExpr {
        kind: KExprKind::Access(n.into(), vec![Index::Variadic("i".into(), span)]),
        span,
    };
    let value = match kind {
        Reduction::Sum => KExprKind::Binary(BinOp::Add, Box::new(at("a")), Box::new(at("b"))),
        Reduction::Prod => KExprKind::Binary(BinOp::Mul, Box::new(at("a")), Box::new(at("b"))),
        Reduction::Max => KExprKind::Call(Func::Max, vec![at("a"), at("b")]),
        Reduction::Min => KExprKind::Call(Func::Min, vec![at("a"), at("b")]),
        Reduction::ArgMax | Reduction::ArgMin | Reduction::Mean => {
            unreachable!("the_reduction refuses argmax and mean")
        }
    };
    let stmt = Stmt {
        target: "y".into(),
        indices: vec![IndexVar::Variadic("i".into(), span)],
        value: KExpr { kind: value, span },
        span,
        target_span: span,
    };
    add_op(
        m,
        OpDef {
            name: name.clone(),
            params: vec![],
            inputs: vec![port("a"), port("b")],
            outputs: vec![port("y")],
            body: OpBody::Kernel(vec![stmt]),
            span,
            name_span: span,
        },
    );
    name
}

/// The apply whose reduction over variable `v` (named `var`) is being sharded: its node,
/// apply, instance and op, the op's single statement `st` and the reduction `red` in it.
struct Reducing<'a> {
    node: &'a Node,
    a: &'a Apply,
    inst: &'a Instance,
    v: usize,
    var: &'a str,
    op: &'a OpDef,
    st: &'a Stmt,
    red: &'a KExpr,
    /// The name of the apply's first result, which the new values' names extend.
    base: String,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn shard_reduction(
    m: &mut Module,
    b: &mut Builder,
    node: &Node,
    a: &Apply,
    inst: &Instance,
    v: usize,
    cfg: &Config,
    next_node: &mut u32,
    report: &mut String,
) -> Result<Option<Vec<Option<Assembled>>>, Diagnostic> {
    let op = m.op(&a.op).expect("verified").clone();
    let var = inst.vars[v].name.clone();
    let (st, red, kind) = the_reduction(&op, &var, node.span)?;
    let cst = &inst.stmts.as_ref().expect("kernel ops lower")[0];
    let dtype = reduce_dtype(&cst.value, v).expect("the reduction was lowered");
    let partial = partial_op(&op, st, red, &var, dtype);
    add_op(m, partial.clone());
    let parts = super::split(inst.vars[v].range.1, cfg.parts);
    if parts.len() < 2 {
        return Ok(None);
    }
    let base = b.old.value(node.results[0]).name.clone();
    let t = Reducing {
        node,
        a,
        inst,
        v,
        var: &var,
        op: &op,
        st,
        red,
        base,
    };
    let partials = emit_partials(&t, b, &partial, &parts, &mut |pi| cfg.place(pi, next_node))?;
    for (pi, &(lo, hi)) in parts.iter().enumerate() {
        report.push_str(&format!(
            "%{}.{var}{pi} reduces `{var}` over {lo}:{hi}\n",
            t.base
        ));
    }
    // Combine the partials with the reduction's monoid, then apply the epilogue once.
    let acc = combine(m, b, &t, (kind, dtype), &partials);
    let result = if std::ptr::eq(red, &st.value) {
        acc
    } else {
        epilogue(m, b, &t, &partial.outputs[0], acc)?
    };
    b.map[node.results[0].index()] = Some(result);
    Ok(Some(vec![None]))
}

/// The single statement of `op` and the one reduction over `var` in it (outside any other),
/// with its kind; an op that has several statements or reductions cannot be sharded so.
fn the_reduction<'o>(
    op: &'o OpDef,
    var: &str,
    span: Span,
) -> Result<(&'o Stmt, &'o KExpr, Reduction), Diagnostic> {
    let [st] = op.kernel().unwrap_or_default() else {
        return Err(err(
            format!(
                "sharding reduction `{var}` needs a single-statement kernel; `@{}` has several",
                op.name
            ),
            span,
        ));
    };
    let found = find_reduce(&st.value, var);
    let [red] = found.as_slice() else {
        return Err(err(
            format!("`{var}` must be reduced by exactly one reduction outside any other"),
            span,
        ));
    };
    let KExprKind::Reduce(kind, _, _) = &red.kind else {
        unreachable!("find_reduce returns reductions")
    };
    if *kind == Reduction::Mean {
        // The mean of a part is not a part of the mean.
        return Err(err(
            format!("`{var}` is reduced by `mean`, whose partial results do not add up; write `sum[{var}](...) / N` to shard it"),
            span,
        ));
    }
    if kind.is_arg() {
        // Partial indices cannot be combined without their values.
        return Err(err(
            format!(
                "`{var}` is reduced by `{}`, whose partial results do not combine",
                kind.name()
            ),
            span,
        ));
    }
    Ok((st, red, *kind))
}

/// `@OP.partial.k`: the reduction `red` of `st` alone, over the inputs it reads, into an
/// output of the reduction's `dtype`.
fn partial_op(op: &OpDef, st: &Stmt, red: &KExpr, var: &str, dtype: DType) -> OpDef {
    let mut used = Vec::new();
    reads(red, &mut used);
    let inputs: Vec<PortDef> = used
        .iter()
        .filter_map(|n| op.inputs.iter().find(|p| p.name == *n).cloned())
        .collect();
    let out = PortDef {
        name: fresh_port(op, "p"),
        dtype,
        ..op.outputs[0].clone()
    };
    let stmt = Stmt {
        target: out.name.clone(),
        indices: st.indices.clone(),
        value: red.clone(),
        span: st.span,
        target_span: st.target_span,
    };
    OpDef {
        name: format!("{}.partial.{var}", op.name),
        params: op.params.clone(),
        inputs,
        outputs: vec![out],
        body: OpBody::Kernel(vec![stmt]),
        span: op.span,
        name_span: op.name_span,
    }
}

/// One apply of `partial` per part of the reduction's range, over slices of its inputs along
/// the reduction's footprint, placed by `place`; every part must lower to the same kernel.
fn emit_partials(
    t: &Reducing,
    b: &mut Builder,
    partial: &OpDef,
    parts: &[(i64, i64)],
    place: &mut dyn FnMut(usize) -> Option<u32>,
) -> Result<Vec<ValueId>, Diagnostic> {
    let (node, a, inst, var) = (t.node, t.a, t.inst, t.var);
    let in_index = port_positions(t.op, &partial.inputs);
    let dtype = partial.outputs[0].dtype;
    let mut partials = Vec::new();
    let mut reference: Option<Instance> = None;
    for (pi, &(lo, hi)) in parts.iter().enumerate() {
        let mut ranges: Vec<(i64, i64)> = inst.vars.iter().map(|x| x.range).collect();
        ranges[t.v] = (lo, hi);
        let mut args = Vec::new();
        let mut types = Vec::new();
        for &k in &in_index {
            let image = load_box(inst, k, &ranges);
            let arg = a.args[k];
            let name = format!("{}.{var}{pi}", b.old.value(arg).name);
            let s = super::slice_to(b, arg, &image, &name, node.span)?;
            types.push(b.new.ty(s).cloned().expect("typed"));
            args.push(s);
        }
        let shard = instantiate(partial, &a.params, &types, None, Site { span: node.span })
            .map_err(|_| {
                err(
                    format!("the partial reduction over `{var}` does not verify"),
                    node.span,
                )
            })?;
        match &reference {
            None => reference = Some(shard),
            Some(r) if r.stmts == shard.stmts => {}
            Some(_) => return Err(err(format!("`@{}` cannot be sharded along `{var}`: its kernel uses a symbol that a shard would rebind", t.op.name), node.span)),
        }
        let kind = NodeKind::Apply(Apply {
            op: partial.name.clone(),
            params: a.params.clone(),
            args,
            range: None,
            placement: place(pi),
            op_span: a.op_span,
        });
        let ty = TensorType::new(dtype, inst.outputs[0].shape.clone());
        partials.push(b.emit(kind, &format!("{}.{var}{pi}", t.base), ty, node.span));
    }
    Ok(partials)
}

/// The partial results folded left with the reduction's monoid `(kind, dtype)` (an apply of
/// `@tapc.sum.f32`, ... per partial after the first); the combined value.
fn combine(
    m: &mut Module,
    b: &mut Builder,
    t: &Reducing,
    (kind, dtype): (Reduction, DType),
    partials: &[ValueId],
) -> ValueId {
    let cname = combine_op(m, kind, dtype, t.op.span);
    let ty = TensorType::new(dtype, t.inst.outputs[0].shape.clone());
    let (span, at) = (t.node.span, (t.a.op_span, None));
    fold(b, &cname, partials, &ty, span, at, &|pi| {
        format!("{}.{}acc{pi}", t.base, t.var)
    })
}

/// `partials` folded left with the combine op `cname` (one apply per partial after the first,
/// of type `ty`, with the op span and placement `at`, the one adding partial `p` named
/// `name(p)`); the combined value.
pub(super) fn fold(
    b: &mut Builder,
    cname: &str,
    partials: &[ValueId],
    ty: &TensorType,
    span: Span,
    (op_span, placement): (Span, Option<u32>),
    name: &dyn Fn(usize) -> String,
) -> ValueId {
    let mut acc = partials[0];
    for (pi, &p) in partials.iter().enumerate().skip(1) {
        let kind = NodeKind::Apply(Apply {
            op: cname.to_string(),
            params: vec![],
            args: vec![acc, p],
            range: None,
            placement,
            op_span,
        });
        acc = b.emit(kind, &name(pi), ty.clone(), span);
    }
    acc
}

/// `@OP.epilogue.k`: the statement with the reduction replaced by a read of the combined
/// partial results `acc` (port `pout`), applied once to them and the inputs it reads.
fn epilogue(
    m: &mut Module,
    b: &mut Builder,
    t: &Reducing,
    pout: &PortDef,
    acc: ValueId,
) -> Result<ValueId, Diagnostic> {
    let (op, st, a) = (t.op, t.st, t.a);
    let access = KExpr {
        kind: KExprKind::Access(pout.name.clone(), st.indices.iter().map(index_of).collect()),
        span: t.red.span,
    };
    let value = with_extents(&replace(&st.value, t.red, &access), &extents(op, t.inst));
    let mut used = Vec::new();
    reads(&value, &mut used);
    let mut inputs: Vec<PortDef> = used
        .iter()
        .filter_map(|n| op.inputs.iter().find(|p| p.name == *n).cloned())
        .collect();
    let outer = port_positions(op, &inputs);
    inputs.push(pout.clone());
    let ename = format!("{}.epilogue.{}", op.name, t.var);
    add_op(
        m,
        OpDef {
            name: ename.clone(),
            params: op.params.clone(),
            inputs,
            outputs: op.outputs.clone(),
            body: OpBody::Kernel(vec![Stmt {
                value,
                ..st.clone()
            }]),
            span: op.span,
            name_span: op.name_span,
        },
    );
    let mut args: Vec<ValueId> = outer.iter().map(|&k| b.mapped(a.args[k])).collect();
    args.push(acc);
    let kind = NodeKind::Apply(Apply {
        op: ename,
        params: a.params.clone(),
        args,
        range: None,
        placement: a.placement,
        op_span: a.op_span,
    });
    let r = t.node.results[0];
    Ok(b.emit(
        kind,
        &b.old.value(r).name.clone(),
        b.old_ty(r)?,
        t.node.span,
    ))
}

/// The extent each shape symbol of `op`'s input ports (a bare name) has in the apply `inst`.
fn extents(op: &OpDef, inst: &Instance) -> std::collections::HashMap<String, i64> {
    let mut out = std::collections::HashMap::new();
    for (p, ty) in op.inputs.iter().zip(&inst.inputs) {
        for (d, &n) in p.dims.iter().zip(&ty.shape) {
            if let Dim::Expr(IExpr::Name(s, _)) = d {
                out.insert(s.clone(), n);
            }
        }
    }
    out
}

/// The hull of input `k`'s accesses over `ranges` (all variables), clipped to the input.
fn load_box(inst: &Instance, k: usize, ranges: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let shape = &inst.inputs[k].shape;
    let mut boxes = vec![(i64::MAX, i64::MIN); shape.len()];
    for st in inst.stmts.iter().flatten() {
        visit_loads(&st.value, &mut |src, index| {
            if src == Src::Input(k) {
                for (d, a) in index.iter().enumerate() {
                    let (lo, hi) = a.range(ranges);
                    boxes[d] = (boxes[d].0.min(lo), boxes[d].1.max(hi + 1));
                }
            }
        });
    }
    boxes
        .iter()
        .zip(shape)
        .map(|(&(lo, hi), &n)| {
            if lo > hi {
                (0, n)
            } else {
                (lo.clamp(0, n), hi.clamp(0, n))
            }
        })
        .collect()
}

/// Positions in `op`'s inputs of `ports` (each one of `op`'s own inputs, kept by name).
fn port_positions(op: &OpDef, ports: &[PortDef]) -> Vec<usize> {
    let at = |p: &PortDef| op.inputs.iter().position(|q| q.name == p.name);
    ports.iter().map(|p| at(p).expect("port")).collect()
}
