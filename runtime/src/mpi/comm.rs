//! The communication of one rank: its MPI handles, the messages in flight, and the send and
//! receive kernels that the local plan's transfer tasks run.
//!
//! Sends pack the planned runs and post `MPI_Isend` (or, at a broadcast's root, `MPI_Ibcast`);
//! a source's one contiguous run is sent in place instead, straight from its buffer (no
//! packing: with `--inputs-on-root` rank 0's worker used to copy every input window it sends
//! before computing), and a release task at the end of the run waits for it
//! ([`release_kernel`]). Every receive is posted ([`Comm::post_receives`]) before the run
//! starts, so data moves while the rank computes, and its task only waits and unpacks. The
//! kernels are plain kernel functions appended to the kernel table, so they find the rank's
//! [`Comm`] in a static.

use super::dist::Transfer;
use super::local::{Local, Role};
use crate::exec::SourceBuf;
use mpi::ffi;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A message in flight and the bytes it sends from (a packed `Vec`) or receives into (a
/// [`SourceBuf`]: big ones on huge pages, faulted in as MPI writes them).
struct Pending<B = SourceBuf> {
    req: ffi::MPI_Request,
    buf: B,
}

/// Per transfer: bytes sent, bytes received, time waiting for the data.
pub(super) type Stats = Vec<(u64, u64, Duration)>;

/// What the send and receive kernels need: they are plain kernel functions, so they find it
/// here.
pub(super) struct Comm {
    comm: ffi::MPI_Comm,
    byte: ffi::MPI_Datatype,
    size: u32,
    transfers: Vec<Transfer>,
    /// Posted receives by transfer index.
    recvs: Vec<Mutex<Option<Pending>>>,
    sends: Mutex<Vec<Pending<Vec<u8>>>>,
    /// Per transfer: whether this rank sends it in place, and the request of that send until
    /// its release task (or [`Comm::wait_sends`]) waited for it.
    in_place: Vec<bool>,
    in_flight: Vec<Mutex<Option<Request>>>,
    /// Time the release tasks waited for their sends.
    released: Mutex<Duration>,
    /// The progress thread while it runs ([`Comm::progress`]).
    waker: Mutex<Option<std::thread::Thread>>,
    /// The broadcasts, by the plan's group index.
    groups: Vec<Broadcast>,
    /// The broadcast of each transfer, if any.
    group_of: Vec<Option<usize>>,
    /// Every MPI call goes through this lock (correct at any thread level MPI provides).
    lock: Mutex<()>,
    stats: Mutex<Stats>,
    /// Bytes of message buffers (packed sends, posted receives) live now and at most.
    held: (AtomicU64, AtomicU64),
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

/// A request of a send in place.
struct Request(ffi::MPI_Request);

// SAFETY: the MPI handles are only used under `lock`.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}
unsafe impl Send for Request {}

static COMM: OnceLock<Comm> = OnceLock::new();

/// How long the progress thread sleeps when this rank has no unfinished message (a safety
/// net: posting a send wakes it at once).
const IDLE: Duration = Duration::from_millis(2);

/// The rank's communication, once installed (for the collective kernels of `coll.rs`).
pub(super) fn installed() -> Option<&'static Comm> {
    COMM.get()
}

impl Comm {
    fn rank_of(&self, node: u32) -> c_int {
        (node % self.size) as c_int
    }

    /// Counts `n` more bytes of message buffers (`add`) or `n` fewer.
    pub(super) fn hold(&self, n: u64, add: bool) {
        if add {
            let now = self.held.0.fetch_add(n, Ordering::Relaxed) + n;
            self.held.1.fetch_max(now, Ordering::Relaxed);
        } else {
            self.held.0.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// The most bytes of message buffers this rank held at once.
    pub(super) fn held_peak(&self) -> u64 {
        self.held.1.load(Ordering::Relaxed)
    }

    pub(super) fn mpi<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }

    /// Drives MPI's progress engine until `stop`: over TCP a message moves only while its
    /// sender or receiver is inside an MPI call, so without this a send posted early would
    /// wait for the end of its sender's compute (the receiver's too, for the handshake of a
    /// large message). Every `every` it tests each of this rank's unfinished messages (which
    /// progresses them); while none is unfinished it makes no MPI call and sleeps until a
    /// send is posted ([`Comm::wake`]) or [`IDLE`] passed, so a rank whose messages have all
    /// arrived computes undisturbed (it used to probe every 200 µs for the whole run). The
    /// collectives of `coll.rs` are progressed by their own task, which waits for them.
    pub(super) fn progress(&self, stop: &AtomicBool, every: Duration) {
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        while !stop.load(Ordering::Relaxed) {
            if self.test_all() {
                std::thread::sleep(every);
            } else {
                std::thread::park_timeout(IDLE);
            }
        }
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Wakes the progress thread (a send was posted).
    fn wake(&self) {
        if let Some(t) = self
            .waker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            t.unpark();
        }
    }

    /// Tests every unfinished message of this rank (a finished request becomes the null
    /// request, which its task's wait then finds done); whether any is still unfinished.
    fn test_all(&self) -> bool {
        let mut open = false;
        let mut test = |req: &mut ffi::MPI_Request| {
            // SAFETY: reads a constant of the MPI library.
            if *req == unsafe { ffi::RSMPI_REQUEST_NULL } {
                return;
            }
            let mut done: c_int = 0;
            // SAFETY: a live request; the status is ignored.
            self.mpi(|| unsafe { ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE) });
            open |= done == 0;
        };
        for r in &self.recvs {
            if let Some(p) = r.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                test(&mut p.req);
            }
        }
        for g in &self.groups {
            if let Some(p) = g.slot.lock().unwrap_or_else(|e| e.into_inner()).0.as_mut() {
                test(&mut p.req);
            }
        }
        for p in self
            .sends
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            test(&mut p.req);
        }
        for r in &self.in_flight {
            if let Some(r) = r.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                test(&mut r.0);
            }
        }
        open
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
            buf: SourceBuf::unfilled(t.bytes()).ok()?,
        };
        let (ptr, n) = (p.buf.as_mut_ptr() as *mut c_void, p.buf.len() as c_int);
        self.hold(p.buf.len() as u64, true);
        let rc = self.mpi(|| start(ptr, n, &mut p.req));
        (rc == 0).then_some(p)
    }

    /// Polls `req` until it completes; returns the time waited.
    pub(super) fn wait(&self, req: &mut ffi::MPI_Request) -> Result<Duration, c_int> {
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

    /// Sets up this rank's communication for `transfers` (a communicator per broadcast: every
    /// rank splits `world` once per broadcast, in plan order, so broadcasts never need to be
    /// matched in one order across ranks) and makes it the one the kernels use.
    pub(super) fn install(
        world: &SimpleCommunicator,
        transfers: &[Transfer],
        local: &Local,
    ) -> Result<&'static Comm, String> {
        let rank = world.rank() as u32;
        let groups = local
            .groups
            .iter()
            .map(|ranks| broadcast(world, ranks, rank))
            .collect();
        let comm = Comm {
            comm: world.as_raw(),
            byte: u8::equivalent_datatype().as_raw(),
            size: world.size() as u32,
            transfers: transfers.to_vec(),
            recvs: transfers.iter().map(|_| Mutex::new(None)).collect(),
            sends: Mutex::new(Vec::new()),
            in_place: (0..transfers.len())
                .map(|k| local.roles.contains(&Role::Release(k)))
                .collect(),
            in_flight: transfers.iter().map(|_| Mutex::new(None)).collect(),
            released: Mutex::new(Duration::ZERO),
            waker: Mutex::new(None),
            groups,
            group_of: local.group_of.clone(),
            lock: Mutex::new(()),
            stats: Mutex::new(vec![(0, 0, Duration::ZERO); transfers.len()]),
            held: (AtomicU64::new(0), AtomicU64::new(0)),
        };
        COMM.set(comm)
            .map_err(|_| "the MPI runtime was started twice".to_string())?;
        Ok(COMM.get().expect("set above"))
    }

    /// Posts every receive of this rank (point to point and broadcast). Each buffer lives in
    /// `recvs[k]` or the broadcast's slot (its heap block does not move) until a receive task
    /// has waited for it.
    pub(super) fn post_receives(
        &self,
        local: &Local,
        broadcasts: &[Vec<u32>],
        rank: u32,
    ) -> Result<(), String> {
        for &k in &local.incoming {
            let t = &self.transfers[k];
            let (from, tag) = (self.rank_of(t.from), k as c_int);
            // SAFETY: `buf` holds `n` bytes and stays in `recvs[k]` until the receive waited.
            let p = self.post(t, |buf, n, req| unsafe {
                ffi::MPI_Irecv(buf, n, self.byte, from, tag, self.comm, req)
            });
            *self.recvs[k].lock().unwrap_or_else(|e| e.into_inner()) =
                Some(p.ok_or_else(|| format!("cannot post the receive of {}", t.value))?);
        }
        for (g, ranks) in local.groups.iter().enumerate() {
            let Some(comm) = self.groups[g].comm.filter(|_| ranks[0] != rank) else {
                continue;
            };
            let t = &self.transfers[broadcasts[g][0] as usize];
            // SAFETY: `buf` holds `n` bytes and stays in the slot until the receive waited.
            let p = self.post(t, |buf, n, req| unsafe {
                ffi::MPI_Ibcast(buf, n, self.byte, 0, comm, req)
            });
            self.groups[g]
                .slot
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .0 = Some(p.ok_or_else(|| format!("cannot post the broadcast of {}", t.value))?);
        }
        Ok(())
    }

    /// Waits for every send posted during the run; returns the time waited.
    pub(super) fn wait_sends(&self) -> Result<Duration, String> {
        let mut sends = std::mem::take(&mut *self.sends.lock().unwrap_or_else(|e| e.into_inner()));
        let mut waited =
            std::mem::take(&mut *self.released.lock().unwrap_or_else(|e| e.into_inner()));
        // Their release tasks waited for them, unless the run stopped early.
        for slot in &self.in_flight {
            if let Some(mut r) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                waited += self
                    .wait(&mut r.0)
                    .map_err(|_| "a send failed".to_string())?;
            }
        }
        for p in &mut sends {
            waited += self
                .wait(&mut p.req)
                .map_err(|_| "a send failed".to_string())?;
            self.hold(p.buf.len() as u64, false);
        }
        Ok(waited)
    }

    /// What every transfer moved so far.
    pub(super) fn stats(&self) -> Stats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The communicator of `ranks` (in that order: the first is its rank 0) on this rank `rank`,
/// when it is one of them and they are more than one. Every rank of `world` must call this
/// for the same groups in the same order (a split is collective).
pub(super) fn sub_communicator(
    world: &SimpleCommunicator,
    ranks: &[u32],
    rank: u32,
) -> Option<ffi::MPI_Comm> {
    let at = ranks.iter().position(|&r| r == rank);
    let color = match at {
        Some(_) if ranks.len() > 1 => Color::with_value(0),
        _ => Color::undefined(),
    };
    world
        .split_by_color_with_key(color, at.unwrap_or(0) as c_int)
        .map(|sub| {
            let raw = sub.as_raw();
            // Kept until MPI_Finalize: freeing is collective, and ranks finish apart.
            std::mem::forget(sub);
            raw
        })
}

/// This rank's side of the broadcast over `ranks` (root first).
fn broadcast(world: &SimpleCommunicator, ranks: &[u32], rank: u32) -> Broadcast {
    let comm = sub_communicator(world, ranks, rank);
    Broadcast {
        comm,
        receivers: ranks.len() as u64 - 1,
        slot: Mutex::new((None, false)),
    }
}

fn byte_range(t: &Transfer) -> impl Iterator<Item = (usize, usize)> + '_ {
    let e = t.elem as usize;
    t.runs
        .iter()
        .map(move |&(a, n)| (a as usize * e, n as usize * e))
}

/// Kernel of a send task: packs transfer `range[0]` from `bases[0]` and posts it.
pub(super) unsafe extern "C-unwind" fn send_kernel(
    bases: *const *mut u8,
    range: *const i64,
) -> i32 {
    let Some(c) = COMM.get() else { return 2 };
    let id = *range as usize;
    let t = &c.transfers[id];
    let base = *bases;
    if c.in_place[id] {
        return send_in_place(c, id, base);
    }
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
    c.hold(buf.len() as u64, true);
    c.sends
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Pending { req, buf });
    c.wake();
    0
}

/// Posts the send of transfer `id`, one run, straight from the buffer at `base`.
unsafe fn send_in_place(c: &Comm, id: usize, base: *mut u8) -> i32 {
    let Some((at, n)) = byte_range(&c.transfers[id]).next() else {
        return 5;
    };
    let mut req = ffi::RSMPI_REQUEST_NULL;
    let rc = c.mpi(|| {
        // SAFETY: the run lies inside the buffer (validated), which nobody writes and which
        // lives until the release task waited for this send.
        ffi::MPI_Isend(
            base.add(at) as *const c_void,
            n as c_int,
            c.byte,
            c.rank_of(c.transfers[id].to),
            id as c_int,
            c.comm,
            &mut req,
        )
    });
    if rc != 0 {
        return 3;
    }
    if let Ok(mut s) = c.stats.lock() {
        s[id].0 += n as u64;
    }
    *c.in_flight[id].lock().unwrap_or_else(|e| e.into_inner()) = Some(Request(req));
    c.wake();
    0
}

/// Kernel of a release task: waits for the send in place of transfer `range[0]`, whose
/// buffer (`bases[0]`) may be freed after.
pub(super) unsafe extern "C-unwind" fn release_kernel(
    _bases: *const *mut u8,
    range: *const i64,
) -> i32 {
    let Some(c) = COMM.get() else { return 2 };
    let id = *range as usize;
    let Some(mut r) = c.in_flight[id]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    else {
        return 4;
    };
    match c.wait(&mut r.0) {
        Ok(w) => {
            *c.released.lock().unwrap_or_else(|e| e.into_inner()) += w;
            0
        }
        Err(_) => 3,
    }
}

/// Kernel of a receive task: waits for transfer `range[0]` and unpacks it into `bases[0]`.
pub(super) unsafe extern "C-unwind" fn recv_kernel(
    bases: *const *mut u8,
    range: *const i64,
) -> i32 {
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
    let rc = recv_into(c, id, &mut p, *bases);
    c.hold(p.buf.len() as u64, false);
    rc
}

/// Waits for the message `p` of transfer `id` and unpacks it into the buffer at `base`.
unsafe fn recv_into(c: &Comm, id: usize, p: &mut Pending, base: *mut u8) -> i32 {
    let data = p.buf.as_mut_ptr() as *const u8;
    let waited = match c.wait(&mut p.req) {
        Ok(w) => w,
        Err(_) => return 3,
    };
    let mut from = 0;
    for (at, n) in byte_range(&c.transfers[id]) {
        // SAFETY: as in `send_kernel`; nobody else writes these runs.
        std::ptr::copy_nonoverlapping(data.add(from), base.add(at), n);
        from += n;
    }
    if let Ok(mut s) = c.stats.lock() {
        s[id].1 += p.buf.len() as u64;
        s[id].2 += waited;
    }
    0
}
