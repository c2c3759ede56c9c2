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
    pub(super) fn pieces<'a>(
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

    /// The pieces of source `si`: (box, node) of each; none for a shared source.
    pub(super) fn source_pieces(&self, si: usize) -> &[(Box1, usize)] {
        &self.sources[si].pieces
    }

    /// Bringing input `inp` at box `bx` to node `n`: the bytes moved, the bytes it takes there
    /// (moved, plus the windows read from shared storage), and the dependencies of its arrival,
    /// pushed to `deps`.
    fn fetch(
        &self,
        plan: &[Gene],
        inp: &Input,
        bx: &[(i64, i64)],
        n: usize,
        deps: &mut Vec<Dep>,
        sent: Option<&mut Vec<Sent>>,
    ) -> (f64, f64) {
        if volume(bx) == 0.0 {
            return (0.0, 0.0);
        }
        if inp.exact && inp.roots.len() == 1 {
            return self.fetch_exact(plan, inp, bx, n, deps, sent);
        }
        if let Some(priced) = self.fetch_through_views(plan, inp, bx, n, deps) {
            return priced;
        }
        // Through views: the remote fraction of everything the views read; the data arrives
        // after the latest piece is done.
        let (mut total, mut remote, mut shared) = (0.0f64, 0.0f64, 0.0f64);
        let mut from = n;
        let first = deps.len();
        for r in &inp.roots {
            match r {
                Root::Source { index } => {
                    let s = &self.sources[*index];
                    if s.place == Placement::Shared {
                        total += s.bytes;
                        shared += s.bytes;
                    }
                    for (pb, pn) in self.source_pieces(*index).iter().map(|(b, n)| (b, *n)) {
                        let b = volume(pb) * s.elem;
                        total += b;
                        if pn != n {
                            remote += b;
                            from = pn;
                        }
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
        let part = |x: f64| {
            if total > 0.0 {
                volume(bx) * inp.elem * x / total
            } else {
                0.0
            }
        };
        let bytes = part(remote);
        let t = self.machine.transfer(from, n, bytes);
        for d in &mut deps[first..] {
            d.delay = t;
        }
        deps.push(Dep::source(t));
        (bytes, bytes + part(shared))
    }

    /// [`Problem::fetch`] of an input read directly from its one root: its footprint
    /// intersected exactly with the pieces of the producer (or source). Each remote piece is
    /// recorded in `sent` when given (for [`Problem::broadcasts`]).
    fn fetch_exact(
        &self,
        plan: &[Gene],
        inp: &Input,
        bx: &[(i64, i64)],
        n: usize,
        deps: &mut Vec<Dep>,
        mut sent: Option<&mut Vec<Sent>>,
    ) -> (f64, f64) {
        let mach = &self.machine;
        let mut bytes = 0.0f64;
        let mut remote = |data: (u32, u32), pb: &Box1, from: usize, b: f64, dep: usize| {
            if let Some(sent) = sent.as_deref_mut() {
                let bx = bx
                    .iter()
                    .zip(pb)
                    .map(|(&(l1, h1), &(l2, h2))| (l1.max(l2), h1.min(h2)));
                sent.push(Sent {
                    data,
                    bx: bx.collect(),
                    dep,
                    from,
                    bytes: b,
                    to: n,
                });
            }
        };
        match &inp.roots[0] {
            Root::Source { index } => {
                if self.sources[*index].place == Placement::Shared {
                    return (0.0, volume(bx) * inp.elem);
                }
                for (k, (pb, pn)) in self.source_pieces(*index).iter().enumerate() {
                    let b = inter(bx, pb) * inp.elem;
                    if b > 0.0 && *pn != n {
                        bytes += b;
                        remote((u32::MAX - *index as u32, k as u32), pb, *pn, b, deps.len());
                        deps.push(Dep::source(mach.transfer(*pn, n, b)));
                    }
                }
            }
            Root::Apply { apply, output } => {
                for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                    let b = inter(bx, pb) * inp.elem;
                    if b > 0.0 {
                        let t = if pn != n {
                            bytes += b;
                            let data = (*apply as u32, (piece * 64 + *output) as u32);
                            remote(data, pb, pn, b, deps.len());
                            self.copy(pn, b) + mach.transfer(pn, n, b)
                        } else {
                            0.0
                        };
                        deps.push(Dep::piece(*apply, piece, t));
                    }
                }
            }
            Root::Free => {}
        }
        (bytes, bytes)
    }

    /// Prices as one broadcast each group of `sent` transfers of the same data (root, piece
    /// and box) from one node to at least 3 distinct nodes, as the runtime groups them
    /// (`codegen::distribute`): every receiver's arrival is the binomial tree's time
    /// ([`Machine::broadcast`]). A second transfer of the same data to a node already in the
    /// group stays point to point. Bytes moved are unchanged. Only the transfers of one apply
    /// are grouped (the runtime also groups those of different applies).
    fn broadcasts(&self, deps: &mut [Dep], sent: &[Sent]) {
        // The transfers by data, then in order: each run of one key is a candidate group (a
        // sort, not a scan per transfer: 64 shards reading 64 pieces each make 4,096).
        let key = |i: usize| (sent[i].data, sent[i].from, &sent[i].bx);
        let mut order: Vec<usize> = (0..sent.len()).collect();
        order.sort_by(|&i, &j| key(i).cmp(&key(j)).then(i.cmp(&j)));
        let mut group = Vec::new();
        let mut to = Vec::new();
        for run in order.chunk_by(|&i, &j| key(i) == key(j)) {
            group.clear();
            to.clear();
            for &j in run {
                if !to.contains(&sent[j].to) {
                    group.push(j);
                    to.push(sent[j].to);
                }
            }
            if group.len() >= BROADCAST_RECEIVERS {
                let s = &sent[run[0]];
                let t = self.machine.broadcast(s.from, &to, s.bytes);
                for &j in &group {
                    deps[sent[j].dep].delay = t;
                }
            }
        }
    }

    /// Whether `inp` of apply `ai` is the output of an apply fused into it in `plan`.
    fn fused_input(&self, plan: &[Gene], inp: &Input, ai: usize) -> bool {
        match inp.roots.as_slice() {
            [Root::Apply { apply, .. }] => {
                inp.exact && plan[*apply].fused && self.applies[*apply].fuse_into == Some(ai)
            }
            _ => false,
        }
    }

    /// Seconds node `n` spends copying `bytes` from one buffer to another (reading and
    /// writing each byte at its memory bandwidth): a receive task unpacking a message into
    /// the buffer its consumer reads, on the receiver; a send task packing a computed value's
    /// runs, on the sender. (A source's contiguous window is sent in place, unpacked.)
    pub(super) fn copy(&self, n: usize, bytes: f64) -> f64 {
        2.0 * bytes / self.machine.nodes[n].mem_bandwidth
    }

    /// Seconds a task of `a` on node `n` takes: the larger of its compute time (`flops` at
    /// the node's rate for the apply's class and dtype) and its memory time (`traffic` bytes
    /// over the node's memory bandwidth): the roofline; plus the node's overhead per task.
    fn duration(&self, a: &ApplyInfo, n: usize, flops: f64, traffic: f64) -> f64 {
        let node = &self.machine.nodes[n];
        (flops / node.rate(a.class, a.f64)).max(traffic / node.mem_bandwidth) + node.task_overhead
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
        t.sent.clear();
        // Only three or more shards can make a broadcast.
        let record = lay.shards.len() >= BROADCAST_RECEIVERS;
        for (p, sh) in lay.shards.iter().enumerate() {
            let n = g.nodes[p] as usize;
            let first = t.deps.len();
            let mut traffic = sh.traffic;
            let mut received = 0.0;
            for (inp, bx) in a.inputs.iter().zip(&sh.in_boxes) {
                let sent = record.then_some(&mut t.sent);
                let (moved, held) = self.fetch(plan, inp, bx, n, &mut t.deps, sent);
                t.moved += moved;
                received += moved;
                t.mem[n] += held;
                // The part of the view copies this shard reads; an input fused into this
                // apply is never written nor read back.
                traffic += inp.copy * (volume(bx) / inp.elements).min(1.0);
                if self.fused_input(plan, inp, ai) {
                    traffic -= volume(bx) * inp.elem;
                }
            }
            if g.fused {
                traffic -= sh.out_bytes;
            }
            let dur = self.duration(a, n, sh.flops, traffic.max(0.0)) + self.copy(n, received);
            t.shards.push((n, dur, first..t.deps.len()));
            t.flops += sh.flops;
            // A fused output is never materialized.
            if !g.fused {
                t.mem[n] += sh.out_bytes;
            }
            if lay.reduction {
                if n != sink {
                    t.mem[sink] += sh.out_bytes;
                }
                t.partial.push(0.0);
            }
        }
        self.replicas(plan, ai, t);
        if lay.reduction {
            let (moved, delay) = self.reduce(&g.nodes[..lay.shards.len()], lay.shards[0].out_bytes);
            t.moved += moved;
            t.partial.iter_mut().for_each(|d| *d = delay);
        }
        if record {
            self.broadcasts(&mut t.deps, &t.sent);
        }
        t.combine = None;
        if lay.reduction {
            let first = t.deps.len();
            for (inp, bx) in a.inputs.iter().zip(&lay.epilogue) {
                let (moved, held) = self.fetch(plan, inp, bx, sink, &mut t.deps, None);
                t.moved += moved;
                t.mem[sink] += held;
            }
            let dur = self.duration(a, sink, lay.combine_flops, lay.combine_traffic);
            t.combine = Some((dur, first..t.deps.len()));
            t.flops += lay.combine_flops;
            t.mem[sink] += lay.shards[0].out_bytes;
        }
    }

    /// The replicas of apply `ai`'s shards on the other nodes that read the states it updates
    /// (`state.rs`): each fetches its inputs there, holds them and its output, and computes
    /// again (not scheduled). A reduction-sharded update (combined on the sink node) has none.
    fn replicas(&self, plan: &[Gene], ai: usize, t: &mut Term) {
        let (a, g) = (&self.applies[ai], &plan[ai]);
        let lay = &a.layouts[&(g.dim, g.parts)];
        let states = &self.states.updates[ai];
        if states.is_empty() || lay.reduction {
            return;
        }
        let readers = self.state_nodes(plan, states);
        let mut deps = Vec::new();
        for (p, sh) in lay.shards.iter().enumerate() {
            let n = g.nodes[p] as usize;
            for &m in readers.iter().filter(|&&m| m != n) {
                for (inp, bx) in a.inputs.iter().zip(&sh.in_boxes) {
                    let (moved, held) = self.fetch(plan, inp, bx, m, &mut deps, None);
                    t.moved += moved;
                    t.mem[m] += held;
                }
                t.mem[m] += sh.out_bytes;
                t.flops += sh.flops;
            }
        }
    }

    /// The nodes that read the states `states` under `plan`: their reading applies' shards',
    /// and the sink node when a sink reads one.
    fn state_nodes(&self, plan: &[Gene], states: &[usize]) -> Vec<usize> {
        let mut out = Vec::new();
        for &s in states {
            let (applies, sunk) = &self.states.readers[s];
            for &r in applies {
                let g = &plan[r];
                let shards = self.applies[r].layouts[&(g.dim, g.parts)].shards.len();
                out.extend(g.nodes[..shards].iter().map(|&n| n as usize));
            }
            if *sunk {
                out.push(self.sink_node());
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A reduction's partial results (`bytes` each, on `nodes`) combined on the sink node as
    /// the runtime combines them: one `MPI_Ireduce` over the distinct nodes, which moves each
    /// node's combined partials once, `(p − 1)·bytes`; and the time it takes
    /// ([`crate::passes::cost::machine::Machine::reduce`]).
    fn reduce(&self, nodes: &[u8], bytes: f64) -> (f64, f64) {
        let sink = self.sink_node();
        let mut others: Vec<usize> = (nodes.iter().map(|&n| n as usize))
            .filter(|&n| n != sink)
            .collect();
        others.sort_unstable();
        others.dedup();
        let moved = others.len() as f64 * bytes;
        (moved, self.machine.reduce(sink, &others, bytes))
    }

    /// Bytes moved to collect sink `si` on the sink node, and the dependencies of its arrival
    /// (with distributed sinks, each node writes its pieces: nothing moves). A sink read
    /// through views (a transpose, a strided slice) moves only the part of each remote piece
    /// it reads, taken as the fraction of its roots' elements the sink holds, as for the
    /// inputs of applies read through views (the runtime sends exactly the elements the sink's
    /// view reaches: the same when the view samples every piece alike).
    fn sink_term(&self, plan: &[Gene], si: usize, t: &mut SinkTerm) {
        let mach = &self.machine;
        let sink = self.sink_node();
        let gather = !mach.distributed_sinks;
        let inp = &self.sinks[si];
        let total = if inp.exact {
            0.0
        } else {
            self.root_bytes(plan, &inp.roots)
        };
        let part = if total > 0.0 {
            (inp.elements * inp.elem / total).min(1.0)
        } else {
            1.0
        };
        t.deps.clear();
        t.moved = 0.0;
        for r in &inp.roots {
            match r {
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    for (piece, pb, pn) in self.pieces(*apply, *output, &plan[*apply]) {
                        let b = if gather && pn != sink {
                            volume(pb) * elem * part
                        } else {
                            0.0
                        };
                        t.moved += b;
                        // Packed on its node, unpacked on the sink node.
                        let copies = if b > 0.0 {
                            self.copy(pn, b) + self.copy(sink, b)
                        } else {
                            0.0
                        };
                        let delay = copies + mach.transfer(pn, sink, b);
                        t.deps.push(Dep::piece(*apply, piece, delay));
                    }
                }
                Root::Source { index } => {
                    let elem = self.sources[*index].elem;
                    for (pb, pn) in self.source_pieces(*index).iter().map(|(b, n)| (b, *n)) {
                        if gather && pn != sink {
                            let b = volume(pb) * elem * part;
                            t.moved += b;
                            t.deps.push(Dep::source(mach.transfer(pn, sink, b)));
                        }
                    }
                }
                Root::Free => {}
            }
        }
    }

    /// The bytes of the data of `roots` (every piece of each apply output, each source).
    fn root_bytes(&self, plan: &[Gene], roots: &[Root]) -> f64 {
        let mut total = 0.0;
        for r in roots {
            match r {
                Root::Apply { apply, output } => {
                    let elem = self.applies[*apply].out_elems[*output].1;
                    total += (self.pieces(*apply, *output, &plan[*apply]))
                        .map(|(_, pb, _)| volume(pb) * elem)
                        .sum::<f64>();
                }
                Root::Source { index } => total += self.sources[*index].bytes,
                Root::Free => {}
            }
        }
        total
    }
}

/// What the start of a shard (or a combine, or the sink collection) waits for: piece `piece`
/// of apply `apply` (none for data that is ready at time 0), plus `delay` seconds of transfer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dep {
    apply: u32,
    piece: u32,
    delay: f64,
}

impl Dep {
    const NONE: u32 = u32::MAX;
    pub(super) fn piece(apply: usize, piece: usize, delay: f64) -> Dep {
        Dep {
            apply: apply as u32,
            piece: piece as u32,
            delay,
        }
    }
    pub(super) fn source(delay: f64) -> Dep {
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
    /// The remote transfers of its shards (recorded with three or more shards).
    sent: Vec<Sent>,
}

/// Receivers from which the runtime broadcasts instead of sending point to point
/// (`codegen::distribute::BROADCAST_RECEIVERS`).
const BROADCAST_RECEIVERS: usize = 3;

/// One remote transfer of a term: its data (root and piece), the box moved, its dependency in
/// the term's `deps`, the nodes and the bytes.
#[derive(Clone, Debug)]
struct Sent {
    data: (u32, u32),
    bx: Box1,
    dep: usize,
    from: usize,
    to: usize,
    bytes: f64,
}

#[derive(Clone, Debug, Default)]
struct SinkTerm {
    deps: Vec<Dep>,
    /// Bytes gathered on the sink node (which then holds them).
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
                        for &c in p.consumers[ai].iter().chain(&p.states.dependents[ai]) {
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
        for s in &p.sources {
            for (pb, n) in &s.pieces {
                mem[*n] += volume(pb) * s.elem;
            }
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
            mem[sink] += s.moved;
            end = arrive(fins, &s.deps, end);
        }
        let peak = mem.iter().cloned().fold(0.0f64, f64::max);
        [end, flops, moved, peak]
    }
}
