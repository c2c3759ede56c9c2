//! `tapc calibrate` under `mpirun` (issue 17): measures the links between ranks for the cost
//! model's α–β pricing. Rank 0 plays ping-pong with every other rank in turn (the others wait
//! at a barrier), over message sizes from 8 B to 16 MiB, and keeps the median round trip of
//! each size; then every rank runs `MPI_Allreduce` (a sum of f64) over the same sizes. A link's
//! latency α is the one-way time of the smallest message; its bandwidth 1/β the median of
//! `bytes / (one-way time - α)` over the messages of 1 MiB and more. Only rank 0 gets the
//! result (the others return `None` and write nothing). [`Links`] is built without MPI too;
//! measuring needs the `mpi` feature.

#[cfg(feature = "mpi")]
use mpi::{collective::SystemOperation, topology::SimpleCommunicator, traits::*};

#[cfg(feature = "mpi")]
/// Message sizes measured, in bytes.
const SIZES: [usize; 9] = [
    8,
    64,
    512,
    4 << 10,
    32 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

#[cfg(feature = "mpi")]
/// Messages from this size on give the bandwidth.
const BIG: usize = 1 << 20;

/// What rank 0 measured.
#[derive(Clone, Debug)]
pub struct Links {
    /// Ranks in the job.
    pub ranks: u32,
    /// Per other rank `r`: the link 0–r's latency (s) and bandwidth (bytes/s).
    pub links: Vec<(u32, f64, f64)>,
    /// The ping-pong of the link 0–1: (bytes, median one-way seconds) per size.
    pub pingpong: Vec<(usize, f64)>,
    /// `MPI_Allreduce` over every rank: (bytes, median seconds) per size.
    pub allreduce: Vec<(usize, f64)>,
}

impl Links {
    /// The median latency of the links (s).
    pub fn latency(&self) -> f64 {
        median(self.links.iter().map(|l| l.1).collect())
    }

    /// The median bandwidth of the links (bytes/s).
    pub fn bandwidth(&self) -> f64 {
        median(self.links.iter().map(|l| l.2).collect())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(feature = "mpi")]
/// Repetitions for a message of `bytes` (fewer for big ones, at least 5).
fn reps(bytes: usize) -> usize {
    ((64 << 20) / bytes.max(1)).clamp(5, 200)
}

#[cfg(feature = "mpi")]
/// Initialises MPI, measures, finalises MPI. `Ok(None)` on ranks other than 0.
pub fn measure() -> Result<Option<Links>, String> {
    let universe = mpi::initialize().ok_or("cannot initialise MPI (run under `mpirun`)")?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        return Err("links need at least 2 ranks: run `mpirun -np 2 tapc calibrate`".into());
    }
    let mut buf = vec![0u8; SIZES[SIZES.len() - 1]];
    let mut links = Vec::new();
    let mut pingpong = Vec::new();
    for peer in 1..size {
        world.barrier();
        if rank == 0 {
            let times = ping(&world, peer, &mut buf);
            links.push(fit(peer as u32, &times)?);
            if peer == 1 {
                pingpong = times;
            }
        } else if rank == peer {
            pong(&world, &mut buf);
        }
    }
    let allreduce = allreduce(&world);
    Ok((rank == 0).then_some(Links {
        ranks: size as u32,
        links,
        pingpong,
        allreduce,
    }))
}

#[cfg(feature = "mpi")]
/// Rank 0's side of the ping-pong with `peer`: (bytes, median one-way seconds) per size.
fn ping(world: &SimpleCommunicator, peer: i32, buf: &mut [u8]) -> Vec<(usize, f64)> {
    let other = world.process_at_rank(peer);
    SIZES
        .iter()
        .map(|&n| {
            // One round trip to warm the path up, then the timed ones.
            let times: Vec<f64> = (0..=reps(n))
                .map(|_| {
                    let t0 = mpi::time();
                    other.send(&buf[..n]);
                    other.receive_into(&mut buf[..n]);
                    (mpi::time() - t0) / 2.0
                })
                .skip(1)
                .collect();
            (n, median(times))
        })
        .collect()
}

#[cfg(feature = "mpi")]
/// The peer's side: echoes every message back.
fn pong(world: &SimpleCommunicator, buf: &mut [u8]) {
    let root = world.process_at_rank(0);
    for &n in &SIZES {
        for _ in 0..=reps(n) {
            root.receive_into(&mut buf[..n]);
            root.send(&buf[..n]);
        }
    }
}

#[cfg(feature = "mpi")]
/// Every rank: (bytes, median seconds) of `MPI_Allreduce` per size (f64 elements).
fn allreduce(world: &SimpleCommunicator) -> Vec<(usize, f64)> {
    SIZES
        .iter()
        .map(|&n| {
            let send = vec![1.0f64; n.div_ceil(8)];
            let mut recv = vec![0.0f64; send.len()];
            let times: Vec<f64> = (0..=reps(n))
                .map(|_| {
                    world.barrier();
                    let t0 = mpi::time();
                    world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
                    mpi::time() - t0
                })
                .skip(1)
                .collect();
            (send.len() * 8, median(times))
        })
        .collect()
}

#[cfg(feature = "mpi")]
/// A link's latency and bandwidth from its ping-pong times.
fn fit(peer: u32, times: &[(usize, f64)]) -> Result<(u32, f64, f64), String> {
    let alpha = times[0].1;
    let per_byte: Vec<f64> = (times.iter())
        .filter(|(n, _)| *n >= BIG)
        .map(|&(n, t)| {
            let wire = t - alpha;
            (if wire > 0.0 { wire } else { t }) / n as f64
        })
        .collect();
    let bandwidth = 1.0 / median(per_byte);
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !ok(alpha) || !ok(bandwidth) {
        return Err(format!(
            "the link 0-{peer} measured latency {alpha:e} s and bandwidth {bandwidth:e} B/s, not positive and finite"
        ));
    }
    Ok((peer, alpha, bandwidth))
}
