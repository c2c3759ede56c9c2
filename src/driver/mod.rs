//! The `tapc` command line. [`run`] executes one invocation in-process and returns what it
//! printed and its exit code, so tests drive the real CLI without spawning processes.

pub mod calibrate;
pub(crate) mod emit;
mod import;

use crate::passes::manager::{self, RunConfig};

use crate::diag::{codes, render_human, render_json, Diagnostic, ErrorFormat};
use crate::ir::{Graph, Module};
use crate::print::print_module;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tapc_runtime::cli::{self, Declared};
use tapc_runtime::output::Outputs;
use tapc_runtime::paths::{shown, Origin};
use tapc_runtime::steps::{LogTo, StepLog};
use tapc_runtime::Tensor;

/// What one invocation printed, and its exit code.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

#[derive(Parser, Debug)]
#[command(
    name = "tapc",
    version,
    about = "Compiler for the Tapestry Expression Graph (TEG)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Compile FILE to a native program (`tapc input.teg -o out`).
    file: Option<PathBuf>,
    /// Output path for the compiled program.
    #[arg(short = 'o')]
    output: Option<PathBuf>,
    /// What `-o` writes: an executable, an object file, assembly or LLVM IR.
    #[arg(long, value_enum, default_value_t = crate::codegen::EmitKind::Exe)]
    emit: crate::codegen::EmitKind,
    /// Which graph to compile when the file has several.
    #[arg(long)]
    graph: Option<String>,
    #[command(flatten)]
    contract: Contract,
    /// Compile a distributed program for `mpirun`: tasks run on rank `node mod R`, with the
    /// transfers between nodes planned here (links the MPI runtime; see README).
    #[arg(long)]
    mpi: bool,
    /// Passes to run before code generation (default: the standard pipeline), e.g.
    /// `canonicalize,shard{parts=4},fuse`.
    #[arg(long, value_name = "LIST")]
    passes: Option<String>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// How to print diagnostics.
    #[arg(long, value_enum, default_value_t = ErrorFormat::Human, global = true)]
    error_format: ErrorFormat,
    /// Colour diagnostics (auto: when stderr is a terminal).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    color: ColorChoice,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Parse and verify FILE; print diagnostics; exit 1 on any error.
    Check { file: PathBuf },
    /// Print FILE in canonical form.
    Fmt {
        file: PathBuf,
        /// Rewrite the file instead of printing it.
        #[arg(long)]
        in_place: bool,
    },
    /// Run passes over FILE and print the result (like mlir-opt).
    Opt {
        file: PathBuf,
        /// Comma-separated pass pipeline, e.g. `canonicalize,shard{parts=4}`.
        #[arg(long, default_value = "")]
        passes: String,
        /// Print the module after every pass (to stderr).
        #[arg(long)]
        print_after_all: bool,
        /// Print the module after the named pass (to stderr).
        #[arg(long)]
        print_after: Vec<String>,
        /// Verify after every pass. Always on (verification also refreshes the facts later
        /// passes use); accepted for mlir-opt compatibility.
        #[arg(long)]
        verify_each: bool,
        /// Print a table of time per pass (to stderr).
        #[arg(long)]
        time_passes: bool,
        /// What to print.
        #[arg(long, value_enum, default_value_t = Emit::Teg)]
        emit: Emit,
        #[command(flatten)]
        cost: CostFlags,
    },
    /// Run a graph (natively by default, or in the reference interpreter): sources from .npy
    /// files, sinks to .npy files.
    Run {
        file: PathBuf,
        /// Bind source @NAME to a .npy file: `--input NAME=PATH`.
        #[arg(long = "input", value_name = "NAME=PATH")]
        inputs: Vec<OsString>,
        /// Read every unbound source @NAME from DIR/NAME.npy.
        #[arg(long)]
        input_dir: Option<PathBuf>,
        /// Where sinks are written, as NAME.npy.
        #[arg(long, default_value = ".")]
        out_dir: PathBuf,
        /// Which graph to run when the file has several.
        #[arg(long)]
        graph: Option<String>,
        #[command(flatten)]
        native: NativeRun,
    },
    /// Measure this machine for the cost model: per-kernel-class throughput (contraction,
    /// elementwise, reduction; f32 and f64; at 1 thread and at --threads) and memory
    /// bandwidth, with small programs compiled in-process; print the machine TOML or write it
    /// to -o (all or nothing). Takes a few seconds. Links between nodes (MPI latency and
    /// bandwidth) are measured by a tapc built with `--features mpi` run under `mpirun -np 2`
    /// (ping-pong and allreduce; rank 0 writes the file); run alone, the file leaves them at
    /// the model's defaults and says so.
    Calibrate {
        /// Write the machine TOML here (read it back with `tapc opt --machine FILE`).
        #[arg(short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Threads per node (what one rank uses; default: all cores).
        #[arg(long)]
        threads: Option<u32>,
    },
    /// Import an ONNX model as TEG (docs/import.md): MODEL.teg plus one .npy per weight.
    Import {
        model: PathBuf,
        /// The TEG file to write.
        #[arg(short = 'o', value_name = "FILE")]
        output: PathBuf,
        /// Where the weights are written as NAME.npy (default: the output's directory).
        #[arg(long, value_name = "DIR")]
        weights_dir: Option<PathBuf>,
        /// Static dims of an input with dynamic ones: `--input-shape NAME=d0,d1,...`.
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shapes: Vec<String>,
        /// Bind an input to constant values, folded at import: `--input-value NAME=FILE.npy`.
        #[arg(long = "input-value", value_name = "NAME=FILE")]
        input_values: Vec<String>,
    },
    /// Serve the Language Server Protocol on stdin/stdout (for editors; docs/editors.md).
    Lsp,
}

/// `tapc opt` flags of the cost pass; each is the same as the pass option named in its help
/// and wins over it. They need `cost` in `--passes`.
#[derive(Args, Debug, Clone, Default)]
struct CostFlags {
    /// Machine model file (TOML) of the cost pass: `cost{machine=FILE}`.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// Seed of the cost search: `cost{seed=N}`.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Skip frontier points whose peak memory per node is over BYTES (e.g. 8GiB):
    /// `cost{max_memory=BYTES}`.
    #[arg(long, value_name = "BYTES")]
    max_node_memory: Option<String>,
    /// Write the Pareto frontier as an SVG plot (time against peak memory and against bytes
    /// moved): `cost{frontier_svg=FILE}`.
    #[arg(long, value_name = "FILE")]
    frontier_svg: Option<PathBuf>,
}

impl CostFlags {
    /// The flags as `(flag, cost option, value)`. Pass options are text, so a path that is not
    /// UTF-8 is an error (never a lossy neighbour of the file named).
    fn options(&self) -> Result<Vec<(&'static str, &'static str, String)>, Diagnostic> {
        let text = |flag: &str, p: &Path| {
            p.to_str().map(str::to_string).ok_or_else(|| {
                let msg = format!("`{flag} {}`: the path must be UTF-8", shown(p));
                Diagnostic::error(codes::IO, msg).note("pass options are text; rename the file")
            })
        };
        let mut v = Vec::new();
        if let Some(m) = &self.machine {
            v.push(("--machine", "machine", text("--machine", m)?));
        }
        if let Some(s) = self.seed {
            v.push(("--seed", "seed", s.to_string()));
        }
        if let Some(b) = &self.max_node_memory {
            v.push(("--max-node-memory", "max_memory", b.clone()));
        }
        if let Some(f) = &self.frontier_svg {
            v.push(("--frontier-svg", "frontier_svg", text("--frontier-svg", f)?));
        }
        Ok(v)
    }
}

/// How native code rounds float sums of products (`tapc FILE -o OUT` and `tapc run`).
#[derive(Args, Debug, Clone, Default)]
struct Contract {
    /// `on` (default): float `sum(a * b)` uses fused multiply-adds, as BLAS does (within the
    /// documented float tolerance of the interpreter); `off`: the product and the sum round
    /// separately, as the interpreter does.
    #[arg(long, value_enum, value_name = "off|on", default_value_t = crate::codegen::FpContract::On)]
    fp_contract: crate::codegen::FpContract,
    /// Accepted for compatibility: the same as `--fp-contract=on` (the default).
    #[arg(long, hide = true, conflicts_with = "fp_contract")]
    fast_math: bool,
    /// `auto` (default): bf16 and u8×i8 contractions use the CPU's dot-product instructions
    /// (AVX512_BF16, AVX512_VNNI) when it has them; `portable`: never (as on a host without).
    #[arg(long, value_enum, value_name = "auto|portable", default_value_t = crate::codegen::DotProducts::Auto)]
    dot_products: crate::codegen::DotProducts,
}

impl Contract {
    fn options(&self) -> crate::codegen::Options {
        crate::codegen::Options {
            fp_contract: self.fp_contract,
            dot_products: self.dot_products,
        }
    }
}

/// `tapc run` backend options.
#[derive(Args, Debug, Clone, Default)]
struct NativeRun {
    /// Compile with LLVM (JIT) and run on the multithreaded runtime (the default).
    #[arg(long, conflicts_with = "interp")]
    native: bool,
    /// Run in the reference interpreter instead.
    #[arg(long)]
    interp: bool,
    /// Worker threads of the native runtime (default: available cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Apply the graph N times (default 1), each `state` taking the value of its `update` in
    /// the step before; the sinks of the last step are written.
    #[arg(long, value_name = "N", value_parser = |v: &str| tapc_runtime::steps::parse_count("--steps", v))]
    steps: Option<u64>,
    /// Print the one-element sinks of every K-th step as CSV lines `step,name,value`.
    #[arg(long, value_name = "K", value_parser = |v: &str| tapc_runtime::steps::parse_count("--log-every", v))]
    log_every: Option<u64>,
    #[command(flatten)]
    contract: Contract,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    Teg,
    Dot,
    Signature,
    /// The alias analysis report (needs `--passes=...,alias`).
    Alias,
    /// Each shard's input boxes and exact footprints (needs `--passes=...,shard`).
    Shard,
    /// The cost tables, totals and Pareto frontier (needs `--passes=...,cost`).
    Cost,
}

/// Whether `args` ask for `tapc lsp`, which needs the process's real stdin and stdout, so the
/// binary dispatches it to [`crate::lsp::run_stdio`] instead of [`run`].
pub fn is_lsp<S: AsRef<OsStr>>(args: &[S]) -> bool {
    let argv = argv(args);
    matches!(
        Cli::try_parse_from(argv),
        Ok(Cli {
            command: Some(Command::Lsp),
            ..
        })
    )
}

/// `tapc` and `args`, as bytes (paths need not be UTF-8).
fn argv<S: AsRef<OsStr>>(args: &[S]) -> impl Iterator<Item = OsString> + '_ {
    std::iter::once(OsString::from("tapc")).chain(args.iter().map(|a| a.as_ref().into()))
}

/// `--help` and `--version` (exit 0, stdout) or a usage error (exit 2, stderr), as clap words them.
fn clap_outcome(e: &clap::Error) -> Outcome {
    let text = e.render().to_string();
    if e.use_stderr() {
        Outcome {
            stdout: String::new(),
            stderr: text,
            code: 2,
        }
    } else {
        Outcome {
            stdout: text,
            stderr: String::new(),
            code: 0,
        }
    }
}

/// The `tapc opt` flags that shape what the pipeline prints.
struct PassFlags {
    print_after_all: bool,
    print_after: Vec<String>,
    time_passes: bool,
    /// Whether stderr is a terminal (a progress bar only when someone watches).
    terminal: bool,
}

/// The pipeline configuration of `tapc opt`: the cost flags become the cost pass's options,
/// and are refused when the pipeline has no cost pass.
fn opt_config(cost: &CostFlags, passes: &str, f: PassFlags) -> Result<RunConfig, Diagnostic> {
    let flags = cost.options()?;
    let has_cost = manager::parse_pipeline(passes)
        .map(|specs| specs.iter().any(|s| s.name == "cost"))
        .unwrap_or(true);
    if let (Some(flag), false) = (flags.first(), has_cost) {
        return Err(Diagnostic::error(
            codes::BAD_PASS,
            format!("`{}` needs the cost pass", flag.0),
        )
        .note("add it to the pipeline: `--passes=cost`"));
    }
    Ok(RunConfig {
        print_after_all: f.print_after_all,
        print_after: f.print_after,
        time_passes: f.time_passes,
        pass_defaults: if f.terminal {
            vec![("cost".into(), "progress".into(), "true".into())]
        } else {
            vec![]
        },
        pass_options: flags
            .into_iter()
            .map(|(_, k, v)| ("cost".to_string(), k.to_string(), v))
            .collect(),
        ..RunConfig::default()
    })
}

/// What `tapc` prints to as it goes, besides the [`Outcome`] it returns.
#[derive(Clone, Copy, Debug)]
pub struct Console {
    /// Whether stderr is a terminal (`--color auto`, progress bars).
    pub terminal: bool,
    /// Where `tapc run --log-every` lines go: stdout as each step ends (the binary), or the
    /// outcome's stdout (in-process callers).
    pub log: LogTo,
}

/// Runs `tapc` with `args` (without the program name), everything printed kept in the outcome.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Outcome {
    let console = Console {
        terminal: false,
        log: LogTo::Kept,
    };
    run_with(args, console)
}

/// As [`run`], printing as `console` says.
pub fn run_with<S: AsRef<OsStr>>(args: &[S], console: Console) -> Outcome {
    let terminal = console.terminal;
    let cli = match Cli::try_parse_from(argv(args)) {
        Ok(c) => c,
        Err(e) => return clap_outcome(&e),
    };
    let color = match cli.common.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal,
    };
    let mut cx = Cx {
        out: Outcome::default(),
        format: cli.common.error_format,
        color,
        native: None,
        log: console.log,
        runtime: if cli.mpi {
            crate::codegen::Runtime::Mpi
        } else {
            crate::codegen::Runtime::Local
        },
    };
    let ok = match cli.command {
        Some(Command::Check { file }) => cx.check(&file),
        Some(Command::Fmt { file, in_place }) => cx.fmt(&file, in_place),
        Some(Command::Opt {
            file,
            passes,
            print_after_all,
            print_after,
            verify_each: _,
            time_passes,
            emit,
            cost,
        }) => {
            let flags = PassFlags {
                print_after_all,
                print_after,
                time_passes,
                terminal,
            };
            match opt_config(&cost, &passes, flags) {
                Ok(config) => cx.opt(&file, &passes, &read_pass_files(&passes, config), emit),
                Err(d) => {
                    cx.fail(&shown(&file).to_string(), d);
                    false
                }
            }
        }
        Some(Command::Run {
            file,
            inputs,
            input_dir,
            out_dir,
            graph,
            native,
        }) => {
            cx.native = Some(native);
            cx.run(
                &file,
                &inputs,
                input_dir.as_deref(),
                &out_dir,
                graph.as_deref(),
            )
        }
        Some(Command::Calibrate { output, threads }) => {
            let threads =
                threads.map_or_else(tapc_runtime::exec::default_threads, |n| (n as usize).max(1));
            cx.calibrate(output.as_deref(), threads)
        }
        Some(Command::Import {
            model,
            output,
            weights_dir,
            input_shapes,
            input_values,
        }) => cx.import(
            &model,
            &output,
            weights_dir.as_deref(),
            &input_shapes,
            &input_values,
        ),
        Some(Command::Lsp) => {
            cx.out.stderr = "`tapc lsp` serves the Language Server Protocol on the stdin and \
                             stdout of the `tapc` process; run the binary\n"
                .into();
            false
        }
        None => cx.compile(
            cli.file.as_deref(),
            cli.output.as_deref(),
            cli.emit,
            cli.graph.as_deref(),
            cli.passes.as_deref(),
            &cli.contract.options(),
        ),
    };
    cx.out.code = i32::from(!ok);
    cx.out
}

/// `config` with the input files its pipeline's options name (`cost{machine=FILE}`) read in:
/// the driver does the pipeline's I/O; a file that cannot be read is reported by its pass.
pub(crate) fn read_pass_files(pipeline: &str, mut config: RunConfig) -> RunConfig {
    for path in manager::input_paths(pipeline, &config) {
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string());
        config.files.insert(path, text);
    }
    config
}

struct Cx {
    out: Outcome,
    format: ErrorFormat,
    color: bool,
    /// Backend options of `tapc run`.
    native: Option<NativeRun>,
    /// Where `tapc run --log-every` lines go.
    log: LogTo,
    /// The runtime `tapc FILE -o OUT` links (`--mpi`: the distributed one).
    runtime: crate::codegen::Runtime,
}

/// A loaded, verified file.
struct Loaded {
    name: String,
    src: String,
    module: Module,
    facts: Vec<crate::verify::GraphFacts>,
}

impl Cx {
    fn report(&mut self, file: &str, src: &str, diags: &[Diagnostic]) {
        let text = match self.format {
            ErrorFormat::Human => render_human(file, src, diags, self.color),
            ErrorFormat::Json => render_json(file, src, diags),
        };
        self.out.stderr.push_str(&text);
    }

    /// A problem with no source location (I/O, command-line bindings).
    fn fail(&mut self, file: &str, d: Diagnostic) -> bool {
        self.report(file, "", &[d]);
        false
    }

    fn load(&mut self, path: &Path) -> Option<Loaded> {
        let name = shown(path).to_string();
        let (src, mut diags) = match std::fs::read(path) {
            Ok(bytes) => crate::syntax::decode(bytes),
            Err(e) => {
                self.fail(
                    &name,
                    Diagnostic::error(codes::IO, format!("cannot read {name}: {e}")),
                );
                return None;
            }
        };
        let (module, facts, compiled) = crate::compile_source(&src);
        diags.extend(compiled);
        let diags = diags.sorted();
        self.report(&name, &src, &diags.0);
        (!diags.has_errors()).then_some(Loaded {
            name,
            src,
            module,
            facts,
        })
    }

    /// Writes the files passes asked for, all or nothing, under the path policy (none may be
    /// the `source` read); a failure is E0100 naming the file.
    fn write_files(&mut self, name: &str, source: &Path, files: &[(PathBuf, String)]) -> bool {
        if files.is_empty() {
            return true;
        }
        let mut o = Outputs::new();
        o.protect(source);
        let staged = files
            .iter()
            .try_for_each(|(path, text)| o.write(path, |w| w.write_all(text.as_bytes())));
        match staged.and_then(|()| o.commit()) {
            Ok(_) => true,
            Err(e) => self.fail(name, Diagnostic::error(codes::IO, e.to_string())),
        }
    }

    /// `tapc calibrate`: the machine TOML to stdout, or to `output` (all or nothing).
    fn calibrate(&mut self, output: Option<&Path>, threads: usize) -> bool {
        let toml = match calibrate::calibrate(threads) {
            Ok(Some(t)) => t,
            // A rank other than 0 of `mpirun ... tapc calibrate`: it measured links only.
            Ok(None) => return true,
            Err(d) => return self.fail("calibrate", d),
        };
        let Some(path) = output else {
            self.out.stdout.push_str(&toml);
            return true;
        };
        let mut o = Outputs::new();
        let written = o
            .write(path, |w| w.write_all(toml.as_bytes()))
            .and_then(|()| o.commit());
        match written {
            Ok(_) => {
                let _ = writeln!(self.out.stderr, "wrote {}", shown(path));
                true
            }
            Err(e) => self.fail("calibrate", Diagnostic::error(codes::IO, e.to_string())),
        }
    }

    fn check(&mut self, path: &Path) -> bool {
        self.load(path).is_some()
    }

    fn fmt(&mut self, path: &Path, in_place: bool) -> bool {
        let Some(l) = self.load(path) else {
            return false;
        };
        let text = crate::format::format_source(&l.module, &l.src);
        if !in_place {
            self.out.stdout = text;
            return true;
        }
        if text == l.src {
            return true;
        }
        // The path policy of an edit (tapc_runtime::paths): through a symlink, keeping hard
        // links and the mode, staged with O_EXCL|O_NOFOLLOW under an unpredictable name.
        let mut o = Outputs::new();
        let written = o.write_as(path, Origin::Edit, |w| {
            std::io::Write::write_all(w, text.as_bytes())
        });
        match written.and_then(|()| o.commit()) {
            Ok(_) => true,
            Err(e) => self.fail(&l.name, Diagnostic::error(codes::IO, e.to_string())),
        }
    }

    fn opt(&mut self, path: &Path, pipeline: &str, config: &RunConfig, emit: Emit) -> bool {
        let Some(mut l) = self.load(path) else {
            return false;
        };
        let mut log = String::new();
        let result = manager::run_pipeline(
            &mut l.module,
            std::mem::take(&mut l.facts),
            pipeline,
            config,
            &mut log,
        );
        self.out.stderr.push_str(&log);
        let cx = match result {
            Ok(cx) => cx,
            Err(d) => {
                let src = l.src.clone();
                self.report(&l.name, &src, &[d]);
                return false;
            }
        };
        if !self.write_files(&l.name, path, &cx.files) {
            return false;
        }
        self.out.stdout = match emit {
            Emit::Teg => print_module(&l.module),
            Emit::Dot => emit::dot(&l.module),
            Emit::Signature => emit::signatures(&l.module, &cx.facts),
            Emit::Alias | Emit::Shard | Emit::Cost => {
                let name = match emit {
                    Emit::Alias => "alias",
                    Emit::Shard => "shard",
                    _ => "cost",
                };
                match cx.report(name) {
                    Some(r) => r.to_string(),
                    None => {
                        let d = Diagnostic::error(
                            codes::BAD_PASS,
                            format!("`--emit {name}` needs the {name} pass"),
                        )
                        .note(format!("add it to the pipeline: `--passes={name}`"));
                        return self.fail(&l.name, d);
                    }
                }
            }
        };
        true
    }

    fn run(
        &mut self,
        path: &Path,
        inputs: &[OsString],
        input_dir: Option<&Path>,
        out_dir: &Path,
        graph: Option<&str>,
    ) -> bool {
        let Some(mut l) = self.load(path) else {
            return false;
        };
        if !self.lower_grad(&mut l) {
            return false;
        }
        let gi = match pick_graph(&l.module, graph) {
            Ok(i) => i,
            Err(d) => return self.fail(&l.name, d),
        };
        let g = &l.module.graphs[gi];
        let (tensors, mut files) = match read_sources(g, inputs, input_dir) {
            Ok(t) => t,
            Err(d) => return self.fail(&l.name, d),
        };
        let native = self.native.clone().unwrap_or_default();
        let steps = tapc_runtime::steps::Steps {
            count: native.steps.unwrap_or(1),
            log_every: native.log_every,
        };
        let states: Vec<String> = g.states().map(|(n, ..)| n.to_string()).collect();
        let mut tensors = tensors;
        let mut log = StepLog::new(&steps, self.log);
        let mut run_steps = |step: &mut dyn FnMut(&HashMap<String, Tensor>) -> Result<_, _>| {
            tapc_runtime::steps::run_named(&steps, &mut tensors, &states, step, &mut log)
        };
        // Native by default; a graph with an extern op that has no kernel cannot be compiled,
        // and the interpreter reports why (E0071) unless `--native` insists.
        let kernelless = l.facts[gi].instances.values().any(|i| i.stmts.is_none());
        let sinks = if native.native || (!native.interp && !kernelless) {
            let threads = native
                .threads
                .map_or_else(tapc_runtime::exec::default_threads, |n| n as usize);
            let opts = tapc_runtime::exec::Options {
                threads,
                record: false,
            };
            let copts = native.contract.options();
            crate::codegen::with_jit(&l.module, gi, &l.facts[gi], &copts, |p| {
                run_steps(&mut |ins| {
                    p.run(ins, &opts)
                        .map(|(s, _)| s)
                        .map_err(|e| Diagnostic::error(codes::RUNTIME, e))
                })
            })
            .and_then(|r| r)
        } else {
            run_steps(&mut |ins| crate::interp::run(&l.module, g, &l.facts[gi], ins))
        };
        // The steps that ran are logged, also when a later one failed.
        self.out.stdout.push_str(&log.finish());
        let sinks = match sinks {
            Ok(s) => s,
            Err(d) => {
                let src = l.src.clone();
                self.report(&l.name, &src, &[d]);
                return false;
            }
        };
        let outs: Vec<(&str, &tapc_runtime::Tensor)> =
            sinks.iter().map(|(n, t)| (n.as_str(), t)).collect();
        files.push(path.to_path_buf());
        match tapc_runtime::output::write_sinks(out_dir, &outs, &files) {
            Ok(paths) => {
                for (p, (n, t)) in paths.iter().zip(&sinks) {
                    let _ = writeln!(
                        self.out.stdout,
                        "@{n}: {} -> {}",
                        t.shape_string(),
                        shown(p)
                    );
                }
                true
            }
            Err(e) => self.fail(&l.name, Diagnostic::error(codes::IO, e.to_string())),
        }
    }

    /// Runs the `grad` pass when a graph has a `grad` statement (`tapc run` interprets or
    /// compiles lowered graphs only).
    fn lower_grad(&mut self, l: &mut Loaded) -> bool {
        if !l.module.graphs.iter().any(Graph::has_grad) {
            return true;
        }
        let facts = std::mem::take(&mut l.facts);
        let mut log = String::new();
        match manager::run_pipeline(
            &mut l.module,
            facts,
            "grad",
            &RunConfig::default(),
            &mut log,
        ) {
            Ok(cx) => {
                l.facts = cx.facts;
                true
            }
            Err(d) => {
                let src = l.src.clone();
                self.report(&l.name, &src, &[d]);
                false
            }
        }
    }

    /// `tapc FILE -o OUT [--emit exe|obj|asm|llvm]`: compiles a graph with the native backend.
    fn compile(
        &mut self,
        file: Option<&Path>,
        output: Option<&Path>,
        emit: crate::codegen::EmitKind,
        graph: Option<&str>,
        passes: Option<&str>,
        opts: &crate::codegen::Options,
    ) -> bool {
        let Some(file) = file else {
            self.out
                .stderr
                .push_str("tapc: no input file; try `tapc --help`\n");
            return false;
        };
        let Some(mut l) = self.load(file) else {
            return false;
        };
        let gi = match pick_graph(&l.module, graph) {
            Ok(i) => i,
            Err(d) => return self.fail(&l.name, d),
        };
        let out = output.map_or_else(|| default_output(file, emit), Path::to_path_buf);
        // The path policy, before compiling: never the source, never over a device.
        let mut guard = Outputs::new();
        guard.protect(file);
        if let Err(e) = guard.check(&out, Origin::User) {
            let d =
                Diagnostic::error(codes::IO, e.to_string()).note("name the output with `-o FILE`");
            return self.fail(&l.name, d);
        }
        let pipeline = passes.unwrap_or(manager::DEFAULT_PIPELINE);
        let mut log = String::new();
        let facts = std::mem::take(&mut l.facts);
        let config = read_pass_files(pipeline, RunConfig::default());
        match manager::run_pipeline(&mut l.module, facts, pipeline, &config, &mut log) {
            Ok(cx) => {
                if !self.write_files(&l.name, file, &cx.files) {
                    return false;
                }
                l.facts = cx.facts
            }
            Err(d) => {
                let src = l.src.clone();
                self.report(&l.name, &src, &[d]);
                return false;
            }
        }
        let rt = self.runtime;
        let (f, facts) = (&l.module, &l.facts[gi]);
        match crate::codegen::emit_to_file(f, gi, facts, emit, &out, opts, rt, &[file]) {
            Ok(()) => true,
            Err(d) => {
                let src = l.src.clone();
                self.report(&l.name, &src, &[d]);
                false
            }
        }
    }
}

/// Binds the sources of `g` for `tapc run` (`--input NAME=PATH`, else `--input-dir DIR`) and
/// reads them, through the runtime's binding: the one compiled programs use. Returns the
/// tensors by name and the files read.
fn read_sources(
    g: &Graph,
    inputs: &[OsString],
    input_dir: Option<&Path>,
) -> Result<(HashMap<String, Tensor>, Vec<PathBuf>), Diagnostic> {
    let error = |msg: String| Diagnostic::error(codes::RUNTIME, msg);
    let mut bound = cli::Inputs {
        dir: input_dir.map(Path::to_path_buf),
        ..Default::default()
    };
    for b in inputs {
        bound.add_named(b).map_err(error)?;
    }
    let shapes: Vec<Vec<usize>> = (g.sources())
        .map(|(_, ty, _)| ty.shape.iter().map(|&d| d as usize).collect())
        .collect();
    let declared: Vec<Declared> = (g.sources().zip(&shapes))
        .map(|((name, ty, _), shape)| Declared {
            name,
            dtype: ty.dtype,
            shape,
        })
        .collect();
    let files = bound
        .files(&g.name, &declared)
        .map_err(|e| match e.source {
            Some(n) => error(e.message).note(format!("pass `--input {n}=FILE.npy`")),
            None => error(e.message),
        })?;
    let tensors = cli::read_inputs(&declared, &files).map_err(error)?;
    let named = (declared.iter().map(|s| s.name.to_string()))
        .zip(tensors)
        .collect();
    Ok((named, files))
}

/// The output of `tapc FILE` without `-o`: FILE's stem (as bytes), with the extension of
/// `emit` (`m.teg` → `m`, `m.o`, `m.s`, `m.ll`).
fn default_output(file: &Path, emit: crate::codegen::EmitKind) -> PathBuf {
    use crate::codegen::EmitKind as E;
    let mut name = file.file_stem().unwrap_or(OsStr::new("out")).to_os_string();
    name.push(match emit {
        E::Exe => "",
        E::Obj => ".o",
        E::Asm => ".s",
        E::Llvm => ".ll",
    });
    PathBuf::from(name)
}

pub(crate) fn pick_graph(m: &Module, name: Option<&str>) -> Result<usize, Diagnostic> {
    match name {
        Some(n) => m
            .graphs
            .iter()
            .position(|g| g.name == n.trim_start_matches('@'))
            .ok_or_else(|| {
                Diagnostic::error(
                    codes::BAD_GRAPH_CHOICE,
                    format!("there is no graph @{}", n.trim_start_matches('@')),
                )
            }),
        None if m.graphs.len() == 1 => Ok(0),
        None if m.graphs.is_empty() => Err(Diagnostic::error(
            codes::BAD_GRAPH_CHOICE,
            "the file has no graph to run",
        )),
        None => Err(
            Diagnostic::error(codes::BAD_GRAPH_CHOICE, "the file has several graphs")
                .note("choose one with `--graph NAME`"),
        ),
    }
}
