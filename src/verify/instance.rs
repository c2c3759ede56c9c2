//! Building an [`Instance`] for one apply: bind, lower the kernel (or read the extern
//! signature), derive projections (`signature`), place shard windows and check every access's
//! static bounds.

use super::bind::{bind, bind_ports, output_shape, with_port_dtypes, Bindings, Ports, Site};
use super::kernel;
use super::signature::derive_signature;
use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::ApplySpans;
use crate::ir::instance::*;
use crate::ir::kernel::{
    projection_entries_error, ExternProjection, ExternSig, IExpr, OpBody, OpDef, PortDef, Stmt,
};
use crate::ir::TensorType;
use std::collections::{HashMap, HashSet};

type R<T> = Result<T, Vec<Diagnostic>>;

/// Per index dimension: its name and extent (`Signature::index`).
type IndexSpace = Vec<(String, i64)>;

/// Per index dimension, per resource: a marginal cost (`Signature::marginal`).
type Costs = Vec<(String, Vec<(String, i64)>)>;

/// One apply being instantiated: the op, its bindings, the argument types, the full output
/// types (empty shapes for a shard, whose outputs come from its range) and the shard's range.
struct Call<'a> {
    op: &'a OpDef,
    b: &'a Bindings,
    args: &'a [TensorType],
    full: &'a [TensorType],
    range: Option<&'a [(i64, i64)]>,
    site: Site,
}

impl Call<'_> {
    /// An error in the extern signature, at `at`.
    fn bad(&self, msg: String, at: crate::diag::Span) -> Vec<Diagnostic> {
        vec![self
            .site
            .err(codes::BAD_SIGNATURE, msg, at, "in this signature")]
    }

    /// Evaluates an expression of the signature that must give a value (`what` fails).
    fn eval(&self, e: &IExpr, ok: impl Fn(i64) -> bool, what: String) -> R<i64> {
        match self.b.eval(e) {
            Ok(Some(v)) if ok(v) => Ok(v),
            _ => Err(self.bad(what, e.span())),
        }
    }

    /// Kernel statements lowered against `outputs`, with the errors of those that failed.
    fn lower(
        &self,
        stmts: &[Stmt],
        outputs: &[TensorType],
    ) -> R<(kernel::Lowered, Vec<Diagnostic>)> {
        let c = self;
        kernel::lower(c.op, stmts, c.b, c.args, outputs, c.range, c.site)
    }
}

/// How an apply is written: where its parts are and its arguments' value names, so that
/// diagnostics point at the parameter or range entry at fault and name the argument.
#[derive(Clone, Copy, Default)]
pub struct Written<'a> {
    pub spans: Option<&'a ApplySpans>,
    pub args: &'a [String],
}

/// Instantiates `op` for an apply with these parameters, argument types and optional range.
pub fn instantiate(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
) -> Result<Instance, Vec<Diagnostic>> {
    instantiate_with(op, params, args, range, site, Written::default())
}

/// [`instantiate`], with how the apply is written (see [`Written`]).
pub fn instantiate_with(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
    written: Written,
) -> Result<Instance, Vec<Diagnostic>> {
    let param_spans = written.spans.map_or(&[][..], |s| s.params.as_slice());
    let b = bind_ports(op, params, param_spans, args, Ports::All, site)?;
    if let Some(r) = range {
        if let Some(&(lo, hi)) = r.iter().find(|(lo, hi)| *lo < 0 || hi < lo) {
            let d = Diagnostic::error(codes::BAD_RANGE, format!("invalid index range {lo}:{hi}"))
                .primary(site.span, "ranges must satisfy 0 <= lo <= hi");
            return Err(vec![d]);
        }
        // An extern op's range is counted against its declared index, whose extents may fail.
        if let OpBody::Extern(sig) = &op.body {
            if r.len() != sig.index.len() {
                return Err(range_rank(site, sig.index.len(), r.len()));
            }
        }
    }
    let full: Vec<TensorType> = match range {
        Some(_) => op
            .outputs
            .iter()
            .map(|p| TensorType::new(p.dtype, vec![]))
            .collect(),
        None => op
            .outputs
            .iter()
            .map(|p| output_shape(&b, p, site).map(|s| TensorType::new(p.dtype, s)))
            .collect::<Result<_, _>>()
            .map_err(|d| vec![d])?,
    };
    let call = Call {
        op,
        b: &b,
        args,
        full: &full,
        range,
        site,
    };
    // Failed statements, costs and projections are reported with the bounds of the rest, not
    // instead of them.
    let (mut inst, deferred) = match &op.body {
        OpBody::Kernel(stmts) => from_kernel(&call, stmts)?,
        OpBody::Extern(sig) => from_extern(&call, sig)?,
    };
    inst.sharded = range.is_some();
    inst.origins = inst
        .signature
        .inputs
        .iter()
        .map(|p| match range {
            Some(r) => p
                .projection
                .image(r)
                .into_iter()
                .map(|(lo, _)| lo)
                .collect(),
            None => vec![0; p.ty.rank()],
        })
        .collect();
    let mut errs = deferred;
    let wide = range.map_or_else(Vec::new, |r| too_wide(op, &inst, r, site, written));
    if wide.is_empty() {
        errs.extend(check_bounds(op, &inst, site).err().into_iter().flatten());
    }
    errs.extend(wide);
    if errs.is_empty() {
        Ok(inst)
    } else {
        Err(errs)
    }
}

/// A shard whose range needs more of an input than its argument has (the input's footprint
/// over the range is wider than the window): one error per range entry, at that entry, rather
/// than one per access in the kernel.
fn too_wide(
    op: &OpDef,
    inst: &Instance,
    range: &[(i64, i64)],
    site: Site,
    w: Written,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (k, port) in inst.signature.inputs.iter().enumerate() {
        let image = port.projection.image(range);
        for (d, (lo, hi)) in image.into_iter().enumerate() {
            let have = inst.inputs[k].shape[d];
            let Some(v) = single_var(&port.projection.matrix[d]) else {
                continue;
            };
            if hi - lo <= have || !seen.insert(v) {
                continue;
            }
            let (rlo, rhi) = range[v];
            let arg = match w.args.get(k) {
                Some(a) => format!("`%{a}`"),
                None => format!("input `{}`", op.inputs[k].name),
            };
            let at = w.spans.and_then(|s| s.range.get(v)).copied();
            let (need, have_what) = (hi - lo, along(d, have));
            let d = Diagnostic::error(
                codes::OUT_OF_BOUNDS,
                format!("the range `{rlo}:{rhi}` exceeds the {have} {have_what} of {arg}"),
            )
            .primary(
                at.unwrap_or(site.span),
                format!("needs {need} {}", along(d, need)),
            )
            .note(format!(
                "help: narrow the range to at most {have} {have_what}, or pass a larger {arg}"
            ));
            out.push(d);
        }
    }
    out
}

/// What `n` elements along dimension `d` are: rows, columns or entries of dimension `d`.
fn along(d: usize, n: i64) -> String {
    let s = if n == 1 { "" } else { "s" };
    match d {
        0 => format!("row{s}"),
        1 => format!("column{s}"),
        _ => format!("entr{} of dimension {d}", if n == 1 { "y" } else { "ies" }),
    }
}

/// The one index variable a projection row depends on, if it depends on exactly one.
fn single_var(row: &[i64]) -> Option<usize> {
    let mut vars = row.iter().enumerate().filter(|(_, &a)| a != 0);
    let (v, _) = vars.next()?;
    vars.next().is_none().then_some(v)
}

/// The output types of a whole (unsharded) apply from its port shapes alone, when binding
/// the shapes succeeds: an apply of an op whose kernel has errors, or with an argument of the
/// wrong dtype, still has these types.
pub(super) fn declared_outputs(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    site: Site,
) -> Option<Vec<TensorType>> {
    let b = bind(op, params, &with_port_dtypes(op, args), site).ok()?;
    op.outputs
        .iter()
        .map(|p| {
            output_shape(&b, p, site)
                .ok()
                .map(|s| TensorType::new(p.dtype, s))
        })
        .collect()
}

/// A kernel op's instance, with the errors of the statements that failed: it holds the others,
/// whose bounds are still checked.
fn from_kernel(c: &Call, stmts: &[Stmt]) -> R<(Instance, Vec<Diagnostic>)> {
    let (low, errs) = c.lower(stmts, c.full)?;
    let mut inst = Instance {
        inputs: c.args.to_vec(),
        outputs: low.outputs,
        vars: low.vars,
        parallel: low.parallel,
        temps: low.temps,
        stmts: Some(low.stmts),
        origins: vec![],
        signature: Signature::default(),
        sharded: false,
    };
    inst.signature = derive_signature(c.op, &inst);
    Ok((inst, errs))
}

/// An extern op's instance: its declared index space, projections and costs, and its
/// reference kernel if it has one; with the errors of its costs and (in a whole apply) of its
/// projections, which the reference kernel's bounds do not depend on.
fn from_extern(c: &Call, sig: &ExternSig) -> R<(Instance, Vec<Diagnostic>)> {
    let (index, names) = extern_index(c, sig)?;
    let ranges: Vec<(i64, i64)> = match c.range {
        Some(r) => r.to_vec(),
        None => index.iter().map(|(_, e)| (0, *e)).collect(),
    };
    let mut ports = Vec::new();
    let mut deferred = Vec::new();
    let declared = c.op.inputs.iter().zip(c.args);
    for (p, ty) in declared.chain(c.op.outputs.iter().zip(c.full)) {
        // A whole apply's bounds do not depend on the projections: their errors wait for them.
        let projection = match extern_projection(c, sig, p, &names) {
            Ok(pr) => pr,
            Err(e) if c.range.is_none() => {
                deferred.extend(e);
                Projection::default()
            }
            Err(e) => return Err(e),
        };
        ports.push(PortSig {
            name: p.name.clone(),
            ty: ty.clone(),
            projection,
        });
    }
    let mut outputs: Vec<PortSig> = ports.split_off(c.op.inputs.len());
    if c.range.is_some() {
        // A shard's outputs are the image of its range.
        for p in &mut outputs {
            p.ty.shape = p
                .projection
                .image(&ranges)
                .iter()
                .map(|(lo, hi)| hi - lo)
                .collect();
        }
    }
    let marginal = extern_costs(c, sig).unwrap_or_else(|e| {
        deferred.extend(e);
        Vec::new()
    });
    let vars: Vec<Var> = index
        .iter()
        .zip(&ranges)
        .map(|((n, _), r)| Var {
            name: n.clone(),
            range: *r,
        })
        .collect();
    let inst = Instance {
        inputs: c.args.to_vec(),
        outputs: outputs.iter().map(|p| p.ty.clone()).collect(),
        parallel: vars.len(),
        vars,
        temps: vec![],
        stmts: None,
        origins: vec![],
        signature: Signature {
            index,
            inputs: ports,
            outputs,
            marginal,
            flops_per_point: 0.0,
            bytes_per_point: 0.0,
        },
        sharded: false,
    };
    Ok((with_reference_kernel(c, sig, inst)?, deferred))
}

/// The declared index space: each dimension's extent, and each name's position.
fn extern_index(c: &Call, sig: &ExternSig) -> R<(IndexSpace, HashMap<String, usize>)> {
    let mut index = Vec::new();
    let mut names = HashMap::new();
    for (k, (n, e)) in sig.index.iter().enumerate() {
        let what = format!("the extent of index `{n}` cannot be evaluated");
        let ext = c.eval(e, |v| v >= 0, what)?;
        if names.insert(n.clone(), k).is_some() {
            return Err(c.bad(format!("index `{n}` is declared twice"), e.span()));
        }
        index.push((n.clone(), ext));
    }
    Ok((index, names))
}

/// A shard's range must have one entry per index dimension.
fn range_rank(site: Site, dims: usize, got: usize) -> Vec<Diagnostic> {
    let d = Diagnostic::error(
        codes::BAD_RANGE,
        format!("the op's index space has {dims} dimension(s) but the range has {got}"),
    )
    .primary(site.span, "wrong number of ranges");
    vec![d]
}

/// Port `p`'s declared projection: affine starts in the index, constant shapes.
fn extern_projection(
    c: &Call,
    sig: &ExternSig,
    p: &PortDef,
    names: &HashMap<String, usize>,
) -> R<Projection> {
    let Some(pr) = sig.projections.iter().find(|x| x.port == p.name) else {
        let msg = format!("port `{}` has no projection", p.name);
        return Err(c.bad(msg, sig.index_span));
    };
    check_entries(c, pr, p)?;
    let mut proj = Projection::default();
    for (s, sh) in pr.start.iter().zip(&pr.shape) {
        let lookup = |n: &str| {
            names
                .get(n)
                .map(|&v| Affine::var(v))
                .or_else(|| c.b.get(n).map(Affine::constant))
        };
        let a = affine_of(s, &lookup).map_err(|_| {
            let msg = format!(
                "projection start of `{}` is not affine in the index",
                p.name
            );
            c.bad(msg, s.span())
        })?;
        proj.matrix
            .push((0..names.len()).map(|v| a.coeff(v)).collect());
        proj.offset.push(a.constant);
        let what = format!(
            "projection shape of `{}` must be a non-negative constant",
            p.name
        );
        proj.shape.push(c.eval(sh, |v| v >= 0, what)?);
    }
    Ok(proj)
}

/// A projection has one start and one shape entry per dimension of its port.
fn check_entries(c: &Call, pr: &ExternProjection, p: &PortDef) -> R<()> {
    let (start, shape) = (pr.start.len(), pr.shape.len());
    match projection_entries_error(&p.name, p.dims.len(), start, shape) {
        Some(msg) => Err(c.bad(msg, pr.span)),
        None => Ok(()),
    }
}

/// The declared marginal costs, evaluated.
fn extern_costs(c: &Call, sig: &ExternSig) -> R<Costs> {
    let mut marginal = Vec::new();
    for (d, entries) in &sig.costs {
        let mut row = Vec::new();
        for (res, e) in entries {
            let what = format!("cost `{res}` of `{d}` cannot be evaluated");
            row.push((res.clone(), c.eval(e, |_| true, what)?));
        }
        marginal.push((d.clone(), row));
    }
    Ok(marginal)
}

/// `inst` with the extern op's reference kernel, whose index variables must be the declared
/// index.
fn with_reference_kernel(c: &Call, sig: &ExternSig, mut inst: Instance) -> R<Instance> {
    if sig.kernel.is_empty() {
        return Ok(inst);
    }
    let low = match c.lower(&sig.kernel, &inst.outputs)? {
        (low, errs) if errs.is_empty() => low,
        (_, errs) => return Err(errs),
    };
    let declared: Vec<&str> = inst.vars.iter().map(|v| v.name.as_str()).collect();
    let got: Vec<&str> = low.vars[..low.parallel]
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    if declared != got {
        return Err(c.bad(format!("the reference kernel's index variables {got:?} differ from the declared index {declared:?}"), sig.index_span));
    }
    inst.vars = low.vars;
    inst.temps = low.temps;
    inst.stmts = Some(low.stmts);
    Ok(inst)
}

/// Every access must stay inside its tensor (inputs: inside the shard's window). A gathered
/// dimension is checked at run time; its input must be whole along it (origin 0).
fn check_bounds(op: &OpDef, inst: &Instance, site: Site) -> Result<(), Vec<Diagnostic>> {
    let mut errs = Vec::new();
    let ranges: Vec<(i64, i64)> = inst.vars.iter().map(|v| v.range).collect();
    for st in inst.stmts.iter().flatten() {
        walk(
            &st.value,
            &mut |e, red| {
                if red.iter().any(|&v| ranges[v].0 >= ranges[v].1)
                    || st.vars.iter().any(|&v| ranges[v].0 >= ranges[v].1)
                {
                    return; // never executed
                }
                let b = Bounds {
                    op,
                    inst,
                    site,
                    ranges: &ranges,
                };
                match &e.kind {
                    CKind::Load { src, index, texts } => b.check(src, index, texts, &[], &mut errs),
                    CKind::Gather(g) => {
                        let skip: Vec<bool> = g.by.iter().map(Option::is_some).collect();
                        b.check(&Src::Input(g.input), &g.index, &g.texts, &skip, &mut errs);
                        b.whole(g, &mut errs);
                    }
                    _ => {}
                }
            },
            &mut vec![],
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// What checking one access's bounds needs.
struct Bounds<'a> {
    op: &'a OpDef,
    inst: &'a Instance,
    site: Site,
    ranges: &'a [(i64, i64)],
}

impl Bounds<'_> {
    /// The affine dimensions of an access (those with `skip[d]` are gathered).
    fn check(
        &self,
        src: &Src,
        index: &[Affine],
        texts: &[(Span, String)],
        skip: &[bool],
        errs: &mut Vec<Diagnostic>,
    ) {
        let (op, inst) = (self.op, self.inst);
        for (d, a) in index.iter().enumerate() {
            if skip.get(d) == Some(&true) {
                continue;
            }
            let (lo, hi) = a.range(self.ranges);
            let (name, allowed) = match src {
                Src::Input(k) => {
                    let o = inst.origins[*k][d];
                    (
                        op.inputs[*k].name.clone(),
                        (o, o + inst.inputs[*k].shape[d]),
                    )
                }
                Src::Temp(t) => (
                    inst.temps[*t].name.clone(),
                    self.ranges[inst.temps[*t].vars[d]],
                ),
            };
            if lo < allowed.0 || hi >= allowed.1 {
                let (span, text) = &texts[d];
                let size = allowed.1 - allowed.0;
                let msg = if allowed.0 == 0 {
                    format!("index `{text}` of `{name}` ranges over [{lo}, {hi}] but dimension {d} has size {size}")
                } else {
                    format!("index `{text}` of `{name}` ranges over [{lo}, {hi}] but the shard's window of dimension {d} is [{}, {})", allowed.0, allowed.1)
                };
                errs.push(
                    self.site
                        .err(
                            codes::OUT_OF_BOUNDS,
                            msg,
                            *span,
                            "can leave the tensor's bounds",
                        )
                        .note("pad or slice the input so that every index stays in range"),
                );
            }
        }
    }

    /// A gathered dimension reads its whole input: a shard window along it is an error.
    fn whole(&self, g: &GatherLoad, errs: &mut Vec<Diagnostic>) {
        for (d, _) in g.gathered() {
            if self.inst.origins[g.input][d] != 0 {
                let name = &self.op.inputs[g.input].name;
                let msg = format!(
                    "dimension {d} of `{name}` is gathered, so an apply reads all of it; it cannot start at {}",
                    self.inst.origins[g.input][d]
                );
                errs.push(self.site.err(
                    codes::BAD_GATHER,
                    msg,
                    g.texts[d].0,
                    "gathered dimension",
                ));
            }
        }
    }
}
