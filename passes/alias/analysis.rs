//! Alias analysis over graphs: the footprint of every value on every *root allocation* it
//! reads (a source, a generator or an apply output; views allocate nothing), as [`Regions`]
//! over the root's shape.
//!
//! Footprints are found by mapping each view backwards onto its operands with the set algebra
//! of this module, following the definition of every view in `src/interp/views.rs`:
//! transpose → permute, reverse → reverse, slice → fill_into, squeeze/unsqueeze/reshape →
//! reshape, broadcast → reduce, repeat → fold the copies (the sett on the repeated axis split
//! into rows of the operand's size), concat/interleave/pad → per-operand *pieces* (a slice of
//! the view that equals a slice of one operand; pad keeps only its interior, or its reflected
//! parts too). A view that reads all of its operands simply has the union of their
//! footprints. Constant padding reads no memory: for values downstream of a constant pad, the
//! elements that do read memory are tracked forwards (lazily, the first time self-aliasing is
//! asked about), so that self-aliasing is decided on those elements only.
//!
//! [`analyze`] builds an [`AliasInfo`] for one graph; its queries ([`AliasInfo::aliases`],
//! [`AliasInfo::contains`], [`AliasInfo::has_self_aliases`],
//! [`AliasInfo::footprint_of_region`]) are what later passes use. Algebra failures
//! (overflow, too complex) are [`AliasError`]s, which the `alias` pass reports as `E0105`.
//! The pass changes nothing; it leaves a text report for `tapc opt --emit alias`.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use super::region::{Region, RegionError, SliceDim};
use super::regions::Regions;
use super::sett::Sett;
use super::stripe::Stripe;
use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::{Graph, NodeKind, PadMode, SliceDim as IrSliceDim, ValueId, View};
use crate::ir::{Module, TensorType};
use crate::passes::manager::{Pass, PassContext, PassOptions};

/// The elements of each root allocation that a value (or part of one) reads: one entry per
/// root, roots in definition order, each a non-empty [`Regions`] over the root's shape.
pub type Footprint = Vec<(ValueId, Regions)>;

/// What allocates a root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootKind {
    /// `source @name`.
    Source(String),
    /// A generator (`zeros`, `iota`, ...), by name.
    Generator(&'static str),
    /// An output of `apply @op`.
    Apply(String),
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootKind::Source(n) => write!(f, "source @{n}"),
            RootKind::Generator(n) => f.write_str(n),
            RootKind::Apply(op) => write!(f, "apply @{op}"),
        }
    }
}

/// Why the analysis failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasErrorKind {
    /// The set algebra cannot represent the exact answer (a period beyond `i64`, a shape
    /// whose size overflows, more pieces than it is willing to build).
    TooComplex,
    /// A query that does not fit the value (a region of another shape, a box of another rank).
    BadQuery,
    /// The graph is not verified (an untyped value, a use before the definition, a view whose
    /// attributes do not fit its operand).
    Unverified,
}

/// A failure of the analysis or of a query, about one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasError {
    /// Why it failed.
    pub kind: AliasErrorKind,
    /// The value the failing footprint or query is about (without `%`).
    pub value: String,
    /// Where that value is defined.
    pub span: Span,
    /// What went wrong.
    pub message: String,
}

impl AliasError {
    fn new(val: &Val, kind: AliasErrorKind, message: impl Into<String>) -> AliasError {
        AliasError {
            kind,
            value: val.name.clone(),
            span: val.span,
            message: message.into(),
        }
    }

    /// An error of the set algebra about `val`.
    fn algebra(val: &Val, e: &RegionError, context: &str) -> AliasError {
        let kind = match e {
            RegionError::Sett(_) | RegionError::BadShape(_) => AliasErrorKind::TooComplex,
            _ => AliasErrorKind::Unverified,
        };
        AliasError::new(val, kind, format!("{context}{e}"))
    }

    /// The error as a diagnostic with code `E0105` (a pass failure).
    pub fn to_diagnostic(&self) -> Diagnostic {
        let d = Diagnostic::error(
            codes::PASS_FAILED,
            format!(
                "alias analysis of `%{}` failed: {}",
                self.value, self.message
            ),
        )
        .primary(self.span, "footprint of this value");
        match self.kind {
            AliasErrorKind::TooComplex => d.note(
                "the stripe/sett/region algebra cannot represent this footprint exactly, and \
                 the analysis does not approximate",
            ),
            AliasErrorKind::BadQuery | AliasErrorKind::Unverified => d,
        }
    }
}

impl fmt::Display for AliasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`%{}`: {}", self.value, self.message)
    }
}

impl std::error::Error for AliasError {}

/// How a value is defined, as far as memory goes.
#[derive(Clone, Debug)]
enum Def {
    Root(RootKind),
    View(View),
}

/// One value of the analysed graph.
#[derive(Clone, Debug)]
struct Val {
    name: String,
    span: Span,
    ty: TensorType,
    def: Def,
}

/// The footprints of every value of one graph, and the queries later passes ask.
#[derive(Clone, Debug)]
pub struct AliasInfo {
    graph: String,
    vals: Vec<Val>,
    /// Values in definition (topological) order.
    order: Vec<ValueId>,
    /// Position of each value in `order`.
    pos: Vec<usize>,
    footprints: Vec<Footprint>,
    /// Whether a constant pad is upstream of each value (else every element reads memory).
    padded: Vec<bool>,
    /// The elements of each padded value that read memory, computed when first asked for.
    backed: Vec<OnceLock<Backed>>,
}

/// The elements of a value that read memory (`None`: all of them), or why they are unknown.
type Backed = Result<Option<Regions>, AliasError>;

type Res<T> = Result<T, RegionError>;

/// Analyses one verified graph: the footprint of every value on its root allocations.
pub fn analyze(g: &Graph) -> Result<AliasInfo, AliasError> {
    let (vals, order, pos) = collect(g)?;
    let n = vals.len();
    let mut footprints: Vec<Footprint> = vec![Vec::new(); n];
    let mut padded = vec![false; n];
    for &v in &order {
        let val = &vals[v.index()];
        let fail = |e: RegionError| AliasError::algebra(val, &e, "");
        let full = Regions::full(&val.ty.shape).map_err(fail)?;
        let view = match &val.def {
            Def::Root(_) => {
                if !full.is_empty() {
                    footprints[v.index()] = vec![(v, full)];
                }
                continue;
            }
            Def::View(view) => view,
        };
        let ins = arg_shapes(&vals, view);
        let args = view.args();
        let seeds = if reads_all_operands(view, &ins, &val.ty.shape) {
            // Every element of every operand is read: no need to map anything.
            let mut seeds: Vec<(ValueId, Regions)> = Vec::new();
            for a in &args {
                if !seeds.iter().any(|(b, _)| b == a) {
                    let r = Regions::full(&vals[a.index()].ty.shape).map_err(fail)?;
                    seeds.push((*a, r));
                }
            }
            seeds
        } else {
            pull_view(view, &ins, &val.ty.shape, &full)
                .map_err(fail)?
                .into_iter()
                .map(|(k, r)| (args[k], r))
                .collect()
        };
        footprints[v.index()] =
            walk(&vals, &pos, &footprints, seeds).map_err(|(u, e)| at(val, &vals[u.index()], e))?;
        let constant = matches!(
            view,
            View::Pad {
                mode: PadMode::Constant(_),
                ..
            }
        );
        padded[v.index()] = constant || args.iter().any(|a| padded[a.index()]);
    }
    Ok(AliasInfo {
        graph: g.name.clone(),
        vals,
        order,
        pos,
        footprints,
        padded,
        backed: (0..n).map(|_| OnceLock::new()).collect(),
    })
}

/// The values of a graph, the values in definition order, and each value's position in it.
type Collected = (Vec<Val>, Vec<ValueId>, Vec<usize>);

/// The values of `g` with their definitions, in definition order, checking that the graph is
/// verified enough to analyse (typed, operands defined before use).
fn collect(g: &Graph) -> Result<Collected, AliasError> {
    let mut defs: Vec<Option<Def>> = vec![None; g.values.len()];
    let mut order = Vec::with_capacity(g.values.len());
    let mut pos = vec![usize::MAX; g.values.len()];
    let unverified = |v: ValueId, what: &str| AliasError {
        kind: AliasErrorKind::Unverified,
        value: g
            .values
            .get(v.index())
            .map_or("?".into(), |d| d.name.clone()),
        span: g.values.get(v.index()).map_or(g.span, |d| d.span),
        message: format!("{what}; the alias analysis needs a verified graph"),
    };
    for node in &g.nodes {
        let def = match &node.kind {
            NodeKind::Source { name, .. } => Def::Root(RootKind::Source(name.clone())),
            NodeKind::Generator(gen) => Def::Root(RootKind::Generator(gen.kind.name())),
            NodeKind::Apply(a) => Def::Root(RootKind::Apply(a.op.clone())),
            NodeKind::View(v) => Def::View(v.clone()),
            NodeKind::Sink { .. } | NodeKind::Sequence { .. } | NodeKind::Pin { .. } => continue,
        };
        if let Def::View(v) = &def {
            for a in v.args() {
                if pos.get(a.index()).is_none_or(|&p| p == usize::MAX) {
                    return Err(unverified(a, "an operand is used before it is defined"));
                }
            }
        }
        for &r in &node.results {
            if r.index() >= defs.len() || defs[r.index()].is_some() {
                return Err(unverified(r, "a value is defined twice"));
            }
            defs[r.index()] = Some(def.clone());
            pos[r.index()] = order.len();
            order.push(r);
        }
    }
    let mut vals = Vec::with_capacity(g.values.len());
    for (i, (d, def)) in g.values.iter().zip(defs).enumerate() {
        let v = ValueId(i as u32);
        let def = def.ok_or_else(|| unverified(v, "the value is defined by no node"))?;
        let ty =
            d.ty.clone()
                .ok_or_else(|| unverified(v, "the value has no type"))?;
        vals.push(Val {
            name: d.name.clone(),
            span: d.span,
            ty,
            def,
        });
    }
    Ok((vals, order, pos))
}

fn arg_shapes<'a>(vals: &'a [Val], view: &View) -> Vec<&'a [i64]> {
    view.args()
        .iter()
        .map(|a| vals[a.index()].ty.shape.as_slice())
        .collect()
}

fn at(val: &Val, u: &Val, e: RegionError) -> AliasError {
    let how = match &u.def {
        Def::View(view) => format!("the `{}` defining `%{}`", view.name(), u.name),
        Def::Root(_) => format!("root `%{}`", u.name),
    };
    AliasError::algebra(val, &e, &format!("while mapping through {how}: "))
}

/// Number of elements of a shape (shapes of typed values always have a valid volume).
fn volume(shape: &[i64]) -> i128 {
    shape.iter().map(|&d| d as i128).product()
}

/// Maps regions of the `seeds` values back to root allocations. Work is processed in reverse
/// definition order so that everything reaching a value is merged (once) before it is mapped
/// further, so diamonds are mapped once; a region covering all of an already analysed value
/// is replaced by that value's footprint (`done`).
fn walk(
    vals: &[Val],
    pos: &[usize],
    done: &[Footprint],
    seeds: Vec<(ValueId, Regions)>,
) -> Result<Footprint, (ValueId, RegionError)> {
    type Work = BTreeMap<usize, (ValueId, Vec<Regions>)>;
    fn add(w: &mut Work, pos: &[usize], v: ValueId, r: Regions) {
        if !r.is_empty() {
            w.entry(pos[v.index()]).or_insert((v, vec![])).1.push(r);
        }
    }
    let merged = |v: ValueId, parts: Vec<Regions>| {
        let shape = &vals[v.index()].ty.shape;
        union_all(shape, parts).map_err(|e| (v, e))
    };
    let mut work = Work::new();
    let mut out = Work::new();
    for (v, r) in seeds {
        add(&mut work, pos, v, r);
    }
    while let Some((_, (v, parts))) = work.pop_last() {
        let val = &vals[v.index()];
        let view = match &val.def {
            Def::Root(_) => {
                out.entry(pos[v.index()])
                    .or_insert((v, vec![]))
                    .1
                    .extend(parts);
                continue;
            }
            Def::View(view) => view,
        };
        let r = merged(v, parts)?;
        if r.count() == volume(&val.ty.shape) {
            for (root, fr) in &done[v.index()] {
                add(&mut out, pos, *root, fr.clone());
            }
            continue;
        }
        let args = view.args();
        if args.iter().all(|a| done[a.index()].is_empty()) {
            continue; // the operands read no memory
        }
        let ins = arg_shapes(vals, view);
        for (k, rr) in pull_view(view, &ins, &val.ty.shape, &r).map_err(|e| (v, e))? {
            if !done[args[k].index()].is_empty() {
                add(&mut work, pos, args[k], rr);
            }
        }
    }
    out.into_values()
        .map(|(v, parts)| Ok((v, merged(v, parts)?)))
        .collect()
}

/// The union of possibly overlapping region lists over `shape`: each region loses what the
/// regions kept so far cover, and the disjoint result is compacted once at the end (a chain
/// of [`Regions::union`]s would compact the growing list at every step).
fn union_all(shape: &[i64], parts: Vec<Regions>) -> Res<Regions> {
    let mut parts = parts.into_iter().filter(|p| !p.is_empty());
    let Some(first) = parts.next() else {
        return Regions::empty(shape);
    };
    let rest: Vec<Regions> = parts.filter(|p| *p != first).collect();
    if rest.is_empty() {
        return Ok(first);
    }
    // Projections often produce the same region many times: drop exact repeats first.
    let mut extra: Vec<&Region> = rest.iter().flat_map(|p| p.regions()).collect();
    extra.sort();
    extra.dedup();
    let mut acc: Vec<Region> = first.regions().to_vec();
    for x in extra {
        if acc.contains(x) {
            continue;
        }
        let mut left = vec![x.clone()];
        for y in &acc {
            let mut next = Vec::with_capacity(left.len());
            for l in &left {
                next.extend_from_slice(l.difference(y)?.regions());
            }
            left = next;
            if left.is_empty() {
                break;
            }
        }
        acc.extend(left);
    }
    Ok(Regions::from_disjoint(shape.to_vec(), acc))
}

/// True if the whole result of the view reads every element of every operand (so its
/// footprint is the union of theirs): all views but a slice that drops elements, a pad that
/// crops, and views with an empty result.
fn reads_all_operands(view: &View, ins: &[&[i64]], out: &[i64]) -> bool {
    if volume(out) == 0 {
        return ins.iter().all(|s| volume(s) == 0);
    }
    match view {
        View::Slice { dims, .. } => slice_dims(dims, ins[0])
            .iter()
            .zip(ins[0])
            .all(|(d, &n)| n <= 1 || (d.start == 0 && d.stop >= n && d.step == 1)),
        View::Pad { widths, .. } => widths.iter().all(|w| w.0 >= 0 && w.1 >= 0),
        _ => true,
    }
}

/// A slice of a view's result that is, element for element, a slice of operand `arg`.
struct Piece {
    arg: usize,
    out_sel: Vec<SliceDim>,
    arg_sel: Vec<SliceDim>,
}

fn full_sel(shape: &[i64]) -> Vec<SliceDim> {
    shape.iter().map(|&n| SliceDim::full(n)).collect()
}

/// The algebra's slice of a canonical IR slice (a missing stop is "past index 0").
fn slice_dims(dims: &[IrSliceDim], shape: &[i64]) -> Vec<SliceDim> {
    let mut out: Vec<SliceDim> = dims
        .iter()
        .zip(shape)
        .map(|(d, &n)| {
            let step = d.step.unwrap_or(1);
            let (start, stop) = if step > 0 {
                (d.start.unwrap_or(0), d.stop.unwrap_or(n))
            } else {
                (d.start.unwrap_or(n - 1), d.stop.unwrap_or(-1))
            };
            SliceDim::new(start, stop, step)
        })
        .collect();
    out.extend(
        shape[out.len().min(shape.len())..]
            .iter()
            .map(|&n| SliceDim::full(n)),
    );
    out
}

/// Along one padded dimension (operand size `n`, result size `out_n`, `lo` before): the
/// (result, operand) slices that read the operand. Reflected parts only with `reflect`.
fn pad_parts(n: i64, out_n: i64, lo: i64, reflect: bool) -> Vec<(SliceDim, SliceDim)> {
    let mut parts = Vec::new();
    let (a, b) = (lo.max(0), (lo + n).min(out_n));
    if b > a {
        parts.push((SliceDim::new(a, b, 1), SliceDim::new(a - lo, b - lo, 1)));
    }
    if reflect {
        // Result x < lo reads operand lo - x.
        let l = lo.min(out_n);
        if l > 0 {
            parts.push((
                SliceDim::new(l - 1, -1, -1),
                SliceDim::new(lo - l + 1, lo + 1, 1),
            ));
        }
        // Result x >= lo + n reads operand 2(n - 1) - (x - lo).
        let r0 = (lo + n).max(0);
        let count = out_n - r0;
        if count > 0 {
            let s0 = 2 * n - 2 - r0 + lo;
            parts.push((
                SliceDim::new(r0, out_n, 1),
                SliceDim::new(s0, s0 - count, -1),
            ));
        }
    }
    parts
}

/// The pieces of a concat, interleave or pad (`None` for the other views).
fn pieces(view: &View, ins: &[&[i64]], out: &[i64]) -> Option<Vec<Piece>> {
    let along = |axis: usize, d: SliceDim| {
        let mut sel = full_sel(out);
        sel[axis] = d;
        sel
    };
    let mut list = Vec::new();
    match view {
        View::Concat { axis, .. } => {
            let mut off = 0;
            for (k, s) in ins.iter().enumerate() {
                let n = s[*axis];
                if n > 0 {
                    list.push(Piece {
                        arg: k,
                        out_sel: along(*axis, SliceDim::new(off, off + n, 1)),
                        arg_sel: full_sel(s),
                    });
                }
                off += n;
            }
        }
        View::Interleave { axis, .. } => {
            let count = ins.len() as i64;
            for (k, s) in ins.iter().enumerate() {
                list.push(Piece {
                    arg: k,
                    out_sel: along(*axis, SliceDim::new(k as i64, out[*axis], count)),
                    arg_sel: full_sel(s),
                });
            }
        }
        View::Pad { widths, mode, .. } => {
            let reflect = *mode == PadMode::Reflect;
            let mut combos = vec![(Vec::new(), Vec::new())];
            for (d, (&n, &out_n)) in ins[0].iter().zip(out).enumerate() {
                let lo = widths.get(d).map_or(0, |w| w.0);
                let parts = pad_parts(n, out_n, lo, reflect);
                let mut next = Vec::with_capacity(combos.len() * parts.len());
                for (o, a) in &combos {
                    for &(po, pa) in &parts {
                        let (mut o, mut a): (Vec<SliceDim>, Vec<SliceDim>) = (o.clone(), a.clone());
                        o.push(po);
                        a.push(pa);
                        next.push((o, a));
                    }
                }
                combos = next;
            }
            list = combos
                .into_iter()
                .map(|(out_sel, arg_sel)| Piece {
                    arg: 0,
                    out_sel,
                    arg_sel,
                })
                .collect();
        }
        _ => return None,
    }
    Some(list)
}

/// True if `sel` selects all of `shape`, in order.
fn is_identity(sel: &[SliceDim], shape: &[i64]) -> bool {
    sel.len() == shape.len()
        && sel
            .iter()
            .zip(shape)
            .all(|(d, &n)| d.start == 0 && d.stop == n && d.step == 1)
}

/// `r.fill_into(full, sel)`, skipping the work when `sel` selects all of `full` in order.
fn place(r: Regions, full: &[i64], sel: &[SliceDim]) -> Res<Regions> {
    if is_identity(sel, full) && r.shape() == full {
        Ok(r)
    } else {
        r.fill_into(full, sel)
    }
}

/// `r.slice(sel)`, skipping the work when `sel` selects all of `r` in order.
fn select(r: Regions, sel: &[SliceDim]) -> Res<Regions> {
    if is_identity(sel, r.shape()) {
        Ok(r)
    } else {
        r.slice(sel)
    }
}

/// The elements of a `repeat` operand (shape `arg`) that region `r` of the result reads:
/// along `axis`, result index `x` reads `x mod n`, so each region's sett on that axis is
/// split into rows of `n` (one per copy) whose columns are the operand indices.
fn fold_repeat(r: &Regions, arg: &[i64], axis: usize, times: i64) -> Res<Regions> {
    let n = arg[axis];
    let mut parts = Vec::new();
    for reg in r.regions() {
        let s = &reg.setts()[axis];
        let mut cols: Vec<Sett> = if s.is_all() {
            vec![Sett::all()]
        } else {
            let pairs = s.unflatten_in(n, n.saturating_mul(times))?;
            pairs.into_iter().map(|(_, c)| c).collect()
        };
        cols.sort();
        cols.dedup();
        for c in cols {
            let mut setts = reg.setts().to_vec();
            setts[axis] = c;
            parts.push(Regions::from_region(Region::new(arg.to_vec(), setts)?));
        }
    }
    union_all(arg, parts)
}

/// The elements of a `repeat` result (shape `out`) that read region `q` of its operand: the
/// operand's sett on `axis` repeated with period `n` (disjoint regions stay disjoint).
fn unfold_repeat(q: &Regions, out: &[i64], axis: usize) -> Res<Regions> {
    let n = q.shape()[axis];
    if q.is_empty() || n == 0 {
        return Regions::empty(out);
    }
    let period = Stripe::new(n, 0, 0)?;
    let mut list = Vec::new();
    for reg in q.regions() {
        let mut setts = reg.setts().to_vec();
        let mut nested = vec![period];
        nested.extend_from_slice(setts[axis].stripes());
        setts[axis] = Sett::new(nested);
        list.push(Region::new(out.to_vec(), setts)?);
    }
    Ok(Regions::from_disjoint(out.to_vec(), list))
}

/// The elements of each operand that region `r` of the view's result reads (operands by
/// index; one operand may appear more than once, e.g. for reflect padding).
fn pull_view(view: &View, ins: &[&[i64]], out: &[i64], r: &Regions) -> Res<Vec<(usize, Regions)>> {
    if r.is_empty() {
        return Ok(vec![]);
    }
    let a0 = ins[0];
    let one = |x: Regions| Ok(vec![(0, x)]);
    match view {
        View::Transpose { perm, .. } => {
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                if let Some(slot) = inv.get_mut(p) {
                    *slot = i;
                }
            }
            one(r.permute(&inv)?)
        }
        View::Reverse { dims, .. } => one(r.reverse(dims)?),
        View::Slice { dims, .. } => one(r.fill_into(a0, &slice_dims(dims, a0))?),
        View::Squeeze { .. } | View::Unsqueeze { .. } | View::Reshape { .. } => one(r.reshape(a0)?),
        View::Broadcast { .. } => {
            let parts = r
                .regions()
                .iter()
                .map(|x| Ok(Regions::from_region(x.reduce(a0)?)));
            one(union_all(a0, parts.collect::<Res<_>>()?)?)
        }
        View::Repeat { times, axis, .. } => one(fold_repeat(r, a0, *axis, *times)?),
        View::Concat { .. } | View::Interleave { .. } | View::Pad { .. } => {
            let mut list = Vec::new();
            for p in pieces(view, ins, out).unwrap_or_default() {
                let sub = r.slice(&p.out_sel)?;
                if !sub.is_empty() {
                    list.push((p.arg, place(sub, ins[p.arg], &p.arg_sel)?));
                }
            }
            Ok(list)
        }
    }
}

/// The elements of a view's result that read memory, given those of its operands (`None`:
/// every element). Only constant padding drops elements; the pieces of a concat, interleave
/// or pad are disjoint parts of the result, so their images are put together without unions.
fn push_backed(
    view: &View,
    ins: &[&[i64]],
    out: &[i64],
    sets: &[Option<&Regions>],
) -> Res<Option<Regions>> {
    let constant_pad = matches!(
        view,
        View::Pad {
            mode: PadMode::Constant(_),
            ..
        }
    );
    if !constant_pad && sets.iter().all(Option::is_none) {
        return Ok(None);
    }
    let set = |k: usize| match sets[k] {
        Some(q) => Ok(q.clone()),
        None => Regions::full(ins[k]),
    };
    let pushed = match view {
        View::Transpose { perm, .. } => set(0)?.permute(perm)?,
        View::Reverse { dims, .. } => set(0)?.reverse(dims)?,
        View::Slice { dims, .. } => set(0)?.slice(&slice_dims(dims, ins[0]))?,
        View::Squeeze { .. } | View::Unsqueeze { .. } | View::Reshape { .. } => {
            set(0)?.reshape(out)?
        }
        View::Broadcast { .. } => set(0)?.broadcast(out)?,
        View::Repeat { axis, .. } => unfold_repeat(&set(0)?, out, *axis)?,
        View::Concat { .. } | View::Interleave { .. } | View::Pad { .. } => {
            let mut list = Vec::new();
            for p in pieces(view, ins, out).unwrap_or_default() {
                let placed = place(select(set(p.arg)?, &p.arg_sel)?, out, &p.out_sel)?;
                list.extend_from_slice(placed.regions());
            }
            Regions::from_disjoint(out.to_vec(), list)
        }
    };
    Ok(Some(pushed))
}

/// The box `[lo, hi)` per dimension of `shape` as a region (bounds are clamped to the shape).
pub fn box_region(shape: &[i64], ranges: &[(i64, i64)]) -> Result<Region, RegionError> {
    if ranges.len() != shape.len() {
        return Err(RegionError::RankMismatch {
            expected: shape.len(),
            got: ranges.len(),
        });
    }
    let mut setts = Vec::with_capacity(shape.len());
    for (&n, &(lo, hi)) in shape.iter().zip(ranges) {
        let (lo, hi) = (lo.clamp(0, n), hi.clamp(0, n));
        setts.push(if hi <= lo {
            Sett::empty()
        } else {
            Sett::from_stripe(Stripe::new(hi - lo, n - (hi - lo), lo)?)
        });
    }
    Region::new(shape.to_vec(), setts)
}

impl AliasInfo {
    /// Name of the analysed graph.
    pub fn graph(&self) -> &str {
        &self.graph
    }

    /// The footprint of all of `v` (empty if `v` reads no memory).
    pub fn footprint(&self, v: ValueId) -> &[(ValueId, Regions)] {
        &self.footprints[v.index()]
    }

    /// The footprint of `v` on one root (`None` if `v` does not read `root`).
    pub fn footprint_on(&self, v: ValueId, root: ValueId) -> Option<&Regions> {
        self.footprint(v)
            .iter()
            .find(|(r, _)| *r == root)
            .map(|(_, x)| x)
    }

    /// True if `v` is an allocation (source, generator or apply output), not a view.
    pub fn is_root(&self, v: ValueId) -> bool {
        matches!(self.vals[v.index()].def, Def::Root(_))
    }

    /// What allocates `v`, if it is a root.
    pub fn root_kind(&self, v: ValueId) -> Option<&RootKind> {
        match &self.vals[v.index()].def {
            Def::Root(k) => Some(k),
            Def::View(_) => None,
        }
    }

    /// The values in definition order.
    pub fn values(&self) -> &[ValueId] {
        &self.order
    }

    /// Number of elements of `v`.
    pub fn elements(&self, v: ValueId) -> i128 {
        volume(&self.vals[v.index()].ty.shape)
    }

    /// Number of elements of `v` that read memory (all but constant padding).
    pub fn backed_elements(&self, v: ValueId) -> Result<i128, AliasError> {
        Ok(match self.backed_set(v)? {
            None => self.elements(v),
            Some(set) => set.count(),
        })
    }

    /// The elements of `v` that read memory (`None`: all of them). Only values with a
    /// constant pad upstream have a set; it is computed (forwards from the pads, for every
    /// value on the way that lacks one) and kept the first time it is asked for.
    fn backed_set(&self, v: ValueId) -> Result<Option<&Regions>, AliasError> {
        if !self.padded[v.index()] {
            return Ok(None);
        }
        if self.backed[v.index()].get().is_none() {
            // Everything upstream that lacks a set, by definition order.
            let mut missing = BTreeMap::new();
            let mut todo = vec![v];
            while let Some(u) = todo.pop() {
                let fresh = self.padded[u.index()] && self.backed[u.index()].get().is_none();
                if fresh && missing.insert(self.pos[u.index()], u).is_none() {
                    if let Def::View(view) = &self.vals[u.index()].def {
                        todo.extend(view.args());
                    }
                }
            }
            for u in missing.into_values() {
                let set = self.push_backed_of(u);
                let _ = self.backed[u.index()].set(set);
            }
        }
        match self.backed[v.index()].get_or_init(|| self.push_backed_of(v)) {
            Ok(set) => Ok(set.as_ref()),
            Err(e) => Err(e.clone()),
        }
    }

    /// The backed set of `u` from those of its operands (already computed).
    fn push_backed_of(&self, u: ValueId) -> Backed {
        let val = &self.vals[u.index()];
        let Def::View(view) = &val.def else {
            return Ok(None);
        };
        let mut sets = Vec::new();
        for a in view.args() {
            sets.push(self.backed_set(a)?);
        }
        let ins = arg_shapes(&self.vals, view);
        push_backed(view, &ins, &val.ty.shape, &sets).map_err(|e| AliasError::algebra(val, &e, ""))
    }

    /// Number of distinct root elements `v` reads.
    pub fn footprint_count(&self, v: ValueId) -> i128 {
        self.footprint(v).iter().map(|(_, r)| r.count()).sum()
    }

    /// True if `a` and `b` share an element of some root.
    pub fn aliases(&self, a: ValueId, b: ValueId) -> Result<bool, AliasError> {
        for (root, ra) in self.footprint(a) {
            if let Some(rb) = self.footprint_on(b, *root) {
                let disjoint = ra.disjoint(rb).map_err(|e| self.query_error(a, b, e))?;
                if !disjoint {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The root elements both `a` and `b` read.
    pub fn overlap(&self, a: ValueId, b: ValueId) -> Result<Footprint, AliasError> {
        let mut out = Vec::new();
        for (root, ra) in self.footprint(a) {
            if let Some(rb) = self.footprint_on(b, *root) {
                let i = ra.intersect(rb).map_err(|e| self.query_error(a, b, e))?;
                if !i.is_empty() {
                    out.push((*root, i));
                }
            }
        }
        Ok(out)
    }

    /// True if every root element `b` reads is also read by `a`.
    pub fn contains(&self, a: ValueId, b: ValueId) -> Result<bool, AliasError> {
        for (root, rb) in self.footprint(b) {
            let Some(ra) = self.footprint_on(a, *root) else {
                return Ok(false);
            };
            if !ra.contains(rb).map_err(|e| self.query_error(a, b, e))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// True if two different elements of `a` are the same memory (after a broadcast, a
    /// repeat, an interleave of a value with itself, reflect padding, ...): fewer distinct
    /// root elements than elements of `a` that read memory.
    pub fn has_self_aliases(&self, a: ValueId) -> Result<bool, AliasError> {
        let distinct = self.footprint_count(a);
        if distinct == self.elements(a) {
            return Ok(false);
        }
        Ok(distinct < self.backed_elements(a)?)
    }

    /// The root elements that region `r` (over `v`'s shape) of `v` reads: e.g. the bytes
    /// one shard of a consumer of `v` reads.
    pub fn footprint_of_region(&self, v: ValueId, r: &Region) -> Result<Footprint, AliasError> {
        self.footprint_of_regions(v, &Regions::from_region(r.clone()))
    }

    /// [`AliasInfo::footprint_of_region`] for a union of regions.
    pub fn footprint_of_regions(&self, v: ValueId, r: &Regions) -> Result<Footprint, AliasError> {
        let val = &self.vals[v.index()];
        if r.shape() != val.ty.shape.as_slice() {
            let msg = format!(
                "a region of shape {:?} asked of a value of type {}",
                r.shape(),
                val.ty
            );
            return Err(AliasError::new(val, AliasErrorKind::BadQuery, msg));
        }
        let seeds = vec![(v, r.clone())];
        walk(&self.vals, &self.pos, &self.footprints, seeds)
            .map_err(|(u, e)| at(val, &self.vals[u.index()], e))
    }

    /// [`AliasInfo::footprint_of_region`] of the box `[lo, hi)` per dimension of `v`.
    pub fn footprint_of_box(
        &self,
        v: ValueId,
        ranges: &[(i64, i64)],
    ) -> Result<Footprint, AliasError> {
        let val = &self.vals[v.index()];
        let r = box_region(&val.ty.shape, ranges)
            .map_err(|e| AliasError::new(val, AliasErrorKind::BadQuery, e.to_string()))?;
        self.footprint_of_region(v, &r)
    }

    fn query_error(&self, a: ValueId, b: ValueId, e: RegionError) -> AliasError {
        let b = &self.vals[b.index()].name;
        let context = format!("comparing with `%{b}`: ");
        AliasError::algebra(&self.vals[a.index()], &e, &context)
    }

    fn name(&self, v: ValueId) -> &str {
        &self.vals[v.index()].name
    }

    /// The text report: every value's footprint, then the pairs of views that alias (with
    /// the elements they share) and the self-aliasing values, in definition order.
    pub fn report(&self) -> Result<String, AliasError> {
        let mut s = format!("graph @{}\n", self.graph);
        for &v in &self.order {
            let val = &self.vals[v.index()];
            if let Def::Root(kind) = &val.def {
                let _ = writeln!(s, "  %{}: root ({kind}) {}", val.name, val.ty);
                continue;
            }
            if self.footprint(v).is_empty() {
                let _ = writeln!(s, "  %{}: reads no memory", val.name);
            }
            for (root, r) in self.footprint(v) {
                let total = self.elements(*root);
                let (name, count) = (self.name(*root), r.count());
                let _ = writeln!(s, "  %{} -> %{name}: {r} ({count} of {total})", val.name);
            }
        }
        let views: Vec<ValueId> = self
            .order
            .iter()
            .copied()
            .filter(|&v| !self.is_root(v) && !self.footprint(v).is_empty())
            .collect();
        for (i, &a) in views.iter().enumerate() {
            for &b in &views[i + 1..] {
                for (root, r) in self.overlap(a, b)? {
                    let (x, y, z) = (self.name(a), self.name(b), self.name(root));
                    let _ = writeln!(s, "  %{x} ~ %{y} at %{z}: {r}");
                }
            }
        }
        for &v in &views {
            if self.has_self_aliases(v)? {
                let (n, d) = (self.backed_elements(v)?, self.footprint_count(v));
                let _ = writeln!(
                    s,
                    "  self-aliasing: %{} ({n} elements, {d} distinct)",
                    self.name(v)
                );
            }
        }
        Ok(s)
    }
}

/// The `alias` pass: analyses every graph, changes nothing, reports footprints.
struct AliasPass;

impl Pass for AliasPass {
    fn name(&self) -> &'static str {
        "alias"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic> {
        let mut text = String::new();
        for g in &m.graphs {
            let info = analyze(g).map_err(|e| e.to_diagnostic())?;
            text.push_str(&info.report().map_err(|e| e.to_diagnostic())?);
        }
        cx.reports.push(("alias".into(), text));
        Ok(false)
    }
}

/// Creates the `alias` pass; it takes no options.
pub fn create(opts: &PassOptions) -> Result<Box<dyn Pass>, String> {
    if let Some((k, _)) = opts.first() {
        return Err(format!(
            "unknown option `{k}` (the alias pass takes no options)"
        ));
    }
    Ok(Box::new(AliasPass))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::graph::Graph;
    use std::collections::{BTreeSet, HashMap};
    use tapc_runtime::{Data, Tensor};

    fn compile(src: &str) -> (Module, Vec<crate::verify::GraphFacts>) {
        let (m, facts, diags) = crate::compile_source(src);
        assert!(
            !diags.has_errors(),
            "{}\n{src}",
            crate::diag::render_human("t.teg", src, &diags.0, false)
        );
        (m, facts)
    }

    /// The analysis of the only graph of `src`, plus a name lookup.
    fn analyzed(src: &str) -> (Graph, AliasInfo) {
        let (m, _) = compile(src);
        let g = m.graphs[0].clone();
        let info = analyze(&g).expect("analysis succeeds");
        (g, info)
    }

    fn id(g: &Graph, name: &str) -> ValueId {
        g.find_value(name)
            .unwrap_or_else(|| panic!("no value %{name}"))
    }

    /// The flat indices (row-major) of root `root` in a footprint.
    fn flat(info: &AliasInfo, fp: &[(ValueId, Regions)], root: ValueId) -> BTreeSet<i64> {
        let shape = info.vals[root.index()].ty.shape.clone();
        let Some((_, r)) = fp.iter().find(|(x, _)| *x == root) else {
            return BTreeSet::new();
        };
        (0..volume(&shape) as i64)
            .filter(|&i| r.contains_point(&unravel(i, &shape)))
            .collect()
    }

    fn unravel(mut lin: i64, shape: &[i64]) -> Vec<i64> {
        let mut c = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = lin % shape[d];
            lin /= shape[d];
        }
        c
    }

    #[test]
    fn worked_cases() {
        let (g, info) = analyzed(
            "graph @g {
              %a = source @a : f32[24]
              %m = reshape %a [4, 6]
              %b = slice %m [0:4, 3:6]
              %c = slice %a [0:24:7]
              %a27 = source @a27 : f32[27]
              %cube = reshape %a27 [3, 3, 3]
              %corner = slice %cube [0:2, 0:2, 0:2]
              %five = slice %a27 [2::5]
              %a10 = source @a10 : f32[10]
              %back = slice %a10 [8:2:-2]
              %fwd = slice %a10 [4:10:2]
            }",
        );
        let v = |n| id(&g, n);
        let a = v("a");
        assert!(info.aliases(v("b"), v("c")).unwrap());
        let o = info.overlap(v("b"), v("c")).unwrap();
        assert_eq!(flat(&info, &o, a), BTreeSet::from([21]));
        assert_eq!(
            flat(&info, info.footprint(v("b")), a),
            [3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23].into()
        );
        assert!(info.aliases(v("corner"), v("five")).unwrap());
        let o = info.overlap(v("corner"), v("five")).unwrap();
        assert_eq!(flat(&info, &o, v("a27")), BTreeSet::from([12]));
        // Same footprint, both ways round.
        let (bk, fw) = (v("back"), v("fwd"));
        assert!(info.contains(bk, fw).unwrap() && info.contains(fw, bk).unwrap());
        assert_eq!(info.footprint(bk), info.footprint(fw));
        assert!(
            !info.aliases(v("b"), bk).unwrap(),
            "different roots never alias"
        );
        assert!(info.contains(a, v("b")).unwrap() && !info.contains(v("b"), a).unwrap());
        for n in ["a", "m", "b", "c", "corner", "five", "back", "fwd"] {
            assert!(!info.has_self_aliases(v(n)).unwrap(), "%{n}");
        }
    }

    #[test]
    fn concat_interleave_repeat_and_pad() {
        let (g, info) = analyzed(
            "graph @g {
              %a = source @a : f32[8]
              %lo = slice %a [0:4]
              %hi = slice %a [4:8]
              %cat = concat %hi, %lo axis 0
              %even = slice %a [0:8:2]
              %odd = slice %a [1:8:2]
              %zip = interleave %even, %odd axis 0
              %twice = interleave %even, %even axis 0
              %rep = repeat %lo times 3 axis 0
              %rep1 = repeat %lo times 1 axis 0
              %rep0 = repeat %lo times 0 axis 0
              %padc = pad %even [2:3] constant 0
              %padr = pad %odd [1:2] reflect
              %b = source @b : f32[4]
              %mix = concat %lo, %b axis 0
              %cc = concat %lo, %lo axis 0
            }",
        );
        let v = |n| id(&g, n);
        let (a, b) = (v("a"), v("b"));
        // Concatenating the halves covers all of %a, once.
        assert!(info.contains(v("cat"), a).unwrap() && info.contains(a, v("cat")).unwrap());
        assert!(!info.has_self_aliases(v("cat")).unwrap());
        assert!(!info.aliases(v("lo"), v("hi")).unwrap());
        // Interleaving the even and odd elements is %a again; with itself it self-aliases.
        assert_eq!(flat(&info, info.footprint(v("zip")), a).len(), 8);
        assert!(!info.has_self_aliases(v("zip")).unwrap());
        assert!(info.has_self_aliases(v("twice")).unwrap());
        assert_eq!(info.footprint(v("twice")), info.footprint(v("even")));
        assert!(!info.aliases(v("even"), v("odd")).unwrap());
        // Repeat folds its copies.
        assert_eq!(info.footprint(v("rep")), info.footprint(v("lo")));
        assert!(
            info.has_self_aliases(v("rep")).unwrap() && !info.has_self_aliases(v("rep1")).unwrap()
        );
        assert!(info.footprint(v("rep0")).is_empty() && !info.has_self_aliases(v("rep0")).unwrap());
        // Constant padding reads nothing; reflect padding reads elements twice.
        assert_eq!(info.footprint(v("padc")), info.footprint(v("even")));
        assert_eq!(info.backed_elements(v("padc")).unwrap(), 4);
        assert!(!info.has_self_aliases(v("padc")).unwrap());
        assert!(info.has_self_aliases(v("padr")).unwrap());
        assert_eq!(
            flat(&info, info.footprint(v("padr")), a),
            [1, 3, 5, 7].into()
        );
        // Several roots.
        let mix = info.footprint(v("mix"));
        assert_eq!(mix.len(), 2);
        assert_eq!(flat(&info, mix, a), [0, 1, 2, 3].into());
        assert_eq!(flat(&info, mix, b).len(), 4);
        assert!(info.aliases(v("mix"), b).unwrap() && info.aliases(v("mix"), v("cat")).unwrap());
        assert!(!info.aliases(v("mix"), v("hi")).unwrap());
        assert!(
            info.contains(v("mix"), v("lo")).unwrap() && !info.contains(v("lo"), v("mix")).unwrap()
        );
        assert!(info.has_self_aliases(v("cc")).unwrap());
        // Sub-regions: the second half of %cat is %lo; odd positions of %zip are %odd.
        let fp = info.footprint_of_box(v("cat"), &[(4, 8)]).unwrap();
        assert_eq!(flat(&info, &fp, a), [0, 1, 2, 3].into());
        let odd_pos =
            Region::new(vec![8], vec![Sett::from_triples(&[(1, 1, 1)]).unwrap()]).unwrap();
        let fp = info.footprint_of_region(v("zip"), &odd_pos).unwrap();
        assert_eq!(flat(&info, &fp, a), [1, 3, 5, 7].into());
        let fp = info.footprint_of_box(v("padc"), &[(0, 2)]).unwrap();
        assert!(fp.is_empty(), "constant padding reads no memory");
    }

    #[test]
    fn broadcast_self_aliases_and_tiles_map_to_blocks() {
        let (g, info) = analyzed(
            "graph @g {
              %a = source @a : f32[8, 8]
              %row = slice %a [2:3, 0:8]
              %bc = broadcast %row [5, 8]
              %r = reshape %a [4, 2, 4, 2]
              %t = transpose %r [0, 2, 1, 3]
              %z = zeros : f32[3]
              %zz = broadcast %z [2, 3]
            }",
        );
        let v = |n| id(&g, n);
        let a = v("a");
        assert!(info.has_self_aliases(v("bc")).unwrap());
        assert_eq!(info.footprint(v("bc")), info.footprint(v("row")));
        assert!(info.has_self_aliases(v("zz")).unwrap());
        assert_eq!(info.root_kind(v("z")), Some(&RootKind::Generator("zeros")));
        assert!(!info.has_self_aliases(v("t")).unwrap());
        // Tile (1, 2) of %t is the 2x2 block at rows 2..4, columns 4..6 of %a.
        let fp = info
            .footprint_of_box(v("t"), &[(1, 2), (2, 3), (0, 2), (0, 2)])
            .unwrap();
        assert_eq!(flat(&info, &fp, a), [20, 21, 28, 29].into());
        // The top-left corners of all tiles: even rows and even columns.
        let fp = info
            .footprint_of_box(v("t"), &[(0, 4), (0, 4), (0, 1), (0, 1)])
            .unwrap();
        let want: BTreeSet<i64> = (0..64).filter(|i| (i / 8) % 2 == 0 && i % 2 == 0).collect();
        assert_eq!(flat(&info, &fp, a), want);
        // A region of the wrong shape is an error, not a panic.
        let r = Region::full(&[3]).unwrap();
        let e = info.footprint_of_region(v("t"), &r).unwrap_err();
        assert_eq!((e.kind, e.value.as_str()), (AliasErrorKind::BadQuery, "t"));
        assert!(e.to_diagnostic().notes.is_empty());
        let e = info.footprint_of_box(v("t"), &[(0, 1)]).unwrap_err();
        assert_eq!(e.kind, AliasErrorKind::BadQuery);
        assert_eq!(e.to_diagnostic().code, Some(codes::PASS_FAILED));
    }

    #[test]
    fn apply_outputs_are_roots_and_reports_are_deterministic() {
        let src = "op @two(x: f32[N]) -> (y: f32[N], z: f32[N]) {
              y[i] = x[i]
              z[i] = x[i] * 2.0
            }
            graph @g {
              %a = source @a : f32[6]
              %y, %z = apply @two(%a)
              %ys = slice %y [1:3]
              %zs = slice %z [1:3]
              %yy = slice %y [2:6:2]
            }";
        let (g, info) = analyzed(src);
        let v = |n| id(&g, n);
        assert!(info.is_root(v("y")) && info.is_root(v("z")));
        assert!(!info.aliases(v("ys"), v("zs")).unwrap());
        assert!(!info.aliases(v("ys"), v("a")).unwrap());
        assert!(info.aliases(v("ys"), v("yy")).unwrap());
        let report = info.report().unwrap();
        assert_eq!(report, analyzed(src).1.report().unwrap());
        assert!(report.contains("%y: root (apply @two) f32[6]"), "{report}");
        assert!(report.contains("%ys ~ %yy at %y: {[(1,5,2)]}"), "{report}");
        assert!(!report.contains("%ys ~ %zs"), "{report}");
    }

    #[test]
    fn unverified_graphs_and_bad_options_are_errors() {
        let (m, _) = compile("graph @g {\n %a = source @a : f32[4]\n %b = slice %a [1:3]\n}");
        let mut g = m.graphs[0].clone();
        g.values[1].ty = None;
        let e = analyze(&g).unwrap_err();
        assert_eq!(
            (e.kind, e.value.as_str()),
            (AliasErrorKind::Unverified, "b")
        );
        assert!(e.message.contains("verified"), "{}", e.message);
        assert!(create(&[("x".into(), "1".into())]).is_err());
        assert!(create(&[]).is_ok());
    }

    #[test]
    fn footprints_the_algebra_cannot_represent_are_errors() {
        let (m, _) = compile(
            "graph @g {
              %a = source @a : f32[100000, 100003]
              %t = transpose %a [1, 0]
              %f = reshape %t [10000300000]
              %s = slice %f [0:10000300000:99991]
            }",
        );
        let e = analyze(&m.graphs[0]).unwrap_err();
        assert_eq!(
            (e.kind, e.value.as_str()),
            (AliasErrorKind::TooComplex, "s")
        );
        assert!(
            e.message.contains("`reshape` defining `%f`"),
            "{}",
            e.message
        );
        let d = e.to_diagnostic();
        assert_eq!((d.code, d.notes.len()), (Some(codes::PASS_FAILED), 1));
    }

    #[test]
    fn huge_shapes_are_analysed_without_enumeration() {
        let n = 1i64 << 20;
        let src = format!(
            "graph @g {{
              %a = source @a : f32[{n}, {n}]
              %r = reshape %a [{h}, 2, {h}, 2]
              %t = transpose %r [0, 2, 1, 3]
              %tl = slice %t [0:{h}, 0:{h}, 0:1, 0:1]
              %br = slice %t [0:{h}, 0:{h}, 1:2, 1:2]
              %col = slice %a [0:{n}, 3:4]
            }}",
            h = n / 2
        );
        let (g, info) = analyzed(&src);
        let v = |s| id(&g, s);
        assert!(!info.aliases(v("tl"), v("br")).unwrap());
        assert!(!info.aliases(v("tl"), v("col")).unwrap());
        assert!(info.aliases(v("br"), v("col")).unwrap());
        assert!(info.contains(v("t"), v("tl")).unwrap());
        assert_eq!(info.footprint_count(v("tl")), (n as i128 * n as i128) / 4);
    }

    // -----------------------------------------------------------------------------------
    // Differential check against the interpreter: every source element holds a unique
    // number (`1_000_000 * source + flat index`), constant padding is -1, and each view's
    // sink then lists exactly the root elements it reads.

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// Uniform in `0..n` (`n >= 1`).
        fn below(&mut self, n: i64) -> i64 {
            (self.next() % n.max(1) as u64) as i64
        }
        fn chance(&mut self, k: i64) -> bool {
            self.below(k) == 0
        }
    }

    fn ints(v: &[i64]) -> String {
        let s: Vec<String> = v.iter().map(i64::to_string).collect();
        format!("[{}]", s.join(", "))
    }

    /// A random view of `%x` (shape `s`) as TEG text and its result shape; `pool` holds the
    /// values defined so far (for concat/interleave partners).
    fn random_view(
        rng: &mut Rng,
        x: &str,
        s: &[i64],
        pool: &[(String, Vec<i64>)],
    ) -> Option<(String, Vec<i64>)> {
        let rank = s.len();
        let total: i64 = s.iter().product();
        match rng.below(11) {
            0 if rank > 0 => {
                let mut p: Vec<i64> = (0..rank as i64).collect();
                for i in (1..rank).rev() {
                    p.swap(i, rng.below(i as i64 + 1) as usize);
                }
                let out = p.iter().map(|&d| s[d as usize]).collect();
                Some((format!("transpose {x} {}", ints(&p)), out))
            }
            1 if rank > 0 => {
                let mut dims: Vec<i64> = (0..rank as i64).filter(|_| rng.chance(2)).collect();
                if dims.is_empty() {
                    dims.push(rng.below(rank as i64));
                }
                Some((format!("reverse {x} {}", ints(&dims)), s.to_vec()))
            }
            2 | 3 if rank > 0 && !s.contains(&0) => {
                let mut parts = Vec::new();
                let mut out = Vec::new();
                for &n in s {
                    let step = [1, 1, 2, 3, -1, -2][rng.below(6) as usize];
                    if step > 0 {
                        let a = rng.below(n);
                        let b = a + 1 + rng.below(n - a);
                        parts.push(if step == 1 {
                            format!("{a}:{b}")
                        } else {
                            format!("{a}:{b}:{step}")
                        });
                        out.push((b - a + step - 1) / step);
                    } else {
                        let a = rng.below(n);
                        let b = rng.below(a + 2) - 1; // -1 ..= a
                        let stop = if b < 0 { String::new() } else { b.to_string() };
                        parts.push(format!("{a}:{stop}:{step}"));
                        out.push((a - b + (-step) - 1) / (-step));
                    }
                }
                Some((format!("slice {x} [{}]", parts.join(", ")), out))
            }
            4 => {
                let ones: Vec<i64> = (0..rank as i64).filter(|&d| s[d as usize] == 1).collect();
                if ones.is_empty() || rng.chance(2) {
                    if rank >= 4 {
                        return None;
                    }
                    let d = rng.below(rank as i64 + 1);
                    let mut out = s.to_vec();
                    out.insert(d as usize, 1);
                    Some((format!("unsqueeze {x} [{d}]"), out))
                } else {
                    let dims: Vec<i64> = ones.iter().copied().filter(|_| rng.chance(2)).collect();
                    let dims = if dims.is_empty() { vec![ones[0]] } else { dims };
                    let out = (0..rank as i64)
                        .filter(|d| !dims.contains(d))
                        .map(|d| s[d as usize])
                        .collect();
                    Some((format!("squeeze {x} {}", ints(&dims)), out))
                }
            }
            5 => {
                let mut out: Vec<i64> = s
                    .iter()
                    .map(|&n| if n == 1 { 1 + rng.below(3) } else { n })
                    .collect();
                if rank < 4 && rng.chance(2) {
                    out.insert(0, 1 + rng.below(3));
                }
                Some((format!("broadcast {x} {}", ints(&out)), out))
            }
            6 => {
                let mut left = total.max(1);
                let mut out = Vec::new();
                for _ in 0..rng.below(3) {
                    let divs: Vec<i64> = (1..=left).filter(|d| left % d == 0).collect();
                    let d = divs[rng.below(divs.len() as i64) as usize];
                    out.push(d);
                    left /= d;
                }
                out.push(left);
                if total == 0 {
                    return None;
                }
                Some((format!("reshape {x} {}", ints(&out)), out))
            }
            7 if rank > 0 => {
                let axis = rng.below(rank as i64) as usize;
                let fits =
                    |t: &[i64]| t.len() == rank && (0..rank).all(|d| d == axis || t[d] == s[d]);
                let cands: Vec<&(String, Vec<i64>)> =
                    pool.iter().filter(|(_, t)| fits(t)).collect();
                let (y, t) = cands[rng.below(cands.len() as i64) as usize];
                let mut out = s.to_vec();
                out[axis] += t[axis];
                Some((format!("concat {x}, %{y} axis {axis}"), out))
            }
            8 if rank > 0 => {
                let axis = rng.below(rank as i64) as usize;
                let cands: Vec<&(String, Vec<i64>)> = pool.iter().filter(|(_, t)| t == s).collect();
                let k = 2 + rng.below(2);
                let names: Vec<String> = (1..k)
                    .map(|_| format!("%{}", cands[rng.below(cands.len() as i64) as usize].0))
                    .collect();
                let mut out = s.to_vec();
                out[axis] *= k;
                Some((
                    format!("interleave {x}, {} axis {axis}", names.join(", ")),
                    out,
                ))
            }
            9 if rank > 0 => {
                let axis = rng.below(rank as i64) as usize;
                let times = if rng.chance(8) { 0 } else { 1 + rng.below(3) };
                let mut out = s.to_vec();
                out[axis] *= times;
                Some((format!("repeat {x} times {times} axis {axis}"), out))
            }
            10 if rank > 0 => {
                let reflect = rng.chance(2) && s.iter().all(|&n| n >= 1);
                let mut w = Vec::new();
                let mut out = Vec::new();
                for &n in s {
                    let max = if reflect { (n - 1).min(2) } else { 2 };
                    let (lo, hi) = (rng.below(max + 1), rng.below(max + 1));
                    w.push(format!("{lo}:{hi}"));
                    out.push(n + lo + hi);
                }
                let mode = if reflect { "reflect" } else { "constant -1" };
                Some((format!("pad {x} [{}] {mode}", w.join(", ")), out))
            }
            _ => None,
        }
    }

    /// A random program: one or two sources, then a chain-heavy mix of views.
    fn random_program(seed: u64) -> (String, Vec<String>) {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut text = String::from("graph @g {\n");
        let mut pool: Vec<(String, Vec<i64>)> = Vec::new();
        for k in 0..1 + rng.below(2) {
            let shape: Vec<i64> = (0..1 + rng.below(3)).map(|_| 1 + rng.below(5)).collect();
            let _ = writeln!(text, "  %s{k} = source @s{k} : i64{}", ints(&shape));
            pool.push((format!("s{k}"), shape));
        }
        let mut views = Vec::new();
        for i in 0..4 + rng.below(8) {
            let j = if rng.chance(3) {
                rng.below(pool.len() as i64) as usize
            } else {
                pool.len() - 1
            };
            let (x, s) = pool[j].clone();
            let Some((body, out)) = random_view(&mut rng, &format!("%{x}"), &s, &pool) else {
                continue;
            };
            if out.iter().product::<i64>() > 300 {
                continue;
            }
            let _ = writeln!(text, "  %v{i} = {body}");
            pool.push((format!("v{i}"), out));
            views.push(format!("v{i}"));
        }
        for v in &views {
            let _ = writeln!(text, "  sink @{v} %{v}");
        }
        text.push('}');
        (text, views)
    }

    fn i64s(t: &Tensor) -> Vec<i64> {
        match &t.data {
            Data::I64(v) => v.clone(),
            d => panic!("unexpected data {d:?}"),
        }
    }

    /// A random region over `shape`: one or two nested stripes per dimension.
    fn random_region(rng: &mut Rng, shape: &[i64]) -> Region {
        let setts = shape
            .iter()
            .map(|_| {
                let triples: Vec<(i64, i64, i64)> = (0..rng.below(3))
                    .map(|_| (1 + rng.below(3), rng.below(3), rng.below(7) - 3))
                    .collect();
                Sett::from_triples(&triples).unwrap()
            })
            .collect();
        Region::new(shape.to_vec(), setts).unwrap()
    }

    fn check_program(seed: u64) {
        let (src, views) = random_program(seed);
        let (m, facts) = compile(&src);
        let g = &m.graphs[0];
        let info = analyze(g).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let mut inputs = HashMap::new();
        let roots: Vec<(ValueId, i64)> = g
            .sources()
            .enumerate()
            .map(|(k, (_, _, v))| (v, k as i64))
            .collect();
        for (name, ty, _) in g.sources() {
            let k: i64 = name[1..].parse().unwrap();
            let data = (0..ty.elements()).map(|i| 1_000_000 * k + i).collect();
            let shape = ty.shape.iter().map(|&d| d as usize).collect::<Vec<_>>();
            inputs.insert(
                name.to_string(),
                Tensor::new(shape, Data::I64(data)).unwrap(),
            );
        }
        let sinks: HashMap<String, Vec<i64>> = crate::interp::run(&m, g, &facts[0], &inputs)
            .unwrap()
            .into_iter()
            .map(|(n, t)| (n, i64s(&t)))
            .collect();
        // Brute-force footprint of (part of) a view: root -> flat indices.
        let brute = |data: &[i64], keep: &dyn Fn(usize) -> bool| {
            let mut set: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
            for (i, &x) in data.iter().enumerate() {
                if x >= 0 && keep(i) {
                    set.entry(x / 1_000_000).or_default().insert(x % 1_000_000);
                }
            }
            set
        };
        let analysed = |fp: &[(ValueId, Regions)]| {
            let mut set: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
            for &(r, k) in &roots {
                let s = flat(&info, fp, r);
                if !s.is_empty() {
                    set.insert(k, s);
                }
            }
            set
        };
        let ctx = |v: &str| format!("seed {seed}, value %{v}\n{src}\n{}", info.report().unwrap());
        let mut rng = Rng(seed | 1);
        let mut sets = Vec::new();
        for name in &views {
            let v = id(g, name);
            let data = &sinks[name.as_str()];
            let want = brute(data, &|_| true);
            assert_eq!(analysed(info.footprint(v)), want, "{}", ctx(name));
            let backed = data.iter().filter(|&&x| x >= 0).count() as i128;
            let distinct: usize = want.values().map(BTreeSet::len).sum();
            assert_eq!(info.backed_elements(v).unwrap(), backed, "{}", ctx(name));
            assert_eq!(
                info.has_self_aliases(v).unwrap(),
                backed > distinct as i128,
                "{}",
                ctx(name)
            );
            // A random sub-region.
            let shape = g.ty(v).unwrap().shape.clone();
            let r = random_region(&mut rng, &shape);
            let fp = info.footprint_of_region(v, &r).unwrap();
            let part = brute(data, &|i| r.contains_point(&unravel(i as i64, &shape)));
            assert_eq!(analysed(&fp), part, "{}\nregion {r}", ctx(name));
            sets.push((v, want));
        }
        let elems = |s: &BTreeMap<i64, BTreeSet<i64>>| -> BTreeSet<(i64, i64)> {
            s.iter()
                .flat_map(|(&k, v)| v.iter().map(move |&i| (k, i)))
                .collect()
        };
        for (a, sa) in &sets {
            for (b, sb) in &sets {
                let (ea, eb) = (elems(sa), elems(sb));
                let names = format!("%{} vs %{}", g.value(*a).name, g.value(*b).name);
                assert_eq!(
                    info.aliases(*a, *b).unwrap(),
                    !ea.is_disjoint(&eb),
                    "{names} {}",
                    ctx("")
                );
                assert_eq!(
                    info.contains(*a, *b).unwrap(),
                    eb.is_subset(&ea),
                    "{names} {}",
                    ctx("")
                );
            }
        }
    }

    #[test]
    fn footprints_match_the_interpreter_on_random_view_chains() {
        for seed in 0..400 {
            check_program(seed);
        }
    }
}
