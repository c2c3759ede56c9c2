//! Stochastic multi-objective search over sharding plans, keeping a Pareto frontier.
//!
//! Each thread runs its own seeded stream (`seed`, thread number) over its share of the
//! evaluation budget: pick a parent (from the thread's frontier three times in four, else from
//! a ring of recent children), apply one to four mutations (shard an apply along a dimension,
//! change its part count, unshard it, move one shard to another node, fuse an apply into its
//! consumer, unfuse it), each with an applicability test, cost the child incrementally (an
//! [`Evaluator`] per thread re-costs only what the mutations changed), and insert it into the
//! frontier if no point there dominates or equals it. Mutation weights adapt: a mutation that
//! produced a frontier point gains weight, and every 256 evaluations weights decay towards 1.
//! The thread frontiers are merged in thread order, so with an evaluation budget the result
//! depends on the seed, the budget and the thread count, never on timing. A wall-clock budget
//! (`time`) also stops the threads; how far each got then depends on the machine's speed, so a
//! time-limited search is not deterministic. [`exhaustive`] enumerates the whole space for
//! testing.

use super::model::{Evaluator, Gene, Objectives, Plan, Problem, MAX_PARTS};
use std::time::{Duration, Instant};

/// The mutations, in the order of [`Stats::tried`].
pub const MUTATIONS: [&str; 6] = ["shard", "parts", "unshard", "move", "fuse", "unfuse"];
const NM: usize = MUTATIONS.len();

#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// Evaluation budget over all threads.
    pub evals: u64,
    pub seed: u64,
    pub threads: usize,
    /// Wall-clock budget: the search also stops when it is spent (not deterministic).
    pub time: Option<Duration>,
    /// Draw a progress bar (indicatif) on stderr; the driver sets it only when stderr is a
    /// terminal.
    pub progress: bool,
    /// Re-cost children incrementally (the default); `false` costs every plan from scratch
    /// (the same results, for benchmarks).
    pub incremental: bool,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            evals: 20000,
            seed: 1,
            threads: 2,
            time: None,
            progress: false,
            incremental: true,
        }
    }
}

/// A costed plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub plan: Plan,
    pub obj: Objectives,
}

/// Whether `a` is no worse than `b` everywhere and better somewhere.
pub fn dominates(a: &Objectives, b: &Objectives) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
}

/// Non-dominated points with distinct objective vectors (the first plan found for a vector is
/// kept).
#[derive(Clone, Debug, Default)]
pub struct Frontier {
    pub points: Vec<Point>,
}

impl Frontier {
    /// Inserts `p` unless it is dominated or its objectives are already present.
    pub fn insert(&mut self, p: Point) -> bool {
        if self
            .points
            .iter()
            .any(|q| q.obj == p.obj || dominates(&q.obj, &p.obj))
        {
            return false;
        }
        self.points.retain(|q| !dominates(&p.obj, &q.obj));
        self.points.push(p);
        true
    }
    /// Points sorted by objectives (time first).
    pub fn sorted(mut self) -> Vec<Point> {
        self.points.sort_by(|a, b| {
            a.obj
                .iter()
                .zip(&b.obj)
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        self.points
    }
}

/// What a search did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub evals: u64,
    /// Per mutation: times applied, and times it produced a frontier point.
    pub tried: [u64; NM],
    pub improved: [u64; NM],
    /// Whether the wall-clock budget stopped the search before its evaluation budget.
    pub timed_out: bool,
}

/// splitmix64: small, fast and good enough for a search.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 11) as u128 * n as u128) >> 53) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn random_nodes(rng: &mut Rng, parts: usize, nodes: usize, keep: &[u8]) -> [u8; MAX_PARTS] {
    let mut out = [0u8; MAX_PARTS];
    for (p, o) in out.iter_mut().enumerate().take(parts) {
        *o = if p < keep.len() {
            keep[p]
        } else {
            rng.below(nodes) as u8
        };
    }
    out
}

/// Applies mutation `m` to apply `ai` of `plan`; false when it does not apply there.
fn mutate(p: &Problem, plan: &mut Plan, ai: usize, m: usize, rng: &mut Rng) -> bool {
    let a = &p.applies[ai];
    if a.fixed {
        return false;
    }
    if !mutate_gene(p, plan, ai, m, rng) {
        return false;
    }
    // A whole apply moved to another node takes the producers fused into it along.
    if plan[ai].is_whole() {
        carry_fused(p, plan, ai);
    }
    // A mutation that separates a fused pair (sharding or moving either side) unfuses it.
    for q in std::iter::once(ai).chain(p.fused_from(ai).iter().copied()) {
        if plan[q].fused && !p.fusion_ok(plan, q) {
            plan[q].fused = false;
        }
    }
    true
}

/// Places the producers fused into the whole apply `ai` (and theirs, transitively) on its node.
fn carry_fused(p: &Problem, plan: &mut Plan, ai: usize) {
    let node = plan[ai].nodes[0];
    for &q in p.fused_from(ai) {
        if plan[q].fused && plan[q].is_whole() && plan[q].nodes[0] != node {
            plan[q].nodes[0] = node;
            carry_fused(p, plan, q);
        }
    }
}

fn mutate_gene(p: &Problem, plan: &mut Plan, ai: usize, m: usize, rng: &mut Rng) -> bool {
    let a = &p.applies[ai];
    let nn = p.machine.len();
    let g = &mut plan[ai];
    match m {
        0 => {
            // Shard along a (different) dimension.
            let dims: Vec<usize> = a
                .dims
                .iter()
                .copied()
                .filter(|&v| v as u8 + 1 != g.dim && a.max_parts(v, p.max_parts) >= 2)
                .collect();
            if dims.is_empty() {
                return false;
            }
            let v = dims[rng.below(dims.len())];
            let counts = a.part_counts(v, p.max_parts);
            let parts = counts[rng.below(counts.len())];
            *g = Gene {
                dim: v as u8 + 1,
                parts: parts as u8,
                nodes: random_nodes(rng, parts, nn, &[]),
                fused: false,
            };
            true
        }
        1 => {
            if g.is_whole() {
                return false;
            }
            let mut counts = a.part_counts(g.dim as usize - 1, p.max_parts);
            counts.retain(|&k| k != g.parts as usize);
            if counts.is_empty() {
                return false;
            }
            let parts = counts[rng.below(counts.len())];
            let keep = g.nodes[..(g.parts as usize).min(parts)].to_vec();
            g.nodes = random_nodes(rng, parts, nn, &keep);
            g.parts = parts as u8;
            true
        }
        2 => {
            if g.is_whole() {
                return false;
            }
            *g = Gene::whole(rng.below(nn) as u8);
            true
        }
        4 => {
            // Fuse into a whole consumer: whole on the consumer's node, fused.
            let Some(c) = a.fuse_into.filter(|&c| plan[c].is_whole()) else {
                return false;
            };
            if plan[ai].fused {
                return false;
            }
            plan[ai] = Gene::fused(plan[c].nodes[0]);
            true
        }
        5 => {
            if !g.fused {
                return false;
            }
            g.fused = false;
            true
        }
        _ => {
            if nn < 2 {
                return false;
            }
            let s = rng.below(g.parts as usize);
            let mut n = rng.below(nn - 1) as u8;
            if n >= g.nodes[s] {
                n += 1;
            }
            g.nodes[s] = n;
            true
        }
    }
}

/// The data-parallel plans ([`Problem::aligned`]) over 2, 4, 8, … nodes and over all of them,
/// up to the most parts a plan may use: starting points the search refines.
fn aligned_seeds(p: &Problem) -> Vec<Plan> {
    let most = p.machine.len().min(p.max_parts);
    let counts = (1..).map(|e| 1usize << e).take_while(|&k| k < most);
    (counts.chain((most >= 2).then_some(most)))
        .map(|k| p.aligned(k))
        .filter(|plan| p.valid(plan))
        .collect()
}

/// One thread's search over `evals` evaluations, until `deadline` if there is one.
fn run_stream(
    p: &Problem,
    evals: u64,
    seed: u64,
    cfg: &SearchConfig,
    deadline: Option<Instant>,
    bar: Option<&indicatif::ProgressBar>,
) -> (Frontier, Stats) {
    let mut rng = Rng(seed);
    let mut front = Frontier::default();
    let mut stats = Stats::default();
    let mut weights = [1.0f64; NM];
    let mut ev = Evaluator::new(p);
    let mut cost = |plan: &Plan| {
        if cfg.incremental {
            ev.evaluate(plan)
        } else {
            p.evaluate(plan)
        }
    };
    let mut ring: Vec<Plan> = Vec::new();
    let start = p.unsharded();
    if evals == 0 || p.applies.is_empty() {
        if evals > 0 {
            stats.evals = 1;
            front.insert(Point {
                obj: cost(&start),
                plan: start,
            });
        }
        return (front, stats);
    }
    front.insert(Point {
        obj: cost(&start),
        plan: start.clone(),
    });
    ring.push(start);
    stats.evals = 1;
    for plan in aligned_seeds(p) {
        if stats.evals >= evals {
            break;
        }
        let obj = cost(&plan);
        stats.evals += 1;
        front.insert(Point {
            obj,
            plan: plan.clone(),
        });
        ring.push(plan);
    }
    while stats.evals < evals {
        if stats.evals % 64 == 0 {
            if let Some(b) = bar {
                b.inc(64);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                stats.timed_out = true;
                break;
            }
        }
        let mut child = if !front.points.is_empty() && rng.below(4) != 0 {
            front.points[rng.below(front.points.len())].plan.clone()
        } else {
            ring[rng.below(ring.len())].clone()
        };
        let mut used = [false; NM];
        let steps = 1 + (0..3).take_while(|_| rng.below(2) == 0).count();
        for _ in 0..steps {
            for _attempt in 0..8 {
                let total: f64 = weights.iter().sum();
                let mut r = rng.unit() * total;
                let mut m = NM - 1;
                for (i, w) in weights.iter().enumerate() {
                    if r < *w {
                        m = i;
                        break;
                    }
                    r -= w;
                }
                let ai = rng.below(p.applies.len());
                if mutate(p, &mut child, ai, m, &mut rng) {
                    used[m] = true;
                    stats.tried[m] += 1;
                    break;
                }
            }
        }
        let obj = cost(&child);
        stats.evals += 1;
        let improved = front.insert(Point {
            plan: child.clone(),
            obj,
        });
        for m in 0..NM {
            if used[m] && improved {
                stats.improved[m] += 1;
                weights[m] += 0.5;
            }
        }
        if stats.evals % 256 == 0 {
            for w in &mut weights {
                *w = (0.9 * *w + 0.1).max(0.05);
            }
        }
        if ring.len() < 32 {
            ring.push(child);
        } else {
            let i = rng.below(32);
            ring[i] = child;
        }
    }
    (front, stats)
}

/// The search: `cfg.threads` streams on scoped threads, frontiers merged in thread order.
pub fn search(p: &Problem, cfg: &SearchConfig) -> (Vec<Point>, Stats) {
    let threads = cfg.threads.max(1) as u64;
    let share = |t: u64| cfg.evals / threads + u64::from(t < cfg.evals % threads);
    let deadline = cfg.time.map(|t| Instant::now() + t);
    let bar = cfg.progress.then(|| {
        // Only a time budget: a spinner with the count; else a bar up to the evaluation budget.
        let (b, template) = if cfg.evals == u64::MAX {
            (
                indicatif::ProgressBar::new_spinner(),
                "cost search {spinner} {human_pos} evaluations, {elapsed}",
            )
        } else {
            (
                indicatif::ProgressBar::new(cfg.evals),
                "cost search {bar:30} {human_pos}/{human_len} evaluations, {elapsed}",
            )
        };
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        b.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let results: Vec<(Frontier, Stats)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seed = Rng(cfg.seed ^ t.wrapping_mul(0xA24B_AED4_963E_E407)).next();
                let bar = bar.as_ref();
                s.spawn(move || run_stream(p, share(t), seed, cfg, deadline, bar))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut front = Frontier::default();
    let mut stats = Stats::default();
    for (f, s) in results {
        for pt in f.points {
            front.insert(pt);
        }
        stats.evals += s.evals;
        stats.timed_out |= s.timed_out;
        for m in 0..NM {
            stats.tried[m] += s.tried[m];
            stats.improved[m] += s.improved[m];
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    (front.sorted(), stats)
}

/// Every gene the search can reach for each apply.
pub fn genes(p: &Problem) -> Vec<Vec<Gene>> {
    let nn = p.machine.len();
    p.applies
        .iter()
        .map(|a| {
            if a.fixed {
                return vec![Gene::whole(a.pinned_node)];
            }
            let mut out: Vec<Gene> = (0..nn).map(|n| Gene::whole(n as u8)).collect();
            if a.fuse_into.is_some() {
                out.extend((0..nn).map(|n| Gene::fused(n as u8)));
            }
            for &v in &a.dims {
                for parts in a.part_counts(v, p.max_parts) {
                    let total = nn.pow(parts as u32);
                    for code in 0..total {
                        let (mut c, mut nodes) = (code, vec![0u8; parts]);
                        for x in nodes.iter_mut() {
                            *x = (c % nn) as u8;
                            c /= nn;
                        }
                        out.push(Gene::split(v, &nodes));
                    }
                }
            }
            out
        })
        .collect()
}

/// The exact frontier by enumerating every valid plan (for tests; the space must be small).
pub fn exhaustive(p: &Problem) -> Vec<Point> {
    let all = genes(p);
    let mut front = Frontier::default();
    let mut idx = vec![0usize; all.len()];
    loop {
        let plan: Plan = idx.iter().zip(&all).map(|(&i, g)| g[i]).collect();
        if p.valid(&plan) {
            front.insert(Point {
                obj: p.evaluate(&plan),
                plan,
            });
        }
        let mut k = 0;
        loop {
            if k == idx.len() {
                return front.sorted();
            }
            idx[k] += 1;
            if idx[k] < all[k].len() {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}
