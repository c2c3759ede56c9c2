//! Dead-buffer sharing (issue 22, XLA-style buffer assignment): a scratch value whose buffer
//! is first needed after another scratch buffer of the same or a larger size is dead takes
//! that buffer, so its pages are the ones the earlier value faulted (a fresh buffer costs a
//! zeroed page per first write).
//!
//! Decided once, on the schedule, after in-place reuse ([`super::reuse`]) and like it: the
//! later buffer is renamed to the earlier one everywhere (task arguments, sinks, footprints;
//! it sits at offset 0, so every view of it still fits), and each task using it waits for
//! every task of the earlier buffer. The walk is the executor's on one thread
//! ([`tapc_runtime::memory::walk`]), so the executor's allocation, `--time`'s peak and the
//! pre-run memory check (`memory::peak`) all see the same assignment. A shared buffer is held
//! between its two values' lifetimes, so a sharing is kept only when the planned peak does not
//! grow. Sources (caller memory) and constants are never shared; distributed (`--mpi`) plans
//! get no sharing (their buffers are cut into pieces and sent between ranks).

use super::reuse::{drop_buffers, rename};
use super::schedule::Schedule;
use tapc_runtime::memory::{self, Event};
use tapc_runtime::plan::{Init, Plan, Task};

/// Per buffer, when the one-thread walk allocates and frees it (event numbers; `None`: never),
/// and the first and last task (in plan order) that use it.
struct Lives {
    alloc: Vec<Option<usize>>,
    free: Vec<Option<usize>>,
    first: Vec<usize>,
    last: Vec<usize>,
}

fn lives(plan: &Plan) -> Lives {
    let n = plan.buffers.len();
    let mut l = Lives {
        alloc: vec![None; n],
        free: vec![None; n],
        first: vec![usize::MAX; n],
        last: vec![0; n],
    };
    for (t, task) in plan.tasks.iter().enumerate() {
        for b in task.buffers() {
            l.first[b as usize] = l.first[b as usize].min(t);
            l.last[b as usize] = t;
        }
    }
    let mut at = 0usize;
    memory::walk(plan, |e| {
        at += 1;
        match e {
            Event::Alloc(b) => l.alloc[b as usize] = Some(at),
            Event::Free(b) => l.free[b as usize] = Some(at),
            Event::Settled => {}
        }
    });
    l
}

/// Shares dead buffers in `s` (see the module docs); returns how many buffers now take an
/// earlier one's memory.
pub fn dead_buffers(s: &mut Schedule) -> usize {
    let plan = &mut s.plan;
    let mut l = lives(plan);
    let mut order: Vec<usize> = (0..plan.buffers.len())
        .filter(|&b| scratch(plan, b) && l.alloc[b].is_some())
        .collect();
    order.sort_by_key(|&b| l.alloc[b]);
    let mut peak = memory::peak(plan).0;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for b in order {
        let Some(a) = dead_for(plan, &l, b) else {
            continue;
        };
        let undo = share(plan, b as u32, a as u32);
        let trial = memory::peak(plan).0;
        if trial <= peak {
            peak = trial;
            pairs.push((b as u32, a as u32));
            l = lives(plan);
        } else {
            undo.apply(plan);
        }
    }
    // The plan's arguments and sinks are renamed already; the footprints follow.
    for &(later, earlier) in &pairs {
        rename(s, later, earlier);
    }
    let gone: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    drop_buffers(s, &gone);
    gone.len()
}

/// Whether buffer `b` may be shared: scratch (not a source, which may be caller memory; not
/// a constant) and not empty.
fn scratch(plan: &Plan, b: usize) -> bool {
    plan.buffers[b].init == Init::Scratch && plan.buffers[b].bytes > 0
}

/// The dead buffer `b` can take: scratch, no sink's, freed before `b` is allocated, at least
/// as big, and used only by tasks before `b`'s first in plan order (a task waits only for
/// earlier ones); the smallest such, then the one freed last.
fn dead_for(plan: &Plan, l: &Lives, b: usize) -> Option<usize> {
    let born = l.alloc[b]?;
    let bytes = plan.buffers[b].bytes;
    let sink = |a: usize| plan.sinks.iter().any(|x| x.view.buffer as usize == a);
    (0..plan.buffers.len())
        .filter(|&a| a != b && scratch(plan, a) && plan.buffers[a].bytes >= bytes)
        .filter(|&a| l.free[a].is_some_and(|f| f < born) && l.last[a] < l.first[b] && !sink(a))
        .min_by_key(|&a| (plan.buffers[a].bytes, std::cmp::Reverse(l.free[a])))
}

/// What [`share`] changed, to put back.
struct Undo {
    later: u32,
    deps: Vec<(usize, Vec<u32>)>,
    args: Vec<(usize, usize)>,
    sinks: Vec<usize>,
}

impl Undo {
    fn apply(self, plan: &mut Plan) {
        for (t, deps) in self.deps {
            plan.tasks[t].deps = deps;
        }
        for (t, k) in self.args {
            plan.tasks[t].args[k].buffer = self.later;
        }
        for k in self.sinks {
            plan.sinks[k].view.buffer = self.later;
        }
    }
}

/// Puts buffer `later` in `earlier`'s memory in `plan`: every task using `later` waits for
/// every task using `earlier`, and `later`'s task arguments and sinks name `earlier` (the
/// buffer itself is left unused).
fn share(plan: &mut Plan, later: u32, earlier: u32) -> Undo {
    let uses = |b: u32| -> Vec<usize> {
        (plan.tasks.iter().enumerate())
            .filter(|(_, t)| t.args.iter().any(|a| a.buffer == b))
            .map(|(i, _)| i)
            .collect()
    };
    let (before, after) = (uses(earlier), uses(later));
    let mut undo = Undo {
        later,
        deps: Vec::new(),
        args: Vec::new(),
        sinks: Vec::new(),
    };
    for &t in &after {
        let task: &mut Task = &mut plan.tasks[t];
        undo.deps.push((t, task.deps.clone()));
        task.deps.extend(before.iter().map(|&d| d as u32));
        task.deps.sort_unstable();
        task.deps.dedup();
        for (k, a) in task.args.iter_mut().enumerate() {
            if a.buffer == later {
                a.buffer = earlier;
                undo.args.push((t, k));
            }
        }
    }
    for (k, x) in plan.sinks.iter_mut().enumerate() {
        if x.view.buffer == later {
            x.view.buffer = earlier;
            undo.sinks.push(k);
        }
    }
    undo
}
