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
//!
//! This file builds the footprints ([`analyze`], `walk`); the view maps on regions are in
//! `views`, the queries of an [`AliasInfo`] and its report in `queries`, and the differential
//! test against the interpreter in `differential`.

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
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassOptions};

mod queries;
mod views;

pub use views::box_region;
use views::{pull_view, push_backed, reads_all_operands, union_all};

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
    /// The result of a `scatter` (a buffer of its own, first a copy of the base).
    Scatter,
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootKind::Source(n) => write!(f, "source @{n}"),
            RootKind::Generator(n) => f.write_str(n),
            RootKind::Apply(op) => write!(f, "apply @{op}"),
            RootKind::Scatter => f.write_str("scatter"),
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
            NodeKind::Scatter(_) => Def::Root(RootKind::Scatter),
            NodeKind::View(v) => Def::View(v.clone()),
            NodeKind::Sink { .. } | NodeKind::Sequence { .. } | NodeKind::Pin { .. } => continue,
            NodeKind::Grad { .. } => {
                return Err(unverified(
                    node.results[0],
                    "a `grad` statement must be lowered first",
                ))
            }
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
pub fn volume(shape: &[i64]) -> i128 {
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
