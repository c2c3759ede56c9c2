//! The concrete form a fused kernel is composed in: an [`FKernel`] is an instance-like kernel
//! (numbered index variables with concrete ranges, typed [`CExpr`] trees, affine loads) whose
//! inputs are graph values. Every rewrite of the pass is a function from `FKernel`s to an
//! `FKernel`:
//!
//! - [`FKernel::from_instance`] reads the lowered kernel of one apply;
//! - [`FKernel::fold_view`] composes a view's affine map into the loads of the ports it feeds;
//! - `absorb::absorb` composes a producer into a consumer, its output either a temporary or
//!   substituted into the consumer's loads (in `absorb.rs`).
//!
//! Coordinates are global, as in the verifier's instances: a load of an input reads element
//! `index - origin` of its argument, where `origin` is zero except for a shard's windows. A
//! composition records the origin it assumes for every port of the result, and the check
//! requires the verifier to derive exactly those.
//!
//! Nothing here decides *whether* to rewrite (see `plan.rs`), and nothing here is trusted:
//! the result is printed as an op, re-lowered by the verifier and compared with the composed
//! form (`check.rs`) before it replaces anything.

use super::affine::{canonical, shifted, Res};
use super::views::ViewMap;
use crate::ir::graph::ValueId;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Scalar, Src, Temp, Var};
use crate::ir::kernel::{BinOp, Dim, Func, IExpr, OpDef, Reduction, UnOp};
use crate::ir::TensorType;
use tapc_runtime::DType;

/// A shape-symbol hint for one input dim: the op it came from (a number unique per source
/// instance in one composition) and the symbol's name there.
pub type Hint = Option<(usize, String)>;

/// One input port of a fused kernel: the graph value it reads, its type, a preferred name.
#[derive(Clone, Debug)]
pub struct FInput {
    pub value: ValueId,
    pub ty: TensorType,
    pub name: String,
    /// Per dim: the symbol the source op used for it, if the port still has the source's shape.
    pub hints: Vec<Hint>,
    /// The global coordinate of the argument's element 0: loads index `origin + element`.
    /// Zero unless the apply is a shard (then the verifier must derive the same origin).
    pub origin: Vec<i64>,
}

/// One output port: preferred name and type (the type of the apply's result).
#[derive(Clone, Debug)]
pub struct FOutput {
    pub name: String,
    pub ty: TensorType,
}

/// A kernel in concrete form, ready to be printed as an op definition.
#[derive(Clone, Debug)]
pub struct FKernel {
    /// Index variables; the first `parallel` ones are the index space, in the order of the
    /// first output statement's left-hand side. Names are preferences (printing renames).
    pub vars: Vec<Var>,
    pub parallel: usize,
    pub temps: Vec<Temp>,
    pub stmts: Vec<CStmt>,
    pub inputs: Vec<FInput>,
    pub outputs: Vec<FOutput>,
    /// A preferred temporary name per temp (graph value names for absorbed producers).
    pub temp_names: Vec<String>,
    /// The index sub-range of a shard (the apply's `@[...]`), `None` for the whole space.
    pub range: Option<Vec<(i64, i64)>>,
}

impl FKernel {
    /// The kernel of one apply of a kernel op. `origin` tags the op's symbol hints.
    pub fn from_instance(
        op: &OpDef,
        inst: &Instance,
        args: &[ValueId],
        origin: usize,
    ) -> Res<FKernel> {
        let stmts = inst.stmts.clone().ok_or("extern op without a kernel")?;
        if stmts.iter().any(|s| has_gather(&s.value)) {
            // Composing a gather with its producer or consumer is not implemented.
            return Err("a kernel with a gathered index");
        }
        if args.len() != op.inputs.len()
            || inst.inputs.len() != args.len()
            || inst.origins.len() != args.len()
        {
            return Err("argument count");
        }
        let inputs = op
            .inputs
            .iter()
            .zip(args)
            .zip(&inst.inputs)
            .zip(&inst.origins)
            .map(|(((p, &value), ty), origin_k)| {
                // A `..S` list covers the dims the fixed ones leave: `S0, S1, ...`.
                let listed = ty.rank() + 1 - p.dims.len().min(ty.rank() + 1);
                let bare: Vec<Hint> = p
                    .dims
                    .iter()
                    .flat_map(|d| match d {
                        Dim::Expr(IExpr::Name(s, _)) => vec![Some((origin, s.clone()))],
                        Dim::Variadic(s, _) => (0..listed)
                            .map(|k| Some((origin, format!("{s}{k}"))))
                            .collect(),
                        Dim::Expr(_) => vec![None],
                    })
                    .collect();
                let hints = if bare.len() == ty.rank() {
                    bare
                } else {
                    vec![None; ty.rank()]
                };
                FInput {
                    value,
                    ty: ty.clone(),
                    name: p.name.clone(),
                    hints,
                    origin: origin_k.clone(),
                }
            })
            .collect();
        let outputs = op
            .outputs
            .iter()
            .zip(&inst.outputs)
            .map(|(p, ty)| FOutput {
                name: p.name.clone(),
                ty: ty.clone(),
            })
            .collect();
        Ok(FKernel {
            vars: inst.vars.clone(),
            parallel: inst.parallel,
            temp_names: inst.temps.iter().map(|t| t.name.clone()).collect(),
            temps: inst.temps.clone(),
            stmts,
            inputs,
            outputs,
            range: inst.sharded.then(|| inst.range()),
        })
    }

    /// Input ports bound to graph value `v`.
    pub fn ports_of(&self, v: ValueId) -> Vec<usize> {
        (0..self.inputs.len())
            .filter(|&k| self.inputs[k].value == v)
            .collect()
    }

    /// Every load of input `k`: `(statement, load index)`, in statement order.
    pub fn loads_of(&self, k: usize) -> Vec<(usize, Vec<Affine>)> {
        let mut out = Vec::new();
        for (s, st) in self.stmts.iter().enumerate() {
            visit(&st.value, &mut |e| {
                if let CKind::Load {
                    src: Src::Input(j),
                    index,
                    ..
                } = &e.kind
                {
                    if *j == k {
                        out.push((s, index.clone()));
                    }
                }
            });
        }
        out
    }

    /// Rebinds every port reading value `u` to `src` (of type `ty`), composing `map` (from
    /// `u`'s coordinates to `src`'s) into their loads.
    pub fn fold_view(
        &mut self,
        u: ValueId,
        map: &ViewMap,
        src: ValueId,
        ty: &TensorType,
    ) -> Res<()> {
        let ports = self.ports_of(u);
        if ports.is_empty() {
            return Err("the view feeds no port");
        }
        let inputs = &self.inputs;
        for st in &mut self.stmts {
            rewrite_loads(&mut st.value, &mut |src_, index| {
                if let Src::Input(k) = src_ {
                    if ports.contains(k) {
                        // The view's element `index - origin`, mapped to its operand's element.
                        let local = shifted(index, &inputs[*k].origin, -1)?;
                        *index = map.compose(&local)?;
                    }
                }
                Ok(())
            })?;
        }
        for &k in &ports {
            let p = &mut self.inputs[k];
            // A source dim read as exactly one view dim of the same size keeps its symbol.
            let hints = map
                .rows
                .iter()
                .enumerate()
                .map(|(d, row)| {
                    let r = canonical(row);
                    match r.terms[..] {
                        [(e, c)] if (c == 1 && r.constant == 0) || c == -1 => (p.ty.shape.get(e)
                            == ty.shape.get(d))
                        .then(|| p.hints.get(e).cloned().flatten())
                        .flatten(),
                        _ => None,
                    }
                })
                .collect();
            p.value = src;
            p.ty = ty.clone();
            p.hints = hints;
            p.origin = vec![0; ty.rank()];
        }
        self.merge_ports();
        Ok(())
    }

    /// Merges ports bound to the same graph value (the first one stays) and drops ports that
    /// are never loaded (an absorbed producer may not need all of its inputs).
    pub fn merge_ports(&mut self) {
        let loaded: Vec<bool> = (0..self.inputs.len())
            .map(|k| !self.loads_of(k).is_empty())
            .collect();
        let mut map = Vec::with_capacity(self.inputs.len());
        let mut kept: Vec<FInput> = Vec::new();
        for (k, p) in std::mem::take(&mut self.inputs).into_iter().enumerate() {
            if !loaded[k] {
                map.push(usize::MAX); // no load refers to it
                continue;
            }
            match kept
                .iter()
                .position(|q| q.value == p.value && q.origin == p.origin)
            {
                Some(i) => map.push(i),
                None => {
                    map.push(kept.len());
                    kept.push(p);
                }
            }
        }
        self.inputs = kept;
        for st in &mut self.stmts {
            let _ = rewrite_loads(&mut st.value, &mut |src, _| {
                if let Src::Input(k) = src {
                    *k = map[*k];
                }
                Ok(())
            });
        }
    }

    /// Number of expression nodes and the deepest expression (size limits of fusion).
    pub fn size(&self) -> (usize, usize) {
        self.stmts.iter().fold((0, 0), |(n, d), st| {
            let (a, b) = size_of(&st.value);
            (n + a, d.max(b))
        })
    }
}

/// Number of nodes of an expression.
pub fn node_count(e: &CExpr) -> usize {
    size_of(e).0
}

fn size_of(e: &CExpr) -> (usize, usize) {
    let kids: Vec<&CExpr> = children(e);
    let (mut n, mut d) = (1, 0);
    for k in kids {
        let (a, b) = size_of(k);
        n += a;
        d = d.max(b);
    }
    (n, d + 1)
}

/// Whether `e` contains a gathered load.
pub fn has_gather(e: &CExpr) -> bool {
    let mut found = false;
    visit(e, &mut |x| found |= matches!(x.kind, CKind::Gather(_)));
    found
}

pub fn children(e: &CExpr) -> Vec<&CExpr> {
    match &e.kind {
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => vec![],
        CKind::Gather(g) => g.gathered().map(|(_, b)| b).collect(),
        CKind::Reduce { body, .. } | CKind::Unary(_, body) => vec![body],
        CKind::Call(_, args) => args.iter().collect(),
        CKind::Binary(_, a, b) => vec![a, b],
    }
}

/// Calls `f` on every node of `e`, parents first.
pub fn visit(e: &CExpr, f: &mut dyn FnMut(&CExpr)) {
    f(e);
    for c in children(e) {
        visit(c, f);
    }
}

/// Whether `e` contains a reduction.
pub fn has_reduction(e: &CExpr) -> bool {
    let mut found = false;
    visit(e, &mut |x| found |= matches!(x.kind, CKind::Reduce { .. }));
    found
}

fn rewrite_loads(
    e: &mut CExpr,
    f: &mut dyn FnMut(&mut Src, &mut Vec<Affine>) -> Res<()>,
) -> Res<()> {
    match &mut e.kind {
        CKind::Const(_) | CKind::Var(_) => Ok(()),
        CKind::Load { src, index, texts } => {
            texts.clear();
            f(src, index)
        }
        CKind::Gather(_) => Err("a kernel with a gathered index"),
        CKind::Reduce { body, .. } | CKind::Unary(_, body) => rewrite_loads(body, f),
        CKind::Call(_, args) => args.iter_mut().try_for_each(|a| rewrite_loads(a, f)),
        CKind::Binary(_, a, b) => {
            rewrite_loads(a, f)?;
            rewrite_loads(b, f)
        }
    }
}

/// Every load of input `k` with the variables in scope around it (the statement's
/// left-hand side and the enclosing reductions).
pub fn loads_in_scope(fk: &FKernel, k: usize) -> Vec<(Vec<Affine>, Vec<usize>)> {
    fn walk(e: &CExpr, k: usize, scope: &mut Vec<usize>, out: &mut Vec<(Vec<Affine>, Vec<usize>)>) {
        match &e.kind {
            CKind::Load {
                src: Src::Input(j),
                index,
                ..
            } if *j == k => out.push((index.clone(), scope.clone())),
            CKind::Reduce { vars, body, .. } => {
                let n = scope.len();
                scope.extend(vars);
                walk(body, k, scope, out);
                scope.truncate(n);
            }
            _ => children(e).into_iter().for_each(|c| walk(c, k, scope, out)),
        }
    }
    let mut out = Vec::new();
    for st in &fk.stmts {
        let mut scope = st.vars.clone();
        walk(&st.value, k, &mut scope, &mut out);
    }
    out
}

/// An integer-valued expression (i64) computing affine `a` of index variables.
pub fn affine_value(a: &Affine) -> Res<CExpr> {
    let int = |kind| CExpr {
        kind,
        dtype: DType::I64,
    };
    let a = canonical(a);
    let mut acc: Option<CExpr> = None;
    let k = a.constant;
    // `4 - i` rather than `-i + 4`.
    let lead = k > 0 && a.terms.first().is_some_and(|t| t.1 < 0);
    if lead {
        acc = Some(int(CKind::Const(Scalar::I(k))));
    }
    for &(v, c) in &a.terms {
        let mag = c.checked_abs().ok_or("coefficient overflow")?;
        let term = if mag == 1 {
            int(CKind::Var(v))
        } else {
            int(CKind::Binary(
                BinOp::Mul,
                Box::new(int(CKind::Const(Scalar::I(mag)))),
                Box::new(int(CKind::Var(v))),
            ))
        };
        acc = Some(match acc {
            None if c < 0 => int(CKind::Unary(UnOp::Neg, Box::new(term))),
            None => term,
            Some(x) => int(CKind::Binary(
                if c < 0 { BinOp::Sub } else { BinOp::Add },
                Box::new(x),
                Box::new(term),
            )),
        });
    }
    let mag = k.checked_abs().ok_or("constant overflow")?;
    let lit = int(CKind::Const(Scalar::I(mag)));
    Ok(match acc {
        Some(x) if lead => x,
        None if k < 0 => int(CKind::Unary(UnOp::Neg, Box::new(lit))),
        None => lit,
        Some(x) if k == 0 => x,
        Some(x) => int(CKind::Binary(
            if k < 0 { BinOp::Sub } else { BinOp::Add },
            Box::new(x),
            Box::new(lit),
        )),
    })
}

/// Whether `s` can be used as a name in a printed kernel (an identifier that is no keyword,
/// dtype, function or reduction name).
pub fn ident_ok(s: &str) -> bool {
    // The lexer's keywords; function, cast and reduction names come from the IR's own tables,
    // so a dtype or function added later is reserved without touching this list.
    const KEYWORDS: &[&str] = &[
        "op", "extern", "graph", "apply", "source", "sink", "sequence", "index", "cost", "on",
        "true", "false", "pin",
    ];
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
        && Func::from_name(s).is_none()
        && Reduction::from_name(s).is_none()
}
