//! Sharding a gathered table along its gathered dimension (`shard{table=E, parts=N}`): the
//! vocabulary-parallel form of an embedding lookup. `y[b, s, h] = E[ids[b, s], h]` becomes
//!
//! - `%y.vocab = iota axis 0 : i64[V]` and `%y.at = apply @OP.at(%y.vocab, %ids)`, which
//!   gathers the coordinate itself (`at[b, s] = E[ids[b, s]]`): a negative id wraps once
//!   against the WHOLE vocabulary and an out-of-range one fails there with the gather's own
//!   error, naming the input `E`, the index and the value, before any part runs;
//! - per part `p` holding rows `[lo, hi)` (`%E.vp = slice %E`): `%y.locp, %y.hitp = apply
//!   @OP.loc<lo, hi>(%y.at)`, the row inside the part clamped into it and whether `lo <= at <
//!   hi`, and `%y.vp = apply @OP.rows<lo, hi>(%E.vp, %y.locp, %y.hitp)`, which is `E[at - lo,
//!   h]` where the row is the part's and `-0.0` (`0` for integers) elsewhere: a masked partial
//!   result (the coordinate is sent once to each part's node, which computes the rest);
//! - the partial results summed with `@tapc.sum.DT` (the combine of a split reduction).
//!
//! Exactly one part holds each row and the others add `-0.0`, the identity of `+` (even for a
//! `-0.0` entry), so the sum is the lookup bit for bit. Each part's footprint is its rows of
//! the table (its input is the slice), which is what the cost model and the MPI runtime see.
//! Only a single-statement kernel whose value is the gathered load itself can be split so.

use super::{err, reduce, Assembled, Config};
use crate::diag::{Diagnostic, Span};
use crate::ir::graph::*;
use crate::ir::kernel::*;
use crate::ir::{DType, Module, TensorType};
use crate::passes::rewrite::Builder;
use crate::verify::{instantiate, Site};
use std::collections::HashSet;

/// The lookup being split: the op, its statement's variables, the table port and the gather.
struct Lookup<'o> {
    op: &'o OpDef,
    vars: Vec<String>,
    table: usize,
    axis: usize,
    gather: &'o Gather,
    indices: &'o [Index],
    span: Span,
}

/// The gathered load of port `table` that `op`'s single statement is, or why it cannot be split.
fn lookup<'o>(op: &'o OpDef, table: &str, span: Span) -> Result<Option<Lookup<'o>>, Diagnostic> {
    let Some(t) = op.inputs.iter().position(|p| p.name == table) else {
        return Ok(None); // this op has no such input: it stays whole
    };
    let no = |why: &str| {
        err(
            format!(
                "the table `{table}` of `@{}` cannot be split along its gathered dimension: {why}",
                op.name
            ),
            span,
        )
    };
    let [st] = op.kernel().unwrap_or_default() else {
        return Err(no("the op must be a single-statement kernel"));
    };
    let vars: Option<Vec<String>> = st
        .indices
        .iter()
        .map(|v| match v {
            IndexVar::Var(n, _) => Some(n.clone()),
            IndexVar::Variadic(..) => None,
        })
        .collect();
    let KExprKind::Access(name, indices) = &st.value.kind else {
        return Err(no("its statement's value must be the gathered load itself (`y[b, s, h] = E[ids[b, s], h]`)"));
    };
    let gathered: Vec<(usize, &Gather)> = indices
        .iter()
        .enumerate()
        .filter_map(|(d, i)| match i {
            Index::Gather(g) => Some((d, g)),
            _ => None,
        })
        .collect();
    let ([(axis, gather)], Some(vars)) = (gathered.as_slice(), vars) else {
        return Err(no(
            "it must read the table at exactly one gathered index, with no `..` variables",
        ));
    };
    if name != table || op.outputs.len() != 1 || op.inputs[t].dtype == DType::Bool {
        return Err(no(
            "its statement's value must be the gathered load itself, of a numeric table",
        ));
    }
    if indices.iter().any(|i| matches!(i, Index::Variadic(..))) {
        return Err(no("the load must not use `..` variables"));
    }
    Ok(Some(Lookup {
        op,
        vars,
        table: t,
        axis: *axis,
        gather,
        indices,
        span: st.span,
    }))
}

/// `base`, or `base1`, `base2`, ... : the first not in `taken`.
fn fresh(taken: &HashSet<String>, base: &str) -> String {
    (0..)
        .map(|k| match k {
            0 => base.to_string(),
            k => format!("{base}{k}"),
        })
        .find(|n| !taken.contains(n))
        .expect("a free name")
}

/// Every name `op` uses: ports, parameters, shape symbols and statement variables.
fn names_of(op: &OpDef) -> HashSet<String> {
    let mut s: HashSet<String> = op.ports().map(|p| p.name.clone()).collect();
    s.extend(op.params.iter().cloned());
    for p in op.ports() {
        for d in &p.dims {
            match d {
                Dim::Expr(e) => e.visit_names(&mut |n, _| {
                    s.insert(n.to_string());
                }),
                Dim::Variadic(n, _) => {
                    s.insert(n.clone());
                }
            }
        }
    }
    for st in op.kernel().unwrap_or_default() {
        for v in &st.indices {
            let (IndexVar::Var(n, _) | IndexVar::Variadic(n, _)) = v;
            s.insert(n.clone());
        }
    }
    s
}

fn kx(kind: KExprKind, span: Span) -> KExpr {
    KExpr { kind, span }
}

fn var_ix(v: &str, span: Span) -> Index {
    Index::Expr(IExpr::Name(v.to_string(), span))
}

/// The ops made for one split lookup, and the names of their row-range parameters.
struct Made {
    at: OpDef,
    loc: OpDef,
    rows: OpDef,
    lo: String,
    hi: String,
}

/// What the three ops share: the statement's variables the coordinate depends on (`b, s`)
/// and the output's dims over them, and fresh names for the parameters and ports.
struct Names {
    at_vars: Vec<String>,
    at_dims: Vec<Dim>,
    lo: String,
    hi: String,
    at: String,
    loc: String,
    hit: String,
    rows: String,
}

fn names(l: &Lookup) -> Names {
    let mut used = HashSet::new();
    let offset = l.gather.offset.iter().map(|(_, e)| e);
    for e in l.gather.indices.iter().chain(offset) {
        e.visit_names(&mut |n, _| {
            used.insert(n.to_string());
        });
    }
    let at_vars: Vec<String> = (l.vars.iter())
        .filter(|v| used.contains(*v))
        .cloned()
        .collect();
    let out = &l.op.outputs[0];
    let at_dims = (at_vars.iter())
        .map(|v| out.dims[l.vars.iter().position(|x| x == v).expect("a variable")].clone())
        .collect();
    let taken = names_of(l.op);
    let f = |b: &str| fresh(&taken, b);
    Names {
        at_vars,
        at_dims,
        lo: f("lo"),
        hi: f("hi"),
        at: f("at"),
        loc: f("loc"),
        hit: f("hit"),
        rows: f("R"),
    }
}

fn port(name: &str, dtype: DType, dims: Vec<Dim>, span: Span) -> PortDef {
    PortDef {
        name: name.into(),
        dtype,
        dims,
        span,
    }
}

fn stmt(target: &str, vars: &[String], value: KExpr, span: Span) -> Stmt {
    Stmt {
        target: target.into(),
        indices: vars
            .iter()
            .map(|v| IndexVar::Var(v.clone(), span))
            .collect(),
        value,
        span,
        target_span: span,
    }
}

/// An op named `@OP.suffix` (`op` is the original), with these parameters, ports and body.
fn def(
    op: &OpDef,
    suffix: &str,
    params: Vec<String>,
    ports: [Vec<PortDef>; 2],
    body: Vec<Stmt>,
) -> OpDef {
    let [inputs, outputs] = ports;
    OpDef {
        name: format!("{}.{suffix}", op.name),
        params,
        inputs,
        outputs,
        body: OpBody::Kernel(body),
        span: op.span,
        name_span: op.name_span,
    }
}

/// `t[b, s]` over the coordinate's variables.
fn read(n: &Names, t: &str, span: Span) -> KExpr {
    let ix = n.at_vars.iter().map(|v| var_ix(v, span)).collect();
    kx(KExprKind::Access(t.into(), ix), span)
}

fn bin(o: BinOp, a: KExpr, b: KExpr, span: Span) -> KExpr {
    kx(KExprKind::Binary(o, Box::new(a), Box::new(b)), span)
}

/// `@OP.at`: the coordinate, gathered from the vocabulary's own indices (the wrap and the
/// range check against the whole table): `at[b, s] = E[ids[b, s]]`.
fn at_op(l: &Lookup, n: &Names) -> OpDef {
    let (op, span) = (l.op, l.span);
    let table = &op.inputs[l.table];
    let idx = op.inputs.iter().find(|p| p.name == l.gather.tensor);
    let vocab = port(
        &table.name,
        DType::I64,
        vec![table.dims[l.axis].clone()],
        span,
    );
    let ports = [
        vec![vocab, idx.expect("the index tensor is an input").clone()],
        vec![port(&n.at, DType::I64, n.at_dims.clone(), span)],
    ];
    let value = KExprKind::Access(table.name.clone(), vec![Index::Gather(l.gather.clone())]);
    let body = vec![stmt(&n.at, &n.at_vars, kx(value, span), span)];
    def(op, "at", op.params.clone(), ports, body)
}

/// `@OP.loc<lo, hi>`: the row inside the part, clamped into it (so that a masked lane reads a
/// row of the part), and whether the coordinate is in the part.
fn loc_op(l: &Lookup, n: &Names, params: Vec<String>) -> OpDef {
    let span = l.span;
    let (at, name) = (read(n, &n.at, span), |v: &str| {
        kx(KExprKind::Name(v.into()), span)
    });
    let int = |v| kx(KExprKind::Int(v), span);
    let call = |f, args| kx(KExprKind::Call(f, args), span);
    let last = bin(
        BinOp::Sub,
        bin(BinOp::Sub, name(&n.hi), name(&n.lo), span),
        int(1),
        span,
    );
    let from_lo = bin(BinOp::Sub, at.clone(), name(&n.lo), span);
    let clamped = call(
        Func::Min,
        vec![call(Func::Max, vec![from_lo, int(0)]), last],
    );
    let inside = bin(
        BinOp::And,
        bin(BinOp::Ge, at.clone(), name(&n.lo), span),
        bin(BinOp::Lt, at, name(&n.hi), span),
        span,
    );
    let ports = [
        vec![port(&n.at, DType::I64, n.at_dims.clone(), span)],
        vec![
            port(&n.loc, DType::I64, n.at_dims.clone(), span),
            port(&n.hit, DType::Bool, n.at_dims.clone(), span),
        ],
    ];
    let body = vec![
        stmt(&n.loc, &n.at_vars, clamped, span),
        stmt(&n.hit, &n.at_vars, inside, span),
    ];
    def(l.op, "loc", params, ports, body)
}

/// `@OP.rows<lo, hi>`: the part's rows where the coordinate is in the part, else the identity
/// of `+` (`-0.0`, or `0` for integers): `select(hit[b, s], E[loc[b, s], h], -0.0)`.
fn rows_op(l: &Lookup, n: &Names, params: Vec<String>) -> OpDef {
    let span = l.span;
    let table = &l.op.inputs[l.table];
    let mut part_table = table.clone();
    part_table.dims[l.axis] = Dim::Expr(IExpr::Name(n.rows.clone(), span));
    let mut indices = l.indices.to_vec();
    indices[l.axis] = Index::Gather(Gather {
        tensor: n.loc.clone(),
        indices: (n.at_vars.iter())
            .map(|v| IExpr::Name(v.clone(), span))
            .collect(),
        offset: None,
        span,
        tensor_span: span,
    });
    let zero = if table.dtype.is_float() {
        let z = Box::new(kx(KExprKind::Float(0.0), span));
        kx(KExprKind::Unary(UnOp::Neg, z), span)
    } else {
        kx(KExprKind::Int(0), span)
    };
    let load = kx(KExprKind::Access(table.name.clone(), indices), span);
    let value = kx(
        KExprKind::Call(Func::Select, vec![read(n, &n.hit, span), load, zero]),
        span,
    );
    let out = &l.op.outputs[0];
    let ports = [
        vec![
            part_table,
            port(&n.loc, DType::I64, n.at_dims.clone(), span),
            port(&n.hit, DType::Bool, n.at_dims.clone(), span),
        ],
        vec![out.clone()],
    ];
    def(
        l.op,
        "rows",
        params,
        ports,
        vec![stmt(&out.name, &l.vars, value, span)],
    )
}

/// `@OP.at`, `@OP.loc` and `@OP.rows` for lookup `l`.
fn make_ops(l: &Lookup) -> Made {
    let n = names(l);
    let mut params = l.op.params.clone();
    params.extend([n.lo.clone(), n.hi.clone()]);
    Made {
        at: at_op(l, &n),
        loc: loc_op(l, &n, params.clone()),
        rows: rows_op(l, &n, params),
        lo: n.lo,
        hi: n.hi,
    }
}

/// An apply of `op` (already in the module) to `args`, its results named `names`, checked by
/// instantiating it: a lookup whose shapes the new ops cannot bind is refused with E0106.
#[allow(clippy::too_many_arguments)]
fn emit_apply(
    b: &mut Builder,
    op: &OpDef,
    params: Vec<(String, i64)>,
    args: Vec<ValueId>,
    placement: Option<u32>,
    names: &[String],
    a: &Apply,
    span: Span,
) -> Result<Vec<ValueId>, Diagnostic> {
    let types: Vec<TensorType> = args
        .iter()
        .map(|v| b.new.ty(*v).cloned().expect("typed"))
        .collect();
    let inst = instantiate(op, &params, &types, None, Site { span }).map_err(|d| {
        let why = d.first().map_or(String::new(), |d| d.message.clone());
        err(
            format!(
                "`@{}` (splitting a gathered table) does not verify: {why}",
                op.name
            ),
            span,
        )
    })?;
    let kind = NodeKind::Apply(Apply {
        op: op.name.clone(),
        params,
        args,
        range: None,
        placement,
        op_span: a.op_span,
    });
    let results: Vec<(String, TensorType)> = names.iter().cloned().zip(inst.outputs).collect();
    Ok(b.emit_multi(kind, &results, span))
}

/// Splits apply `node` of a lookup of its input port `table` into `cfg.parts` parts of the
/// table's rows (module docs); `None` leaves it whole (no such port, or too few rows).
#[allow(clippy::too_many_arguments)]
pub(super) fn shard_table(
    m: &mut Module,
    b: &mut Builder,
    node: &Node,
    a: &Apply,
    table: &str,
    cfg: &Config,
    next_node: &mut u32,
    report: &mut String,
) -> Result<Option<Vec<Option<Assembled>>>, Diagnostic> {
    let op = m
        .op(&a.op)
        .expect("verified applies name defined ops")
        .clone();
    let Some(l) = lookup(&op, table, node.span)? else {
        return Ok(None);
    };
    let t_arg = a.args[l.table];
    let t_ty = b.old_ty(t_arg)?;
    let parts = super::split(t_ty.shape[l.axis], cfg.parts);
    if parts.len() < 2 {
        return Ok(None);
    }
    let made = make_ops(&l);
    for o in [&made.at, &made.loc, &made.rows] {
        reduce::add_op(m, o.clone());
    }
    let span = node.span;
    let base = b.old.value(node.results[0]).name.clone();
    let vocab_ty = TensorType::new(DType::I64, vec![t_ty.shape[l.axis]]);
    let gen = NodeKind::Generator(Generator {
        kind: GenKind::Iota { axis: 0 },
        ty: vocab_ty.clone(),
    });
    let vocab = b.emit(gen, &format!("{base}.vocab"), vocab_ty, span);
    let k = op.inputs.iter().position(|p| p.name == l.gather.tensor);
    let ids = b.mapped(a.args[k.expect("the index tensor is an input")]);
    let at = emit_apply(
        b,
        &made.at,
        a.params.clone(),
        vec![vocab, ids],
        a.placement,
        &[format!("{base}.at")],
        a,
        span,
    )?[0];
    let mut partials = Vec::new();
    for (p, &(lo, hi)) in parts.iter().enumerate() {
        let mut rows: Vec<(i64, i64)> = t_ty.shape.iter().map(|&n| (0, n)).collect();
        rows[l.axis] = (lo, hi);
        let name = format!("{}.v{p}", b.old.value(t_arg).name);
        let slice = super::slice_to(b, t_arg, &rows, &name, span)?;
        let mut params = a.params.clone();
        params.extend([(made.lo.clone(), lo), (made.hi.clone(), hi)]);
        let node_p = cfg.place(p, next_node);
        let loc = emit_apply(
            b,
            &made.loc,
            params.clone(),
            vec![at],
            node_p,
            &[format!("{base}.loc{p}"), format!("{base}.hit{p}")],
            a,
            span,
        )?;
        let part = emit_apply(
            b,
            &made.rows,
            params,
            vec![slice, loc[0], loc[1]],
            node_p,
            &[format!("{base}.v{p}")],
            a,
            span,
        )?[0];
        partials.push(part);
        report.push_str(&format!(
            "%{base}.v{p} reads rows {lo}:{hi} of `{table}` (%{name})\n"
        ));
    }
    let ty = b.old_ty(node.results[0])?;
    let sum = reduce::combine_op(m, Reduction::Sum, ty.dtype, op.span);
    let last = partials.len() - 1;
    let acc = reduce::fold(
        b,
        &sum,
        &partials,
        &ty,
        span,
        (a.op_span, a.placement),
        &|p| {
            if p == last {
                base.clone()
            } else {
                format!("{base}.vacc{p}")
            }
        },
    );
    b.map[node.results[0].index()] = Some(acc);
    Ok(Some(vec![None]))
}
