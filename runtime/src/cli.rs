//! The command line of a compiled program, parsed once ([`parse`]) into [`Args`] for both the
//! single-process and the distributed run: `./out [--input NAME=PATH]... [PATH]...
//! [--input-dir DIR] [--out-dir DIR] [--threads N] [--max-memory BYTES] [--time]
//! [--trace FILE] [--inputs-on-root] [--gather-sinks] [--steps N] [--log-every K]`, with its `--help` ([`help`]) and what a run printed
//! ([`Outcome`]).
//!
//! Sources are bound here too, for every front end: [`bind`] matches values to the declared
//! sources (by name, by position in declaration order, or a fallback), [`Inputs`] is the
//! command line's form of it (files named, positional, or `DIR/NAME.npy`) and
//! [`read_inputs`] reads the files, checked against the declared types. Compiled programs,
//! `tapc run` (interpreted or JIT-compiled) and the JIT's `Program::run` all bind through
//! [`bind`].

use crate::exec::default_threads;
use crate::memory::parse_bytes;
use crate::npy;
use crate::paths::shown;
use crate::plan::Plan;
use crate::steps::{parse_count, Steps};
use crate::tensor::{checked_numel, type_string, DType, Tensor};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What a run printed and its exit code (0 ok, 1 error, 2 usage).
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Outcome {
    /// A failed run: `WHO: error: MSG` on stderr and exit code 1 (`who` is the program's name,
    /// or `PROG: rank R` for one rank of a distributed run).
    pub fn failed(who: &str, msg: &str) -> Outcome {
        Outcome {
            stderr: format!("{who}: error: {msg}\n"),
            code: 1,
            ..Outcome::default()
        }
    }
}

const USAGE: &str = "usage: PROGRAM [--input NAME=PATH.npy]... [PATH.npy]... [--input-dir DIR] [--out-dir DIR] [--threads N] [--max-memory BYTES] [--time] [--trace FILE.json] [--inputs-on-root] [--gather-sinks] [--steps N] [--log-every K]";

/// The parsed command line of a compiled program.
#[derive(Clone, Debug)]
pub struct Args {
    pub inputs: Inputs,
    pub out_dir: PathBuf,
    pub threads: usize,
    pub max_memory: Option<u64>,
    pub time: bool,
    pub trace: Option<PathBuf>,
    /// Distributed programs: rank 0 reads every input and sends the windows (no shared FS).
    pub inputs_on_root: bool,
    /// Distributed programs: every sink is gathered to rank 0, which writes it whole (else
    /// each rank writes its own windows of each sink into the staged files).
    pub gather_sinks: bool,
    /// `--steps N` and `--log-every K` (see [`crate::steps`]).
    pub steps: Steps,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            inputs: Inputs::default(),
            out_dir: PathBuf::from("."),
            threads: default_threads(),
            max_memory: None,
            time: false,
            trace: None,
            inputs_on_root: false,
            gather_sinks: false,
            steps: Steps::default(),
        }
    }
}

impl Args {
    /// Whether the executor records every job (for `--time` and `--trace`).
    pub fn records(&self) -> bool {
        self.time || self.trace.is_some()
    }

    /// Sets the option `flag` (one of [`VALUED`]) to `value`: paths are kept as bytes, numbers
    /// must be UTF-8.
    fn set(&mut self, flag: &str, value: OsString) -> Result<(), String> {
        match flag {
            "--input" => return self.inputs.add_named(&value),
            "--input-dir" => self.inputs.dir = Some(PathBuf::from(value)),
            "--out-dir" => self.out_dir = PathBuf::from(value),
            "--trace" => self.trace = Some(PathBuf::from(value)),
            _ => return self.set_number(flag, &value),
        }
        Ok(())
    }

    /// Sets the option `flag`, which takes a number, to `value`.
    fn set_number(&mut self, flag: &str, value: &OsStr) -> Result<(), String> {
        let Some(value) = value.to_str() else {
            return Err(format!("`{flag} {}` must be a number", shown(value)));
        };
        match flag {
            "--threads" => {
                self.threads = match value.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("`--threads {value}` must be a positive integer")),
                }
            }
            "--steps" => self.steps.count = parse_count(flag, value)?,
            "--log-every" => self.steps.log_every = Some(parse_count(flag, value)?),
            "--max-memory" => {
                self.max_memory = Some(parse_bytes(value).ok_or_else(|| {
                    format!("`--max-memory {value}` must be a size such as 512MiB or 8G")
                })?)
            }
            _ => {}
        }
        Ok(())
    }
}

/// The options that take a value.
const VALUED: [&str; 8] = [
    "--steps",
    "--log-every",
    "--input",
    "--input-dir",
    "--out-dir",
    "--trace",
    "--threads",
    "--max-memory",
];

/// `--flag=value` split at its first `=` (bytes: the value may be any path).
fn split_inline(arg: &OsStr) -> (&OsStr, Option<OsString>) {
    let b = arg.as_bytes();
    match b.iter().position(|&c| c == b'=') {
        Some(i) if b.starts_with(b"--") => (
            OsStr::from_bytes(&b[..i]),
            Some(OsStr::from_bytes(&b[i + 1..]).to_os_string()),
        ),
        _ => (arg, None),
    }
}

/// Parses the arguments (without the program's name), as bytes: `Ok(None)` asks for
/// `--help`; an error is the message of a usage error (exit 2), usage included.
pub fn parse<S: AsRef<OsStr>>(prog: &str, args: &[S]) -> Result<Option<Args>, String> {
    let usage = |e: String| format!("{prog}: {e}\n{USAGE}");
    let mut a = Args::default();
    let mut it = args.iter().map(AsRef::as_ref);
    while let Some(arg) = it.next() {
        let (flag_os, inline) = split_inline(arg);
        // Options are ASCII; anything else not starting with `-` is a positional path.
        let flag = flag_os.to_str().unwrap_or("");
        if flag.is_empty() && flag_os.as_bytes().first() == Some(&b'-') {
            return Err(usage(format!("unknown option `{}`", shown(flag_os))));
        }
        match flag {
            "-h" | "--help" => return Ok(None),
            "--time" => a.time = true,
            "--inputs-on-root" => a.inputs_on_root = true,
            "--gather-sinks" => a.gather_sinks = true,
            f if VALUED.contains(&f) => {
                let Some(v) = inline.or_else(|| it.next().map(OsStr::to_os_string)) else {
                    return Err(usage(format!("`{f}` needs a value")));
                };
                a.set(f, v).map_err(usage)?;
            }
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(usage(format!("unknown option `{f}`")))
            }
            _ => a.inputs.positional.push(PathBuf::from(arg)),
        }
    }
    Ok(Some(a))
}

/// The arguments of a run, or what to print instead: the help (exit 0) or a usage error
/// (exit 2).
pub fn args_or_usage<S: AsRef<OsStr>>(
    prog: &str,
    args: &[S],
    plan: &Plan,
) -> Result<Args, Outcome> {
    match parse(prog, args) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(Outcome {
            stdout: help(plan),
            ..Outcome::default()
        }),
        Err(e) => Err(Outcome {
            stderr: format!("{e}\n"),
            code: 2,
            ..Outcome::default()
        }),
    }
}

/// `--help`: the usage, the graph, and the type of every source and sink.
pub fn help(plan: &Plan) -> String {
    let mut s = format!("{USAGE}\ncomputes graph @{}\n", plan.graph);
    let declared = plan.sources.iter().filter(|p| p.window.is_none());
    let sources = declared.enumerate().map(|(k, p)| {
        let state = plan.states.iter().any(|&(s, _)| s as usize == k);
        let kind = if state { "state" } else { "source" };
        (kind, &p.name, p.dtype, &p.shape)
    });
    let sinks = plan
        .sinks
        .iter()
        .map(|p| ("sink", &p.name, p.dtype, &p.shape));
    for (kind, name, dtype, shape) in sources.chain(sinks) {
        let _ = writeln!(s, "  {kind} @{name}: {}", type_string(dtype, shape));
    }
    s
}

/// A source as binding sees it: its name and declared type.
#[derive(Clone, Copy, Debug)]
pub struct Declared<'a> {
    pub name: &'a str,
    pub dtype: DType,
    pub shape: &'a [usize],
}

impl<'a> Declared<'a> {
    /// The sources of `plan`, in declaration order (its source windows, which read the files
    /// of declared sources and come after them, are not bound to inputs).
    pub fn of(plan: &'a Plan) -> Vec<Declared<'a>> {
        (plan.sources.iter())
            .filter(|s| s.window.is_none())
            .map(|s| Declared {
                name: &s.name,
                dtype: s.dtype,
                shape: &s.shape,
            })
            .collect()
    }

    /// The bytes of its tensor (saturating: a size that overflows fails any memory check).
    pub fn bytes(&self) -> u64 {
        checked_numel(self.shape).map_or(u64::MAX, |n| {
            (n as u64).saturating_mul(self.dtype.size_bytes() as u64)
        })
    }
}

/// A value a source can be bound to, as messages name it.
pub trait Bound: Clone {
    fn describe(&self) -> String;
}

impl Bound for PathBuf {
    fn describe(&self) -> String {
        shown(self).to_string()
    }
}

impl Bound for &Tensor {
    fn describe(&self) -> String {
        self.shape_string()
    }
}

/// Why sources could not be bound.
#[derive(Debug)]
pub struct Unbound {
    pub message: String,
    /// The source left without a value, when that is the problem (a front end then says how
    /// it binds one).
    pub source: Option<String>,
}

impl Unbound {
    fn new(message: String) -> Unbound {
        Unbound {
            message,
            source: None,
        }
    }

    /// The message of a compiled program, which names its ways of binding a source.
    pub fn program_message(self) -> String {
        match self.source {
            Some(n) => format!(
                "{}; pass `--input {n}=FILE.npy`, a positional file, or `--input-dir DIR`",
                self.message
            ),
            None => self.message,
        }
    }
}

/// Binds every source, in declaration order, to a value: the one `named` for it, else the
/// `positional` one at its index, else `fallback`'s. A name that is no source's, more
/// positional values than sources, and a source bound twice or not at all are errors.
pub fn bind<T: Bound>(
    graph: &str,
    sources: &[Declared],
    named: &[(String, T)],
    positional: &[T],
    fallback: impl Fn(&Declared) -> Option<T>,
) -> Result<Vec<T>, Unbound> {
    if let Some((n, _)) = named
        .iter()
        .find(|(n, _)| !sources.iter().any(|s| s.name == n))
    {
        let names: Vec<String> = sources.iter().map(|s| format!("@{}", s.name)).collect();
        let names = if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        };
        return Err(Unbound::new(format!(
            "graph @{graph} has no source @{n} (its sources: {names})"
        )));
    }
    if positional.len() > sources.len() {
        return Err(Unbound::new(format!(
            "{} positional input(s) given but graph @{graph} has {} source(s)",
            positional.len(),
            sources.len()
        )));
    }
    let one = |(k, s): (usize, &Declared)| {
        let by_name: Vec<&T> = (named.iter())
            .filter(|(n, _)| n == s.name)
            .map(|(_, v)| v)
            .collect();
        bind_one(s, &by_name, positional.get(k), &fallback)
    };
    sources.iter().enumerate().map(one).collect()
}

/// The value of source `s`, given the values bound to it by name and by position.
fn bind_one<T: Bound>(
    s: &Declared,
    by_name: &[&T],
    by_position: Option<&T>,
    fallback: impl Fn(&Declared) -> Option<T>,
) -> Result<T, Unbound> {
    let name = s.name;
    match (by_name, by_position) {
        ([_, _, ..], _) => Err(Unbound::new(format!("source @{name} is bound twice"))),
        ([v], Some(_)) => Err(Unbound::new(format!(
            "source @{name} is bound both by `--input` ({}) and positionally",
            v.describe()
        ))),
        ([v], None) => Ok((*v).clone()),
        ([], Some(v)) => Ok(v.clone()),
        ([], None) => fallback(s).ok_or_else(|| Unbound {
            message: format!(
                "no input for source @{name} ({})",
                type_string(s.dtype, s.shape)
            ),
            source: Some(name.to_string()),
        }),
    }
}

/// How the command line binds sources: by name (`--input NAME=PATH`), by position (in
/// declaration order) or from `--input-dir DIR` (as `DIR/NAME.npy`).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub named: Vec<(String, PathBuf)>,
    pub positional: Vec<PathBuf>,
    pub dir: Option<PathBuf>,
}

impl Inputs {
    /// Adds the value of an `--input` option: `NAME=PATH` (or `@NAME=PATH`); the PATH is
    /// kept as bytes.
    pub fn add_named(&mut self, value: impl AsRef<OsStr>) -> Result<(), String> {
        let value = value.as_ref();
        let b = value.as_bytes();
        let must = || format!("`--input {}` must be NAME=PATH", shown(value));
        let i = b.iter().position(|&c| c == b'=').ok_or_else(must)?;
        let n = std::str::from_utf8(&b[..i]).map_err(|_| must())?;
        let name = n.trim_start_matches('@').to_string();
        let path = PathBuf::from(OsStr::from_bytes(&b[i + 1..]));
        self.named.push((name, path));
        Ok(())
    }

    /// The file of every source, in declaration order (see [`bind`]).
    pub fn files(&self, graph: &str, sources: &[Declared]) -> Result<Vec<PathBuf>, Unbound> {
        let in_dir = |s: &Declared| (self.dir.as_ref()).map(|d| d.join(format!("{}.npy", s.name)));
        bind(graph, sources, &self.named, &self.positional, in_dir)
    }
}

/// Reads every source's file, checked against its declared type.
pub fn read_inputs(sources: &[Declared], files: &[PathBuf]) -> Result<Vec<Tensor>, String> {
    let read = |(s, f): (&Declared, &PathBuf)| {
        npy::read_expecting(f, s.name, s.dtype, s.shape).map_err(|e| e.to_string())
    };
    sources.iter().zip(files).map(read).collect()
}
