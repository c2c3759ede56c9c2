//! `cost`: an analytic multi-objective cost model of sharding plans and a stochastic
//! Pareto-frontier search over them (see `docs/passes/cost.md`).
//!
//! Options: `cost{nodes=2, evals=20000, time=2s, seed=1, threads=2, parts=N,
//! objective=time|bytes|memory|flops, max_memory=BYTES, sources=root|split|shared|N,
//! sinks=gather|distributed, machine=FILE, frontier_svg=FILE, progress=true|false, pick=K}`. Per graph it builds the model ([`model::Problem`]), keeps only the
//! dimensions `shard` can actually split each apply along and the producer→consumer pairs
//! `fuse` actually fuses, searches ([`pareto::search`]), picks the frontier point best for
//! `objective` (ties broken by time, bytes, memory, flops; points over `max_memory` per node,
//! e.g. `8GiB`, are skipped; `pick=K` takes the K-th best instead, to measure the frontier's
//! runners-up), and materializes it ([`materialize`]: the fused pairs with
//! `fuse::select::fuse_pairs`, then the sharding with `shard::apply_plan`), so the output is
//! valid TEG. The report "cost" holds the marginal cost table per apply, graph totals, the
//! chosen plan and the frontier; with `frontier_svg` the frontier plot ([`plot`]) is handed to
//! the driver to write. The machine file comes read by the driver too (`PassFiles`).

pub mod machine;
pub mod model;
pub mod pareto;
pub mod peak;
pub mod plot;
mod probe;

pub use probe::problem;

use crate::diag::{codes, Diagnostic};
use crate::ir::graph::{Graph, NodeKind};
use crate::ir::Module;
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassFiles, PassOptions};
use crate::passes::shard::{apply_plan, ApplyPlan};
use crate::verify::GraphFacts;
use machine::Machine;
use model::{Objectives, Problem, OBJECTIVES};
use pareto::{Point, SearchConfig, MUTATIONS};
use std::collections::HashMap;
use std::fmt::Write;

/// The pass's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub machine: Machine,
    pub search: SearchConfig,
    pub max_parts: usize,
    /// Index into [`OBJECTIVES`].
    pub objective: usize,
    pub max_memory: Option<f64>,
    /// Where the driver writes the frontier plot.
    pub frontier_svg: Option<std::path::PathBuf>,
    /// Which point of the ranked frontier to carry out: 1 (the default) is the best.
    pub pick: usize,
}

/// `2s`, `500ms`, `1.5s`, `2m`: a wall-clock budget.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, mul) = [("ms", 1e-3), ("s", 1.0), ("m", 60.0)]
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, *m)))
        .unwrap_or((t, 1.0));
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && v * mul < 1e9)
        .map(|v| std::time::Duration::from_secs_f64(v * mul))
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 2s, 500ms, 1m)"))
}

/// `8GiB`, `512MiB`, `1e9`, `1000KB`: a byte count.
pub fn parse_bytes(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let units = [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1000),
        ("B", 1),
    ];
    let (num, mul) = units
        .iter()
        .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n, *m as f64)))
        .unwrap_or((t, 1.0));
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| v * mul)
        .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 8GiB)"))
}

/// Parses the options; `files` holds the machine file the `machine` option names (read by the
/// driver).
pub fn config(opts: &PassOptions, files: &PassFiles) -> Result<Config, String> {
    let mut nodes: Option<u32> = None;
    let mut machine = None;
    let mut c = SearchConfig::default();
    let (mut parts, mut objective, mut max_memory) = (None, 0, None);
    let (mut evals, mut svg) = (None, None);
    let (mut sources, mut sinks, mut pick) = (None, None, 1);
    for (k, v) in opts {
        let int = |what: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{what} must be a non-negative integer, not `{v}`"))
        };
        match k.as_str() {
            "nodes" => nodes = Some(int("nodes").ok().filter(|&n| (1..=255).contains(&n)).ok_or_else(|| format!("nodes must be in 1..=255, not `{v}`"))? as u32),
            "evals" => evals = Some(int("evals")?),
            "time" => c.time = Some(parse_duration(v)?),
            "progress" => c.progress = match v.as_str() {
                "true" | "on" | "1" => true,
                "false" | "off" | "0" => false,
                _ => return Err(format!("progress takes true or false, not `{v}`")),
            },
            "frontier_svg" | "frontier-svg" => svg = Some(std::path::PathBuf::from(v)),
            "seed" => c.seed = int("seed")?,
            "threads" => c.threads = int("threads").ok().filter(|&t| (1..=64).contains(&t)).ok_or_else(|| format!("threads must be in 1..=64, not `{v}`"))? as usize,
            "parts" => parts = Some(int("parts").ok().filter(|&p| (1..=model::MAX_PARTS as u64).contains(&p)).ok_or_else(|| format!("parts must be in 1..={}, not `{v}`", model::MAX_PARTS))? as usize),
            "objective" => objective = OBJECTIVES.iter().position(|o| o == v).ok_or_else(|| format!("objective must be one of {}, not `{v}`", OBJECTIVES.join("|")))?,
            "max_memory" | "max-memory" => max_memory = Some(parse_bytes(v)?),
            "sources" => sources = Some(machine::Placement::from_option(v)?),
            "sinks" => sinks = Some(match v.as_str() {
                "gather" => false,
                "distributed" => true,
                _ => return Err(format!("sinks takes gather or distributed, not `{v}`")),
            }),
            "pick" => pick = int("pick").ok().filter(|&k| k >= 1).ok_or_else(|| format!("pick must be a frontier rank from 1 (the best), not `{v}`"))? as usize,
            "machine" => {
                let text = files.get(v).map_err(|e| format!("cannot read machine file `{v}`: {e}"))?;
                machine = Some(Machine::from_toml(text)?);
            }
            other => return Err(format!("unknown option `{other}` (cost takes nodes, evals, time, seed, threads, parts, objective, max_memory, sources, sinks, machine, frontier_svg, progress, pick)")),
        }
    }
    let mut machine = match (machine, nodes) {
        (Some(m), Some(n)) if !m.sized => m.with_nodes(n as usize),
        (Some(m), Some(n)) if m.len() != n as usize => {
            return Err(format!(
                "nodes={n} but the machine file has {} nodes",
                m.len()
            ))
        }
        (Some(m), _) => m,
        (None, n) => Machine::default_local(n.unwrap_or(2)),
    };
    // `sources=` places every source (over the machine file's `[sources]`), `sinks=` says
    // whether sinks are gathered.
    if let Some(p) = sources {
        if let machine::Placement::Node(n) = p {
            if n as usize >= machine.len() {
                return Err(format!(
                    "sources={n}: the machine has {} nodes",
                    machine.len()
                ));
            }
        }
        machine.sources.clear();
        machine.default_source = p;
    }
    if let Some(d) = sinks {
        machine.distributed_sinks = d;
    }
    let max_parts = parts.unwrap_or(machine.len().clamp(2, model::MAX_PARTS));
    // A time budget alone runs until the time is spent; with both, whichever ends first.
    c.evals = match (evals, c.time) {
        (Some(e), _) => e,
        (None, Some(_)) => u64::MAX,
        (None, None) => 20000,
    };
    Ok(Config {
        machine,
        search: c,
        max_parts,
        objective,
        max_memory,
        frontier_svg: svg,
        pick,
    })
}

pub fn create(opts: &PassOptions, files: &PassFiles) -> Result<Box<dyn Pass>, String> {
    Ok(Box::new(Cost(config(opts, files)?)))
}

pub struct Cost(pub Config);

/// Rewrites graph `gi` of `m` (verified, its facts in `cx`) into `plan`: first the fused pairs
/// are fused (`fuse::select::fuse_pairs`; a fused pair is whole on one node by construction),
/// then every apply is sharded and placed as its gene says (`shard::apply_plan`, on the facts
/// of the fused graph; applies are found again by the name of their first result, which fusion
/// keeps for the consumer). Returns whether the module changed. A fusion the `fuse` pass cannot
/// do in combination is an error (E0105) rather than a silently different plan.
pub fn materialize(
    m: &mut Module,
    gi: usize,
    cx: &mut PassContext,
    p: &Problem,
    plan: &[model::Gene],
) -> Result<bool, Diagnostic> {
    let pairs: Vec<(usize, usize)> = p
        .fused_pairs(plan)
        .into_iter()
        .map(|(a, c)| (p.applies[a].node, p.applies[c].node))
        .collect();
    let fused = !pairs.is_empty();
    if fused {
        fuse_chosen(m, gi, cx, p, &pairs)?;
    }
    let facts = &cx.facts(m).map_err(|d| {
        unverified(
            "cost: fusing the chosen pairs gave a graph that does not verify",
            d,
        )
    })?[gi];
    let plans = shard_plans(&m.graphs[gi], facts, p, plan);
    if plans.is_empty() {
        return Ok(fused);
    }
    apply_plan(m, gi, facts, &plans)?;
    cx.invalidate(gi);
    Ok(true)
}

/// A module that does not verify where the pass needs it to: E0105, `what` and the first error.
fn unverified(what: &str, d: Diagnostic) -> Diagnostic {
    Diagnostic::error(codes::PASS_FAILED, format!("{what}: {}", d.message))
}

/// Fuses `pairs` (producer and consumer node) in graph `gi`, all of them or fails.
fn fuse_chosen(
    m: &mut Module,
    gi: usize,
    cx: &mut PassContext,
    p: &Problem,
    pairs: &[(usize, usize)],
) -> Result<(), Diagnostic> {
    let facts = &cx
        .facts(m)
        .map_err(|d| unverified("cost needs a verified graph", d))?[gi];
    let left = crate::passes::fuse::select::fuse_pairs(m, gi, facts, pairs)?;
    cx.invalidate(gi);
    if let Some(&(a, c)) = left.first() {
        let name = |n: usize| {
            p.applies
                .iter()
                .find(|x| x.node == n)
                .map_or("?".to_string(), |x| x.name.clone())
        };
        return Err(Diagnostic::error(
            codes::PASS_FAILED,
            format!(
                "cost: the chosen plan fuses %{} into %{}, which the fuse pass could not do together with the plan's other fusions",
                name(a),
                name(c)
            ),
        ));
    }
    Ok(())
}

/// The `shard::apply_plan` input of `plan` for graph `g` (after fusion, with its `facts`):
/// keyed by node index, the applies found by the name of their first result.
fn shard_plans(
    g: &Graph,
    facts: &GraphFacts,
    p: &Problem,
    plan: &[model::Gene],
) -> HashMap<usize, ApplyPlan> {
    let by_name: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.kind, NodeKind::Apply(_)))
        .map(|(i, n)| (g.values[n.results[0].index()].name.as_str(), i))
        .collect();
    let mut plans = HashMap::new();
    for (node, mut ap) in p.to_apply_plans(plan) {
        let Some(a) = p.applies.iter().find(|a| a.node == node) else {
            continue;
        };
        let Some(&ni) = by_name.get(a.name.as_str()) else {
            continue; // fused away
        };
        if ap.parts == 1 {
            // Whole on another node: one shard along the (possibly fused) op's first variable.
            match facts.instances.get(&ni) {
                Some(inst) if inst.parallel > 0 => ap.dim = inst.vars[0].name.clone(),
                _ => continue,
            }
        }
        plans.insert(ni, ap);
    }
    plans
}

/// The frontier point best for objective `obj` under the memory limit (ties: time, bytes,
/// memory, flops), or `None` when every point is over the limit.
pub fn choose(front: &[Point], obj: usize, max_memory: Option<f64>) -> Option<&Point> {
    ranked(front, obj)
        .into_iter()
        .find(|p| max_memory.is_none_or(|m| p.obj[3] <= m))
}

/// The frontier's points, best for objective `obj` first (ties: time, bytes, memory, flops;
/// a stable sort, so equal points keep the frontier's order).
pub fn ranked(front: &[Point], obj: usize) -> Vec<&Point> {
    let order = [obj, 0, 2, 3, 1];
    let mut v: Vec<&Point> = front.iter().collect();
    v.sort_by(|a, b| {
        order
            .iter()
            .map(|&i| a.obj[i].total_cmp(&b.obj[i]))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    v
}

/// Per-node peaks of a carried-out plan ([`peak::node_peaks`]), or why there are none.
type Peaks = Result<Vec<tapc_runtime::mpi::peak::RankPeak>, String>;

/// Carries out the best frontier point of graph `gi` for the objective whose per-node peak
/// memory, as the runtime plans it ([`peak`]), is under `max_memory` (the model's figure when
/// the runtime has no run matching the machine); each point over it is rolled back. With
/// `pick=K` the K − 1 best points are passed over first (an error when the frontier has
/// fewer than K points). Returns
/// the point carried out (`None`: none fits, the graph is left as it was), the per-node
/// peaks of the graph as it is then, and whether the module changed.
fn carry_out(
    m: &mut Module,
    gi: usize,
    cx: &mut PassContext,
    p: &Problem,
    front: &[Point],
    cfg: &Config,
) -> Result<(Option<Point>, Peaks, bool), Diagnostic> {
    let doable = (front.iter())
        .map(|pt| feasible(m, gi, cx, p, pt))
        .collect::<Result<Vec<Point>, Diagnostic>>()?;
    if cfg.pick > doable.len() {
        return Err(Diagnostic::error(
            codes::PASS_FAILED,
            format!(
                "cost: pick={} but the frontier of graph @{} has {} point(s)",
                cfg.pick,
                m.graphs[gi].name,
                doable.len()
            ),
        ));
    }
    for pt in ranked(&doable, cfg.objective)
        .into_iter()
        .skip(cfg.pick - 1)
    {
        let saved = cfg.max_memory.map(|_| m.clone());
        let changed = materialize(m, gi, cx, p, &pt.plan)?;
        let peaks = graph_peaks(m, gi, cx, p)?;
        let fits = |limit: f64| match &peaks {
            Ok(v) => peak::max_peak(v) as f64 <= limit,
            Err(_) => pt.obj[3] <= limit,
        };
        match (cfg.max_memory, saved) {
            (Some(limit), Some(saved)) if !fits(limit) => {
                *m = saved;
                cx.invalidate(gi);
            }
            _ => return Ok((Some(pt.clone()), peaks, changed)),
        }
    }
    let peaks = graph_peaks(m, gi, cx, p)?;
    Ok((None, peaks, false))
}

/// `pt` without the fusions the fuse pass cannot do together (tried on a copy of `m`), its
/// objectives evaluated again. The model checks each fused pair alone; a chain of them can fail
/// (a stencil fused into a stencil already holding its producer), and then the plan keeps the
/// pairs that can be done rather than failing the pass. Only plans with a fused group of three
/// or more applies are tried: the model's per-pair check decides the others.
fn feasible(
    m: &mut Module,
    gi: usize,
    cx: &mut PassContext,
    p: &Problem,
    pt: &Point,
) -> Result<Point, Diagnostic> {
    let pairs: Vec<(usize, usize)> = (p.fused_pairs(&pt.plan).into_iter())
        .map(|(a, c)| (p.applies[a].node, p.applies[c].node))
        .collect();
    let consumers: Vec<usize> = pairs.iter().map(|&(_, c)| c).collect();
    let grouped = |n: usize| consumers.iter().filter(|&&c| c == n).count() > 1;
    let chained = (pairs.iter()).any(|&(a, c)| consumers.contains(&a) || grouped(c));
    if !chained {
        return Ok(pt.clone());
    }
    let facts = &cx
        .facts(m)
        .map_err(|d| unverified("cost needs a verified graph", d))?[gi];
    let left = crate::passes::fuse::select::fuse_pairs(&mut m.clone(), gi, facts, &pairs)?;
    if left.is_empty() {
        return Ok(pt.clone());
    }
    let mut plan = pt.plan.clone();
    for (producer, _) in left {
        if let Some(ai) = p.applies.iter().position(|a| a.node == producer) {
            plan[ai].fused = false;
        }
    }
    Ok(Point {
        obj: p.evaluate(&plan),
        plan,
    })
}

/// [`peak::node_peaks`] of graph `gi` of `m` as it is now.
fn graph_peaks(
    m: &mut Module,
    gi: usize,
    cx: &mut PassContext,
    p: &Problem,
) -> Result<Peaks, Diagnostic> {
    let facts = &cx
        .facts(m)
        .map_err(|d| unverified("cost: the chosen plan gave a graph that does not verify", d))?[gi];
    Ok(peak::node_peaks(m, gi, facts, &p.machine))
}

/// `1.23e-4 s`-style formatting of objectives.
pub fn format_objectives(o: &Objectives) -> String {
    format!(
        "time {:.3e} s, flops {:.0}, bytes moved {:.0}, peak memory {:.0} B",
        o[0], o[1], o[2], o[3]
    )
}

/// The report of one graph: cost tables, totals, the frontier and the chosen plan.
pub fn report(
    p: &Problem,
    front: &[Point],
    stats: &pareto::Stats,
    chosen: Option<&Point>,
    graph: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "graph @{graph}: {} nodes, {} applies",
        p.machine.len(),
        p.applies.len()
    );
    let (mut flops, mut bytes) = (0.0, 0.0);
    for a in &p.applies {
        flops += a.flops;
        bytes += a.bytes;
        let _ = writeln!(
            s,
            "  %{} = apply @{}: {:.0} flops, {:.0} footprint bytes",
            a.name, a.op, a.flops, a.bytes
        );
        let _ = writeln!(
            s,
            "    {:<8} {:>8} {:>10} {:>14} {:>14}  shardable",
            "dim", "extent", "kind", "flops/step", "bytes/step"
        );
        for (v, r) in a.table.iter().enumerate() {
            let b = r.bytes.map_or("-".to_string(), |b| format!("{b:.0}"));
            let kind = if r.reduction { "reduction" } else { "parallel" };
            let yes = if a.dims.contains(&v) { "yes" } else { "no" };
            let _ = writeln!(
                s,
                "    {:<8} {:>8} {:>10} {:>14.1} {:>14}  {yes}",
                r.dim, r.extent, kind, r.flops, b
            );
        }
    }
    let _ = writeln!(s, "  totals: {flops:.0} flops, {bytes:.0} footprint bytes");
    let _ = writeln!(
        s,
        "  unsharded: {}",
        format_objectives(&p.evaluate(&p.unsharded()))
    );
    let rates: Vec<String> = MUTATIONS
        .iter()
        .enumerate()
        .map(|(m, n)| format!("{n} {}/{}", stats.improved[m], stats.tried[m]))
        .collect();
    let fusable = p.fusable_pairs();
    let _ = writeln!(
        s,
        "  fusable pairs: {}",
        if fusable.is_empty() {
            "none".to_string()
        } else {
            fusable.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "  search: {} evaluations{}; frontier improvements per mutation: {}",
        stats.evals,
        if stats.timed_out {
            " (stopped by the time budget)"
        } else {
            ""
        },
        rates.join(", ")
    );
    let _ = writeln!(s, "  frontier ({} points):", front.len());
    let _ = writeln!(
        s,
        "    {:>12} {:>14} {:>14} {:>14}  plan",
        "time (s)", "flops", "bytes moved", "peak mem (B)"
    );
    for pt in front {
        let _ = writeln!(
            s,
            "    {:>12.4e} {:>14.0} {:>14.0} {:>14.0}  {}",
            pt.obj[0],
            pt.obj[1],
            pt.obj[2],
            pt.obj[3],
            p.describe(&pt.plan)
        );
    }
    match chosen {
        Some(c) => {
            let _ = writeln!(s, "  chosen: {}", p.describe(&c.plan));
            let _ = writeln!(s, "    {}", format_objectives(&c.obj));
        }
        None => {
            let _ = writeln!(
                s,
                "  chosen: none (no frontier point under the memory limit); graph left unsharded"
            );
        }
    }
    s
}

impl Pass for Cost {
    fn name(&self) -> &'static str {
        "cost"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic> {
        let cfg = &self.0;
        let mut out = String::new();
        let mut changed = false;
        let mut plots = Vec::new();
        for gi in 0..m.graphs.len() {
            let facts = &cx
                .facts(m)
                .map_err(|d| unverified("cost needs a verified graph", d))?[gi];
            let p =
                problem(m, gi, facts, cfg).map_err(|e| Diagnostic::error(codes::PASS_FAILED, e))?;
            // Inputs read through views priced exactly (`model/views.rs`), in the search too.
            let p = p.with_exact_views(&m.graphs[gi]);
            let (front, stats) = pareto::search(&p, &cfg.search);
            let (chosen, peaks, ch) = carry_out(m, gi, cx, &p, &front, cfg)?;
            changed |= ch;
            let name = m.graphs[gi].name.clone();
            out.push_str(&report(&p, &front, &stats, chosen.as_ref(), &name));
            out.push_str(&peak::describe(&peaks));
            plots.push((name, p.machine.len(), front, chosen));
        }
        cx.reports.push(("cost".into(), out));
        if let Some(path) = &cfg.frontier_svg {
            let graphs: Vec<plot::GraphFrontier> = plots
                .iter()
                .map(|(g, n, f, c)| plot::GraphFrontier {
                    graph: g,
                    nodes: *n,
                    front: f,
                    chosen: c.as_ref(),
                })
                .collect();
            let svg = plot::frontier_svg(&graphs).map_err(|e| {
                Diagnostic::error(
                    codes::PASS_FAILED,
                    format!("cost: plotting the frontier: {e}"),
                )
            })?;
            cx.files.push((path.clone(), svg));
        }
        Ok(changed)
    }
}
