//! The reduction collectives of one rank (issue 17): each reduction group of the plan
//! (`group.rs`) runs as one task on every rank that holds a partial result. The task packs
//! its rank's partials, combines them with `MPI_Reduce_local` (two nodes on one rank), then
//! joins `MPI_Ireduce` to the root (the rank of the one node that reads the result),
//! `MPI_Iallreduce` (several readers of the whole result) or `MPI_Ireduce_scatter` (several
//! readers of disjoint parts) on a communicator of the group's ranks made at start-up, polls
//! it to completion under the rank's MPI lock (as receives do), and unpacks the result (or
//! its part) into the result's runs on the ranks that read it. A group whose partials are
//! all on this rank needs no communicator: the local combine is the result.
//!
//! A reduce-scatter gives communicator rank `k` the `k`-th block of the buffer every rank
//! contributes, so each rank packs its partials in that order: the parts of the ranks one
//! after the other (a permutation of the result's elements, the same on every rank; the
//! reduction is elementwise), and receives its own part packed in its runs' order.
//!
//! Datatypes: the MPI type of each dtype but f16, bf16 and bool, which the compiler never
//! groups (their split reductions keep the point-to-point transfers and combine tasks).

use super::comm::{installed, sub_communicator, Comm, Stats};
use super::dist::{Place, Reduction, Runs};
use super::group::{remap, Kind, ReduceOp};
use super::local::local_leaves;
use crate::tensor::DType;
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// One group as this rank sees it.
struct Group {
    red: Reduction,
    /// Its communicator (the root is rank 0 of it), when more than one rank takes part.
    comm: Option<ffi::MPI_Comm>,
    /// This rank's index in it, and its size.
    me: usize,
    size: usize,
    /// Whether this rank reads the result (its last argument).
    target: bool,
    /// How many of the leaves are on this rank (the task's first arguments).
    local: usize,
    /// A reduce-scatter's order of elements.
    scatter: Option<Scatter>,
}

/// How the ranks of a reduce-scatter lay out the buffer they reduce.
struct Scatter {
    /// Per leaf on this rank, its runs in the order of the ranks' parts.
    pack: Vec<Runs>,
    /// The elements of each rank's part, in the communicator's order (`recvcounts`).
    counts: Vec<c_int>,
    /// The bytes of each rank's part, in the same order.
    bytes: Vec<u64>,
    /// This rank's part: runs of the result.
    mine: Runs,
}

impl Scatter {
    /// The layout of group `g` on ranks `members` (the communicator's order), seen from `at`.
    fn of(g: &Reduction, nodes: &[u32], members: &[u32], at: Place) -> Result<Scatter, String> {
        let parts: Vec<Runs> = (members.iter())
            .map(|&m| g.part_of(m, |n| at.rank_of(n)))
            .collect();
        let order: Runs = parts.iter().flatten().copied().collect();
        let pack = (local_leaves(g, nodes, at).iter())
            .map(|l| remap(&g.runs, &l.runs, &order))
            .collect::<Option<Vec<Runs>>>()
            .ok_or_else(|| format!("corrupt plan: a part of {} outside it", g.value))?;
        let elems = |p: &Runs| p.iter().map(|r| r.1).sum::<i64>();
        let elem = g.dtype.size_bytes() as u64;
        let mine = members.iter().position(|&m| m == at.rank);
        Ok(Scatter {
            pack,
            counts: parts.iter().map(|p| elems(p) as c_int).collect(),
            bytes: parts.iter().map(|p| elems(p) as u64 * elem).collect(),
            mine: mine.map_or_else(Vec::new, |k| parts[k].clone()),
        })
    }
}

/// The rank's groups and what each moved.
struct Coll {
    groups: Vec<Group>,
    stats: Mutex<Stats>,
}

// SAFETY: the MPI handles are only used under the rank's MPI lock.
unsafe impl Send for Coll {}
unsafe impl Sync for Coll {}

static COLL: OnceLock<Coll> = OnceLock::new();

/// Makes every group's communicator (every rank splits `world` once per group, in plan order,
/// so collectives of different groups never need one order across ranks) and installs them
/// for the kernel. `ranks`: per group, [`super::local::group_ranks`].
pub(super) fn install(
    world: &SimpleCommunicator,
    reductions: &[Reduction],
    nodes: &[u32],
    ranks: &[Vec<u32>],
    at: Place,
) -> Result<(), String> {
    let mut groups = Vec::new();
    for (g, members) in reductions.iter().zip(ranks) {
        let me = members.iter().position(|&r| r == at.rank);
        let comm = sub_communicator(world, members, at.rank);
        let target = g.targets.iter().any(|&n| at.rank_of(n) == at.rank);
        let local = local_leaves(g, nodes, at).len();
        let scatter = (g.kind() == Kind::ReduceScatter)
            .then(|| Scatter::of(g, nodes, members, at))
            .transpose()?;
        groups.push(Group {
            red: g.clone(),
            comm,
            me: me.unwrap_or(0),
            size: members.len(),
            target,
            local,
            scatter,
        });
    }
    let stats = Mutex::new(vec![(0, 0, Duration::ZERO); groups.len()]);
    COLL.set(Coll { groups, stats })
        .map_err(|_| "the MPI runtime was started twice".to_string())
}

/// What every group moved so far (sent, received, time waiting), by group index.
pub(super) fn stats() -> Stats {
    (COLL.get()).map_or_else(Vec::new, |c| {
        c.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    })
}

/// The MPI datatype of `d` (`None`: MPI has none).
fn datatype(d: DType) -> Option<ffi::MPI_Datatype> {
    Some(match d {
        DType::F32 => f32::equivalent_datatype().as_raw(),
        DType::F64 => f64::equivalent_datatype().as_raw(),
        DType::I32 => i32::equivalent_datatype().as_raw(),
        DType::I64 => i64::equivalent_datatype().as_raw(),
        DType::I8 => i8::equivalent_datatype().as_raw(),
        DType::U8 => u8::equivalent_datatype().as_raw(),
        DType::I16 => i16::equivalent_datatype().as_raw(),
        DType::U16 => u16::equivalent_datatype().as_raw(),
        DType::U32 => u32::equivalent_datatype().as_raw(),
        DType::U64 => u64::equivalent_datatype().as_raw(),
        DType::F16 | DType::BF16 | DType::Bool => return None,
    })
}

fn operation(op: ReduceOp) -> ffi::MPI_Op {
    // SAFETY: reads constants of the MPI library.
    unsafe {
        match op {
            ReduceOp::Sum => ffi::RSMPI_SUM,
            ReduceOp::Prod => ffi::RSMPI_PROD,
            ReduceOp::Max => ffi::RSMPI_MAX,
            ReduceOp::Min => ffi::RSMPI_MIN,
        }
    }
}

/// The bytes of `runs` (`elem`-byte elements) of the buffer at `base`, packed.
unsafe fn pack(base: *const u8, runs: &Runs, elem: usize, into: &mut Vec<u8>) {
    into.clear();
    for &(a, n) in runs {
        // SAFETY: the runs lie inside the buffer (validated) and their writer is done.
        into.extend_from_slice(std::slice::from_raw_parts(
            base.add(a as usize * elem),
            n as usize * elem,
        ));
    }
}

/// Kernel of a reduction task: `range[0]` is the group; `bases` are this rank's partial
/// results in the order of the group's leaves, then the result when this rank reads it.
pub(super) unsafe extern "C-unwind" fn reduce_kernel(
    bases: *const *mut u8,
    range: *const i64,
) -> i32 {
    let (Some(c), Some(coll)) = (installed(), COLL.get()) else {
        return 2;
    };
    let id = *range as usize;
    let g = &coll.groups[id];
    let (Some(dt), op) = (datatype(g.red.dtype), operation(g.red.op)) else {
        return 5;
    };
    let (elem, count) = (g.red.dtype.size_bytes(), g.red.elements() as c_int);
    let leaves = g.local;
    if leaves == 0 {
        return 4;
    }
    let runs = |k: usize| g.scatter.as_ref().map_or(&g.red.runs, |s| &s.pack[k]);
    let (mut acc, mut tmp) = (Vec::new(), Vec::new());
    pack(*bases, runs(0), elem, &mut acc);
    for k in 1..leaves {
        pack(*bases.add(k), runs(k), elem, &mut tmp);
        let (src, dst) = (
            tmp.as_ptr() as *const c_void,
            acc.as_mut_ptr() as *mut c_void,
        );
        if c.mpi(|| ffi::MPI_Reduce_local(src, dst, count, dt, op)) != 0 {
            return 3;
        }
    }
    let bytes = acc.len() as u64;
    c.hold(2 * bytes, true);
    let rc = match g.comm {
        Some(comm) => collective(c, g, comm, (dt, op, count), &mut acc, &mut tmp),
        None => Ok(Duration::ZERO),
    };
    c.hold(2 * bytes, false);
    let Ok(waited) = rc else { return 3 };
    if g.target {
        let out = *bases.add(leaves);
        let mut from = 0;
        for &(a, n) in g.scatter.as_ref().map_or(&g.red.runs, |s| &s.mine) {
            let n = n as usize * elem;
            // SAFETY: as in `pack`; this task is the result's only writer.
            std::ptr::copy_nonoverlapping(acc.as_ptr().add(from), out.add(a as usize * elem), n);
            from += n;
        }
    }
    let root = 0;
    let (sent, received) = match &g.scatter {
        Some(s) => g.red.scatter_traffic(g.me, &s.bytes),
        None => g.red.traffic(g.me, g.size, root),
    };
    if let Ok(mut s) = coll.stats.lock() {
        s[id].0 += sent;
        s[id].1 += received;
        s[id].2 += waited;
    }
    0
}

/// Joins the group's collective with this rank's combined partials `acc`; the result ends in
/// `acc` on the ranks that receive it. Returns the time waited.
unsafe fn collective(
    c: &Comm,
    g: &Group,
    comm: ffi::MPI_Comm,
    (dt, op, count): (ffi::MPI_Datatype, ffi::MPI_Op, c_int),
    acc: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<Duration, c_int> {
    let received = match &g.scatter {
        Some(s) => s.bytes[g.me] as usize,
        None => acc.len(),
    };
    out.clear();
    out.resize(received, 0);
    let mut req = ffi::RSMPI_REQUEST_NULL;
    let (src, dst) = (
        acc.as_ptr() as *const c_void,
        out.as_mut_ptr() as *mut c_void,
    );
    let rc = c.mpi(|| match (&g.scatter, g.red.all()) {
        // SAFETY (the counts): the group outlives the request (it is waited for below).
        (Some(s), _) => {
            ffi::MPI_Ireduce_scatter(src, dst, s.counts.as_ptr(), dt, op, comm, &mut req)
        }
        (None, true) => ffi::MPI_Iallreduce(src, dst, count, dt, op, comm, &mut req),
        (None, false) => ffi::MPI_Ireduce(src, dst, count, dt, op, 0, comm, &mut req),
    });
    if rc != 0 {
        return Err(rc);
    }
    let waited = c.wait(&mut req)?;
    std::mem::swap(acc, out);
    Ok(waited)
}
