//! One run of a compiled program: the same steps, in one place, for a single process
//! ([`run_program`]) and for every rank of a distributed run (`mpi/run.rs`).
//!
//! [`run`] binds the sources to files, validates the plan, checks the memory the run will
//! need against `--max-memory`, the cgroup, `RLIMIT_AS` and `MemAvailable` before any input is
//! read, reads the inputs, refuses a bad `--out-dir` and outputs the path policy refuses (an
//! output that is an input, a directory, ...: [`crate::paths`]) before computing, runs the
//! schedule, and
//! then writes the sinks and the `--trace` file as one all-or-nothing set of outputs and
//! prints what it wrote and the `--time` summary. A failure at any step is reported once, by
//! [`Mode::fail`]: a message and exit 1 in one process, a message naming the rank and
//! `MPI_Abort` in a distributed job. So a failed run writes no output.
//!
//! What differs between the two is a [`Mode`]: what the process holds at its peak (the memory
//! check), how it reads its inputs, whether it writes the outputs, how it runs the schedule,
//! how it puts the outputs in place and how it reports a failure. [`Local`] is the single
//! process.

use crate::cli::{self, Args, Declared, Outcome};
use crate::exec::{execute_with, KernelFn, Options, SinkView, WarmStart};
use crate::memory;
use crate::output::{self, Npy, Outputs};
use crate::paths::{shown, Origin};
use crate::plan::Plan;
use crate::steps::{log_step, LogTo, StepLog};
use crate::tensor::{type_string, Tensor};
use std::fmt::Write as _;
use std::path::PathBuf;

/// A compiled program and the arguments it runs with.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    /// The program's name, for messages.
    pub prog: &'a str,
    pub args: &'a Args,
    pub plan: &'a Plan,
    pub kernels: &'a [KernelFn],
}

/// What a process holds at its peak: the buffers of `plan`, `input_bytes` of inputs and, on a
/// rank of a distributed job, `message_bytes` of messages in flight (at most).
pub struct Footprint<'a> {
    pub plan: &'a Plan,
    pub input_bytes: u64,
    pub message_bytes: u64,
}

impl<'a> Footprint<'a> {
    /// The whole plan with every input (what one process running it all holds).
    pub fn whole(plan: &'a Plan) -> Footprint<'a> {
        let input_bytes = (Declared::of(plan).iter())
            .map(Declared::bytes)
            .fold(0, u64::saturating_add);
        Footprint {
            plan,
            input_bytes,
            message_bytes: 0,
        }
    }
}

/// What the process that writes the outputs hands back after running: the sinks it staged
/// and, when asked for, the `--trace` JSON and the `--time` summary.
pub struct Done {
    /// Each sink's final path, in plan order.
    pub paths: Vec<PathBuf>,
    pub trace: Option<String>,
    pub time: Option<String>,
    /// The `--log-every` lines, printed before the outputs.
    pub log: String,
}

/// What differs between running in one process and running one rank of a distributed job;
/// [`run`] calls these in order.
pub trait Mode {
    /// Gets ready to run (the plan is validated and the sources bound; nothing is read yet).
    fn prepare(&mut self, _job: &Job) -> Result<(), String> {
        Ok(())
    }

    /// What this process will hold at its peak (checked before any input is read).
    fn footprint<'a>(&'a self, job: &Job<'a>) -> Footprint<'a> {
        Footprint::whole(job.plan)
    }

    /// Reads this process's inputs; `files` holds every source's, in declaration order.
    fn read(&mut self, job: &Job, files: &[PathBuf]) -> Result<(), String>;

    /// Whether this process writes the outputs (it checks `--out-dir` before running).
    fn writes_outputs(&self) -> bool {
        true
    }

    /// Runs the schedule. The process that writes the outputs stages the sinks in `outputs`
    /// (see [`stage_sinks`]) and returns what it staged; the others return `None`.
    fn execute(&mut self, job: &Job, outputs: &mut Outputs) -> Result<Option<Done>, String>;

    /// Puts the staged outputs (the sinks and the trace) in place, all or nothing.
    fn commit(&mut self, _job: &Job, outputs: Outputs) -> Result<(), String> {
        outputs.commit().map(drop).map_err(|e| e.to_string())
    }

    /// Reports a failure: the outcome to print (or, on a rank of a distributed job, prints it
    /// and aborts the job).
    fn fail(&self, job: &Job, msg: &str) -> Outcome {
        Outcome::failed(job.prog, msg)
    }
}

/// Runs `job` in `mode`: every step once, then the outcome (see the module docs).
pub fn run(job: &Job, mode: &mut impl Mode) -> Outcome {
    match steps(job, mode) {
        Ok(out) => out,
        Err(e) => mode.fail(job, &e),
    }
}

fn steps(job: &Job, mode: &mut impl Mode) -> Result<Outcome, String> {
    let sources = Declared::of(job.plan);
    let files = (job.args.inputs.files(&job.plan.graph, &sources))
        .map_err(cli::Unbound::program_message)?;
    job.plan.validate(job.kernels.len())?;
    mode.prepare(job)?;
    // Planned before anything is read or allocated: a run that cannot fit is one message.
    let peak = mode.footprint(job);
    let (threads, max) = (job.args.threads, job.args.max_memory);
    let held = memory::Held {
        inputs: peak.input_bytes,
        messages: peak.message_bytes,
    };
    memory::check(peak.plan, held, threads, max)?;
    mode.read(job, &files)?;
    let mut outputs = Outputs::new();
    if mode.writes_outputs() {
        output::check_out_dir(&job.args.out_dir)?;
        check_outputs(job, &mut outputs, &files)?;
    }
    match mode.execute(job, &mut outputs)? {
        Some(done) => finish(job, mode, outputs, done),
        None => Ok(Outcome::default()),
    }
}

/// Protects the input `files` in `outputs` and checks every output's path against the path
/// policy, before anything is computed.
fn check_outputs(job: &Job, outputs: &mut Outputs, files: &[PathBuf]) -> Result<(), String> {
    for f in files {
        outputs.protect(f);
    }
    let names = job.plan.sinks.iter().map(|s| s.name.as_str());
    let sinks = output::sink_targets(&job.args.out_dir, names).map_err(|e| e.to_string())?;
    for t in &sinks {
        outputs.check(t, Origin::Sink).map_err(|e| e.to_string())?;
    }
    if let Some(t) = &job.args.trace {
        (outputs.check(t, Origin::User)).map_err(|e| format!("{e} (the --trace file)"))?;
    }
    Ok(())
}

/// Adds the trace to the staged sinks, puts them all in place, and says what was written.
fn finish(
    job: &Job,
    mode: &mut impl Mode,
    mut outputs: Outputs,
    done: Done,
) -> Result<Outcome, String> {
    if let (Some(path), Some(json)) = (&job.args.trace, &done.trace) {
        // The out dir exists once the run writes anything (a trace inside it, no sinks).
        if !path
            .parent()
            .is_none_or(|d| d.as_os_str().is_empty() || d.exists())
        {
            output::ensure_dir(&job.args.out_dir).map_err(|e| e.to_string())?;
        }
        outputs
            .write(path, |w| w.write_all(json.as_bytes()))
            .map_err(|e| format!("{e} (the --trace file; no output was written)"))?;
    }
    mode.commit(job, outputs)?;
    let mut out = Outcome {
        stdout: done.log,
        ..Outcome::default()
    };
    for (p, s) in done.paths.iter().zip(&job.plan.sinks) {
        let ty = type_string(s.dtype, &s.shape);
        let _ = writeln!(out.stdout, "@{}: {ty} -> {}", s.name, shown(p));
    }
    if let Some(time) = done.time {
        out.stderr.push_str(&time);
    }
    Ok(out)
}

/// Stages every sink `(NAME, value)` as `--out-dir/NAME.npy` in `outputs`.
pub fn stage_sinks(
    job: &Job,
    outputs: &mut Outputs,
    sinks: &[(&str, &dyn Npy)],
) -> Result<Vec<PathBuf>, String> {
    output::stage_sinks(outputs, &job.args.out_dir, sinks).map_err(|e| e.to_string())
}

/// The executor's options for `args`.
pub fn options(args: &Args) -> Options {
    Options {
        threads: args.threads,
        record: args.records(),
    }
}

/// The single process: it reads every input whole and runs the whole plan.
pub struct Local {
    inputs: Vec<Tensor>,
    /// The `--log-every` lines, printed as each step ends.
    log: StepLog,
}

impl Local {
    /// Runs step `s` of several (not the last): each state takes its update's value, copied
    /// from the update's buffer in memory.
    fn step(&mut self, job: &Job, s: u64, opts: &Options) -> Result<(), String> {
        let refs: Vec<&Tensor> = self.inputs.iter().collect();
        let mut log = String::new();
        let (next, _) = execute_with(job.plan, job.kernels, &refs, opts, |views| {
            log_views(job, s, views, &mut log)?;
            (views.iter().enumerate())
                .filter_map(|(j, v)| Some((job.plan.state_of_sink(j)?, v)))
                .map(|(k, v)| Ok((k, v.to_tensor()?)))
                .collect::<Result<Vec<_>, String>>()
        })
        .map_err(|e| format!("step {s}: {e}"))?;
        for (k, t) in next {
            self.inputs[k] = t;
        }
        self.log.step_done(&log);
        Ok(())
    }
}

/// The `--log-every` lines of step `s`, from the sinks of one element (not the updates).
fn log_views(job: &Job, s: u64, views: &[SinkView], log: &mut String) -> Result<(), String> {
    let steps = &job.args.steps;
    if !steps.logs(s) {
        return Ok(());
    }
    let scalars = (views.iter().enumerate())
        .filter(|(j, v)| {
            v.shape.iter().product::<usize>() == 1 && job.plan.state_of_sink(*j).is_none()
        })
        .map(|(_, v)| v)
        .map(|v| Ok((v.name, v.to_tensor()?)))
        .collect::<Result<Vec<_>, String>>()?;
    log_step(steps, s, scalars.iter().map(|(n, t)| (*n, t)), log);
    Ok(())
}

impl Mode for Local {
    fn read(&mut self, job: &Job, files: &[PathBuf]) -> Result<(), String> {
        // The workers start and the first buffers are faulted while the inputs are read.
        let warm = WarmStart::begin(job.plan, job.args.threads);
        self.inputs = cli::read_inputs(&Declared::of(job.plan), files)?;
        warm.finish();
        Ok(())
    }

    fn execute(&mut self, job: &Job, outputs: &mut Outputs) -> Result<Option<Done>, String> {
        let opts = options(job.args);
        let steps = job.args.steps;
        for s in 1..steps.count {
            self.step(job, s, &opts)?;
        }
        let refs: Vec<&Tensor> = self.inputs.iter().collect();
        let mut log = String::new();
        // Sinks are written straight from their buffers, before any is freed.
        let (paths, mut report) = execute_with(job.plan, job.kernels, &refs, &opts, |views| {
            log_views(job, steps.count, views, &mut log)?;
            let items: Vec<(&str, &dyn Npy)> =
                views.iter().map(|v| (v.name, v as &dyn Npy)).collect();
            stage_sinks(job, outputs, &items)
        })?;
        self.log.step_done(&log);
        // The inputs as read are held for the whole run.
        let inputs = Footprint::whole(job.plan).input_bytes;
        report.peak_bytes = report.peak_bytes.saturating_add(inputs);
        report.planned_bytes = report.planned_bytes.saturating_add(inputs);
        Ok(Some(Done {
            paths,
            trace: job.args.trace.as_ref().map(|_| report.trace_json()),
            time: job.args.time.then(|| report.time_summary()),
            log: self.log.finish(),
        }))
    }
}

/// Runs the whole plan in this process with the parsed arguments `args`, its log lines
/// printed as the steps end.
pub fn run_program(prog: &str, args: &Args, plan: &Plan, kernels: &[KernelFn]) -> Outcome {
    run_program_logging(prog, args, plan, kernels, LogTo::Stdout)
}

/// As [`run_program`], the log lines going where `log` says (kept: in the outcome's stdout).
pub fn run_program_logging(
    prog: &str,
    args: &Args,
    plan: &Plan,
    kernels: &[KernelFn],
    log: LogTo,
) -> Outcome {
    let job = Job {
        prog,
        args,
        plan,
        kernels,
    };
    let mut local = Local {
        inputs: Vec::new(),
        log: StepLog::new(&args.steps, log),
    };
    run(&job, &mut local)
}
