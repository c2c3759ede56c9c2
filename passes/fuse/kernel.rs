//! The concrete form a fused kernel is composed in: an [`FKernel`] is an instance-like kernel
//! (numbered index variables with concrete ranges, typed [`CExpr`] trees, affine loads) whose
//! inputs are graph values. Every rewrite of the pass is a function from `FKernel`s to an
//! `FKernel`:
//!
//! - [`FKernel::from_instance`] reads the lowered kernel of one apply;
//! - [`FKernel::fold_view`] composes a view's affine map into the loads of the ports it feeds;
//! - [`absorb`] composes a producer into a consumer, its output either a temporary
//!   ([`Absorb::Temp`]) or substituted into the consumer's loads ([`Absorb::Inline`]).
//!
//! Coordinates are global, as in the verifier's instances: a load of an input reads element
//! `index - origin` of its argument, where `origin` is zero except for a shard's windows. A
//! composition records the origin it assumes for every port of the result, and the check
//! requires the verifier to derive exactly those.
//!
//! Nothing here decides *whether* to rewrite (see `plan.rs`), and nothing here is trusted:
//! the result is printed as an op, re-lowered by the verifier and compared with the composed
//! form (`check.rs`) before it replaces anything.

use super::affine::{as_var, canonical, shifted, substitute, Res};
use super::views::ViewMap;
use crate::ir::graph::ValueId;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Scalar, Src, Target, Temp, Var};
use crate::ir::kernel::{BinOp, Dim, Func, IExpr, OpDef, UnOp};
use crate::ir::TensorType;
use std::collections::HashMap;
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

pub fn children(e: &CExpr) -> Vec<&CExpr> {
    match &e.kind {
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => vec![],
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

/// How the producer's output enters the consumer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Absorb {
    /// The output statement becomes a temporary indexed by the consumer's variables
    /// (`sigma[d]`: the consumer variable indexing the producer output's dim `d`).
    Temp,
    /// The output expression replaces each load (producer temporaries, if any, become
    /// consumer temporaries through `sigma`).
    Inline,
}

/// Composes producer `p` (single output, bound to value `v`) into consumer `c`.
/// `sigma` maps the producer's output dims to consumer parallel variables; it is required when
/// the producer has temporaries or for [`Absorb::Temp`]. `temp_name` names the new temporary.
pub fn absorb(
    c: &FKernel,
    p: &FKernel,
    v: ValueId,
    mode: Absorb,
    sigma: Option<&[usize]>,
    temp_name: &str,
) -> Res<FKernel> {
    if p.outputs.len() != 1 {
        return Err("the producer has several outputs");
    }
    let vports = c.ports_of(v);
    let out_stmt = p
        .stmts
        .iter()
        .position(|s| s.target == Target::Output(0))
        .ok_or("the producer never assigns its output")?;
    let p_out_vars = p.stmts[out_stmt].vars.clone();
    if p_out_vars.len() != p.outputs[0].ty.rank() || p_out_vars.len() != p.parallel {
        return Err("output rank");
    }
    let needs_sigma = mode == Absorb::Temp || !p.temps.is_empty();
    if needs_sigma && sigma.is_none() {
        return Err("the producer's variables do not map onto the consumer's");
    }
    // Inputs: the producer's first, then the consumer's except the absorbed value. In an
    // unsharded consumer, the producer's loads are rebased to element coordinates.
    let mut inputs: Vec<FInput> = p.inputs.clone();
    let p_in: Vec<InputImg> = (0..p.inputs.len())
        .map(|k| InputImg::Src(Src::Input(k)))
        .collect();
    let p_off: Vec<Vec<i64>> = p
        .inputs
        .iter()
        .map(|i| match c.range {
            Some(_) => vec![0; i.origin.len()],
            None => i.origin.iter().map(|o| -o).collect(),
        })
        .collect();
    if c.range.is_none() {
        for i in &mut inputs {
            i.origin = vec![0; i.origin.len()];
        }
    }
    // A load `v[a]` in the consumer reads the producer's output at its global coordinate
    // `a - origin + lo` (origin: the consumer's window on `v`; lo: the producer's range).
    let p_lo: Vec<i64> = p_out_vars.iter().map(|&pv| p.vars[pv].range.0).collect();
    let mut c_in = Vec::with_capacity(c.inputs.len());
    let mut c_off = Vec::with_capacity(c.inputs.len());
    for (k, inp) in c.inputs.iter().enumerate() {
        if vports.contains(&k) {
            c_in.push(InputImg::Inline);
            if inp.origin.len() != p_lo.len() {
                return Err("output rank");
            }
            c_off.push(p_lo.iter().zip(&inp.origin).map(|(l, o)| l - o).collect());
        } else {
            c_in.push(InputImg::Src(Src::Input(inputs.len())));
            c_off.push(vec![0; inp.origin.len()]);
            inputs.push(inp.clone());
        }
    }
    // Temporaries: the producer's, then its output (Temp mode), then the consumer's.
    let mut temps: Vec<Temp> = Vec::new();
    let mut temp_names: Vec<String> = Vec::new();
    let mut vars: Vec<Var> = c.vars.clone();
    // Producer parallel variables become consumer variables (when they map).
    let p_par_img: Vec<Affine> = match sigma {
        Some(s) => {
            let mut img = vec![Affine::constant(0); p.parallel];
            for (d, &pv) in p_out_vars.iter().enumerate() {
                if s.get(d)
                    .is_none_or(|&x| x >= c.parallel || c.vars[x].range != p.vars[pv].range)
                {
                    return Err("a producer variable has no consumer variable with its range");
                }
                img[pv] = Affine::var(s[d]);
                let cv = &mut vars[s[d]];
                if !ident_ok(&cv.name) && ident_ok(&p.vars[pv].name) {
                    cv.name = p.vars[pv].name.clone();
                }
            }
            img
        }
        None => vec![],
    };
    let p_temps: Vec<usize> = (0..p.temps.len()).collect();
    for (t, tmp) in p.temps.iter().enumerate() {
        temps.push(Temp {
            name: tmp.name.clone(),
            dtype: tmp.dtype,
            vars: tmp
                .vars
                .iter()
                .map(|&x| as_var(&p_par_img[x]).unwrap_or(x))
                .collect(),
        });
        temp_names.push(p.temp_names[t].clone());
    }
    let mut stmts = Vec::new();
    for (s, st) in p.stmts.iter().enumerate() {
        if s == out_stmt {
            continue;
        }
        let mut m = Mapper {
            src_vars: &p.vars,
            par_img: p_par_img.clone(),
            red: HashMap::new(),
            vars: &mut vars,
            inputs: &p_in,
            offsets: &p_off,
            temps: &p_temps,
            inline: None,
        };
        let value = m.copy(&st.value)?;
        let Target::Temp(t) = st.target else {
            return Err("unexpected producer output");
        };
        stmts.push(CStmt {
            target: Target::Temp(t),
            vars: st
                .vars
                .iter()
                .map(|&x| as_var(&p_par_img[x]).unwrap_or(x))
                .collect(),
            value,
        });
    }
    let out_temp = temps.len();
    if mode == Absorb::Temp {
        let s = sigma.ok_or("no placement for the temporary")?;
        let st = &p.stmts[out_stmt];
        let mut m = Mapper {
            src_vars: &p.vars,
            par_img: p_par_img.clone(),
            red: HashMap::new(),
            vars: &mut vars,
            inputs: &p_in,
            offsets: &p_off,
            temps: &p_temps,
            inline: None,
        };
        let value = m.copy(&st.value)?;
        let tvars: Vec<usize> = (0..p_out_vars.len()).map(|d| s[d]).collect();
        temps.push(Temp {
            name: temp_name.to_string(),
            dtype: value.dtype,
            vars: tvars.clone(),
        });
        temp_names.push(temp_name.to_string());
        stmts.push(CStmt {
            target: Target::Temp(out_temp),
            vars: tvars,
            value,
        });
        for k in &vports {
            c_in[*k] = InputImg::Src(Src::Temp(out_temp));
        }
    }
    let shift = temps.len();
    let c_temps: Vec<usize> = (0..c.temps.len()).map(|t| t + shift).collect();
    for (t, tmp) in c.temps.iter().enumerate() {
        temps.push(tmp.clone());
        temp_names.push(c.temp_names[t].clone());
    }
    let spec = InlineSpec {
        p,
        out: &p.stmts[out_stmt].value,
        out_vars: &p_out_vars,
        inputs: &p_in,
        offsets: &p_off,
        temps: &p_temps,
    };
    let ident: Vec<Affine> = (0..c.parallel).map(Affine::var).collect();
    for st in &c.stmts {
        let mut m = Mapper {
            src_vars: &c.vars,
            par_img: ident.clone(),
            red: HashMap::new(),
            vars: &mut vars,
            inputs: &c_in,
            offsets: &c_off,
            temps: &c_temps,
            inline: Some(&spec),
        };
        // Consumer reduction variables keep their numbers (they are already in `vars`).
        m.red = (c.parallel..c.vars.len()).map(|x| (x, x)).collect();
        let value = m.copy(&st.value)?;
        stmts.push(CStmt {
            target: match st.target {
                Target::Output(k) => Target::Output(k),
                Target::Temp(t) => Target::Temp(c_temps[t]),
            },
            vars: st.vars.clone(),
            value,
        });
    }
    let mut fk = FKernel {
        vars,
        parallel: c.parallel,
        temps,
        stmts,
        inputs,
        outputs: c.outputs.clone(),
        temp_names,
        range: c.range.clone(),
    };
    fk.merge_ports();
    Ok(fk)
}

/// Where loads of a source input go.
enum InputImg {
    Src(Src),
    /// Substitute the producer's output expression.
    Inline,
}

struct InlineSpec<'a> {
    p: &'a FKernel,
    out: &'a CExpr,
    out_vars: &'a [usize],
    inputs: &'a [InputImg],
    offsets: &'a [Vec<i64>],
    temps: &'a [usize],
}

/// Copies an expression of a source kernel into the fused kernel's numbering.
struct Mapper<'a, 'b> {
    src_vars: &'a [Var],
    /// Images of the source's parallel variables.
    par_img: Vec<Affine>,
    /// Source reduction variable → fused variable (allocated on first sight).
    red: HashMap<usize, usize>,
    vars: &'b mut Vec<Var>,
    inputs: &'a [InputImg],
    /// Added to every load index of each source input.
    offsets: &'a [Vec<i64>],
    temps: &'a [usize],
    inline: Option<&'a InlineSpec<'a>>,
}

impl Mapper<'_, '_> {
    fn img(&self, v: usize) -> Res<Affine> {
        if v < self.par_img.len() {
            Ok(self.par_img[v].clone())
        } else {
            self.red
                .get(&v)
                .map(|&x| Affine::var(x))
                .ok_or("variable out of scope")
        }
    }

    fn index(&self, index: &[Affine]) -> Res<Vec<Affine>> {
        index
            .iter()
            .map(|a| substitute(a, &|v| self.img(v)))
            .collect()
    }

    fn copy(&mut self, e: &CExpr) -> Res<CExpr> {
        let kind = match &e.kind {
            CKind::Const(s) => CKind::Const(*s),
            CKind::Var(v) => {
                let a = self.img(*v)?;
                return Ok(match as_var(&a) {
                    Some(x) => CExpr {
                        kind: CKind::Var(x),
                        dtype: e.dtype,
                    },
                    None => CExpr {
                        kind: CKind::Call(Func::Cast(e.dtype), vec![affine_value(&a)?]),
                        dtype: e.dtype,
                    },
                });
            }
            CKind::Load { src, index, .. } => {
                let index = self.index(index)?;
                match src {
                    Src::Temp(t) => CKind::Load {
                        src: Src::Temp(self.temps[*t]),
                        index,
                        texts: vec![],
                    },
                    Src::Input(k) => {
                        let index = shifted(&index, &self.offsets[*k], 1)?;
                        return self.load_input(*k, index, e.dtype);
                    }
                }
            }
            CKind::Reduce { kind, vars, body } => {
                let mut nv = Vec::new();
                for &v in vars {
                    let id = match self.red.get(&v) {
                        Some(&x) => x,
                        None => {
                            self.vars.push(self.src_vars[v].clone());
                            let x = self.vars.len() - 1;
                            self.red.insert(v, x);
                            x
                        }
                    };
                    nv.push(id);
                }
                CKind::Reduce {
                    kind: *kind,
                    vars: nv,
                    body: Box::new(self.copy(body)?),
                }
            }
            CKind::Call(f, args) => {
                CKind::Call(*f, args.iter().map(|a| self.copy(a)).collect::<Res<_>>()?)
            }
            CKind::Unary(op, a) => CKind::Unary(*op, Box::new(self.copy(a)?)),
            CKind::Binary(op, a, b) => {
                CKind::Binary(*op, Box::new(self.copy(a)?), Box::new(self.copy(b)?))
            }
        };
        Ok(CExpr {
            kind,
            dtype: e.dtype,
        })
    }

    /// A load of source input `k` at `index` (fused numbering, offset applied).
    fn load_input(&mut self, k: usize, index: Vec<Affine>, dtype: DType) -> Res<CExpr> {
        match &self.inputs[k] {
            InputImg::Src(s) => Ok(CExpr {
                kind: CKind::Load {
                    src: s.clone(),
                    index,
                    texts: vec![],
                },
                dtype,
            }),
            InputImg::Inline => {
                let spec = self.inline.ok_or("no producer to inline")?;
                self.inline_at(spec, &index, dtype)
            }
        }
    }

    /// The producer's output expression at the point `index` (already in fused numbering).
    fn inline_at(&mut self, spec: &InlineSpec, index: &[Affine], dtype: DType) -> Res<CExpr> {
        let mut par = vec![Affine::constant(0); spec.p.parallel];
        for (d, &pv) in spec.out_vars.iter().enumerate() {
            par[pv] = index.get(d).cloned().ok_or("index rank")?;
        }
        let mut m = Mapper {
            src_vars: &spec.p.vars,
            par_img: par,
            red: HashMap::new(),
            vars: &mut *self.vars,
            inputs: spec.inputs,
            offsets: spec.offsets,
            temps: spec.temps,
            inline: None,
        };
        let e = m.copy(spec.out)?;
        if e.dtype != dtype {
            return Err("dtype of the inlined expression");
        }
        Ok(e)
    }
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
    const RESERVED: &[&str] = &[
        "op", "extern", "graph", "apply", "source", "sink", "sequence", "index", "cost", "on",
        "true", "false", "f32", "f64", "i32", "i64", "bool", "exp", "log", "sqrt", "tanh", "abs",
        "sin", "cos", "erf", "atan", "asin", "acos", "pow", "floor", "ceil", "max", "min",
        "select", "sum", "prod", "pin",
    ];
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !RESERVED.contains(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_values_print_as_integer_expressions() {
        let a = Affine {
            terms: vec![(0, -1)],
            constant: 4,
        };
        let e = affine_value(&a).unwrap();
        // 4 - i
        assert!(matches!(e.kind, CKind::Binary(BinOp::Sub, _, _)));
        assert_eq!(e.dtype, DType::I64);
        let big = Affine {
            terms: vec![(0, i64::MIN)],
            constant: 0,
        };
        assert!(affine_value(&big).is_err());
    }

    #[test]
    fn reserved_words_are_not_names() {
        for bad in ["sum", "max", "f32", "index", "1x", "a.b", ""] {
            assert!(!ident_ok(bad), "{bad}");
        }
        assert!(ident_ok("h_0"));
    }
}
