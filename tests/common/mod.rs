//! Helpers shared by the integration tests: compile a source and run its graph.
#![allow(dead_code)]

pub mod grad_cases;
pub mod grad_graphs;
pub mod graphgen;
pub mod jax_fixtures;
pub mod mpi;
pub mod pyenv;
pub mod rng;
pub mod syspkg;
pub mod tolerance;
pub mod train_block;

use std::collections::HashMap;
use tapc::ir::Module;
use tapc::verify::GraphFacts;
use tapc_runtime::Tensor;

pub use rng::Rng;

/// Compiles `src`, panicking with the rendered diagnostics if it has errors.
pub fn compile_ok(name: &str, src: &str) -> (Module, Vec<GraphFacts>) {
    let (m, facts, diags) = tapc::compile_source(src);
    if diags.has_errors() {
        panic!(
            "{name} has errors:\n{}",
            tapc::diag::render_human(name, src, &diags.0, false)
        );
    }
    (m, facts)
}

/// Runs graph `gi` with `inputs`; sinks by name.
pub fn run(
    m: &Module,
    facts: &[GraphFacts],
    gi: usize,
    inputs: &HashMap<String, Tensor>,
) -> HashMap<String, Tensor> {
    tapc::interp::run(m, &m.graphs[gi], &facts[gi], inputs)
        .expect("graph runs")
        .into_iter()
        .collect()
}

pub fn f64s(t: &Tensor) -> Vec<f64> {
    use tapc_runtime::Data;
    match &t.data {
        Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
        Data::F64(v) => v.clone(),
        Data::I32(v) => v.iter().map(|&x| x as f64).collect(),
        Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Data::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        Data::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        Data::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        Data::I8(v) => v.iter().map(|&x| x as f64).collect(),
        Data::U8(v) => v.iter().map(|&x| x as f64).collect(),
        Data::I16(v) => v.iter().map(|&x| x as f64).collect(),
        Data::U16(v) => v.iter().map(|&x| x as f64).collect(),
        Data::U32(v) => v.iter().map(|&x| x as f64).collect(),
        Data::U64(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// The MLP example's sources (`tests/data/mlp/*.npy`), by source name.
pub fn mlp_inputs() -> HashMap<String, Tensor> {
    let dir = format!("{}/tests/data/mlp", env!("CARGO_MANIFEST_DIR"));
    ["x", "w1", "b1", "w2", "b2"]
        .iter()
        .map(|n| {
            let path = format!("{dir}/{n}.npy");
            let t = tapc_runtime::npy::read(std::path::Path::new(&path)).expect("fixture");
            (n.to_string(), t)
        })
        .collect()
}

pub fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR")))
        .expect("example exists")
}

/// Sink values of every graph of a module, by graph index.
pub type Sinks = Vec<HashMap<String, Tensor>>;

/// Sinks before and after `pipeline`, and the printed result; asserts that the result re-parses
/// to the same module and runs the re-parsed module (so the printed text is what is checked).
pub fn before_after(
    src: &str,
    pipeline: &str,
    inputs: &HashMap<String, Tensor>,
) -> (Sinks, Sinks, String) {
    // The input runs as `tapc run` runs it: `grad` statements lowered first.
    let (m, facts) = compile_ok("input", src);
    let (m, facts) = if m.graphs.iter().any(tapc::ir::Graph::has_grad) {
        grad_cases::lowered("input", src)
    } else {
        (m, facts)
    };
    let before = (0..m.graphs.len())
        .map(|i| run(&m, &facts, i, inputs))
        .collect();
    let (m, _) = after_pipeline("input", src, pipeline);
    let printed = tapc::print::print_module(&m);
    let (m2, facts2) = compile_ok("output", &printed);
    assert_eq!(m, m2, "output re-parses to the same module");
    let after = (0..m2.graphs.len())
        .map(|i| run(&m2, &facts2, i, inputs))
        .collect();
    (before, after, printed)
}

/// `src` compiled and run through `pipeline`, which must succeed: the module and its facts.
#[allow(dead_code)] // Not every test binary runs pipelines.
pub fn after_pipeline(what: &str, src: &str, pipeline: &str) -> (Module, Vec<GraphFacts>) {
    let (m, cx) = pipeline_context(what, src, pipeline);
    (m, cx.facts)
}

/// [`after_pipeline`] with the pass context (its facts and the passes' reports).
#[allow(dead_code)] // Not every test binary runs pipelines.
pub fn pipeline_context(
    what: &str,
    src: &str,
    pipeline: &str,
) -> (Module, tapc::passes::manager::PipelineOutput) {
    use tapc::passes::manager::{run_pipeline, RunConfig};
    let (mut m, facts) = compile_ok(what, src);
    let cx = run_pipeline(
        &mut m,
        facts,
        pipeline,
        &RunConfig::default(),
        &mut String::new(),
    )
    .unwrap_or_else(|d| panic!("{what}: {pipeline} failed: {}", d.message));
    (m, cx)
}

/// A fresh, empty directory `tapc-NAME-PID` under the system's temporary directory, removed
/// when the test process exits (`TAPC_KEEP_SCRATCH=1` keeps it for a post-mortem).
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tapc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    remove_at_exit(&d);
    d
}

/// Directories to remove when the process exits; a test binary's tests share them, so no
/// test can remove one another still uses.
static AT_EXIT: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes `dir` (and everything under it) when the test process exits, passed or failed.
pub fn remove_at_exit(dir: &std::path::Path) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    // SAFETY: `remove_registered` is a plain `extern "C" fn` that takes no arguments.
    HOOK.call_once(|| unsafe {
        libc::atexit(remove_registered);
    });
    AT_EXIT.lock().unwrap().push(dir.to_path_buf());
}

extern "C" fn remove_registered() {
    if std::env::var_os("TAPC_KEEP_SCRATCH").is_some() {
        return;
    }
    let dirs = std::mem::take(&mut *AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()));
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Deterministic inputs for every source: floats in [-2, 2), ints in [-50, 50), bools.
pub fn inputs(m: &Module, gi: usize) -> HashMap<String, Tensor> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next();
    let mut out = HashMap::new();
    for (name, ty, _) in m.graphs[gi].sources() {
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let n: usize = shape.iter().product();
        let data = match ty.dtype {
            tapc_runtime::DType::F32 => tapc_runtime::Data::F32(
                (0..n)
                    .map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0)
                    .collect(),
            ),
            tapc_runtime::DType::F64 => tapc_runtime::Data::F64(
                (0..n)
                    .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0)
                    .collect(),
            ),
            tapc_runtime::DType::I32 => {
                tapc_runtime::Data::I32((0..n).map(|_| (next() % 100) as i32 - 50).collect())
            }
            tapc_runtime::DType::I64 => {
                tapc_runtime::Data::I64((0..n).map(|_| (next() % 100) as i64 - 50).collect())
            }
            tapc_runtime::DType::Bool => {
                tapc_runtime::Data::Bool((0..n).map(|_| next() & 1 == 1).collect())
            }
            // The other dtypes: the same draws, converted (floats rounded, unsigned in [0, 100)).
            d => {
                let vals: Vec<f64> = (0..n)
                    .map(|_| match d.is_float() {
                        true => (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0,
                        false if d.is_unsigned() => (next() % 100) as f64,
                        false => (next() % 100) as f64 - 50.0,
                    })
                    .collect();
                tapc_runtime::data_of!(d, T => vals.iter().map(|&v| from_f64::<T>(v)).collect())
            }
        };
        out.insert(name.to_string(), Tensor::new(shape, data).unwrap());
    }
    out
}

/// An element of a test tensor from an f64 (rounded to nearest, or an integer in range).
pub trait FromF64 {
    fn from_f64(v: f64) -> Self;
}

macro_rules! from_f64_as {
    ($($t:ty),*) => {$(
        impl FromF64 for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}
from_f64_as!(f32, f64, i8, u8, i16, u16, i32, u32, i64, u64);

impl FromF64 for bool {
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

impl FromF64 for tapc_runtime::f16 {
    fn from_f64(v: f64) -> Self {
        tapc_runtime::f16::from_f64(v)
    }
}

impl FromF64 for tapc_runtime::bf16 {
    fn from_f64(v: f64) -> Self {
        tapc_runtime::bf16::from_f64(v)
    }
}

/// `T::from_f64(v)`.
pub fn from_f64<T: FromF64>(v: f64) -> T {
    T::from_f64(v)
}
