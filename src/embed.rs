//! The embedding API: TEG text compiled once (verified, run through a pass pipeline and
//! JIT-compiled) into a [`Compiled`] program kept in memory, then run many times on caller
//! memory. The Python package (`python/`) is a thin layer over it.

use crate::codegen::{self, Jit};
use crate::diag::{render_human, render_json, Diagnostic};
use crate::driver::{emit, pick_graph, read_pass_files};
use crate::import::{ImportOptions, Imported};
use crate::ir::Module;
use crate::passes::manager::{self, RunConfig};
use crate::verify::GraphFacts;
use std::path::Path;
use tapc_runtime::exec::{self, Input, Report, SinkData, SinkView};
use tapc_runtime::DType;

/// How to compile: what `tapc FILE -o OUT` and `tapc run` take as flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Options {
    /// The graph to compile (`--graph`); needed when the file has several.
    pub graph: Option<String>,
    /// A pass pipeline, as `tapc opt --passes` takes it (default: the standard pipeline).
    pub passes: Option<String>,
    /// Worker threads of each run (default: the available cores).
    pub threads: Option<usize>,
}

/// A source or sink of the compiled graph: its name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Why a text did not compile: the diagnostics with the source they point into.
#[derive(Clone, Debug)]
pub struct CompileError {
    /// The file name the diagnostics name.
    pub file: String,
    pub source: String,
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    fn new(file: &str, source: &str, diagnostics: Vec<Diagnostic>) -> CompileError {
        CompileError {
            file: file.to_string(),
            source: source.to_string(),
            diagnostics,
        }
    }

    /// The diagnostics as `tapc --error-format=json` prints them: one JSON object a line, with
    /// the code, message, notes and every label's line and column.
    pub fn json(&self) -> String {
        render_json(&self.file, &self.source, &self.diagnostics)
    }

    /// The diagnostics as `tapc` prints them on a terminal (without colour).
    pub fn human(&self) -> String {
        render_human(&self.file, &self.source, &self.diagnostics, false)
    }
}

/// Imports the ONNX model at `path` (what `tapc import` does, without writing files). A failure
/// is a [`CompileError`] whose diagnostics name the model file.
pub fn import_onnx(path: &Path, opts: &ImportOptions) -> Result<Imported, CompileError> {
    let file = tapc_runtime::paths::shown(path).to_string();
    crate::import::import_onnx(path, opts).map_err(|d| CompileError::new(&file, "", d))
}

/// A graph compiled for this machine, ready to run.
pub struct Compiled {
    /// The graph's name.
    pub graph: String,
    /// The module after the passes, as TEG text.
    pub teg: String,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// Worker threads of each run.
    pub threads: usize,
    name: String,
    module: Module,
    facts: Vec<GraphFacts>,
    jit: Jit,
}

/// Compiles TEG `bytes` (named `file` in diagnostics): parse, verify, the pipeline, the JIT.
pub fn compile(file: &str, bytes: Vec<u8>, opts: &Options) -> Result<Compiled, CompileError> {
    let (src, mut diags) = crate::syntax::decode(bytes);
    let (mut module, facts, compiled) = crate::compile_source(&src);
    diags.extend(compiled);
    let diags = diags.sorted();
    let fail = |ds: Vec<Diagnostic>| CompileError::new(file, &src, ds);
    if diags.has_errors() {
        return Err(fail(diags.0));
    }
    let pipeline = opts.passes.as_deref().unwrap_or(manager::DEFAULT_PIPELINE);
    let config = read_pass_files(pipeline, RunConfig::default());
    let mut log = String::new();
    let out = manager::run_pipeline(&mut module, facts, pipeline, &config, &mut log)
        .map_err(|d| fail(vec![d]))?;
    let gi = pick_graph(&module, opts.graph.as_deref()).map_err(|d| fail(vec![d]))?;
    let jit = codegen::jit(&module, gi, &out.facts[gi], &codegen::Options::default())
        .map_err(|d| fail(vec![d]))?;
    let port = |name: &str, dtype: DType, shape: &[usize]| Port {
        name: name.to_string(),
        dtype,
        shape: shape.to_vec(),
    };
    let plan = &jit.plan;
    Ok(Compiled {
        graph: module.graphs[gi].name.clone(),
        teg: crate::print::print_module(&module),
        inputs: (plan.sources.iter())
            .map(|s| port(&s.name, s.dtype, &s.shape))
            .collect(),
        outputs: (plan.sinks.iter())
            .map(|s| port(&s.name, s.dtype, &s.shape))
            .collect(),
        threads: opts.threads.unwrap_or_else(exec::default_threads).max(1),
        name: file.to_string(),
        module,
        facts: out.facts,
        jit,
    })
}

impl Compiled {
    /// Per apply of the module: its index space, each port's projection and derived costs
    /// (`tapc opt --emit signature`).
    pub fn signature(&self) -> String {
        emit::signatures(&self.module, &self.facts)
    }

    /// The cost model's report of the compiled module (`tapc opt --passes=cost --emit cost`).
    pub fn cost(&self) -> Result<String, CompileError> {
        let mut m = self.module.clone();
        let mut log = String::new();
        let config = RunConfig::default();
        let out = manager::run_pipeline(&mut m, self.facts.clone(), "cost", &config, &mut log)
            .map_err(|d| CompileError::new(&self.name, &self.teg, vec![d]))?;
        Ok(out.report("cost").unwrap_or_default().to_string())
    }

    fn exec_options(&self) -> exec::Options {
        exec::Options {
            threads: self.threads,
            record: false,
        }
    }

    /// Runs the program on `inputs` (one per source, in order; borrowed ones are read in
    /// place) and hands the sinks, read in place, to `sinks` before their buffers are freed.
    pub fn run<T>(
        &self,
        inputs: &[Input],
        sinks: impl FnOnce(&[SinkView]) -> Result<T, String>,
    ) -> Result<(T, Report), String> {
        let (plan, kernels) = (&self.jit.plan, self.jit.kernels());
        exec::execute_inputs(plan, kernels, inputs, &self.exec_options(), sinks)
    }

    /// Runs the program on `inputs` and returns the sinks, each in the buffer the program
    /// wrote it into when that buffer is all its own, else copied ([`exec::execute_owned`]).
    pub fn run_owned(&self, inputs: &[Input]) -> Result<(Vec<SinkData>, Report), String> {
        let (plan, kernels) = (&self.jit.plan, self.jit.kernels());
        exec::execute_owned(plan, kernels, inputs, &self.exec_options())
    }
}
