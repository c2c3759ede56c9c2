//! One rank's *local plan*: the tasks of the nodes it owns (node `n` runs on rank `n mod R`)
//! plus a send task after every producer whose output another rank reads and a receive task
//! before every consumer of remote data (and, for a source window sent in place, a release
//! task after every other, which keeps the source's buffer until MPI has sent it), the windows of the sinks it writes, and the source
//! windows the rank reads itself. [`local_plan`] builds it in phases: which transfers cross
//! ranks and how the broadcasts group them ([`routes`]), where each transfer's ends attach on
//! this rank ([`ends`]), the task list ([`Builder::tasks`]), the sinks it writes
//! ([`super::sinks::local_sinks`]) and the sources ([`sources`]); then every buffer becomes the
//! pieces this rank touches ([`super::pieces`]).
//!
//! Deadlock freedom: a receive task depends on every local task that precedes its consumer in
//! the global plan order, so a worker blocked in a receive never holds up a task the sender
//! is waiting for (the earliest unfinished task of the whole job can always run).

use super::dist::{normalize, Dist, Leaf, Place, Reduction, Runs, Window};
use super::group::Kind;
use super::pieces::{self, Read};
use super::sinks::{self, Out};
use crate::plan::{Arg, Buffer, Init, Plan, Sink, Source, Task, Transfer};

/// What a task of the local plan does.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Role {
    Compute,
    Send(usize),
    Recv(usize),
    /// The collective of reduction group `g` (`coll.rs`).
    Reduce(usize),
    /// The end of in-place send `k` (`comm.rs`): MPI sends a source's run straight from its
    /// buffer, which this task, after every other, keeps alive until the send is done.
    Release(usize),
}

/// Which end of a transfer a task is.
#[derive(Clone, Copy, PartialEq)]
enum End {
    Send,
    Recv,
    Release,
}

/// This rank's part of the plan.
pub(super) struct Local {
    pub plan: Plan,
    pub roles: Vec<Role>,
    /// What this rank reads from files, per source of its plan (a piece of a global source).
    pub reads: Vec<Read>,
    /// Point-to-point transfers this rank receives.
    pub incoming: Vec<usize>,
    /// Per broadcast of the plan, the ranks it involves, its root first (only the root when
    /// all its receivers share the root's rank).
    pub groups: Vec<Vec<u32>>,
    /// The broadcast of each transfer, if any.
    pub group_of: Vec<Option<usize>>,
    /// Per broadcast, its transfers that move data between ranks.
    pub casts: Vec<Vec<usize>>,
    /// What each sink of `plan` is (a gathered sink, or a run of a directly written one).
    pub outs: Vec<Out>,
    /// Per sink of the whole plan, whether the ranks write it directly.
    pub direct: Vec<bool>,
    /// The most bytes of message buffers the rank holds: every receive is posted before the
    /// run and every packed send is kept until the run ends, so all of them (and two buffers
    /// of the result's size per reduction group the rank joins).
    pub messages: u64,
    /// Per reduction group of the plan, its ranks (root first: [`group_ranks`]).
    pub reduce_ranks: Vec<Vec<u32>>,
}

/// The transfers that move data between ranks and the broadcasts that group them.
struct Routes {
    /// Per transfer: whether it crosses ranks (and runs: a source's transfer only with
    /// `--inputs-on-root`, otherwise every rank reads its own window).
    active: Vec<bool>,
    group_of: Vec<Option<usize>>,
    /// The transfer after which a broadcast's root sends (the first of its equal transfers).
    leader: Vec<Option<usize>>,
    groups: Vec<Vec<u32>>,
    casts: Vec<Vec<usize>>,
}

/// The transfers and broadcasts of `d`; `direct`: the buffers of sinks written directly by the
/// ranks (their sink transfers do not run).
fn routes(d: &Dist, at: Place, inputs_on_root: bool, direct: &[u32]) -> Routes {
    let runs = |t: &Transfer| {
        (t.after.is_some() || inputs_on_root) && (t.before.is_some() || !direct.contains(&t.buffer))
    };
    let active: Vec<bool> = (d.transfers.iter())
        .map(|t| at.rank_of(t.from) != at.rank_of(t.to) && runs(t))
        .collect();
    let mut r = Routes {
        group_of: vec![None; d.transfers.len()],
        leader: vec![None; d.transfers.len()],
        groups: Vec::new(),
        casts: Vec::new(),
        active,
    };
    for (g, members) in d.broadcasts.iter().enumerate() {
        let members: Vec<usize> = members.iter().map(|&k| k as usize).collect();
        r.casts
            .push(members.iter().copied().filter(|&k| r.active[k]).collect());
        r.groups.push(broadcast_ranks(d, at, &r.active, &members));
        for &k in &members {
            r.group_of[k] = Some(g);
        }
        if let Some(&k) = members.iter().find(|&&k| r.active[k]) {
            r.leader[k] = Some(g);
        }
    }
    r
}

/// The ranks of one broadcast (transfers `members`), its root first.
fn broadcast_ranks(d: &Dist, at: Place, active: &[bool], members: &[usize]) -> Vec<u32> {
    let root = at.rank_of(d.transfers[members[0]].from);
    let mut ranks: Vec<u32> = members
        .iter()
        .filter(|&&k| active[k])
        .map(|&k| at.rank_of(d.transfers[k].to))
        .filter(|&r| r != root)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    ranks.insert(0, root);
    ranks
}

/// Where the ends of the transfers this rank takes part in attach.
struct Ends {
    /// Per global task, the transfers received just before it.
    recv_before: Vec<Vec<usize>>,
    /// Per global task, the transfers sent just after it.
    send_after: Vec<Vec<usize>>,
    /// Transfers of sources this rank sends (before anything runs).
    source_sends: Vec<usize>,
    /// Transfers into sinks this rank receives (after everything ran).
    sink_recvs: Vec<usize>,
    /// Point-to-point transfers this rank receives.
    incoming: Vec<usize>,
}

fn ends(d: &Dist, at: Place, r: &Routes, tasks: usize) -> Ends {
    let mut e = Ends {
        recv_before: vec![Vec::new(); tasks],
        send_after: vec![Vec::new(); tasks],
        source_sends: Vec::new(),
        sink_recvs: Vec::new(),
        incoming: Vec::new(),
    };
    for (k, t) in d.transfers.iter().enumerate().filter(|(k, _)| r.active[*k]) {
        if at.rank_of(t.to) == at.rank {
            if r.group_of[k].is_none() {
                e.incoming.push(k);
            }
            match t.before {
                Some(b) => e.recv_before[b as usize].push(k),
                None => e.sink_recvs.push(k),
            }
        }
        // A broadcast is sent once, by its leading transfer.
        let sends = r.group_of[k].is_none() || r.leader[k].is_some();
        if at.rank_of(t.from) == at.rank && sends {
            match t.after {
                Some(a) => e.send_after[a as usize].push(k),
                None => e.source_sends.push(k),
            }
        }
    }
    e
}

/// The local task list under construction.
struct Builder<'p> {
    plan: &'p Plan,
    at: Place,
    /// The index of the send kernel (the receive and reduction kernels follow it).
    send_kernel: u32,
    tasks: Vec<Task>,
    roles: Vec<Role>,
    /// The local index of each global task on this rank.
    local: Vec<u32>,
}

impl Builder<'_> {
    /// Whether global task `task` has a local task here: a reduction group's combines are
    /// replaced by its collective, on each rank that holds a partial result.
    fn on_me(&self, task: usize) -> bool {
        let d = &self.plan.dist;
        match d.reduction_of(task) {
            Some(g) => {
                let g = &d.reductions[g];
                g.last() as usize == task && !local_leaves(g, &d.nodes, self.at).is_empty()
            }
            None => d.runs_on(task, self.at),
        }
    }

    /// The collective of reduction group `g` after every task so far (as a receive: no
    /// deadlock), reading this rank's partial results and writing the result where read.
    fn reduction(&mut self, g: usize) -> u32 {
        let d = &self.plan.dist;
        let red = &d.reductions[g];
        let elem = red.dtype.size_bytes() as i64;
        let arg = |buffer: u32, runs: &Runs| {
            let lo = runs.first().map_or(0, |r| r.0);
            let hi = runs.last().map_or(0, |r| r.0 + r.1);
            Arg {
                buffer,
                offset: 0,
                lo: lo * elem,
                hi: hi * elem,
            }
        };
        let mut args: Vec<Arg> = (local_leaves(red, &d.nodes, self.at).iter())
            .map(|l| arg(l.buffer, &l.runs))
            .collect();
        if red
            .targets
            .iter()
            .any(|&n| self.at.rank_of(n) == self.at.rank)
        {
            // A reduce-scatter writes only this rank's part.
            let part = match red.kind() {
                Kind::ReduceScatter => red.part_of(self.at.rank, |n| self.at.rank_of(n)),
                _ => red.runs.clone(),
            };
            args.push(arg(red.buffer, &part));
        }
        let task = Task {
            name: format!(
                "{} {} ({} {})",
                red.kind().name(),
                red.value,
                red.op.name(),
                red.dtype.name()
            ),
            kernel: self.send_kernel + 2,
            args,
            range: vec![(g as i64, g as i64 + 1)],
            split: None,
            align: 1,
            work: 0.0,
            deps: (0..self.tasks.len() as u32).collect(),
        };
        self.push(task, Role::Reduce(g))
    }

    fn push(&mut self, t: Task, r: Role) -> u32 {
        self.tasks.push(t);
        self.roles.push(r);
        (self.tasks.len() - 1) as u32
    }

    /// A send, receive or release task of transfer `k` after `deps`.
    fn transfer(&mut self, k: usize, deps: Vec<u32>, end: End) -> u32 {
        let t = &self.plan.dist.transfers[k];
        // The byte extent of the buffer the transfer's runs touch (for the plan's validation).
        let (lo, hi) = t.runs.iter().fold((i64::MAX, 0i64), |(lo, hi), &(a, n)| {
            (lo.min(a), hi.max(a.saturating_add(n)))
        });
        let elem = i64::from(t.elem);
        let (to, from) = (self.at.rank_of(t.to), self.at.rank_of(t.from));
        let (name, kernel, role) = match end {
            End::Send => (format!("send {} -> rank {to}", t.value), 0, Role::Send(k)),
            End::Recv => (format!("recv {} <- rank {from}", t.value), 1, Role::Recv(k)),
            End::Release => (
                format!("sent {} -> rank {to}", t.value),
                3,
                Role::Release(k),
            ),
        };
        let task = Task {
            name,
            kernel: self.send_kernel + kernel,
            args: vec![Arg {
                buffer: t.buffer,
                offset: 0,
                lo: lo.min(hi).saturating_mul(elem),
                hi: hi.saturating_mul(elem),
            }],
            range: vec![(k as i64, k as i64 + 1)],
            split: None,
            align: 1,
            work: 0.0,
            deps,
        };
        self.push(task, role)
    }

    /// A receive (or the release of an in-place send) of `k` after every task so far (see
    /// the module docs: no deadlock).
    fn after_all(&mut self, k: usize, end: End) -> u32 {
        let all: Vec<u32> = (0..self.tasks.len() as u32).collect();
        self.transfer(k, all, end)
    }

    fn receive(&mut self, k: usize) -> u32 {
        self.after_all(k, End::Recv)
    }

    /// Every task of this rank with its transfers; returns the receives of sink data. The
    /// sources' transfers `in_place` are sent from their buffers, each released last.
    fn tasks(&mut self, e: &Ends, in_place: &[usize]) -> Vec<u32> {
        for &k in &e.source_sends {
            self.transfer(k, vec![], End::Send);
        }
        for i in 0..self.plan.tasks.len() {
            if !self.on_me(i) {
                continue;
            }
            self.local[i] = match self.plan.dist.reduction_of(i) {
                Some(g) => self.reduction(g),
                None => self.compute(i, e),
            };
            for &k in &e.send_after[i] {
                self.transfer(k, vec![self.local[i]], End::Send);
            }
        }
        let late = e.sink_recvs.iter().map(|&k| self.receive(k)).collect();
        for &k in in_place {
            self.after_all(k, End::Release);
        }
        late
    }

    /// Global task `i` after its local dependencies and the receives it needs.
    fn compute(&mut self, i: usize, e: &Ends) -> u32 {
        let mut deps = self.local_deps(&self.plan.tasks[i].deps);
        for &k in &e.recv_before[i] {
            deps.push(self.receive(k));
        }
        let mut t = self.plan.tasks[i].clone();
        t.deps = deps;
        if let Some(rows) = self.plan.dist.rows_on(i, self.at) {
            restrict_rows(&mut t, rows);
        }
        self.push(t, Role::Compute)
    }

    /// The local indices of the global tasks `deps` that run on this rank.
    fn local_deps(&self, deps: &[u32]) -> Vec<u32> {
        deps.iter()
            .filter(|&&g| self.on_me(g as usize))
            .map(|&g| self.local[g as usize])
            .collect()
    }
}

/// Narrows a replicated generator task to `rows` of its range's first dimension, and its one
/// argument (a row-major value of its own, whose bytes are its rows in order) to their bytes;
/// a task of another form stays whole.
fn restrict_rows(t: &mut Task, rows: (i64, i64)) {
    let Some(&(a, b)) = t.range.first() else {
        return;
    };
    let [arg] = &mut t.args[..] else {
        return;
    };
    let (n, bytes) = (b - a, arg.hi - arg.lo);
    if n <= 0 || bytes % n != 0 || rows.0 < a || rows.1 > b || rows.0 >= rows.1 {
        return;
    }
    let (lo, per_row) = (arg.lo, bytes / n);
    arg.lo = lo + (rows.0 - a) * per_row;
    arg.hi = lo + (rows.1 - a) * per_row;
    t.range[0] = rows;
}

/// The sources this rank reads itself (those its tasks or sinks use, unless rank 0 reads for
/// everyone): the buffers with the others turned into scratch, the local sources, and what to
/// read of each.
type Sources = (Vec<Buffer>, Vec<Source>, Vec<(usize, Option<Runs>)>);

fn sources(plan: &Plan, at: Place, tasks: &[Task], sinks: &[Sink], on_root: bool) -> Sources {
    let mut used = vec![false; plan.buffers.len()];
    for a in tasks.iter().flat_map(|t| &t.args) {
        used[a.buffer as usize] = true;
    }
    for s in sinks {
        used[s.view.buffer as usize] = true;
    }
    let (mut reads, mut local) = (Vec::new(), Vec::new());
    let mut buffers = plan.buffers.clone();
    for (b, buf) in buffers.iter_mut().enumerate() {
        let Init::Source(k) = buf.init else { continue };
        if !used[b] || (on_root && at.rank != 0) {
            buf.init = Init::Scratch;
            continue;
        }
        buf.init = Init::Source(local.len() as u32);
        // What a window reads of its file is in `reads` (by global index): locally it is a
        // source like the others (its `of` indexes the whole plan).
        local.push(Source {
            window: None,
            ..plan.sources[k as usize].clone()
        });
        // Rank 0 reading for everyone reads what any node reads.
        let mine =
            |w: &&Window| w.buffer as usize == b && (on_root || at.rank_of(w.node) == at.rank);
        let runs: Runs = (plan.dist.windows.iter().filter(mine))
            .flat_map(|w| w.runs.clone())
            .collect();
        reads.push((k as usize, (!runs.is_empty()).then(|| normalize(runs))));
    }
    (buffers, local, reads)
}

/// Per state of `plan`, the C-order elements of it that rank `at` holds: its nodes' windows of
/// the state's source.
fn state_needs(plan: &Plan, at: Place) -> Vec<Runs> {
    (plan.states.iter())
        .map(|&(k, _)| {
            let b = plan.sources[k as usize].buffer;
            let mine = |w: &&Window| w.buffer == b && at.rank_of(w.node) == at.rank;
            normalize(
                (plan.dist.windows.iter().filter(mine))
                    .flat_map(|w| w.runs.clone())
                    .collect(),
            )
        })
        .collect()
}

/// How a rank runs its plan: `--inputs-on-root`, `--gather-sinks` (every sink gathered to rank
/// 0), and whether state carries over to another step (`--steps` above 1).
#[derive(Clone, Copy)]
pub(super) struct Flags {
    pub on_root: bool,
    pub gather: bool,
    pub carry: bool,
}

/// This rank's local plan; the send, receive, reduction and release kernels are `send_kernel`
/// and the next three indices.
/// With `flags.carry`, it also reads every state's update where the rank holds the state
/// ([`sinks::state_sinks`]).
pub(super) fn local_plan(plan: &Plan, at: Place, send_kernel: u32, flags: Flags) -> Local {
    let Flags {
        on_root,
        gather,
        carry,
    } = flags;
    let d = &plan.dist;
    let direct = sinks::direct(plan, gather);
    let direct_buffers: Vec<u32> = (plan.sinks.iter().zip(&direct))
        .filter(|(_, &on)| on)
        .map(|(s, _)| s.view.buffer)
        .collect();
    let r = routes(d, at, on_root, &direct_buffers);
    let e = ends(d, at, &r, plan.tasks.len());
    let mut b = Builder {
        plan,
        at,
        send_kernel,
        tasks: Vec::new(),
        roles: Vec::new(),
        local: vec![u32::MAX; plan.tasks.len()],
    };
    let late = b.tasks(&e, &in_place(d, &r, &e));
    let (mut sinks, mut outs) = sinks::local_sinks(plan, at, &direct, &|g| b.local_deps(g), &late);
    if carry {
        let (more, tags) = sinks::state_sinks(plan, &state_needs(plan, at), &|g| b.local_deps(g));
        sinks.extend(more);
        outs.extend(tags);
    }
    let (buffers, local_sources, reads) = sources(plan, at, &b.tasks, &sinks, on_root);
    let whole = Plan {
        graph: plan.graph.clone(),
        buffers,
        sources: local_sources,
        tasks: b.tasks,
        sinks,
        dist: Default::default(),
        states: vec![],
    };
    let (plan, reads) = pieces::split(whole, &reads);
    let messages = message_bytes(d, at, &r, &e, &b.roles) + reduce_bytes(d, &b.roles);
    let reduce_ranks = (d.reductions.iter())
        .map(|g| group_ranks(g, &d.nodes, at))
        .collect();
    Local {
        messages,
        reduce_ranks,
        outs,
        direct,
        plan,
        roles: b.roles,
        reads,
        incoming: e.incoming,
        groups: r.groups,
        group_of: r.group_of,
        casts: r.casts,
    }
}

/// The bytes of every message buffer of this rank (see [`Local::messages`]).
fn message_bytes(d: &Dist, at: Place, r: &Routes, e: &Ends, roles: &[Role]) -> u64 {
    let bytes = |k: usize| d.transfers[k].bytes();
    let recv: u64 = e.incoming.iter().map(|&k| bytes(k)).sum();
    let cast: u64 = (r.groups.iter().enumerate())
        .filter(|(_, ranks)| ranks.len() > 1 && ranks[1..].contains(&at.rank))
        .map(|(g, _)| bytes(d.broadcasts[g][0] as usize))
        .sum();
    let released: Vec<usize> = (roles.iter())
        .filter_map(|r| match r {
            Role::Release(k) => Some(*k),
            _ => None,
        })
        .collect();
    // A send in place packs nothing.
    let sent: u64 = (roles.iter())
        .filter_map(|r| match r {
            Role::Send(k) if !released.contains(k) => Some(bytes(*k)),
            _ => None,
        })
        .sum();
    recv + cast + sent
}

/// The transfers of sources this rank sends in place, from the source's buffer without
/// packing: point to point (not a broadcast) and one contiguous run. A source's buffer is only
/// read (never reused nor written in place: `codegen::reuse`, `codegen::share`), so nothing
/// changes it while MPI reads it; its release task keeps it allocated until then.
fn in_place(d: &Dist, r: &Routes, e: &Ends) -> Vec<usize> {
    (e.source_sends.iter().copied())
        .filter(|&k| r.group_of[k].is_none() && d.transfers[k].runs.len() == 1)
        .collect()
}

/// The message buffers of the reduction groups this rank joins: its combined partial results
/// and the collective's result, each the size of the result.
fn reduce_bytes(d: &Dist, roles: &[Role]) -> u64 {
    (roles.iter())
        .filter_map(|r| match r {
            Role::Reduce(g) => Some(2 * d.reductions[*g].bytes()),
            _ => None,
        })
        .sum()
}

/// The ranks of group `g` on this job, its root first (the rank of its one target for a
/// reduce, of its last combine's node for a reduce-scatter; the lowest for an allreduce),
/// each once.
pub(super) fn group_ranks(g: &Reduction, nodes: &[u32], at: Place) -> Vec<u32> {
    let mut ranks: Vec<u32> = (g.leaves.iter())
        .map(|l| at.rank_of(nodes[l.task as usize]))
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let root = match g.kind() {
        Kind::Allreduce => return ranks,
        Kind::Reduce => g.targets[0],
        Kind::ReduceScatter => nodes[g.last() as usize],
    };
    let root = at.rank_of(root);
    ranks.retain(|&r| r != root);
    ranks.insert(0, root);
    ranks
}

/// The leaves of `g` on this rank, in the group's order.
pub(super) fn local_leaves<'a>(g: &'a Reduction, nodes: &[u32], at: Place) -> Vec<&'a Leaf> {
    (g.leaves.iter())
        .filter(|l| at.rank_of(nodes[l.task as usize]) == at.rank)
        .collect()
}
