//! Open MPI for the tests and benchmarks that run `--mpi` programs: the runtime library built
//! with its `mpi` feature, and `mpirun` over a chosen transport.

use super::syspkg;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The MPI runtime library, built once per test or bench binary.
pub fn mpi_runtime() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| nested_build(&["-p", "tapc-runtime"]).join("debug/libtapc_runtime.a"))
}

/// `tapc` itself built with `--features mpi`, once per test binary. It shares the MPI runtime's
/// target directory, so the runtime and Open MPI's bindings are built once for both.
#[allow(dead_code)] // Only the runtime tests use it.
pub fn mpi_tapc() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| nested_build(&["--bin", "tapc"]).join("debug/tapc"))
}

/// `exe FILE -o OUT --passes PASSES [--mpi]` (with no `TAPC_MPI_RUNTIME_LIB`: `exe` is built
/// with the `mpi` feature when `mpi`), which must succeed.
#[allow(dead_code)] // Only the runtime tests use it.
pub fn compile_with(exe: &Path, file: &Path, passes: &str, out: &Path, mpi: bool) {
    let mut c = Command::new(exe);
    c.arg(file).arg("-o").arg(out).args(["--passes", passes]);
    if mpi {
        c.arg("--mpi");
    }
    let o = c.env_remove("TAPC_MPI_RUNTIME_LIB").output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `cargo build --locked --features mpi ARGS` into `<target>/mpi` (Open MPI and libclang
/// installed first); returns that target directory. One at a time: both share it.
fn nested_build(args: &[&str]) -> PathBuf {
    static ONE: Mutex<()> = Mutex::new(());
    let _g = ONE.lock().unwrap_or_else(|e| e.into_inner());
    syspkg::ensure("mpirun", &["libopenmpi-dev", "openmpi-bin"]);
    syspkg::ensure("mpicc", &["libopenmpi-dev"]);
    syspkg::ensure_file(
        &[
            "/usr/lib/llvm-14/lib/libclang.so",
            "/usr/lib/x86_64-linux-gnu/libclang.so",
        ],
        &["libclang-dev"],
    );
    // <target>/<profile>/deps/mpi-HASH: the nested build gets <target>/mpi.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().join("mpi");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["build", "--locked", "--features", "mpi"])
        .args(args)
        .arg("--target-dir")
        .arg(&target)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo build --features mpi {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target
}

/// The `@linear` and `@relu` operators of the MLPs the MPI tests and benchmark run.
#[allow(dead_code)] // Not every user of this module builds an MLP.
pub const MLP_OPS: &str = "op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}
";

/// The MLP `x[batch, input] → hidden → output` (bias and ReLU) as graph `@mlp`, with its ops.
#[allow(dead_code)] // Not every user of this module builds an MLP.
pub fn mlp(batch: usize, input: usize, hidden: usize, output: usize) -> String {
    format!(
        "{MLP_OPS}graph @mlp {{
  %x = source @x : f32[{batch}, {input}]
  %w1 = source @w1 : f32[{input}, {hidden}]
  %b1 = source @b1 : f32[{hidden}]
  %w2 = source @w2 : f32[{hidden}, {output}]
  %b2 = source @b2 : f32[{output}]
  %h = apply @linear(%x, %w1, %b1)
  %a = apply @relu(%h)
  %y = apply @linear(%a, %w2, %b2)
  sink @y %y
}}
"
    )
}

/// A 5-point heat stencil over `steps` steps of a `rows`×`cols` grid, sunk as the row sums of
/// the last grid. Each step keeps the interior, or with `boundary` reads its grid through a
/// constant `pad` (which the shards' kernels fold: only halo rows move).
#[allow(dead_code)] // Only the memory and cost tests and the MPI bench build one.
pub fn heat(rows: usize, cols: usize, steps: usize, boundary: bool) -> String {
    let mut g = format!(
        "op @step(x: f32[M, N]) -> (y: f32[M - 2, N - 2]) {{
  y[i, j] = x[i + 1, j + 1] * 0.5 + (x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]) * 0.125
}}
op @rowsum(x: f32[M, N]) -> (y: f32[M]) {{
  y[i] = sum[j](x[i, j])
}}
graph @heat {{
  %u0 = source @u : f32[{rows}, {cols}]
"
    );
    for s in 1..=steps {
        let x = if boundary {
            g.push_str(&format!(
                "  %p{s} = pad %u{} [1:1, 1:1] constant 0.0\n",
                s - 1
            ));
            format!("%p{s}")
        } else {
            format!("%u{}", s - 1)
        };
        g.push_str(&format!("  %u{s} = apply @step({x})\n"));
    }
    g.push_str(&format!(
        "  %e = apply @rowsum(%u{steps})\n  sink @e %e\n}}\n"
    ));
    g
}

/// `c = a · b` for `a: f32[m, k]`, `b: f32[k, n]`.
#[allow(dead_code)] // Only the memory tests and the MPI bench build one.
pub fn matmul(m: usize, k: usize, n: usize) -> String {
    format!(
        "op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
graph @mm {{
  %a = source @a : f32[{m}, {k}]
  %b = source @b : f32[{k}, {n}]
  %c = apply @matmul(%a, %b)
  sink @c %c
}}
"
    )
}

#[derive(Clone, Copy, Debug)]
pub enum Btl {
    SharedMemory,
    Tcp,
}

/// `mpirun -np N --oversubscribe` over the chosen transport (pml ob1, so the btl is used).
pub fn mpirun(np: usize, btl: Btl, prog: &Path, args: &[String]) -> Output {
    mpirun_with(None, np, btl, prog, args, |_| {})
}

/// [`mpirun`] with `more` adding to the command (environment, a second program), killed by
/// `timeout` after `secs` seconds when given (then its exit code is 124, or 137 if it had to be
/// killed): for launches that used to hang.
pub fn mpirun_with(
    secs: Option<u32>,
    np: usize,
    btl: Btl,
    prog: &Path,
    args: &[String],
    more: impl FnOnce(&mut Command),
) -> Output {
    let _g = one_job();
    let mut c = match secs {
        Some(s) => {
            let mut t = Command::new("timeout");
            t.args(["--kill-after=10", &s.to_string(), "mpirun"]);
            t
        }
        None => Command::new("mpirun"),
    };
    mpirun_args(&mut c, np, btl);
    c.arg(prog).args(args);
    more(&mut c);
    c.output().unwrap()
}

/// Held while an `mpirun` job runs: one job at a time, as the tests share two cores.
pub fn one_job() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds to `mpirun` command `c` the arguments of `-np N --oversubscribe` over the chosen
/// transport (pml ob1, so the btl is used) and the environment that lets root run it.
pub fn mpirun_args(c: &mut Command, np: usize, btl: Btl) {
    c.args([
        "-np",
        &np.to_string(),
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .args(["--mca", "pml", "ob1", "--mca", "btl"])
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    match btl {
        Btl::SharedMemory => c.arg("self,vader"),
        Btl::Tcp => c.args(["self,tcp", "--mca", "btl_tcp_if_include", "lo"]),
    };
}
