//! `shard`: split applies into shards along index dimensions, from their signatures alone.
//!
//! Options: `shard{parts=N, dim=NAME|auto, nodes=M}`; `dim` names an index variable (or a
//! parallel dimension by number) and applies whose op has no such variable stay whole. A grid,
//! `shard{parts=RxC, dim=I*J}`, shards two parallel variables into R×C blocks (2-D). Each shard is an `apply` over an index
//! sub-range (`@[lo:hi, ...]`) whose inputs are slices of the original inputs covering the
//! image of the sub-range under each input's projection; the full output is the concat of the
//! shard outputs. Sizes split evenly with the remainder going to the first shards (10 in 4
//! parts is 3,3,2,2); no shard is empty. `dim=auto` shards along the dimension that lines up
//! with an input that was itself sharded (so `linear -> relu -> linear` stays sharded and
//! `canonicalize` removes the slice/concat pairs), else along the leading dimension when it
//! has at least `parts` points, else the largest. Naming a
//! reduction variable (`dim=k`) shards it into partial results, a combine, and the epilogue
//! (see `reduce.rs`). Shards are placed round-robin over `nodes` (default: `parts`).
//! Every sharding is checked: the shard's lowered kernel and projections must equal the
//! original's, and the shard outputs must be disjoint and cover the output (alias algebra).

mod cover;
mod kexpr;
mod reduce;
mod scatter;
mod split;
mod vocab;

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::*;
use crate::ir::instance::Instance;
use crate::ir::{Module, TensorType};
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassOptions};
use crate::passes::rewrite::Builder;
use crate::verify::{instantiate, GraphFacts, Site};

#[derive(Clone, Debug, Default)]
pub struct Config {
    pub parts: i64,
    pub dim: Option<String>,
    /// A grid's second index variable and its parts (`dim=i*j, parts=RxC`): each shard is
    /// one block of rows × columns (2-D, SUMMA-style).
    pub grid: Option<(String, i64)>,
    pub nodes: u32,
    /// Explicit placement of shard `p` (cycled); empty means round-robin over `nodes`.
    pub placements: Vec<u32>,
    /// `table=NAME`: split the gathered dimension of every apply's input port `NAME` into
    /// `parts` row ranges (vocabulary-parallel, a masked partial sum; see `vocab.rs`).
    pub table: Option<String>,
}

impl Config {
    /// The node of shard `p`, the `count`-th shard made so far.
    fn place(&self, p: usize, count: &mut u32) -> Option<u32> {
        let n = if self.placements.is_empty() {
            *count % self.nodes.max(1)
        } else {
            self.placements[p % self.placements.len()]
        };
        *count += 1;
        Some(n)
    }
}

/// How the cost search shards one apply: along index variable `dim` into `parts`, placing
/// shard `p` on `nodes[p % nodes.len()]`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplyPlan {
    pub dim: String,
    pub parts: i64,
    pub nodes: Vec<u32>,
}

/// Shards graph `gi` of `m` by an explicit per-apply plan (keyed by node index in the graph);
/// applies without an entry stay whole. `facts` must be the graph's verification facts.
pub fn apply_plan(
    m: &mut Module,
    gi: usize,
    facts: &GraphFacts,
    plan: &std::collections::HashMap<usize, ApplyPlan>,
) -> Result<String, Diagnostic> {
    let (g, _, report) = shard_graph(
        m,
        gi,
        facts,
        &Config {
            parts: 1,
            nodes: 1,
            ..Config::default()
        },
        Some(plan),
    )?;
    m.graphs[gi] = g;
    Ok(report)
}

pub fn create(opts: &PassOptions) -> Result<Box<dyn Pass>, String> {
    let mut c = Config::default();
    let (mut parts, mut dim) = ("2".to_string(), "auto".to_string());
    for (k, v) in opts {
        match k.as_str() {
            "parts" => parts = v.clone(),
            "dim" | "dims" => dim = v.clone(),
            "table" => c.table = Some(v.clone()),
            "nodes" => {
                c.nodes = v
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| format!("nodes must be a positive integer, not `{v}`"))?
            }
            other => {
                return Err(format!(
                    "unknown option `{other}` (shard takes parts, dim, table, nodes)"
                ))
            }
        }
    }
    set_dims(&mut c, &dim, &parts)?;
    if c.table.is_some() && (c.dim.is_some() || c.grid.is_some()) {
        return Err("`table` splits a gathered table's rows: give it without `dim`".into());
    }
    if c.nodes == 0 {
        c.nodes = (c.parts * c.grid.as_ref().map_or(1, |g| g.1)) as u32;
    }
    Ok(Box::new(Shard(c)))
}

/// `dim` and `parts`: `auto` or one variable with `N` parts, or a grid `i*j` with `RxC`.
fn set_dims(c: &mut Config, dim: &str, parts: &str) -> Result<(), String> {
    let count = |p: &str| {
        p.parse::<i64>()
            .ok()
            .filter(|&p| p >= 1)
            .ok_or_else(|| format!("parts must be a positive integer, not `{p}`"))
    };
    match (dim.split_once('*'), parts.split_once('x')) {
        (None, None) => {
            c.parts = count(parts)?;
            c.dim = (dim != "auto").then(|| dim.to_string());
        }
        (Some((i, j)), Some((r, k))) if !i.is_empty() && !j.is_empty() && i != j => {
            c.parts = count(r)?;
            c.dim = Some(i.to_string());
            c.grid = Some((j.to_string(), count(k)?));
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "`dim={dim}` must name two different variables, e.g. `dim=i*j`"
            ))
        }
        (Some(_), None) => {
            return Err(format!(
                "`dim={dim}` is a grid: give parts per variable, e.g. `parts=2x2`"
            ))
        }
        (None, Some(_)) => {
            return Err(format!(
                "`parts={parts}` is a grid: name its variables, e.g. `dim=i*j`"
            ))
        }
    }
    Ok(())
}

struct Shard(Config);

impl Pass for Shard {
    fn name(&self) -> &'static str {
        "shard"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic> {
        let mut changed = false;
        let mut report = String::new();
        for gi in 0..m.graphs.len() {
            // A kernel whose temporaries reduce over the sharded variable is split first, so
            // that each reduction becomes partial + combine (softmax on columns).
            if let Some(var) = &self.0.dim {
                let facts = &cx.facts(m).map_err(unverified)?[gi];
                if split::split_graph(m, gi, facts, var)? {
                    cx.invalidate(gi);
                }
            }
            let facts = &cx.facts(m).map_err(unverified)?[gi];
            let (g, c, r) = shard_graph(m, gi, facts, &self.0, None)?;
            m.graphs[gi] = g;
            if c {
                cx.invalidate(gi);
            }
            changed |= c;
            report.push_str(&r);
        }
        cx.reports.push(("shard".into(), report));
        Ok(changed)
    }
}

/// A module that no longer verifies (after splitting kernels): a compiler bug, E0105.
fn unverified(d: Diagnostic) -> Diagnostic {
    Diagnostic::error(
        codes::PASS_FAILED,
        format!("splitting kernels for sharding: {}", d.message),
    )
}

/// Even split of `[0, n)` into at most `parts` non-empty ranges, remainder first.
pub fn split(n: i64, parts: i64) -> Vec<(i64, i64)> {
    let p = parts.min(n).max(1);
    let (q, r) = (n / p, n % p);
    let mut lo = 0;
    (0..p)
        .map(|k| {
            let hi = lo + q + i64::from(k < r);
            let out = (lo, hi);
            lo = hi;
            out
        })
        .collect()
}

/// How a value of the new graph was assembled from shards: along `axis`, at these bounds.
#[derive(Clone, Debug, PartialEq)]
struct Assembled {
    axis: usize,
    bounds: Vec<(i64, i64)>,
}

fn err(msg: String, span: Span) -> Diagnostic {
    Diagnostic::error(codes::BAD_SHARD, msg).primary(span, "cannot shard this apply")
}

fn shard_graph(
    m: &mut Module,
    gi: usize,
    facts: &GraphFacts,
    cfg: &Config,
    plan: Option<&std::collections::HashMap<usize, ApplyPlan>>,
) -> Result<(Graph, bool, String), Diagnostic> {
    let old = m.graphs[gi].clone();
    let mut b = Builder::new(&old, false);
    let mut assembled: Vec<Option<Assembled>> = Vec::new();
    let mut changed = false;
    let mut report = String::new();
    let mut next_node = 0u32;
    for (ni, node) in old.nodes.iter().enumerate() {
        if let (Some(t), None) = (&cfg.table, plan) {
            let done = match &node.kind {
                NodeKind::Apply(a) if a.range.is_none() => {
                    vocab::shard_table(m, &mut b, node, a, t, cfg, &mut next_node, &mut report)?
                }
                _ => None,
            };
            match done {
                Some(_) => changed = true,
                None => b.copy_node(node)?,
            }
            continue;
        }
        if let (NodeKind::Scatter(s), None) = (&node.kind, plan) {
            if scatter::shard_scatter(&mut b, node, s, cfg, &mut next_node, &mut report)? {
                changed = true;
                continue;
            }
        }
        let NodeKind::Apply(a) = &node.kind else {
            b.copy_node(node)?;
            continue;
        };
        let inst = facts
            .instances
            .get(&ni)
            .ok_or_else(|| Diagnostic::error(codes::PASS_FAILED, "shard needs a verified graph"))?;
        if a.range.is_some() {
            b.copy_node(node)?; // already a shard
            continue;
        }
        let planned;
        let cfg = match plan.map(|p| p.get(&ni)) {
            None => cfg,
            Some(None) => {
                b.copy_node(node)?;
                continue;
            }
            Some(Some(p)) => {
                planned = Config {
                    parts: p.parts,
                    dim: Some(p.dim.clone()),
                    grid: None,
                    nodes: cfg.nodes,
                    placements: p.nodes.clone(),
                    table: None,
                };
                &planned
            }
        };
        let choice = choose_dim(&b, &assembled, a, inst, cfg, node.span)?;
        let done = match choice {
            Some(Choice::Parallel(splits)) => shard_parallel(
                m,
                &mut b,
                node,
                a,
                inst,
                &splits,
                &mut next_node,
                cfg,
                &mut report,
            )?,
            Some(Choice::Reduction(v)) => reduce::shard_reduction(
                m,
                &mut b,
                node,
                a,
                inst,
                v,
                cfg,
                &mut next_node,
                &mut report,
            )?,
            None => None,
        };
        match done {
            Some(asm) => {
                changed = true;
                for (r, x) in node.results.iter().zip(asm) {
                    let id = b.mapped(*r).index();
                    if assembled.len() <= id {
                        assembled.resize(id + 1, None);
                    }
                    assembled[id] = x;
                }
            }
            None => b.copy_node(node)?,
        }
    }
    Ok((b.new, changed, report))
}

/// Parallel dims and the bounds each is split at: one, or two for a grid (the first outer).
type Splits = Vec<(usize, Vec<(i64, i64)>)>;

enum Choice {
    /// Shard these parallel dims at these bounds.
    Parallel(Splits),
    /// Shard reduction variable number `v`.
    Reduction(usize),
}

fn choose_dim(
    b: &Builder,
    assembled: &[Option<Assembled>],
    a: &Apply,
    inst: &Instance,
    cfg: &Config,
    span: Span,
) -> Result<Option<Choice>, Diagnostic> {
    let np = inst.parallel;
    let parallel = |name: &str| {
        let by_index = name.parse::<usize>().ok().filter(|&d| d < np);
        by_index.or_else(|| inst.vars[..np].iter().position(|v| v.name == *name))
    };
    if let (Some(name), Some((name2, parts2))) = (&cfg.dim, &cfg.grid) {
        return grid(
            inst,
            cfg,
            (parallel(name), name),
            (parallel(name2), name2),
            *parts2,
            span,
        );
    }
    if let Some(name) = &cfg.dim {
        if let Some(d) = parallel(name) {
            let n = inst.vars[d].range.1;
            return Ok((n >= 2).then(|| Choice::Parallel(vec![(d, split(n, cfg.parts))])));
        }
        if let Some(v) = inst.vars.iter().skip(np).position(|v| v.name == *name) {
            return Ok(Some(Choice::Reduction(np + v)));
        }
        let _ = span;
        return Ok(None); // this op has no such variable: leave it whole
    }
    // Line up with a sharded input: its assembly axis must be a plain index variable here.
    for (k, arg) in a.args.iter().enumerate() {
        let Some(Some(asm)) = assembled.get(b.mapped(*arg).index()) else {
            continue;
        };
        let p = &inst.signature.inputs[k].projection;
        let row = &p.matrix[asm.axis];
        if let Some(d) =
            (0..np).find(|&d| row[d] == 1 && row.iter().filter(|&&c| c != 0).count() == 1)
        {
            if p.offset[asm.axis] == 0
                && p.shape[asm.axis] == 1
                && asm.bounds.last().map(|x| x.1) == Some(inst.vars[d].range.1)
            {
                return Ok(Some(Choice::Parallel(vec![(d, asm.bounds.clone())])));
            }
        }
    }
    // Else the leading dimension (the batch, by convention) if it has room for every part,
    // so that chains of ops shard alike; else the largest.
    let ext = |d: usize| inst.vars[d].range.1;
    let best = (0..np)
        .find(|&d| ext(d) >= cfg.parts)
        .or_else(|| (0..np).max_by_key(|&d| (ext(d), std::cmp::Reverse(d))));
    Ok(best
        .filter(|&d| ext(d) >= 2)
        .map(|d| Choice::Parallel(vec![(d, split(ext(d), cfg.parts))])))
}

/// A grid over two parallel variables (each found, or `None`): an op without either stays
/// whole; a reduction variable cannot be one of them.
fn grid(
    inst: &Instance,
    cfg: &Config,
    (d1, name1): (Option<usize>, &str),
    (d2, name2): (Option<usize>, &str),
    parts2: i64,
    span: Span,
) -> Result<Option<Choice>, Diagnostic> {
    let reduction = |n: &str| inst.vars[inst.parallel..].iter().any(|v| v.name == n);
    if let Some(r) = [name1, name2].into_iter().find(|n| reduction(n)) {
        return Err(err(
            format!("a grid shards two parallel variables, and `{r}` is a reduction variable"),
            span,
        ));
    }
    let (Some(d1), Some(d2)) = (d1, d2) else {
        return Ok(None);
    };
    let ext = |d: usize| inst.vars[d].range.1;
    let splits: Splits = [(d1, cfg.parts), (d2, parts2)]
        .into_iter()
        .filter(|&(d, _)| ext(d) >= 2)
        .map(|(d, p)| (d, split(ext(d), p)))
        .collect();
    Ok((!splits.is_empty() && d1 != d2).then_some(Choice::Parallel(splits)))
}

/// Slices `v` (an old value, already mapped) to the half-open box `image`, unless it is whole.
fn slice_to(
    b: &mut Builder,
    v: ValueId,
    image: &[(i64, i64)],
    name: &str,
    span: Span,
) -> Result<ValueId, Diagnostic> {
    let t = b.old_ty(v)?;
    let mv = b.mapped(v);
    if image
        .iter()
        .zip(&t.shape)
        .all(|(&(lo, hi), &n)| lo == 0 && hi == n)
    {
        return Ok(mv);
    }
    let dims = image
        .iter()
        .map(|&(lo, hi)| SliceDim::from_count(lo, 1, hi - lo))
        .collect();
    let ty = t.with_shape(image.iter().map(|&(lo, hi)| hi - lo).collect());
    Ok(b.emit(
        NodeKind::View(View::Slice { arg: mv, dims }),
        name,
        ty,
        span,
    ))
}

/// The image of `range` under an input's projection, clipped to the input.
fn input_box(inst: &Instance, k: usize, range: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let p = &inst.signature.inputs[k].projection;
    let shape = &inst.inputs[k].shape;
    p.image(range)
        .into_iter()
        .zip(shape)
        .map(|((lo, hi), &n)| (lo.clamp(0, n), hi.clamp(0, n).max(lo.clamp(0, n))))
        .collect()
}

/// The shard must lower to the same kernel and projections as the original: otherwise a
/// symbol bound from a sliced dimension changed its meaning inside the kernel.
fn same_meaning(orig: &Instance, shard: &Instance) -> bool {
    let proj = |i: &Instance| {
        i.signature
            .inputs
            .iter()
            .map(|p| (p.projection.matrix.clone(), p.projection.offset.clone()))
            .collect::<Vec<_>>()
    };
    let reds = |i: &Instance| {
        i.vars[i.parallel..]
            .iter()
            .map(|v| v.range)
            .collect::<Vec<_>>()
    };
    orig.stmts == shard.stmts && proj(orig) == proj(shard) && reds(orig) == reds(shard)
}

/// Every block of `full` that `splits` cut it into, the first split's blocks outermost.
fn blocks(full: &[(i64, i64)], splits: &Splits) -> Vec<Vec<(i64, i64)>> {
    splits.iter().fold(vec![full.to_vec()], |acc, (d, bounds)| {
        acc.iter()
            .flat_map(|r| {
                bounds.iter().map(move |&x| {
                    let mut r = r.clone();
                    r[*d] = x;
                    r
                })
            })
            .collect()
    })
}

#[allow(clippy::too_many_arguments)]
fn shard_parallel(
    m: &Module,
    b: &mut Builder,
    node: &Node,
    a: &Apply,
    inst: &Instance,
    splits: &Splits,
    next_node: &mut u32,
    cfg: &Config,
    report: &mut String,
) -> Result<Option<Vec<Option<Assembled>>>, Diagnostic> {
    let op = m.op(&a.op).expect("verified applies name defined ops");
    let mut shard_outputs: Vec<Vec<ValueId>> = vec![Vec::new(); node.results.len()];
    let base = b.old.value(node.results[0]).name.clone();
    for (p, range) in blocks(&inst.range(), splits).into_iter().enumerate() {
        let mut args = Vec::new();
        let mut arg_types = Vec::new();
        for (k, &arg) in a.args.iter().enumerate() {
            let image = input_box(inst, k, &range);
            let name = format!("{}.{p}", b.old.value(arg).name);
            let v = slice_to(b, arg, &image, &name, node.span)?;
            arg_types.push(b.new.ty(v).cloned().expect("typed"));
            args.push(v);
        }
        let shard = instantiate(
            op,
            &a.params,
            &arg_types,
            Some(&range),
            Site { span: node.span },
        );
        let shard = match shard {
            Ok(s) if same_meaning(inst, &s) => s,
            _ => {
                let names: Vec<&str> = splits
                    .iter()
                    .map(|(d, _)| &inst.vars[*d].name[..])
                    .collect();
                return match &cfg.dim {
                    Some(_) => Err(err(format!("`@{}` cannot be sharded along `{}`: its kernel uses a symbol that a shard would rebind", a.op, names.join("` and `")), node.span)),
                    None => Ok(None),
                };
            }
        };
        let placement = cfg.place(p, next_node);
        let kind = NodeKind::Apply(Apply {
            op: a.op.clone(),
            params: a.params.clone(),
            args,
            range: Some(range.clone()),
            placement,
            op_span: a.op_span,
        });
        let results: Vec<(String, TensorType)> = node
            .results
            .iter()
            .zip(&shard.outputs)
            .map(|(r, t)| (format!("{}.{p}", b.old.value(*r).name), t.clone()))
            .collect();
        let ids = b.emit_multi(kind, &results, node.span);
        for (o, id) in ids.into_iter().enumerate() {
            shard_outputs[o].push(id);
        }
        report.push_str(&cover::describe_inputs(
            &format!("{base}.{p}"),
            inst,
            &range,
        )?);
    }
    let mut out = Vec::new();
    for (o, &r) in node.results.iter().enumerate() {
        let axes = splits
            .iter()
            .map(|&(d, _)| output_axis(inst, o, d, node.span))
            .collect::<Result<Vec<_>, _>>()?;
        let t = b.old_ty(r)?;
        for ((_, bounds), &axis) in splits.iter().zip(&axes) {
            cover::check_cover(&t.shape, axis, bounds, node.span)?;
        }
        let v = assemble(b, &shard_outputs[o], splits, &axes, r, node.span)?;
        b.map[r.index()] = Some(v);
        out.push(Some(Assembled {
            axis: axes[0],
            bounds: splits[0].1.clone(),
        }));
    }
    Ok(Some(out))
}

/// The axis of output `o` that parallel dim `d` indexes.
fn output_axis(inst: &Instance, o: usize, d: usize, span: Span) -> Result<usize, Diagnostic> {
    let proj = &inst.signature.outputs[o].projection;
    proj.matrix
        .iter()
        .position(|row| row[d] == 1)
        .ok_or_else(|| {
            err(
                "an output does not depend on the sharded dimension".into(),
                span,
            )
        })
}

/// Old value `r` as the concat of its shards (`parts`, blocks in the order of [`blocks`]): a
/// grid concats each row of blocks along the second axis, then the rows along the first.
fn assemble(
    b: &mut Builder,
    parts: &[ValueId],
    splits: &Splits,
    axes: &[usize],
    r: ValueId,
    span: Span,
) -> Result<ValueId, Diagnostic> {
    let t = b.old_ty(r)?;
    let name = b.old.value(r).name.clone();
    let concat = |b: &mut Builder, args: Vec<ValueId>, axis, name: &str, ty| {
        b.emit(NodeKind::View(View::Concat { args, axis }), name, ty, span)
    };
    let Some((_, inner)) = splits.get(1) else {
        return Ok(concat(b, parts.to_vec(), axes[0], &name, t));
    };
    let mut rows = Vec::new();
    for (i, (blk, &(lo, hi))) in parts.chunks(inner.len()).zip(&splits[0].1).enumerate() {
        let mut shape = t.shape.clone();
        shape[axes[0]] = hi - lo;
        let row = concat(
            b,
            blk.to_vec(),
            axes[1],
            &format!("{name}.r{i}"),
            t.with_shape(shape),
        );
        rows.push(row);
    }
    Ok(concat(b, rows, axes[0], &name, t))
}
