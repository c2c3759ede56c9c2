//! One rank of a distributed program under `mpirun`.
//!
//! Every rank decodes the same plan, checks with its peers that it is the same (a hash), and
//! builds its *local plan*: the tasks of the nodes it owns (node `n` runs on rank `n mod R`)
//! plus a send task after every producer whose output another rank reads and a receive task
//! before every consumer of remote data. Sends pack the planned runs and post `MPI_Isend`;
//! every receive is posted (`MPI_Irecv`) before the run starts, so data moves while the rank
//! computes, and its task only waits and unpacks. The local plan then runs on the ordinary
//! multithreaded executor with `--threads` workers.
//!
//! Deadlock freedom: a receive task depends on every local task that precedes its consumer in
//! the global plan order, so a worker blocked in a receive never holds up a task the sender
//! is waiting for (the earliest unfinished task of the whole job can always run).
//!
//! Rank 0 collects the sinks (transfers planned at compile time), every rank's report, and
//! writes the sinks atomically only after all ranks succeeded. A rank that fails prints its
//! rank and the reason (the executor's messages name the task) and calls `MPI_Abort`.

use super::dist::{normalize, Runs, Transfer, Window};
use crate::entry::{self, Outcome};
use crate::exec::{execute, KernelFn, Options, Report};
use crate::output::{self, Npy, Outputs};
use crate::plan::{Arg, Init, Plan, Task};
use crate::{npy, Tensor};
use mpi::ffi;
use mpi::topology::Color;
use mpi::traits::*;
use std::ffi::{c_int, c_void};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A message in flight and the bytes it sends from or receives into.
struct Pending {
    req: ffi::MPI_Request,
    buf: Vec<u8>,
}

/// What the send and receive kernels need: they are plain kernel functions, so they find it
/// here.
struct Comm {
    comm: ffi::MPI_Comm,
    byte: ffi::MPI_Datatype,
    size: u32,
    transfers: Vec<Transfer>,
    /// Posted receives by transfer index.
    recvs: Vec<Mutex<Option<Pending>>>,
    sends: Mutex<Vec<Pending>>,
    /// The broadcasts, by the plan's group index.
    groups: Vec<Broadcast>,
    /// The broadcast of each transfer, if any.
    group_of: Vec<Option<usize>>,
    /// Every MPI call goes through this lock (correct at any thread level MPI provides).
    lock: Mutex<()>,
    /// Per transfer: bytes sent, bytes received, time waiting for the data.
    stats: Mutex<Vec<(u64, u64, Duration)>>,
}

/// One broadcast of the plan as this rank sees it.
struct Broadcast {
    /// Its communicator (root is rank 0), when this rank takes part.
    comm: Option<ffi::MPI_Comm>,
    /// How many ranks receive the data.
    receivers: u64,
    /// On a receiver: the posted `MPI_Ibcast` and whether its data was unpacked already
    /// (two receiving nodes on one rank share one copy).
    slot: Mutex<(Option<Pending>, bool)>,
}

// SAFETY: the MPI handles are only used under `lock`.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

static COMM: OnceLock<Comm> = OnceLock::new();

impl Comm {
    fn rank_of(&self, node: u32) -> c_int {
        (node % self.size) as c_int
    }

    fn mpi<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }

    /// Drives MPI's progress engine every `every` until `stop`: over TCP a message moves only
    /// while its sender or receiver is inside an MPI call, so without this a send posted early
    /// would wait for the end of its sender's compute (the receiver's too, for the handshake
    /// of a large message).
    fn progress(&self, stop: &AtomicBool, every: Duration) {
        while !stop.load(Ordering::Relaxed) {
            let mut flag: c_int = 0;
            // SAFETY: a probe of this communicator; it receives nothing.
            self.mpi(|| unsafe {
                ffi::MPI_Iprobe(
                    ffi::RSMPI_ANY_SOURCE,
                    ffi::RSMPI_ANY_TAG,
                    self.comm,
                    &mut flag,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            });
            std::thread::sleep(every);
        }
    }

    /// A buffer for the data of `t` and the receiving call `start(buffer, length, request)`
    /// posted on it; `None` when the call fails.
    fn post(
        &self,
        t: &Transfer,
        start: impl FnOnce(*mut c_void, c_int, &mut ffi::MPI_Request) -> c_int,
    ) -> Option<Pending> {
        let mut p = Pending {
            // SAFETY: reads a constant of the MPI library.
            req: unsafe { ffi::RSMPI_REQUEST_NULL },
            buf: vec![0u8; t.bytes() as usize],
        };
        let (ptr, n) = (p.buf.as_mut_ptr() as *mut c_void, p.buf.len() as c_int);
        let rc = self.mpi(|| start(ptr, n, &mut p.req));
        (rc == 0).then_some(p)
    }

    /// Polls `req` until it completes; returns the time waited.
    fn wait(&self, req: &mut ffi::MPI_Request) -> Result<Duration, c_int> {
        let t = Instant::now();
        let mut spins = 0u32;
        loop {
            let mut done: c_int = 0;
            // SAFETY: `req` is a live request; the status is ignored.
            let rc =
                self.mpi(|| unsafe { ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE) });
            if rc != 0 {
                return Err(rc);
            }
            if done != 0 {
                return Ok(t.elapsed());
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

fn byte_range(t: &Transfer) -> impl Iterator<Item = (usize, usize)> + '_ {
    let e = t.elem as usize;
    t.runs
        .iter()
        .map(move |&(a, n)| (a as usize * e, n as usize * e))
}

/// Kernel of a send task: packs transfer `range[0]` from `bases[0]` and posts it.
unsafe extern "C-unwind" fn send_kernel(bases: *const *mut u8, range: *const i64) -> i32 {
    let Some(c) = COMM.get() else { return 2 };
    let id = *range as usize;
    let t = &c.transfers[id];
    let base = *bases;
    let mut buf = Vec::with_capacity(t.bytes() as usize);
    for (at, n) in byte_range(t) {
        // SAFETY: the runs lie inside the buffer (validated) and its producer is done.
        buf.extend_from_slice(std::slice::from_raw_parts(base.add(at), n));
    }
    let mut req = ffi::RSMPI_REQUEST_NULL;
    // A broadcast counts as its root sending to every receiver (the bytes the job moves).
    let (rc, sent) = match c.group_of[id].map(|g| &c.groups[g]) {
        Some(Broadcast {
            comm: Some(comm),
            receivers,
            ..
        }) => {
            let rc = c.mpi(|| {
                ffi::MPI_Ibcast(
                    buf.as_mut_ptr() as *mut c_void,
                    buf.len() as c_int,
                    c.byte,
                    0,
                    *comm,
                    &mut req,
                )
            });
            (rc, buf.len() as u64 * receivers)
        }
        Some(_) => return 5,
        None => {
            let rc = c.mpi(|| {
                ffi::MPI_Isend(
                    buf.as_ptr() as *const c_void,
                    buf.len() as c_int,
                    c.byte,
                    c.rank_of(t.to),
                    id as c_int,
                    c.comm,
                    &mut req,
                )
            });
            (rc, buf.len() as u64)
        }
    };
    if rc != 0 {
        return 3;
    }
    if let Ok(mut s) = c.stats.lock() {
        s[id].0 += sent;
    }
    c.sends
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Pending { req, buf });
    0
}

/// Kernel of a receive task: waits for transfer `range[0]` and unpacks it into `bases[0]`.
unsafe extern "C-unwind" fn recv_kernel(bases: *const *mut u8, range: *const i64) -> i32 {
    let Some(c) = COMM.get() else { return 2 };
    let id = *range as usize;
    if let Some(g) = c.group_of[id] {
        let mut slot = c.groups[g].slot.lock().unwrap_or_else(|e| e.into_inner());
        let (pending, unpacked) = &mut *slot;
        if *unpacked {
            return 0;
        }
        let Some(p) = pending else { return 4 };
        let rc = recv_into(c, id, p, *bases);
        *unpacked = true;
        return rc;
    }
    let Some(mut p) = c.recvs[id].lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return 4;
    };
    recv_into(c, id, &mut p, *bases)
}

/// Waits for the message `p` of transfer `id` and unpacks it into the buffer at `base`.
unsafe fn recv_into(c: &Comm, id: usize, p: &mut Pending, base: *mut u8) -> i32 {
    let waited = match c.wait(&mut p.req) {
        Ok(w) => w,
        Err(_) => return 3,
    };
    let mut from = 0;
    for (at, n) in byte_range(&c.transfers[id]) {
        // SAFETY: as in `send_kernel`; nobody else writes these runs.
        std::ptr::copy_nonoverlapping(p.buf.as_ptr().add(from), base.add(at), n);
        from += n;
    }
    if let Ok(mut s) = c.stats.lock() {
        s[id].1 += p.buf.len() as u64;
        s[id].2 += waited;
    }
    0
}

/// What a transfer task of the local plan does.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Compute,
    Send(usize),
    Recv(usize),
}

/// This rank's part of the plan.
struct Local {
    plan: Plan,
    roles: Vec<Role>,
    /// Sources this rank reads from files, by global index, with the element runs it reads
    /// (`None`: the whole file).
    reads: Vec<(usize, Option<Runs>)>,
    /// Point-to-point transfers this rank receives.
    incoming: Vec<usize>,
    /// Per broadcast of the plan, the ranks it involves, its root first (only the root when
    /// all its receivers share the root's rank).
    groups: Vec<Vec<u32>>,
    /// The broadcast of each transfer, if any.
    group_of: Vec<Option<usize>>,
    /// Per broadcast, its transfers that move data between ranks.
    casts: Vec<Vec<usize>>,
}

fn local_plan(plan: &Plan, rank: u32, size: u32, nk: u32, inputs_on_root: bool) -> Local {
    let d = &plan.dist;
    let rank_of = |n: u32| n % size;
    let on_me = |i: usize| rank_of(d.nodes[i]) == rank;
    let active: Vec<bool> = d
        .transfers
        .iter()
        .map(|t| rank_of(t.from) != rank_of(t.to) && (t.after.is_some() || inputs_on_root))
        .collect();
    let mut group_of = vec![None; d.transfers.len()];
    let mut leader = vec![None; d.transfers.len()];
    let (mut groups, mut casts) = (Vec::new(), Vec::new());
    for (g, members) in d.broadcasts.iter().enumerate() {
        casts.push(
            members
                .iter()
                .map(|&k| k as usize)
                .filter(|&k| active[k])
                .collect(),
        );
        let root = rank_of(d.transfers[members[0] as usize].from);
        let mut ranks: Vec<u32> = members
            .iter()
            .filter(|&&k| active[k as usize])
            .map(|&k| rank_of(d.transfers[k as usize].to))
            .filter(|&r| r != root)
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks.insert(0, root);
        groups.push(ranks);
        for &k in members {
            group_of[k as usize] = Some(g);
        }
        // The root sends once, after the first of the group's (equal) transfers.
        if let Some(&k) = members.iter().find(|&&k| active[k as usize]) {
            leader[k as usize] = Some(g);
        }
    }
    let nt = plan.tasks.len();
    let (mut recv_before, mut send_after) = (vec![Vec::new(); nt], vec![Vec::new(); nt]);
    let (mut source_sends, mut sink_recvs, mut incoming) = (Vec::new(), Vec::new(), Vec::new());
    for (k, t) in d.transfers.iter().enumerate() {
        if !active[k] {
            continue;
        }
        if rank_of(t.to) == rank {
            if group_of[k].is_none() {
                incoming.push(k);
            }
            match t.before {
                Some(b) => recv_before[b as usize].push(k),
                None => sink_recvs.push(k),
            }
        }
        if rank_of(t.from) == rank && (group_of[k].is_none() || leader[k].is_some()) {
            match t.after {
                Some(a) => send_after[a as usize].push(k),
                None => source_sends.push(k),
            }
        }
    }
    let mut tasks: Vec<Task> = Vec::new();
    let mut roles = Vec::new();
    let mut local = vec![u32::MAX; nt];
    let push = |tasks: &mut Vec<Task>, roles: &mut Vec<Role>, t: Task, r: Role| {
        tasks.push(t);
        roles.push(r);
        (tasks.len() - 1) as u32
    };
    let transfer_task = |k: usize, deps: Vec<u32>, send: bool| {
        let t = &d.transfers[k];
        // The byte extent of the buffer the transfer's runs touch (for the plan's validation).
        let (lo, hi) = t.runs.iter().fold((i64::MAX, 0i64), |(lo, hi), &(a, n)| {
            (lo.min(a), hi.max(a.saturating_add(n)))
        });
        let elem = i64::from(t.elem);
        Task {
            name: if send {
                format!("send {} -> rank {}", t.value, rank_of(t.to))
            } else {
                format!("recv {} <- rank {}", t.value, rank_of(t.from))
            },
            kernel: nk + u32::from(!send),
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
        }
    };
    for &k in &source_sends {
        let t = transfer_task(k, vec![], true);
        push(&mut tasks, &mut roles, t, Role::Send(k));
    }
    for i in 0..nt {
        if !on_me(i) {
            continue;
        }
        let mut deps: Vec<u32> = plan.tasks[i]
            .deps
            .iter()
            .filter(|&&g| on_me(g as usize))
            .map(|&g| local[g as usize])
            .collect();
        for &k in &recv_before[i] {
            let all: Vec<u32> = (0..tasks.len() as u32).collect();
            let t = transfer_task(k, all, false);
            deps.push(push(&mut tasks, &mut roles, t, Role::Recv(k)));
        }
        let mut t = plan.tasks[i].clone();
        t.deps = deps;
        local[i] = push(&mut tasks, &mut roles, t, Role::Compute);
        for &k in &send_after[i] {
            let t = transfer_task(k, vec![local[i]], true);
            push(&mut tasks, &mut roles, t, Role::Send(k));
        }
    }
    let mut late = Vec::new();
    for &k in &sink_recvs {
        let all: Vec<u32> = (0..tasks.len() as u32).collect();
        let t = transfer_task(k, all, false);
        late.push(push(&mut tasks, &mut roles, t, Role::Recv(k)));
    }
    let sinks = if rank == 0 {
        plan.sinks
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.deps = s
                    .deps
                    .iter()
                    .filter(|&&g| on_me(g as usize))
                    .map(|&g| local[g as usize])
                    .chain(late.iter().copied())
                    .collect();
                s
            })
            .collect()
    } else {
        vec![]
    };
    // The sources this rank reads itself: those its tasks or sinks use, unless rank 0 sends them.
    let mut used = vec![false; plan.buffers.len()];
    for t in &tasks {
        for a in &t.args {
            used[a.buffer as usize] = true;
        }
    }
    for s in &sinks {
        used[s.view.buffer as usize] = true;
    }
    let mut reads = Vec::new();
    let mut sources = Vec::new();
    let mut buffers = plan.buffers.clone();
    for (b, buf) in buffers.iter_mut().enumerate() {
        if let Init::Source(k) = buf.init {
            if used[b] && (!inputs_on_root || rank == 0) {
                buf.init = Init::Source(sources.len() as u32);
                sources.push(plan.sources[k as usize].clone());
                // Rank 0 reading for everyone reads what any node reads.
                let mine = |w: &&Window| {
                    w.buffer as usize == b && (inputs_on_root || rank_of(w.node) == rank)
                };
                let runs: Runs = d
                    .windows
                    .iter()
                    .filter(mine)
                    .flat_map(|w| w.runs.clone())
                    .collect();
                reads.push((k as usize, (!runs.is_empty()).then(|| normalize(runs))));
            } else {
                buf.init = Init::Scratch;
            }
        }
    }
    Local {
        plan: Plan {
            graph: plan.graph.clone(),
            buffers,
            sources,
            tasks,
            sinks,
            dist: Default::default(),
        },
        roles,
        reads,
        incoming,
        groups,
        group_of,
        casts,
    }
}

/// How often the progress thread polls MPI: `TAPC_MPI_PROGRESS_US` microseconds (default
/// 200; `0`: no progress thread, for A/B runs).
fn progress_interval() -> Result<Option<Duration>, String> {
    let us = match std::env::var("TAPC_MPI_PROGRESS_US") {
        Err(_) => 200,
        Ok(v) => v.trim().parse::<u64>().map_err(|_| {
            format!("TAPC_MPI_PROGRESS_US: expected a number of microseconds, found `{v}`")
        })?,
    };
    Ok((us > 0).then(|| Duration::from_micros(us)))
}

/// FNV-1a of the plan's encoding: equal on every rank that runs the same program.
fn plan_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Prints the failure of this rank and aborts the whole job.
fn die(world: &impl Communicator, prog: &str, rank: i32, msg: &str) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = writeln!(std::io::stderr(), "{prog}: rank {rank}: error: {msg}");
    let _ = std::io::stderr().flush();
    world.abort(1)
}

pub fn main(
    prog: &str,
    args: &[String],
    plan: &Plan,
    kernels: &[KernelFn],
    plan_bytes: &[u8],
) -> Outcome {
    let a = match entry::parse_args(prog, args) {
        Ok(Some(a)) => a,
        // Help and usage errors need no MPI.
        _ => return entry::run_program(prog, args, plan, kernels),
    };
    let Some((universe, threading)) = mpi::initialize_with_threading(mpi::Threading::Multiple)
    else {
        return Outcome {
            stderr: format!("{prog}: error: cannot initialise MPI (run under `mpirun`)\n"),
            code: 1,
            ..Outcome::default()
        };
    };
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size() as u32);
    let fail = |msg: String| -> ! { die(&world, prog, rank, &msg) };
    // Workers and the progress thread call MPI, one at a time (`Comm::lock`).
    if matches!(threading, mpi::Threading::Single | mpi::Threading::Funneled) {
        fail(format!(
            "this MPI provides thread level {threading:?}; the runtime needs MPI_THREAD_SERIALIZED or more"
        ));
    }
    let progress_every = progress_interval().unwrap_or_else(|e| fail(e));
    // Every rank runs the same plan.
    let mine = plan_hash(plan_bytes);
    let mut all = vec![0u64; size as usize];
    world.all_gather_into(&mine, &mut all[..]);
    if all[rank as usize] != all[0] {
        fail(format!(
            "this rank runs a program built from another plan (plan hash {mine:016x}, rank 0 has {:016x})",
            all[0]
        ));
    }
    if all.iter().any(|&h| h != all[0]) {
        // The odd rank reports and aborts; the others wait for that abort.
        world.barrier();
    }
    let nk = kernels.len() as u32;
    let local = local_plan(plan, rank as u32, size, nk, a.inputs_on_root);
    if let Some(t) = plan
        .dist
        .transfers
        .iter()
        .find(|t| t.bytes() > c_int::MAX as u64)
    {
        fail(format!("transfer of {} is over 2 GiB", t.value));
    }
    // A communicator per broadcast (every rank splits the world once per broadcast, in plan
    // order), so broadcasts never need to be matched in one order across ranks.
    let groups: Vec<Broadcast> = local
        .groups
        .iter()
        .map(|ranks| {
            let at = ranks.iter().position(|&r| r == rank as u32);
            let color = match at {
                Some(_) if ranks.len() > 1 => Color::with_value(0),
                _ => Color::undefined(),
            };
            let comm = world
                .split_by_color_with_key(color, at.unwrap_or(0) as c_int)
                .map(|sub| {
                    let raw = sub.as_raw();
                    // Kept until MPI_Finalize: freeing is collective, and ranks finish apart.
                    std::mem::forget(sub);
                    raw
                });
            Broadcast {
                comm,
                receivers: ranks.len() as u64 - 1,
                slot: Mutex::new((None, false)),
            }
        })
        .collect();
    let files = entry::bind_inputs(&a, plan).unwrap_or_else(|e| fail(e));
    let mut inputs: Vec<Tensor> = Vec::new();
    let mut input_bytes = 0u64;
    for (k, runs) in &local.reads {
        let s = &plan.sources[*k];
        let read = match runs {
            Some(runs) => npy::read_window_expecting(&files[*k], &s.name, s.dtype, &s.shape, runs),
            None => npy::read_expecting(&files[*k], &s.name, s.dtype, &s.shape).map(|t| {
                (
                    t,
                    (s.shape.iter().product::<usize>() * s.dtype.size_bytes()) as u64,
                )
            }),
        };
        match read {
            Ok((t, n)) => {
                inputs.push(t);
                input_bytes += n;
            }
            Err(e) => fail(e.to_string()),
        }
    }
    if rank == 0 {
        entry::check_out_dir(&a.out_dir).unwrap_or_else(|e| fail(e));
    }
    let comm = Comm {
        comm: world.as_raw(),
        byte: u8::equivalent_datatype().as_raw(),
        size,
        transfers: plan.dist.transfers.clone(),
        recvs: plan
            .dist
            .transfers
            .iter()
            .map(|_| Mutex::new(None))
            .collect(),
        sends: Mutex::new(Vec::new()),
        groups,
        group_of: local.group_of.clone(),
        lock: Mutex::new(()),
        stats: Mutex::new(vec![(0, 0, Duration::ZERO); plan.dist.transfers.len()]),
    };
    if COMM.set(comm).is_err() {
        fail("the MPI runtime was started twice".into());
    }
    let c = COMM.get().expect("set above");
    // Each buffer lives in `recvs[k]` or the broadcast's slot (its heap block does not move)
    // until a receive task has waited for it.
    for &k in &local.incoming {
        let t = &c.transfers[k];
        let (from, tag) = (c.rank_of(t.from), k as c_int);
        let p = c.post(t, |buf, n, req| unsafe {
            ffi::MPI_Irecv(buf, n, c.byte, from, tag, c.comm, req)
        });
        *c.recvs[k].lock().unwrap_or_else(|e| e.into_inner()) =
            Some(p.unwrap_or_else(|| fail(format!("cannot post the receive of {}", t.value))));
    }
    for (g, ranks) in local.groups.iter().enumerate() {
        let Some(comm) = c.groups[g].comm.filter(|_| ranks[0] != rank as u32) else {
            continue;
        };
        let t = &c.transfers[plan.dist.broadcasts[g][0] as usize];
        let p = c.post(t, |buf, n, req| unsafe {
            ffi::MPI_Ibcast(buf, n, c.byte, 0, comm, req)
        });
        c.groups[g].slot.lock().unwrap_or_else(|e| e.into_inner()).0 =
            Some(p.unwrap_or_else(|| fail(format!("cannot post the broadcast of {}", t.value))));
    }
    let mut table: Vec<KernelFn> = kernels.to_vec();
    table.push(send_kernel);
    table.push(recv_kernel);
    let opts = Options {
        threads: a.threads,
        record: a.time || a.trace.is_some(),
    };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    world.barrier();
    let start = mpi::time();
    let stop = AtomicBool::new(false);
    let run = std::thread::scope(|sc| {
        // A rank that moves no data (one rank, an idle one) needs no progress.
        let moves = local.roles.iter().any(|r| *r != Role::Compute);
        if let Some(every) = progress_every.filter(|_| moves) {
            let stop = &stop;
            sc.spawn(move || c.progress(stop, every));
        }
        let run = execute(&local.plan, &table, &refs, &opts);
        stop.store(true, Ordering::Relaxed);
        run
    });
    let (sinks, report) = run.unwrap_or_else(|e| fail(e));
    let mut sends = std::mem::take(&mut *c.sends.lock().unwrap_or_else(|e| e.into_inner()));
    let mut send_wait = Duration::ZERO;
    for p in &mut sends {
        send_wait += c
            .wait(&mut p.req)
            .unwrap_or_else(|_| fail("a send failed".into()));
    }
    drop(sends);
    let stats = c.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // Every rank's summary, trace events and bytes go to rank 0, which reports.
    let summary = rank_summary(plan, &local, &report, &stats, rank, send_wait, input_bytes);
    let trace = if a.trace.is_some() {
        trace_events(&local, &report, rank, start)
    } else {
        String::new()
    };
    let sent: u64 = stats.iter().map(|s| s.0).sum();
    if rank != 0 {
        let root = world.process_at_rank(0);
        root.send_with_tag(summary.as_bytes(), 1);
        root.send_with_tag(trace.as_bytes(), 2);
        root.send_with_tag(&sent, 3);
        return Outcome::default();
    }
    let (mut summaries, mut traces, mut moved) = (vec![summary], vec![trace], sent);
    for r in 1..size as i32 {
        let p = world.process_at_rank(r);
        summaries.push(String::from_utf8_lossy(&p.receive_vec_with_tag::<u8>(1).0).into_owned());
        traces.push(String::from_utf8_lossy(&p.receive_vec_with_tag::<u8>(2).0).into_owned());
        moved += p.receive_with_tag::<u64>(3).0;
    }
    let mut out = Outcome::default();
    // One all-or-nothing set of outputs (the runtime's one writer): the sinks and the trace.
    let items: Vec<(&str, &dyn Npy)> = sinks
        .iter()
        .map(|(n, t)| (n.as_str(), t as &dyn Npy))
        .collect();
    let mut outputs = Outputs::new();
    let paths = output::stage_sinks(&mut outputs, &a.out_dir, &items)
        .unwrap_or_else(|e| fail(e.to_string()));
    if let Some(tp) = &a.trace {
        let mut json = String::from("{\"traceEvents\":[\n");
        json.push_str(
            &traces
                .iter()
                .filter(|t| !t.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(",\n"),
        );
        json.push_str("\n],\"displayTimeUnit\":\"ms\"}\n");
        outputs
            .write(tp, |w| w.write_all(json.as_bytes()))
            .unwrap_or_else(|e| fail(format!("{e} (the --trace file; no output was written)")));
    }
    outputs.commit().unwrap_or_else(|e| fail(e.to_string()));
    for (p, (n, t)) in paths.iter().zip(&sinks) {
        let _ = writeln!(out.stdout, "@{n}: {} -> {}", t.shape_string(), p.display());
    }
    if a.time {
        out.stderr
            .push_str(&placement_summary(plan, size, &local.groups));
        for s in &summaries {
            out.stderr.push_str(s);
        }
        let _ = writeln!(out.stderr, "bytes moved: {moved}");
    }
    out
}

/// Which rank runs which node, the idle ranks, and the broadcasts (`groups`: their ranks,
/// root first).
fn placement_summary(plan: &Plan, size: u32, groups: &[Vec<u32>]) -> String {
    let nodes = plan.dist.node_count();
    let mut s = format!("mpi: {size} rank(s), a plan of {nodes} node(s):");
    for n in 0..nodes {
        let _ = write!(s, " node {n} -> rank {}", n % size);
        s.push(if n + 1 < nodes { ',' } else { ';' });
    }
    let idle: Vec<String> = (nodes..size).map(|r| r.to_string()).collect();
    if idle.is_empty() {
        s.push_str(" no idle ranks\n");
    } else {
        let _ = writeln!(s, " idle rank(s): {}", idle.join(", "));
    }
    for (g, ranks) in groups.iter().enumerate().filter(|(_, r)| r.len() > 1) {
        let t = &plan.dist.transfers[plan.dist.broadcasts[g][0] as usize];
        let to: Vec<String> = ranks[1..].iter().map(|r| r.to_string()).collect();
        let _ = writeln!(
            s,
            "mpi: broadcast of {} ({} B) from rank {} to rank(s) {}",
            t.value,
            t.bytes(),
            ranks[0],
            to.join(", ")
        );
    }
    s
}

/// This rank's `--time` section: the executor's task table, then bytes per value and the
/// time spent waiting on transfers.
fn rank_summary(
    plan: &Plan,
    local: &Local,
    report: &Report,
    stats: &[(u64, u64, Duration)],
    rank: i32,
    send_wait: Duration,
    input_bytes: u64,
) -> String {
    let mut s = format!("rank {rank}:\n");
    s.push_str(&report.time_summary());
    let mut per: Vec<(String, u64, u64)> = Vec::new();
    let mut wait = Duration::ZERO;
    for (k, st) in stats.iter().enumerate() {
        if st.0 == 0 && st.1 == 0 {
            continue;
        }
        let v = &plan.dist.transfers[k].value;
        match per.iter_mut().find(|p| &p.0 == v) {
            Some(p) => {
                p.1 += st.0;
                p.2 += st.1;
            }
            None => per.push((v.clone(), st.0, st.1)),
        }
        wait += st.2;
    }
    for (v, sent, recv) in &per {
        let _ = writeln!(s, "  {v}: sent {sent} B, received {recv} B");
    }
    let (tx, rx): (u64, u64) = per.iter().fold((0, 0), |a, p| (a.0 + p.1, a.1 + p.2));
    let _ = writeln!(
        s,
        "  rank {rank} sent {tx} B, received {rx} B; waited {:.3} ms on receives, {:.3} ms on sends; {} local task(s)",
        wait.as_secs_f64() * 1e3,
        send_wait.as_secs_f64() * 1e3,
        local.roles.iter().filter(|r| **r == Role::Compute).count()
    );
    let _ = writeln!(s, "  rank {rank} bytes read from inputs: {input_bytes}");
    s
}

/// This rank's trace events: a process per rank, a thread per worker, and the two ends of
/// every transfer as a flow (`id` = the transfer's index). Times are `MPI_Wtime` based, so
/// ranks on one host share a clock.
fn trace_events(local: &Local, report: &Report, rank: i32, start: f64) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let pid = rank;
    let mut ev = vec![format!(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"rank {rank}\"}}}}"
    )];
    for w in 0..report.threads {
        ev.push(format!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{w},\"args\":{{\"name\":\"worker {w}\"}}}}"
        ));
    }
    let base = start * 1e6;
    for e in &report.events {
        let ts = base + e.start.as_secs_f64() * 1e6;
        let dur = e.duration.as_secs_f64() * 1e6;
        ev.push(format!(
            "{{\"name\":\"{}\",\"cat\":\"task\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{ts:.3},\"dur\":{dur:.3}}}",
            esc(&local.plan.tasks[e.task].name),
            e.worker
        ));
        // A broadcast's one send starts the flow of each of its receiving transfers.
        let (ph, ks) = match local.roles[e.task] {
            Role::Send(k) => match local.group_of[k] {
                Some(g) => ("s", local.casts[g].clone()),
                None => ("s", vec![k]),
            },
            Role::Recv(k) => ("f", vec![k]),
            Role::Compute => ("", vec![]),
        };
        let at = ts + dur;
        for k in ks {
            ev.push(format!(
                "{{\"name\":\"transfer\",\"cat\":\"mpi\",\"ph\":\"{ph}\",\"bp\":\"e\",\"id\":{k},\"pid\":{pid},\"tid\":{},\"ts\":{at:.3}}}",
                e.worker
            ));
        }
    }
    ev.join(",\n")
}
