//! Costing a plan: per apply the time-independent terms (its shards' nodes, durations and
//! input dependencies; bytes moved, memory per node, flops), per sink its collection, then a
//! list schedule over them ([`Evaluator`], which re-costs only what a plan change touches).

use super::*;
use crate::ir::footprint::volume;

fn inter(a: &[(i64, i64)], b: &[(i64, i64)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&(l1, h1), &(l2, h2))| (h1.min(h2) - l1.max(l2)).max(0) as f64)
        .product()
}

impl Problem {
    /// The four objectives of `plan` (which must be [`valid`](Problem::valid)), costed from
    /// scratch (an [`Evaluator`] with empty caches).
    pub fn evaluate(&self, plan: &[Gene]) -> Objectives {
        Evaluator::new(self).evaluate(plan)
    }

    /// The pieces of apply `j`'s output `o` under gene `g`: (piece number, box, node). A
    /// reduction-sharded apply has one piece, the combined result on the sink node.
    fn pieces<'a>(
        &'a self,
        j: usize,
        o: usize,
        g: &'a Gene,
    ) -> impl Iterator<Item = (usize, &'a Box1, usize)> + 'a {
        let lay = &self.applies[j].layouts[&(g.dim, g.parts)];
        let sink = self.sink_node();
        let n = if lay.reduction { 1 } else { lay.shards.len() };
        (0..n).map(move |p| {
            let node = if lay.reduction {
                sink
            } else {
                g.nodes[p] as usize
            };
            (p, &lay.shards[p].out_boxes[o], node)
        })
    }

    fn sink_node(&self) -> usize {
        (self.machine.sink_node as usize).min(self.machine.len() - 1)
    }

    /// Bytes moved to bring input `inp` at box `bx` to node `n`, the memory it takes there, and
    /// the dependencies of its arrival, pushed to `deps`.
    fn fetch(
        &self,
        plan: &[Gene],
        inp: &Input,
        bx: &[(i64, i64)],
        n: usize,
        deps: &mut Vec<Dep>,
    ) -> f64 {
        let mach = &self.machine;
        if volume(bx) == 0.0 {
            return 0.0;
        }
        if inp.exact && inp.roots.len() == 1 {
            let mut bytes = 0.0f64;
            match &inp.roots[0] {
                Root::Source { node, .. } => {
                    let src = *node as usize;
                    if src != n {
                        bytes = volume(bx) * inp.elem;
                        deps.push(Dep::source(mach.transfer(src, n, bytes)));
                    }
                }
                Root::Apply { apply, output } => {
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = inter(bx, pb) * inp.elem;
                        if b > 0.0 {
                            let t = if pn != n {
                                bytes += b;
                                mach.transfer(pn, n, b)
                            } else {
                                0.0
                            };
                            deps.push(Dep::piece(*apply, piece, t));
                        }
                    }
                }
                Root::Free => {}
            }
            return bytes;
        }
        // Through views: the remote fraction of everything the views read; the data arrives
        // after the latest piece is done.
        let (mut total, mut remote) = (0.0f64, 0.0f64);
        let mut from = n;
        let first = deps.len();
        for r in &inp.roots {
            match r {
                Root::Source { node, bytes: b } => {
                    total += b;
                    if *node as usize != n {
                        remote += b;
                        from = *node as usize;
                    }
                }
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = volume(pb) * elem;
                        total += b;
                        deps.push(Dep::piece(*apply, piece, 0.0));
                        if pn != n {
                            remote += b;
                            from = pn;
                        }
                    }
                }
                Root::Free => {}
            }
        }
        let bytes = if total > 0.0 {
            volume(bx) * inp.elem * remote / total
        } else {
            0.0
        };
        let t = mach.transfer(from, n, bytes);
        for d in &mut deps[first..] {
            d.delay = t;
        }
        deps.push(Dep::source(t));
        bytes
    }

    /// The plan-dependent but time-independent terms of apply `ai`: its shards' nodes,
    /// durations and input dependencies, bytes moved, memory per node and flops. They depend
    /// only on the apply's own gene and on the genes of the applies it reads.
    fn term(&self, plan: &[Gene], ai: usize, t: &mut Term) {
        let a = &self.applies[ai];
        let g = &plan[ai];
        let mach = &self.machine;
        let nn = mach.len();
        let sink = self.sink_node();
        let lay = &a.layouts[&(g.dim, g.parts)];
        t.shards.clear();
        t.deps.clear();
        t.partial.clear();
        t.mem.clear();
        t.mem.resize(nn, 0.0);
        t.moved = 0.0;
        t.flops = 0.0;
        for (p, sh) in lay.shards.iter().enumerate() {
            let n = g.nodes[p] as usize;
            let first = t.deps.len();
            for (inp, bx) in a.inputs.iter().zip(&sh.in_boxes) {
                let b = self.fetch(plan, inp, bx, n, &mut t.deps);
                t.moved += b;
                t.mem[n] += b;
            }
            t.shards
                .push((n, sh.flops / mach.nodes[n].flops, first..t.deps.len()));
            t.flops += sh.flops;
            // A fused output is never materialized.
            if !g.fused {
                t.mem[n] += sh.out_bytes;
            }
            if lay.reduction {
                let d = if n != sink {
                    t.moved += sh.out_bytes;
                    t.mem[sink] += sh.out_bytes;
                    mach.transfer(n, sink, sh.out_bytes)
                } else {
                    0.0
                };
                t.partial.push(d);
            }
        }
        t.combine = None;
        if lay.reduction {
            let first = t.deps.len();
            for (inp, bx) in a.inputs.iter().zip(&lay.epilogue) {
                let b = self.fetch(plan, inp, bx, sink, &mut t.deps);
                t.moved += b;
                t.mem[sink] += b;
            }
            t.combine = Some((
                lay.combine_flops / mach.nodes[sink].flops,
                first..t.deps.len(),
            ));
            t.flops += lay.combine_flops;
            t.mem[sink] += lay.shards[0].out_bytes;
        }
    }

    /// Bytes moved to collect sink `si` on the sink node, and the dependencies of its arrival.
    fn sink_term(&self, plan: &[Gene], si: usize, t: &mut SinkTerm) {
        let mach = &self.machine;
        let sink = self.sink_node();
        t.deps.clear();
        t.moved = 0.0;
        for r in &self.sinks[si].roots {
            match r {
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = if pn != sink { volume(pb) * elem } else { 0.0 };
                        t.moved += b;
                        t.deps
                            .push(Dep::piece(*apply, piece, mach.transfer(pn, sink, b)));
                    }
                }
                Root::Source { node, bytes } => {
                    if *node as usize != sink {
                        t.moved += bytes;
                        t.deps
                            .push(Dep::source(mach.transfer(*node as usize, sink, *bytes)));
                    }
                }
                Root::Free => {}
            }
        }
    }
}

/// What the start of a shard (or a combine, or the sink collection) waits for: piece `piece`
/// of apply `apply` (none for data that is ready at time 0), plus `delay` seconds of transfer.
#[derive(Clone, Copy, Debug)]
struct Dep {
    apply: u32,
    piece: u32,
    delay: f64,
}

impl Dep {
    const NONE: u32 = u32::MAX;
    fn piece(apply: usize, piece: usize, delay: f64) -> Dep {
        Dep {
            apply: apply as u32,
            piece: piece as u32,
            delay,
        }
    }
    fn source(delay: f64) -> Dep {
        Dep {
            apply: Dep::NONE,
            piece: 0,
            delay,
        }
    }
}

/// The cached, time-independent terms of one apply under a plan (see [`Problem::term`]).
#[derive(Clone, Debug, Default)]
struct Term {
    /// Per shard: node, compute seconds, its dependencies in `deps`.
    shards: Vec<(usize, f64, std::ops::Range<usize>)>,
    deps: Vec<Dep>,
    /// Reduction sharding: per shard, the transfer of its partial result to the sink node.
    partial: Vec<f64>,
    /// Reduction sharding: the combine's seconds and its epilogue dependencies in `deps`.
    combine: Option<(f64, std::ops::Range<usize>)>,
    moved: f64,
    mem: Vec<f64>,
    flops: f64,
}

#[derive(Clone, Debug, Default)]
struct SinkTerm {
    deps: Vec<Dep>,
    moved: f64,
}

/// Costs plans incrementally. It keeps, for the last plan it costed, every apply's
/// time-independent terms (shard dependencies with their transfer times, bytes moved, memory
/// per node, flops) and every sink's. Costing the next plan recomputes the terms only of the
/// applies whose gene changed and of the applies and sinks that read them (the affected
/// transfers), then reruns the list schedule (the critical path) over the cached terms and sums
/// the totals in apply order, so the result is exactly that of costing from scratch.
#[derive(Clone, Debug)]
pub struct Evaluator<'p> {
    p: &'p Problem,
    plan: Plan,
    terms: Vec<Term>,
    sinks: Vec<SinkTerm>,
    fins: Vec<Vec<f64>>,
    fresh: bool,
    dirty: Vec<bool>,
    /// Apply terms recomputed so far (for benchmarks).
    pub recomputed: u64,
}

impl<'p> Evaluator<'p> {
    pub fn new(p: &'p Problem) -> Evaluator<'p> {
        Evaluator {
            p,
            plan: Vec::new(),
            terms: vec![Term::default(); p.applies.len()],
            sinks: vec![SinkTerm::default(); p.sinks.len()],
            fins: vec![Vec::new(); p.applies.len()],
            fresh: true,
            dirty: vec![false; p.applies.len()],
            recomputed: 0,
        }
    }

    /// The objectives of `plan` (which must be [`valid`](Problem::valid)).
    pub fn evaluate(&mut self, plan: &[Gene]) -> Objectives {
        let p = self.p;
        let n = p.applies.len();
        if self.fresh || self.plan.len() != n {
            self.plan = plan.to_vec();
            for ai in 0..n {
                p.term(plan, ai, &mut self.terms[ai]);
            }
            for si in 0..p.sinks.len() {
                p.sink_term(plan, si, &mut self.sinks[si]);
            }
            self.recomputed += n as u64;
            self.fresh = false;
        } else {
            // Changed genes, then everything that reads a changed apply.
            let mut any = false;
            for ((d, old), new) in self.dirty.iter_mut().zip(&self.plan).zip(plan) {
                *d = old != new;
                any |= *d;
            }
            if any {
                self.plan.copy_from_slice(plan);
                let mut redo = self.dirty.clone();
                let mut sinks = vec![false; p.sinks.len()];
                for ai in 0..n {
                    if self.dirty[ai] {
                        for &c in &p.consumers[ai] {
                            redo[c] = true;
                        }
                        for &s in &p.sink_readers[ai] {
                            sinks[s] = true;
                        }
                    }
                }
                for (ai, term) in self.terms.iter_mut().enumerate() {
                    if redo[ai] {
                        p.term(plan, ai, term);
                        self.recomputed += 1;
                    }
                }
                for (si, redo) in sinks.into_iter().enumerate() {
                    if redo {
                        p.sink_term(plan, si, &mut self.sinks[si]);
                    }
                }
            }
        }
        self.schedule()
    }

    /// The list schedule over the cached terms, and the totals.
    fn schedule(&mut self) -> Objectives {
        let p = self.p;
        let nn = p.machine.len();
        let sink = p.sink_node();
        let mut ready = vec![0.0f64; nn];
        let mut mem = vec![0.0f64; nn];
        for &(n, b) in &p.sources {
            mem[n as usize] += b;
        }
        let (mut flops, mut moved) = (0.0f64, 0.0f64);
        let fins = &mut self.fins;
        let arrive = |fins: &[Vec<f64>], deps: &[Dep], mut start: f64| -> f64 {
            for d in deps {
                let fin = if d.apply == Dep::NONE {
                    0.0
                } else {
                    fins[d.apply as usize][d.piece as usize]
                };
                start = start.max(fin + d.delay);
            }
            start
        };
        let mut partial: Vec<f64> = Vec::new();
        for (ai, t) in self.terms.iter().enumerate() {
            partial.clear();
            for (n, dur, deps) in &t.shards {
                let start = arrive(fins, &t.deps[deps.clone()], ready[*n]);
                let fin = start + dur;
                ready[*n] = fin;
                partial.push(fin);
            }
            if let Some((dur, deps)) = &t.combine {
                let mut start = ready[sink];
                for (fin, d) in partial.iter().zip(&t.partial) {
                    start = start.max(fin + d);
                }
                let start = arrive(fins, &t.deps[deps.clone()], start);
                let fin = start + dur;
                ready[sink] = fin;
                partial.clear();
                partial.push(fin);
            }
            fins[ai].clear();
            fins[ai].extend_from_slice(&partial);
            flops += t.flops;
            moved += t.moved;
            for (m, x) in mem.iter_mut().zip(&t.mem) {
                *m += x;
            }
        }
        let mut end = ready.iter().cloned().fold(0.0f64, f64::max);
        for s in &self.sinks {
            moved += s.moved;
            end = arrive(fins, &s.deps, end);
        }
        let peak = mem.iter().cloned().fold(0.0f64, f64::max);
        [end, flops, moved, peak]
    }
}
