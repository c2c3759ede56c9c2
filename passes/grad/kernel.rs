//! Ops the `grad` pass writes from one statement of an apply's instance: the statement alone
//! (a multi-statement kernel is split so that its temporaries become graph values), and the
//! adjoint of the statement with respect to one of the tensors it reads. All ports have the
//! concrete types of that apply, so the ops need no shape symbols.

use super::expr::{self, access_vars, Writer};
use super::rules::{Back, Contribution};
use crate::diag::Span;
use crate::ir::instance::{CStmt, Instance, Src, Target};
use crate::ir::kernel::{BinOp, Dim, IExpr, IndexVar, OpBody, OpDef, PortDef, Reduction, Stmt};
use crate::ir::TensorType;
use std::collections::HashMap;

/// What a port of a generated op is bound to at its apply.
#[derive(Clone, Debug, PartialEq)]
pub enum PortRef {
    /// A tensor the statement reads.
    Src(Src),
    /// The statement's own value (a `max`/`min` adjoint compares with it).
    Target,
    /// The adjoint of the statement's value.
    DTarget,
}

/// One statement of an instance with the types of everything it touches.
pub struct StmtCx<'a> {
    pub inst: &'a Instance,
    pub st: &'a CStmt,
    /// The type of each source the statement may read.
    pub src_ty: &'a dyn Fn(&Src) -> TensorType,
    pub target_ty: TensorType,
}

/// Where a piece of an adjoint lands in its source, per dimension.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    /// The piece's next dimension, at `lo, lo + step, ..` (`len` positions).
    Var { lo: i64, len: i64, step: i64 },
    /// A single index (the piece has no dimension for it).
    Const(i64),
}

/// An adjoint op computing the adjoint of one window of a source, and where the window is;
/// or, for a gathered load, the values a scatter-add puts into the source.
pub struct Piece {
    pub gen: Generated,
    pub places: Vec<Place>,
    pub scatter: Option<ScatterPiece>,
}

/// How a gathered load's adjoint lands in its table: `gen`'s values are scatter-added along
/// `axis` at the coordinates `idx` computes, both reshaped to `shape` (the table's, but along
/// the axis: one entry per load point).
pub struct ScatterPiece {
    pub idx: Generated,
    pub axis: usize,
    pub shape: Vec<i64>,
}

/// A generated op and the binding of each of its inputs.
pub struct Generated {
    pub op: OpDef,
    pub inputs: Vec<PortRef>,
}

impl StmtCx<'_> {
    pub(super) fn var_names(&self) -> Vec<String> {
        self.inst
            .vars
            .iter()
            .map(|v| v.name.replace('.', "_"))
            .collect()
    }

    pub fn src_name(&self, s: &Src) -> String {
        match s {
            Src::Input(i) => self.inst.signature.inputs[*i].name.clone(),
            Src::Temp(t) => self.inst.temps[*t].name.clone(),
        }
    }

    pub fn target_name(&self) -> String {
        match self.st.target {
            Target::Output(o) => self.inst.signature.outputs[o].name.clone(),
            Target::Temp(t) => self.inst.temps[t].name.clone(),
        }
    }

    /// The sources the statement reads, in a fixed order (inputs, then temporaries).
    fn sources(&self) -> Vec<Src> {
        let mut out: Vec<Src> = (0..self.inst.inputs.len()).map(Src::Input).collect();
        let own = match self.st.target {
            Target::Temp(t) => Some(t),
            Target::Output(_) => None,
        };
        out.extend(
            (0..self.inst.temps.len())
                .filter(|t| Some(*t) != own)
                .map(Src::Temp),
        );
        out
    }

    fn lhs(&self) -> Vec<String> {
        let names = self.var_names();
        self.st.vars.iter().map(|v| names[*v].clone()).collect()
    }

    /// The statement alone, as an op `name` computing its target.
    pub fn forward(&self, name: &str) -> Generated {
        let src_name = |s: &Src| self.src_name(s);
        let mut w = Writer::new(self.var_names(), &src_name);
        let value = w.write(&self.st.value);
        let target = self.target_name();
        self.assemble(name, value, (&target, &self.target_ty), self.lhs(), &[])
    }

    /// The adjoint of the statement with respect to `source`, one [`Piece`] per window of the
    /// source that its loads read (a single whole-tensor piece for plain loads); empty when no
    /// float path leads from it to the value; an error naming a load with no adjoint yet. The
    /// ops are unnamed.
    pub fn adjoint(&self, source: &Src) -> Result<Vec<Piece>, String> {
        let src_name = |s: &Src| self.src_name(s);
        let mut w = Writer::new(self.var_names(), &src_name);
        let target = self.target_name();
        let dt = fresh_port(&format!("d_{target}"), &self.port_names(&target));
        let t = self.lhs();
        let mut b = Back {
            w: &mut w,
            source: source.clone(),
            root: access_vars(&target, &t),
            out: Vec::new(),
        };
        b.back(
            &self.st.value,
            access_vars(&dt, &t),
            &mut self.st.vars.clone(),
            true,
        );
        let mut found = Vec::new();
        for c in b.out {
            match c.gather {
                Some(_) => found.push(c),
                None => found.extend(super::unroll::unroll(c, self.inst, &self.var_names())?),
            }
        }
        let x = self.src_name(source);
        let xty = (self.src_ty)(source);
        let out = fresh_port(&format!("d_{x}"), &self.port_names(&target));
        let extra = [
            (target.as_str(), PortRef::Target),
            (dt.as_str(), PortRef::DTarget),
        ];
        let mut pieces = Vec::new();
        let mut groups: Vec<(Vec<Place>, Vec<String>, crate::ir::kernel::KExpr)> = Vec::new();
        for c in &found {
            if let Some(g) = &c.gather {
                pieces.push(self.scatter_piece(&mut w, c, g, (&x, &xty), &out, &extra)?);
                continue;
            }
            let (places, own) = self.window(c, &x, &xty)?;
            let names = self.var_names();
            let lhs: Vec<String> = own.iter().map(|v| names[*v].clone()).collect();
            match groups.iter_mut().find(|g| g.0 == places) {
                Some(g) => {
                    let term = self.term(&mut w, c, &own, &g.1, xty.dtype)?;
                    g.2 = expr::bin(BinOp::Add, g.2.clone(), term);
                }
                None => {
                    let term = self.term(&mut w, c, &own, &lhs, xty.dtype)?;
                    groups.push((places, lhs, term));
                }
            }
        }
        pieces.extend(groups.into_iter().map(|(places, lhs, value)| {
            let shape = places
                .iter()
                .filter_map(|p| match p {
                    Place::Var { len, .. } => Some(*len),
                    Place::Const(_) => None,
                })
                .collect();
            let ty = TensorType::new(xty.dtype, shape);
            let gen = self.assemble("", value, (&out, &ty), lhs, &extra);
            Piece {
                gen,
                places,
                scatter: None,
            }
        }));
        Ok(pieces)
    }

    pub(super) fn port_names(&self, target: &str) -> Vec<String> {
        let mut n: Vec<String> = self.sources().iter().map(|s| self.src_name(s)).collect();
        n.push(target.to_string());
        n
    }

    /// Where a load reads its source: per dimension, a variable with a positive step over its
    /// range shifted by a constant, or a constant; and those variables in dimension order.
    /// Anything else (a negative step, a repeated variable; two variables in one index are
    /// unrolled before, `unroll.rs`) is an error: its adjoint would be a scatter.
    fn window(
        &self,
        c: &Contribution,
        x: &str,
        xty: &TensorType,
    ) -> Result<(Vec<Place>, Vec<usize>), String> {
        let names = self.var_names();
        let mut places = Vec::new();
        let mut own = Vec::new();
        for (d, a) in c.index.iter().enumerate() {
            match a.terms.as_slice() {
                [] => places.push(Place::Const(a.constant)),
                [(v, step)] if *step >= 1 && !own.contains(v) => {
                    let r = self.inst.vars[*v].range;
                    let lo = a.constant + step * r.0;
                    let len = r.1 - r.0;
                    if lo < 0 || lo + step * (len - 1) >= xty.shape[d] {
                        return Err(format!("the load of `{x}` at dimension {d} leaves it"));
                    }
                    places.push(Place::Var {
                        lo,
                        len,
                        step: *step,
                    });
                    own.push(*v);
                }
                _ => {
                    let text = expr::affine(a, &|v| names[v].clone());
                    return Err(format!(
                        "the load of `{x}` at dimension {d} is indexed by `{}`, not by a variable with a positive step that no other dimension reads, plus a constant (its adjoint would be a scatter)",
                        crate::print::iexpr_text(&text)
                    ));
                }
            }
        }
        Ok((places, own))
    }

    /// One load's contribution with its variables renamed to the adjoint's left-hand side and
    /// the other variables in scope summed over.
    pub(super) fn term(
        &self,
        w: &mut Writer,
        c: &Contribution,
        own: &[usize],
        lhs: &[String],
        dtype: crate::ir::DType,
    ) -> Result<crate::ir::kernel::KExpr, String> {
        let names = self.var_names();
        let mut map = HashMap::new();
        for (v, l) in own.iter().zip(lhs) {
            map.insert(names[*v].clone(), l.clone());
        }
        let mut summed = Vec::new();
        for v in &c.bound {
            if !own.contains(v) && !map.contains_key(&names[*v]) {
                // The forward's name where the adjoint's left-hand side leaves it free (so
                // `shard{dim=i}` splits the batch sum of a weight gradient as the forward's).
                let f = match lhs.contains(&names[*v]) || map.values().any(|x| x == &names[*v]) {
                    true => w.fresh(),
                    false => names[*v].clone(),
                };
                map.insert(names[*v].clone(), f.clone());
                summed.push((f, *v));
            }
        }
        let mut adj = c.adj.clone();
        expr::rename(&mut adj, &map);
        // A summed variable the term does not mention is a factor of its extent; one it
        // mentions only inside compound indices has no extent a kernel can infer.
        let mut vars = Vec::new();
        for (f, v) in summed {
            match expr::mentions(&adj, &f) {
                (false, _) => {
                    let n = self.inst.vars[v].range;
                    adj = expr::mul(adj, expr::typed((n.1 - n.0) as f64, dtype));
                }
                (true, true) => vars.push(f),
                (true, false) => {
                    return Err(format!(
                        "the sum over `{}` in the adjoint reads it only in compound indices",
                        names[v]
                    ))
                }
            }
        }
        Ok(if vars.is_empty() {
            adj
        } else {
            expr::reduce(Reduction::Sum, vars, adj)
        })
    }

    /// An op with one output statement `out[lhs] = value`, whose inputs are the tensors
    /// `value` reads: sources of the statement, or the `extra` ports.
    pub(super) fn assemble(
        &self,
        name: &str,
        value: crate::ir::kernel::KExpr,
        out: (&str, &TensorType),
        lhs: Vec<String>,
        extra: &[(&str, PortRef)],
    ) -> Generated {
        let mut read = Vec::new();
        expr::reads(&value, &mut read);
        let mut inputs = Vec::new();
        let mut ports = Vec::new();
        for s in self.sources() {
            let n = self.src_name(&s);
            if read.contains(&n) {
                ports.push(port(&n, &(self.src_ty)(&s)));
                inputs.push(PortRef::Src(s));
            }
        }
        for (n, r) in extra {
            if read.iter().any(|x| x == n) {
                ports.push(port(n, &self.target_ty));
                inputs.push(r.clone());
            }
        }
        let taken: Vec<String> = (ports.iter().map(|p| p.name.clone()))
            .chain([out.0.to_string()])
            .collect();
        let sp = Span::default();
        let stmt = Stmt {
            target: out.0.to_string(),
            indices: lhs.into_iter().map(|v| IndexVar::Var(v, sp)).collect(),
            value,
            span: sp,
            target_span: sp,
        };
        let op = OpDef {
            name: name.to_string(),
            params: vec![],
            inputs: ports,
            outputs: vec![port(out.0, out.1)],
            body: OpBody::Kernel(super::split::split(stmt, &taken)),
            span: sp,
            name_span: sp,
        };
        Generated { op, inputs }
    }
}

/// `base`, or `base_`, `base__`, ... : a port name none of `taken` has.
pub(super) fn fresh_port(base: &str, taken: &[String]) -> String {
    let mut n = base.to_string();
    while taken.contains(&n) {
        n.push('_');
    }
    n
}

/// A port of concrete type `ty`.
pub fn port(name: &str, ty: &TensorType) -> PortDef {
    let sp = Span::default();
    PortDef {
        name: name.to_string(),
        dtype: ty.dtype,
        dims: ty
            .shape
            .iter()
            .map(|&d| Dim::Expr(IExpr::Int(d, sp)))
            .collect(),
        span: sp,
    }
}
