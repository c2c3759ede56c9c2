//! One rank of a distributed program under `mpirun`: the steps every run takes
//! ([`crate::program::run`]: binding, the memory check, the output commit and the failure
//! report) in the rank's own [`Mode`], [`Rank`].
//!
//! Every rank decodes the same plan and, getting ready ([`Rank::prepare`]), checks with its
//! peers that it is the same (a hash) and that they were all started with the same run
//! options ([`AGREED`]: else rank 0 names the options and ranks that differ and aborts the
//! job, before any input is read), and builds its local plan (`local.rs`: its nodes' tasks
//! plus send and receive tasks, each buffer cut to the pieces the rank touches). It reads the
//! windows of the sources its tasks read
//! ([`Rank::read`]), or with `--inputs-on-root` rank 0 reads them for everyone. Running
//! ([`Rank::execute`]) posts every receive (`comm.rs`), runs the local plan on the ordinary
//! multithreaded executor with `--threads` workers (and a progress thread when the rank moves
//! data), waits for its sends, and sends its report to rank 0; over `--steps N` it does so
//! once per step, the source pieces kept and each state replaced in place between steps
//! (`carry.rs`). Sinks (`sinks.rs`): rank 0
//! stages every directly written sink before the run (header and full size) and broadcasts the
//! staged paths; after the run each rank writes its windows of them at their offsets, an
//! all-reduce agrees that all did, and rank 0 commits them with the trace (and, with
//! `--gather-sinks`, the sinks gathered to it), so that they are in place only after all
//! ranks succeeded. A rank that fails prints its rank and the
//! reason (the executor's messages name the task) and calls `MPI_Abort` ([`Rank::fail`]).
//!
//! Each rank checks its own peak ([`Mode::footprint`]: its local plan's pieces, the source
//! pieces it reads and its message buffers) against the memory it may use, before any input is
//! read, with the message one process prints; `--time` prints that planned peak and the
//! measured one (the executor's allocation high-water mark, the inputs held, the most message
//! bytes held at once).

use super::carry;
use super::coll::{self, reduce_kernel};
use super::comm::{recv_kernel, release_kernel, send_kernel, Comm, Stats};
use super::dist::Place;
use super::group::Kind;
use super::local::{local_plan, Flags, Local, Role};
use super::peak::RankPeak;
use super::sinks::{self, Out};
use crate::cli::{Args, Outcome};
use crate::exec::{execute_inputs, Input, KernelFn, Owned, Report, SinkView, SourceBuf};
use crate::memory;
use crate::npy;
use crate::output::{self, Npy, Outputs};
use crate::paths::shown;
use crate::plan::Plan;
use crate::program::{self, Done, Footprint, Job, Mode};
use crate::signals;
use crate::tensor::checked_numel;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::ffi::c_int;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// This rank of the job, through the steps of [`program::run`].
struct Rank {
    /// MPI is finalised when this is dropped, after the run.
    _universe: Universe,
    world: SimpleCommunicator,
    threading: mpi::Threading,
    at: Place,
    /// The hash of the plan's encoding, to check that every rank runs the same plan.
    plan_hash: u64,
    /// The rank's part of the plan (built by `prepare`).
    local: Option<Local>,
    progress_every: Option<Duration>,
    /// The source pieces as read, one per source of the local plan, each handed to the run
    /// as its buffer.
    inputs: Vec<Mutex<Option<SourceBuf>>>,
    /// Bytes this rank read from its input files.
    input_bytes: u64,
    /// The process's resident bytes once MPI is up, before the run allocates anything.
    resident_at_start: Option<u64>,
}

/// Runs this rank's part of `job` (`encoded`: the plan's encoding).
pub(crate) fn run_rank(job: &Job, encoded: &[u8]) -> Outcome {
    let Some((universe, threading)) = mpi::initialize_with_threading(mpi::Threading::Multiple)
    else {
        return Outcome::failed(job.prog, "cannot initialise MPI (run under `mpirun`)");
    };
    // The rank's memory plan counts freed buffers as given back.
    crate::exec::keep_freed_buffers(false);
    let world = universe.world();
    let at = Place {
        rank: world.rank() as u32,
        size: world.size() as u32,
    };
    let mut rank = Rank {
        _universe: universe,
        world,
        threading,
        at,
        plan_hash: fnv1a(encoded),
        local: None,
        progress_every: None,
        inputs: Vec::new(),
        input_bytes: 0,
        resident_at_start: memory::resident_now(),
    };
    program::run(job, &mut rank)
}

/// What a rank's steps leave: the last step's report, sink bytes written and start time
/// (`MPI_Wtime`), the highest measured peak, the time waited on sends and the log entries.
struct Ran {
    report: Report,
    written: u64,
    start: f64,
    peak: u64,
    send_wait: Duration,
    log: String,
}

/// What every rank reports to rank 0 after its run.
struct RankReport {
    /// Its `--time` section.
    summary: String,
    /// Its trace events (empty without `--trace`).
    trace: String,
    /// Bytes it sent.
    sent: u64,
    /// Its `--log-every` entries ([`carry::log_step`]).
    log: String,
}

impl Mode for Rank {
    fn prepare(&mut self, job: &Job) -> Result<(), String> {
        // Workers and the progress thread call MPI, one at a time (`Comm::lock`).
        if matches!(
            self.threading,
            mpi::Threading::Single | mpi::Threading::Funneled
        ) {
            return Err(format!(
                "this MPI provides thread level {:?}; the runtime needs MPI_THREAD_SERIALIZED or more",
                self.threading
            ));
        }
        self.progress_every = progress_interval()?;
        self.check_same_plan()?;
        self.check_same_options(job.args)?;
        let nk = job.kernels.len() as u32;
        let carry = job.args.steps.count > 1;
        if carry && job.args.inputs_on_root && !job.plan.states.is_empty() {
            return Err("`--steps` above 1 with `--inputs-on-root`: the state must stay on the ranks that hold it, so each rank reads its own windows of it; run without `--inputs-on-root`".into());
        }
        let flags = Flags {
            on_root: job.args.inputs_on_root,
            gather: job.args.gather_sinks,
            carry,
        };
        let local = local_plan(job.plan, self.at, nk, flags);
        let transfers = &job.plan.dist.transfers;
        if let Some(t) = transfers.iter().find(|t| t.bytes() > c_int::MAX as u64) {
            return Err(format!("transfer of {} is over 2 GiB", t.value));
        }
        self.local = Some(local);
        Ok(())
    }

    /// This rank's own peak ([`crate::mpi::peak`]): its local plan's pieces (the source
    /// pieces it reads among them, read straight into their buffers) and its messages.
    fn footprint<'a>(&'a self, job: &Job<'a>) -> Footprint<'a> {
        match &self.local {
            // Over several steps the source pieces are held throughout: counted again, on top
            // of the plan's (which frees each after its last use).
            Some(l) => Footprint {
                plan: &l.plan,
                input_bytes: match job.args.steps.count > 1 {
                    true => (l.plan.sources.iter())
                        .map(|s| l.plan.buffers[s.buffer as usize].bytes)
                        .sum(),
                    false => 0,
                },
                message_bytes: l.messages,
            },
            None => Footprint::whole(job.plan),
        }
    }

    fn read(&mut self, job: &Job, files: &[PathBuf]) -> Result<(), String> {
        let local = self.local.as_ref().ok_or_else(not_prepared)?;
        for (k, r) in local.reads.iter().enumerate() {
            let s = &job.plan.sources[r.source];
            // A source window reads its declared source's file.
            let of = s.file(r.source);
            let (file, declared) = (&files[of], &job.plan.sources[of]);
            let piece = &local.plan.buffers[local.plan.sources[k].buffer as usize];
            let mut buf = SourceBuf::zeroed(piece.bytes)
                .map_err(|e| format!("input for source @{}: {e}", s.name))?;
            let ty = (s.dtype, &declared.shape[..]);
            let dst = buf.bytes_mut();
            let n = match &s.window {
                None => npy::read_piece_into(file, &s.name, ty, r.piece, &r.runs, dst),
                Some(w) => {
                    let w = npy::WindowBox {
                        origin: &w.origin,
                        bx: &s.shape,
                    };
                    npy::read_window_into(file, &s.name, ty, &w, r.piece, &r.runs, dst)
                }
            }
            .map_err(|e| e.to_string())?;
            self.inputs.push(Mutex::new(Some(buf)));
            self.input_bytes += n;
        }
        Ok(())
    }

    fn writes_outputs(&self) -> bool {
        self.at.rank == 0
    }

    fn execute(&mut self, job: &Job, outputs: &mut Outputs) -> Result<Option<Done>, String> {
        let local = self.local.as_ref().ok_or_else(not_prepared)?;
        let staged = self.stage_direct(job, local, outputs)?;
        signals::test_pause("run");
        let c = Comm::install(&self.world, &job.plan.dist.transfers, local)?;
        let d = &job.plan.dist;
        coll::install(
            &self.world,
            &d.reductions,
            &d.nodes,
            &local.reduce_ranks,
            self.at,
        )?;
        let ran = self.steps(job, local, c, &staged, outputs)?;
        signals::test_pause("sinks");
        self.agree()?;
        let stats = c.stats();
        let reduced = coll::stats();
        let mut peaks = Peaks::of(local, &ran.report, c.held_peak());
        peaks.measured[0] = ran.peak;
        let mine = RankReport {
            summary: self.summary(
                job.plan,
                local,
                &ran.report,
                (&stats, &reduced),
                ran.send_wait,
            ) + &peaks.line(self.at.rank, self.resident_at_start)
                + &format!(
                    "  rank {} sink bytes written: {}\n",
                    self.at.rank, ran.written
                ),
            trace: (job.args.trace.as_ref()).map_or_else(String::new, |_| {
                trace_events(local, &ran.report, self.at.rank as i32, ran.start)
            }),
            sent: stats.iter().chain(&reduced).map(|s| s.0).sum(),
            log: ran.log,
        };
        let Some(all) = self.gather(mine) else {
            return Ok(None);
        };
        let names = job.plan.sinks.iter().map(|s| s.name.as_str());
        let logs: Vec<&str> = all.iter().map(|r| r.log.as_str()).collect();
        Ok(Some(Done {
            paths: output::sink_targets(&job.args.out_dir, names).map_err(|e| e.to_string())?,
            trace: job.args.trace.as_ref().map(|_| trace_json(&all)),
            time: (job.args.time)
                .then(|| time_summary(job.plan, self.at, local, &all, job.args.steps.count)),
            log: carry::merge_logs(&logs),
        }))
    }

    fn fail(&self, job: &Job, msg: &str) -> Outcome {
        use std::io::Write;
        let who = format!("{}: rank {}", job.prog, self.at.rank);
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().write_all(Outcome::failed(&who, msg).stderr.as_bytes());
        let _ = std::io::stderr().flush();
        self.world.abort(1)
    }
}

/// A rank's planned and measured peak memory: (buffers, of which inputs, messages) each.
struct Peaks {
    planned: [u64; 3],
    measured: [u64; 3],
}

impl Peaks {
    /// The plan's figures (those the memory check used) and the run's: the executor's
    /// allocation high-water mark and the most message bytes held at once.
    fn of(local: &Local, report: &Report, messages: u64) -> Peaks {
        let p = RankPeak::of(local);
        Peaks {
            planned: [p.buffers, p.inputs, p.messages],
            measured: [report.peak_bytes, p.inputs, messages],
        }
    }

    /// The `--time` line: `rank R peak memory: planned N B (...), measured N B (...)`.
    fn line(&self, rank: u32, resident_at_start: Option<u64>) -> String {
        let part = |v: &[u64; 3]| {
            format!(
                "{} B (buffers {}, of which inputs {}, messages {})",
                v[0] + v[2],
                v[0],
                v[1],
                v[2]
            )
        };
        let start = resident_at_start.map_or_else(String::new, |b| format!("; {b} B at start"));
        let rss = memory::resident_peak().map_or_else(String::new, |b| {
            format!("; resident high-water {b} B (the whole process, MPI included{start})")
        });
        format!(
            "  rank {rank} peak memory: planned {}, measured {}{rss}\n",
            part(&self.planned),
            part(&self.measured)
        )
    }
}

/// The sinks of a rank's run, read in place: on rank 0 the gathered ones are staged whole,
/// and every rank writes its runs of the direct ones into the staged files
/// ([`sinks::write_runs`]). Returns the sink bytes this rank wrote.
fn write_sinks(
    job: &Job,
    local: &Local,
    views: &[SinkView],
    staged: &[Option<PathBuf>],
    outputs: &mut Outputs,
) -> Result<u64, String> {
    let whole: Vec<(&str, &dyn Npy)> = (views.iter().zip(&local.outs))
        .filter(|(_, o)| matches!(o, Out::Whole(_)))
        .map(|(v, _)| (v.name, v as &dyn Npy))
        .collect();
    if !whole.is_empty() {
        program::stage_sinks(job, outputs, &whole)?;
    }
    let whole_bytes: u64 = (views.iter().zip(&local.outs))
        .filter(|(_, o)| matches!(o, Out::Whole(_)))
        .map(|(v, _)| (checked_numel(v.shape).unwrap_or(0) * v.dtype.size_bytes()) as u64)
        .sum();
    Ok(whole_bytes + sinks::write_runs(job.plan, views, &local.outs, staged)?)
}

fn not_prepared() -> String {
    "internal error: the rank's plan was used before it was built".to_string()
}

impl Rank {
    /// Fails unless every rank runs the same plan (an all-gather of a hash of its encoding).
    fn check_same_plan(&self) -> Result<(), String> {
        let mine = self.plan_hash;
        let mut all = vec![0u64; self.at.size as usize];
        self.world.all_gather_into(&mine, &mut all[..]);
        if all[self.at.rank as usize] != all[0] {
            return Err(format!(
                "this rank runs a program built from another plan (plan hash {mine:016x}, rank 0 has {:016x})",
                all[0]
            ));
        }
        if all.iter().any(|&h| h != all[0]) {
            // The odd rank reports and aborts; the others wait for that abort.
            self.world.barrier();
        }
        Ok(())
    }

    /// Fails on every rank, with one message from rank 0, unless every rank was started with
    /// the same [`AGREED`] options (an all-gather of a hash of each; rank 0 names the options
    /// and ranks that differ). The other ranks wait for rank 0's abort.
    fn check_same_options(&self, args: &Args) -> Result<(), String> {
        let mine = agreed(args).map(|(_, _, h)| h);
        let mut all = vec![0u64; AGREED.len() * self.at.size as usize];
        self.world.all_gather_into(&mine[..], &mut all[..]);
        let all: Vec<&[u64]> = all.chunks(AGREED.len()).collect();
        let Some(msg) = options_differ(args, &all) else {
            return Ok(());
        };
        if self.at.rank != 0 {
            // Rank 0 reports and aborts the job; this rank waits for that abort.
            self.world.barrier();
        }
        Err(msg)
    }

    /// Runs every step (`--steps`): each posts the receives and runs the local plan; after
    /// each but the last the rank's state takes its update ([`carry::Held::refresh`]), after
    /// the last the rank writes its sinks. One step hands the pieces read to the run; several
    /// keep them for every step.
    fn steps(
        &self,
        job: &Job,
        local: &Local,
        c: &'static Comm,
        staged: &[Option<PathBuf>],
        outputs: &mut Outputs,
    ) -> Result<Ran, String> {
        let steps = job.args.steps;
        let mut held = (steps.count > 1)
            .then(|| carry::Held::take(&self.inputs))
            .transpose()?;
        let inputs: Vec<Input> = match &mut held {
            Some(h) => h.inputs(&local.plan),
            None => (local.plan.sources.iter().zip(&self.inputs))
                .map(|(s, buf)| {
                    Input::Owned(Owned {
                        buf,
                        dtype: s.dtype,
                        shape: &s.shape,
                    })
                })
                .collect(),
        };
        let (mut log, mut peak, mut send_wait) = (String::new(), 0, Duration::ZERO);
        for s in 1..=steps.count {
            c.post_receives(local, &job.plan.dist.broadcasts, self.at.rank)?;
            if s == 1 {
                self.world.barrier();
            }
            let start = mpi::time();
            let last = s == steps.count;
            let run = self.run_local(job, local, c, &inputs, |views| {
                if steps.logs(s) {
                    carry::log_step(job.plan, local, s, views, &mut log)?;
                }
                match (last, &mut held) {
                    (false, Some(h)) => h.refresh(job.plan, local, views).map(|_| 0),
                    _ => write_sinks(job, local, views, staged, outputs),
                }
            });
            let (written, report) = run.map_err(|e| match steps.count {
                1 => e,
                _ => format!("step {s}: {e}"),
            })?;
            send_wait += c.wait_sends()?;
            peak = peak.max(report.peak_bytes);
            if last {
                return Ok(Ran {
                    report,
                    written,
                    start,
                    peak,
                    send_wait,
                    log,
                });
            }
        }
        Err("internal error: a run of no steps".into())
    }

    /// Runs the local plan on `inputs`, with the send and receive kernels after the program's,
    /// and a progress thread while it runs when this rank moves data; `sinks` reads the sinks.
    fn run_local(
        &self,
        job: &Job,
        local: &Local,
        c: &'static Comm,
        inputs: &[Input],
        sinks: impl FnOnce(&[SinkView]) -> Result<u64, String>,
    ) -> Result<(u64, Report), String> {
        let mut table: Vec<KernelFn> = job.kernels.to_vec();
        table.push(send_kernel);
        table.push(recv_kernel);
        table.push(reduce_kernel);
        table.push(release_kernel);
        let opts = program::options(job.args);
        // A rank that moves no data (one rank, an idle one) needs no progress.
        let moves = local.roles.iter().any(|r| *r != Role::Compute);
        let stop = AtomicBool::new(false);
        std::thread::scope(|sc| {
            if let Some(every) = self.progress_every.filter(|_| moves) {
                let stop = &stop;
                sc.spawn(move || c.progress(stop, every));
            }
            let run = execute_inputs(&local.plan, &table, inputs, &opts, sinks);
            stop.store(true, Ordering::Relaxed);
            run
        })
    }

    /// On rank 0, stages the sinks the ranks write directly ([`sinks::stage`]); every rank
    /// gets their staged paths (a broadcast).
    fn stage_direct(
        &self,
        job: &Job,
        local: &Local,
        outputs: &mut Outputs,
    ) -> Result<Vec<Option<PathBuf>>, String> {
        if !local.direct.contains(&true) {
            return Ok(vec![None; job.plan.sinks.len()]);
        }
        let root = self.world.process_at_rank(0);
        let mut bytes = Vec::new();
        if self.at.rank == 0 {
            let staged = sinks::stage(job.plan, &local.direct, outputs, &job.args.out_dir)?;
            for p in &staged {
                bytes.push(u8::from(p.is_some()));
                bytes.extend_from_slice(p.as_ref().map_or(&[][..], |p| p.as_os_str().as_bytes()));
                bytes.push(0);
            }
        }
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        root.broadcast_into(&mut bytes[..]);
        let paths = bytes.split(|&b| b == 0).take(job.plan.sinks.len());
        Ok(paths
            .map(|p| (p.first() == Some(&1)).then(|| PathBuf::from(OsStr::from_bytes(&p[1..]))))
            .collect())
    }

    /// The agreement that every rank wrote its windows of the sinks: an all-reduce (a rank that
    /// failed aborted the job instead of joining it).
    fn agree(&self) -> Result<(), String> {
        let (mine, mut all) = (1u32, 0u32);
        self.world
            .all_reduce_into(&mine, &mut all, SystemOperation::min());
        match all {
            1 => Ok(()),
            _ => Err("a rank failed to write its part of the sinks".into()),
        }
    }

    /// Sends this rank's report to rank 0; on rank 0, returns every rank's, in rank order.
    fn gather(&self, mine: RankReport) -> Option<Vec<RankReport>> {
        if self.at.rank != 0 {
            let root = self.world.process_at_rank(0);
            root.send_with_tag(mine.summary.as_bytes(), 1);
            root.send_with_tag(mine.trace.as_bytes(), 2);
            root.send_with_tag(&mine.sent, 3);
            root.send_with_tag(mine.log.as_bytes(), 4);
            return None;
        }
        let mut all = vec![mine];
        for r in 1..self.at.size as i32 {
            let p = self.world.process_at_rank(r);
            let text =
                |tag| String::from_utf8_lossy(&p.receive_vec_with_tag::<u8>(tag).0).into_owned();
            let (summary, trace) = (text(1), text(2));
            let sent = p.receive_with_tag::<u64>(3).0;
            all.push(RankReport {
                summary,
                trace,
                sent,
                log: text(4),
            });
        }
        Some(all)
    }

    /// This rank's `--time` section (see [`rank_summary`]).
    fn summary(
        &self,
        plan: &Plan,
        local: &Local,
        report: &Report,
        stats: (&Stats, &Stats),
        send_wait: Duration,
    ) -> String {
        let rank = self.at.rank as i32;
        rank_summary(
            plan,
            local,
            report,
            stats,
            rank,
            send_wait,
            self.input_bytes,
        )
    }
}

/// The job's `--time` summary on rank 0: the placement, every rank's section and the bytes
/// moved (over all `steps`, and per step when there are several: every step moves the same).
fn time_summary(plan: &Plan, at: Place, local: &Local, all: &[RankReport], steps: u64) -> String {
    let mut s = placement_summary(plan, at.size, &local.groups);
    s.push_str(&reductions_summary(plan, &local.reduce_ranks));
    for r in all {
        s.push_str(&r.summary);
    }
    let moved: u64 = all.iter().map(|r| r.sent).sum();
    let _ = writeln!(s, "bytes moved: {moved}");
    if steps > 1 {
        let _ = writeln!(s, "bytes moved per step: {} ({steps} steps)", moved / steps);
    }
    s
}

/// The job's trace: every rank's events in one Chrome/Perfetto trace.
fn trace_json(all: &[RankReport]) -> String {
    let events: Vec<&str> = (all.iter())
        .map(|r| r.trace.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    format!(
        "{{\"traceEvents\":[\n{}\n],\"displayTimeUnit\":\"ms\"}}\n",
        events.join(",\n")
    )
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

/// FNV-1a of `bytes` (of the plan's encoding: equal on every rank that runs the same
/// program).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The run options that must be the same on every rank, as given (see docs/mpi.md):
/// `--inputs-on-root` decides which rank reads which input, the sinks and the trace are
/// written by rank 0 alone, and `--time` and `--trace` decide what every rank records and
/// sends to rank 0. `--threads`, `--max-memory` and the inputs are each rank's own.
const AGREED: [&str; 5] = [
    "--inputs-on-root",
    "--out-dir",
    "--trace",
    "--time",
    "--gather-sinks",
];

/// Each of the [`AGREED`] options of `args`: its name, its value as messages show it, and a
/// hash of its value as given (paths as bytes).
fn agreed(args: &Args) -> [(&'static str, String, u64); AGREED.len()] {
    let flag = |on: bool| if on { "given" } else { "not given" }.to_string();
    let (trace, trace_bytes) = match &args.trace {
        Some(t) => (
            format!("`{}`", shown(t)),
            [&b"1"[..], t.as_os_str().as_bytes()].concat(),
        ),
        None => (flag(false), b"0".to_vec()),
    };
    let out = args.out_dir.as_os_str().as_bytes();
    [
        (
            AGREED[0],
            flag(args.inputs_on_root),
            args.inputs_on_root as u64,
        ),
        (AGREED[1], format!("`{}`", shown(&args.out_dir)), fnv1a(out)),
        (AGREED[2], trace, fnv1a(&trace_bytes)),
        (AGREED[3], flag(args.time), args.time as u64),
        (AGREED[4], flag(args.gather_sinks), args.gather_sinks as u64),
    ]
}

/// The message naming every [`AGREED`] option that some rank of `all` (every rank's hashes,
/// in rank order) was given differently from rank 0, and those ranks; `None` when all
/// agree. `args` are this rank's, shown as rank 0's (only rank 0 prints the message).
fn options_differ(args: &Args, all: &[&[u64]]) -> Option<String> {
    let mut parts = Vec::new();
    for (k, (name, value, _)) in agreed(args).iter().enumerate() {
        let ranks: Vec<String> = (all.iter().enumerate())
            .filter(|(_, h)| h[k] != all[0][k])
            .map(|(r, _)| r.to_string())
            .collect();
        if !ranks.is_empty() {
            parts.push(format!(
                "`{name}` differs from rank 0's ({value}) on rank(s) {}",
                ranks.join(", ")
            ));
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "the ranks were started with different run options, which must be the same on every rank: {}; no input was read and no output was written",
            parts.join("; ")
        )
    })
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

/// The reduction collectives: per group, its kind, value, bytes and ranks (`ranks`: per
/// group, root first).
fn reductions_summary(plan: &Plan, ranks: &[Vec<u32>]) -> String {
    let mut s = String::new();
    for (g, ranks) in plan.dist.reductions.iter().zip(ranks) {
        let list = |r: &[u32]| {
            r.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let what = format!(
            "{} ({} B, {} {})",
            g.value,
            g.bytes(),
            g.op.name(),
            g.dtype.name()
        );
        let _ = match g.kind() {
            _ if ranks.len() < 2 => {
                writeln!(s, "mpi: {what} combined on rank {} alone", list(ranks))
            }
            Kind::Allreduce => writeln!(s, "mpi: allreduce of {what} over rank(s) {}", list(ranks)),
            Kind::ReduceScatter => writeln!(
                s,
                "mpi: reduce-scatter of {what} from rank {} over rank(s) {}, each its part",
                ranks[0],
                list(ranks)
            ),
            Kind::Reduce => writeln!(
                s,
                "mpi: reduce of {what} to rank {} from rank(s) {}",
                ranks[0],
                list(&ranks[1..])
            ),
        };
    }
    s
}

/// This rank's `--time` section: the executor's task table, then bytes per value and the
/// time spent waiting on transfers.
fn rank_summary(
    plan: &Plan,
    local: &Local,
    report: &Report,
    (stats, reduced): (&Stats, &Stats),
    rank: i32,
    send_wait: Duration,
    input_bytes: u64,
) -> String {
    let mut s = format!("rank {rank}:\n");
    s.push_str(&report.time_summary());
    let mut per: Vec<(String, u64, u64)> = Vec::new();
    let mut wait = Duration::ZERO;
    let values = (plan.dist.transfers.iter().map(|t| &t.value))
        .zip(stats)
        .chain((plan.dist.reductions.iter().map(|g| &g.value)).zip(reduced));
    for (v, st) in values {
        if st.0 == 0 && st.1 == 0 {
            continue;
        }
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
            Role::Compute | Role::Reduce(_) | Role::Release(_) => ("", vec![]),
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
