//! Differential tests of the native backend against the reference interpreter: every example,
//! every filetest graph (but those of files with expected errors, and the few the interpreter
//! does not run, listed in `FILETEST_GRAPHS_NOT_RUN`), the semantics corner cases below,
//! sharded graphs and random graphs each compile once (LLVM JIT) and run with 1 and 2 worker
//! threads. Every test counts what it compared and fails on a graph it could not compare.
//!
//! Integer and bool results must be bit-exact. Float results must satisfy
//! `|native - interp| <= rtol * |interp| + atol * (1 + rms)` elementwise, `rms` the sink's root
//! mean square, `rtol, atol` 1e-4, 1e-5 for f32 and 1e-12, 1e-13 for f64 (NaN matches NaN,
//! infinities must be equal; `common::tolerance`): the math
//! functions are polynomials within a few ulps (`src/codegen/math.rs`, `tests/math.rs`), float
//! sums of products are fused multiply-adds (unless `--fp-contract=off`), and float sums
//! vectorised along a contiguous reduction are reassociated (see `src/codegen/kernel/reduce.rs`);
//! everything else is computed exactly as the interpreter does.

use crate::common;

use common::inputs;
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tapc::codegen::FpContract;
use tapc::ir::Module;
use tapc::verify::GraphFacts;
use tapc_runtime::exec::Options;
use tapc_runtime::{Data, Tensor};

/// Compares sink lists; `Err` describes the first mismatch.
fn compare(want: &[(String, Tensor)], got: &[(String, Tensor)]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("{} sinks vs {}", want.len(), got.len()));
    }
    for ((wn, w), (gn, g)) in want.iter().zip(got) {
        if wn != gn || w.shape != g.shape || w.dtype() != g.dtype() {
            return Err(format!(
                "sink @{wn}: {} vs @{gn}: {}",
                w.shape_string(),
                g.shape_string()
            ));
        }
        if let Some(i) = common::tolerance::first_mismatch(w, g) {
            let (x, y) = (common::f64s(w)[i], common::f64s(g)[i]);
            return Err(format!(
                "sink @{wn} {}: element {i}: interpreter {x:e}, native {y:e}",
                w.shape_string()
            ));
        }
    }
    Ok(())
}

/// What [`check_graph`] did with a graph.
#[derive(Debug)]
enum Checked {
    /// Native results matched the interpreter's on 1 and 2 threads.
    Compared,
    /// Nothing to compare with, and why: the interpreter does not run the graph.
    NotRun(String),
}

/// Runs graph `gi` in the interpreter and natively (1 and 2 threads).
fn check_graph(what: &str, m: &Module, facts: &[GraphFacts], gi: usize) -> Result<Checked, String> {
    check_graph_with(what, m, facts, gi, &Default::default())
}

fn check_graph_with(
    what: &str,
    m: &Module,
    facts: &[GraphFacts],
    gi: usize,
    copts: &tapc::codegen::Options,
) -> Result<Checked, String> {
    // Analysis-only filetests use huge shapes; the interpreter is not meant for them.
    let elements: i64 = m.graphs[gi]
        .values
        .iter()
        .filter_map(|v| v.ty.as_ref())
        .map(|t| t.elements())
        .sum();
    if elements > 1 << 21 {
        let why = format!("{elements} elements, over the 2^21 this test interprets");
        return Ok(Checked::NotRun(why));
    }
    let ins = inputs(m, gi);
    let want = match tapc::interp::run(m, &m.graphs[gi], &facts[gi], &ins) {
        Ok(want) => want,
        Err(d) => return Ok(Checked::NotRun(format!("the interpreter: {}", d.message))),
    };
    let results = tapc::codegen::with_jit(m, gi, &facts[gi], copts, |p| {
        [1, 2]
            .iter()
            .map(|&threads| {
                let opts = Options {
                    threads,
                    record: false,
                };
                p.run(&ins, &opts).map(|r| r.0)
            })
            .collect::<Vec<_>>()
    })
    .map_err(|d| format!("{what} @{}: {}", m.graphs[gi].name, d.message))?;
    for (threads, r) in [1, 2].iter().zip(results) {
        let got =
            r.map_err(|e| format!("{what} @{} ({threads} threads): {e}", m.graphs[gi].name))?;
        compare(&want, &got)
            .map_err(|e| format!("{what} @{} ({threads} threads): {e}", m.graphs[gi].name))?;
    }
    Ok(Checked::Compared)
}

/// Checks every graph of `src`; returns each graph's name and what was done with it.
fn check_source(what: &str, src: &str) -> Result<Vec<(String, Checked)>, String> {
    let (mut m, facts, diags) = tapc::compile_source(src);
    if diags.has_errors() {
        return Err(format!(
            "{what} does not verify:\n{}",
            tapc::diag::render_human(what, src, &diags.0, false)
        ));
    }
    // `grad` statements are lowered first, as `tapc run` does; one that cannot be (E0110)
    // leaves nothing to run.
    let facts = if m.graphs.iter().any(tapc::ir::Graph::has_grad) {
        let config = tapc::passes::manager::RunConfig::default();
        match tapc::passes::manager::run_pipeline(
            &mut m,
            facts,
            "grad",
            &config,
            &mut String::new(),
        ) {
            Ok(cx) => cx.facts,
            Err(d) => {
                let why =
                    |g: &tapc::ir::Graph| (g.name.clone(), Checked::NotRun(d.message.clone()));
                return Ok(m.graphs.iter().map(why).collect());
            }
        }
    } else {
        facts
    };
    (0..m.graphs.len())
        .map(|gi| {
            Ok((
                m.graphs[gi].name.clone(),
                check_graph(what, &m, &facts, gi)?,
            ))
        })
        .collect()
}

/// Checks `src`, every graph of which must be compared; `Err` names what was not.
fn compare_every_graph(what: &str, src: &str) -> Result<(), String> {
    let not_run: Vec<String> = check_source(what, src)?
        .into_iter()
        .filter_map(|(g, c)| match c {
            Checked::Compared => None,
            Checked::NotRun(why) => Some(format!("@{g}: {why}")),
        })
        .collect();
    if not_run.is_empty() {
        Ok(())
    } else {
        Err(format!("{what}: not compared: {}", not_run.join("; ")))
    }
}

/// Checks `src`, every graph of which must run in the interpreter.
fn assert_source(what: &str, src: &str) {
    compare_every_graph(what, src).unwrap_or_else(|e| panic!("{e}"));
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn teg_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            teg_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "teg") {
            out.push(p);
        }
    }
}

#[test]
fn every_example_matches_the_interpreter() {
    let mut files = Vec::new();
    teg_files(&root().join("examples"), &mut files);
    assert!(files.len() >= 4);
    // Its 14M weight elements are over the limit above; tests/transformer.rs compares it with
    // the interpreter and numpy instead.
    files.retain(|f| !f.ends_with("transformer.teg"));
    // Its 2.7M elements (the gradient graph of a 2-layer transformer) are over the limit too;
    // tests/train_transformer.rs runs it in the interpreter, the JIT and a compiled program
    // against JAX instead.
    files.retain(|f| !f.ends_with("train_transformer.teg"));
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        assert_source(&f.display().to_string(), &src);
    }
}

/// Filetest graphs the interpreter does not run (so there is nothing to compare with), and
/// why. `every_filetest_graph_matches_the_interpreter` fails on a graph it cannot compare that
/// is not listed here, and on a listed graph it can compare.
const FILETEST_GRAPHS_NOT_RUN: &[(&str, &str, &str)] = &[
    (
        "tests/filetests/alias/too_complex.teg",
        "huge",
        "3e10 elements: an analysis-only shape",
    ),
    (
        "tests/filetests/errors/grad_unsupported.teg",
        "g",
        "`grad` has no adjoint for a load reading one variable in two dimensions (E0110)",
    ),
    (
        "tests/filetests/errors/grad_conv_pieces.teg",
        "g",
        "`grad` unrolls at most 64 offsets of a convolution window (E0110)",
    ),
    (
        "tests/filetests/errors/grad_gather.teg",
        "g",
        "`grad` has no adjoint for a load gathering two dimensions (E0110)",
    ),
    (
        "tests/filetests/errors/grad_gather_shifted.teg",
        "shifted",
        "`grad` has no adjoint for a gathered load read at a shifted column (E0110)",
    ),
    (
        "tests/filetests/errors/grad_scatter.teg",
        "g",
        "`grad` has no adjoint for a `scatter … reduce max` (E0110)",
    ),
    (
        "tests/filetests/errors/e0071_no_kernel.teg",
        "g",
        "an extern op without a kernel (E0071)",
    ),
    (
        "tests/filetests/errors/e0105_pass_failed.teg",
        "huge",
        "3e10 elements: an analysis-only shape",
    ),
    (
        "tests/filetests/syntax/canonical.teg",
        "uses",
        "an extern op without a kernel",
    ),
    (
        "tests/filetests/syntax/ops.teg",
        "uses",
        "an extern op without a kernel",
    ),
    (
        "tests/filetests/views/extern_and_shards.teg",
        "g",
        "an extern op without a kernel",
    ),
];

/// What the filetest sweep found: graphs compared, graphs not run (`(file, graph, why)`),
/// files with expected errors (no graph to run), failures.
#[derive(Default)]
struct Sweep {
    compared: usize,
    not_run: Vec<(String, String, String)>,
    with_errors: usize,
    failures: Vec<String>,
}

impl Sweep {
    fn add(&mut self, file: &str, src: &str) {
        if tapc::compile_source(src).2.has_errors() {
            self.with_errors += 1;
            return;
        }
        match check_source(file, src) {
            Ok(graphs) => {
                for (g, c) in graphs {
                    match c {
                        Checked::Compared => self.compared += 1,
                        Checked::NotRun(why) => self.not_run.push((file.into(), g, why)),
                    }
                }
            }
            Err(e) => self.failures.push(e),
        }
    }
}

#[test]
fn every_filetest_graph_matches_the_interpreter() {
    let mut files = Vec::new();
    teg_files(&root().join("tests/filetests"), &mut files);
    assert!(!files.is_empty(), "no filetests found");
    // The interpreter dominates (MLP-sized graphs take seconds), so spread files over cores.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let sweep = std::sync::Mutex::new(Sweep::default());
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(f) = files.get(i) else { return };
                let src = std::fs::read_to_string(f).unwrap();
                let rel = f.strip_prefix(root()).unwrap().display().to_string();
                sweep.lock().unwrap().add(&rel, &src);
            });
        }
    });
    let mut sweep = sweep.into_inner().unwrap();
    assert!(sweep.failures.is_empty(), "{}", sweep.failures.join("\n"));
    sweep.not_run.sort();
    let listed = |f: &str, g: &str| {
        FILETEST_GRAPHS_NOT_RUN
            .iter()
            .any(|(lf, lg, _)| *lf == f && *lg == g)
    };
    let unlisted: Vec<String> = sweep
        .not_run
        .iter()
        .filter(|(f, g, _)| !listed(f, g))
        .map(|(f, g, why)| format!("{f} @{g}: {why}"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "not compared and not in FILETEST_GRAPHS_NOT_RUN:\n{}",
        unlisted.join("\n")
    );
    assert_eq!(
        sweep.not_run.len(),
        FILETEST_GRAPHS_NOT_RUN.len(),
        "a graph in FILETEST_GRAPHS_NOT_RUN is compared now (or gone): remove it; not run: {:?}",
        sweep.not_run
    );
    assert!(sweep.compared > 0, "no filetest graph was compared");
    println!(
        "{} files: {} graphs compared, {} listed as not run, {} files with expected errors",
        files.len(),
        sweep.compared,
        sweep.not_run.len(),
        sweep.with_errors
    );
}

const SEMANTICS: &str = r#"
op @ints(a: i32[N], b: i32[N]) -> (q: i32[N], r: i32[N], m: i32[N], c: i64[N], f: f32[N], t: bool[N]) {
  q[i] = a[i] / b[i]
  r[i] = a[i] % b[i]
  m[i] = max(abs(a[i]) * -3, min(b[i], a[i] - 7))
  c[i] = i64(a[i]) * 100000000000 / i64(b[i] + 1) + i64(i)
  f[i] = f32(a[i]) / 3.0 + f32(i)
  t[i] = a[i] < b[i] || !(a[i] == 0)
}
op @floats(x: f32[N], y: f64[N]) -> (a: f32[N], b: f64[N], c: i32[N], d: f32[N], e: bool[N], g: f64[N]) {
  a[i] = exp(x[i]) + log(abs(x[i]) + 0.5) * tanh(x[i]) - sqrt(abs(x[i])) + sin(x[i]) * cos(x[i])
  b[i] = exp(y[i]) - floor(y[i] * 3.5) + ceil(y[i]) + y[i] % 0.7 - f64(x[i])
  c[i] = i32(x[i] * 1000.0) + i32(y[i] * 1.0e12)
  d[i] = select(x[i] > 0.0, x[i] % -1.3, -x[i] / 0.0)
  e[i] = x[i] >= 0.5 && f64(x[i]) != y[i]
  g[i] = max(y[i] / 0.0 * 0.0, y[i]) + min(y[i], -y[i])
}
op @rows(x: f32[M, N], k: i64[M, N]) -> (s: f32[M], p: f64[M], mx: f32[M], mn: i64[M]) {
  s[i] = sum[j](x[i, j] * x[i, j])
  p[i] = prod[j](f64(x[i, j]) * 0.5 + 1.0)
  mx[i] = max[j](x[i, j])
  mn[i] = min[j](k[i, j] * k[i, j] - 3)
}
op @total(x: f32[M, N]) -> (t: f32[]) {
  t[] = sum[i, j](x[i, j])
}
op @cols(k: i64[M, N]) -> (ks: i64[N]) {
  ks[j] = sum[i](k[i, j] * 1000000007)
}
op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
op @softmax(x: f32[M, N]) -> (y: f32[M, N]) {
  m[i] = max[j](x[i, j])
  s[i] = sum[j](exp(x[i, j] - m[i]))
  y[i, j] = exp(x[i, j] - m[i]) / s[i]
}
op @colnorm(x: f32[M, N]) -> (y: f32[M, N]) {
  t[j] = sum[i](abs(x[i, j])) + 1.0
  y[i, j] = x[i, j] / t[j] + f32(i - j)
}
op @shifted(x: f32[M, N]) -> (y: f32[M, N / 2]) {
  y[i, j] = x[i, j] - x[i, j + 1] + x[i, 2 * j] * 0.5
}
op @conv2d<stride>(x: f32[N, C, H, W], f: f32[O, C, KH, KW])
    -> (y: f32[N, O, (H - KH) / stride + 1, (W - KW) / stride + 1]) {
  y[n, o, h, w] = sum[c, kh, kw](x[n, c, stride * h + kh, stride * w + kw] * f[o, c, kh, kw])
}
op @bools(a: bool[N], b: bool[N]) -> (y: bool[N], z: i32[N]) {
  y[i] = (a[i] && !b[i]) || (a[i] == b[i] && i > 3)
  z[i] = i32(a[i]) * 2 + select(b[i], 10, -10)
}

graph @g_ints {
  %a = source @a : i32[67]
  %b0 = source @b : i32[67]
  %z = zeros : i32[5]
  %bt = slice %b0 [0:62]
  %b = concat %bt, %z axis 0
  %q, %r, %m, %c, %f, %t = apply @ints(%a, %b)
  sink @q %q
  sink @r %r
  sink @m %m
  sink @c %c
  sink @f %f
  sink @t %t
}

graph @g_floats {
  %x0 = source @x : f32[50]
  %y = source @y : f64[50]
  %nan = full 0.0 : f32[2]
  %xs = slice %x0 [0:48]
  %x = concat %xs, %nan axis 0
  %a, %b, %c, %d, %e, %g = apply @floats(%x, %y)
  sink @a %a
  sink @b %b
  sink @c %c
  sink @d %d
  sink @e %e
  sink @g %g
}

graph @g_reductions {
  %x = source @x : f32[13, 70]
  %k = source @k : i64[13, 70]
  %s, %p, %mx, %mn = apply @rows(%x, %k)
  %t = apply @total(%x)
  %ks = apply @cols(%k)
  sink @s %s
  sink @p %p
  sink @mx %mx
  sink @mn %mn
  sink @t %t
  sink @ks %ks
}

graph @g_matmuls {
  %a = source @a : f32[37, 29]
  %b = source @b : f32[29, 45]
  %c = apply @matmul(%a, %b)
  %bt = transpose %b [1, 0]
  %at = transpose %a [1, 0]
  %ct = apply @matmul(%bt, %at)
  %small = slice %a [0:5, 0:29]
  %cs = apply @matmul(%small, %b)
  sink @c %c
  sink @ct %ct
  sink @cs %cs
}

graph @g_kernels {
  %x = source @x : f32[19, 40]
  %y = apply @softmax(%x)
  %n = apply @colnorm(%x)
  %h = apply @shifted(%x)
  sink @y %y
  sink @n %n
  sink @h %h
}

graph @g_convs {
  %img = source @img : f32[2, 3, 11, 13]
  %flt = source @flt : f32[5, 3, 3, 3]
  %pad = pad %img [0:0, 0:0, 1:1, 2:1] constant 0.5
  %y1 = apply @conv2d<stride = 1>(%pad, %flt)
  %y2 = apply @conv2d<stride = 2>(%img, %flt)
  %ref = pad %img [0:0, 0:0, 2:2, 1:1] reflect
  %y3 = apply @conv2d<stride = 1>(%ref, %flt)
  sink @y1 %y1
  sink @y2 %y2
  sink @y3 %y3
}

graph @g_booleans {
  %a = source @a : bool[21]
  %r = rand seed 5 : bool[21]
  %y, %z = apply @bools(%a, %r)
  sink @y %y
  sink @z %z
}
"#;

/// The bound is the dtype's: an f64 result off by one part in 1e9 fails, where f32 allows
/// one part in 1e5.
#[test]
fn the_float_tolerance_is_per_dtype() {
    let (w, off) = (vec![1.5, -3.0, 7.0], vec![1.5, -3.0, 7.0 * (1.0 + 1e-9)]);
    let t = |d: Data| Tensor::new(vec![3], d).unwrap();
    let f64s = |v: &[f64]| t(Data::F64(v.to_vec()));
    let f32s = |v: &[f64]| t(Data::F32(v.iter().map(|&x| x as f32).collect()));
    let mismatch = common::tolerance::first_mismatch;
    assert_eq!(mismatch(&f64s(&w), &f64s(&off)), Some(2));
    assert_eq!(mismatch(&f64s(&w), &f64s(&w)), None);
    let off32 = [1.5, -3.0, 7.0 * (1.0 + 1e-5)];
    assert_eq!(mismatch(&f32s(&w), &f32s(&off32)), None);
    let far32 = [1.5, -3.0, 7.0 * (1.0 + 1e-3)];
    assert_eq!(mismatch(&f32s(&w), &f32s(&far32)), Some(2));
}

#[test]
fn arithmetic_reductions_and_kernels_match_the_interpreter() {
    assert_source("semantics", SEMANTICS);
}

const VIEWS: &str = r#"
op @affine(x: f32[M, N]) -> (y: f32[M, N]) {
  y[i, j] = x[i, j] * 1.5 - 0.25
}
op @add(x: f32[..S], y: f32[..S]) -> (z: f32[..S]) {
  z[..i] = x[..i] + y[..i]
}
op @iadd(x: i64[..S], y: i64[..S]) -> (z: i64[..S]) {
  z[..i] = x[..i] + y[..i] * 3
}

graph @views {
  %x = source @x : f32[6, 10]
  %t = transpose %x [1, 0]
  %r = reverse %t [0, 1]
  %s = slice %r [1:9:3, 5:0:-2]
  %a = apply @affine(%s)
  %b = broadcast %a [4, 3, 3]
  %a1 = slice %a [1:2, 0:3]
  %b1 = broadcast %a1 [2, 5, 3]
  %w1 = apply @add(%b1, %b1)
  %u = unsqueeze %x [0]
  %q = squeeze %u [0]
  %c = concat %x, %q, %x axis 1
  %il = interleave %x, %q axis 0
  %rp = repeat %x times 3 axis 1
  %rs = reshape %t [5, 12]
  %rc = reshape %x [3, 20]
  %p = pad %x [1:2, 0:3] constant -1.0
  %pr = pad %x [2:1, 3:3] reflect
  %z = apply @add(%rs, %rs)
  %w = apply @add(%b, %b)
  sink @a %a
  sink @w %w
  sink @w1 %w1
  sink @c %c
  sink @il %il
  sink @rp %rp
  sink @z %z
  sink @rc %rc
  sink @p %p
  sink @pr %pr
}

graph @generators {
  %z = zeros : f32[3, 4]
  %o = ones : i64[3, 4]
  %f = full 2.5 : f64[3, 4]
  %i = iota axis 1 : i64[3, 4]
  %ri = rand seed 3 : i64[3, 4]
  %rf = rand seed 4 : f64[3, 4]
  %rb = rand seed 6 : i32[3, 4]
  %s = apply @iadd(%o, %i)
  %s2 = apply @iadd(%ri, %s)
  %t = apply @add(%z, %z)
  sink @s %s2
  sink @t %t
  sink @f %f
  sink @rf %rf
  sink @rb %rb
  sink @i %i
}

graph @sharded {
  %x = source @x : f32[64, 40]
  %w = source @w : f32[40, 24]
  %b = source @b : f32[24]
  %x.0 = slice %x [0:32]
  %x.1 = slice %x [32:64]
  %h.0 = apply @linear(%x.0, %w, %b) @[0:32, 0:24] on 0
  %h.1 = apply @linear(%x.1, %w, %b) @[32:64, 0:24] on 1
  %w.0 = slice %w [:, 0:10]
  %b.0 = slice %b [0:10]
  %w.1 = slice %w [:, 10:24]
  %b.1 = slice %b [10:24]
  %q.0 = apply @linear(%x, %w.0, %b.0) @[0:64, 0:10]
  %q.1 = apply @linear(%x, %w.1, %b.1) @[0:64, 10:24]
  %h = concat %h.0, %h.1 axis 0
  %q = concat %q.0, %q.1 axis 1
  %d = apply @add(%h, %q)
  sink @h %h
  sink @d %d
  sequence %h.0, %h.1 -> @d
}

graph @empty {
  %x = source @x : f32[0, 3]
  %z = zeros : f32[2, 3]
  %c = concat %x, %z axis 0
  %r = apply @add(%x, %x)
  %e = slice %c [2:2, 0:3]
  %s = apply @rowsum(%e)
  %w = rand seed 3 : f32[2, 0]
  %ws = apply @rowsum(%w)
  %p = pad %x [1:1, 0:0] constant 2.0
  sink @c %c
  sink @r %r
  sink @s %s
  sink @ws %ws
  sink @p %p
  sink @x %x
}

op @rowsum(x: f32[M, N]) -> (y: f32[M]) {
  y[i] = sum[j](x[i, j])
}

op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
"#;

#[test]
fn views_generators_and_shards_match_the_interpreter() {
    assert_source("views", VIEWS);
}

/// Every example through pass pipelines (sharding, fusion), compiled natively, against the
/// interpreter on the original graph.
#[test]
fn examples_after_shard_and_fuse_match_the_interpreter() {
    for name in ["mlp.teg", "softmax.teg", "conv.teg", "attention.teg"] {
        let src = common::example(name);
        let (m0, facts0) = common::compile_ok(name, &src);
        let ins = if name == "mlp.teg" {
            inputs(&m0, 0)
        } else {
            HashMap::new()
        };
        let want = tapc::interp::run(&m0, &m0.graphs[0], &facts0[0], &ins).unwrap();
        for pipeline in [
            "canonicalize",
            "shard{parts=2}",
            "shard{parts=3},fuse",
            "fuse",
        ] {
            let got = native_after(name, &src, 0, pipeline, &ins);
            for r in got {
                compare(&want, &r).unwrap_or_else(|e| panic!("{name} after {pipeline}: {e}"));
            }
        }
    }
}

#[test]
fn fp_contract_off_stays_within_the_float_tolerance() {
    let (m, facts) = common::compile_ok("semantics", SEMANTICS);
    let copts = tapc::codegen::Options {
        fp_contract: FpContract::Off,
        ..Default::default()
    };
    for gi in 0..m.graphs.len() {
        match check_graph_with("fp-contract=off", &m, &facts, gi, &copts) {
            Ok(Checked::Compared) => {}
            Ok(Checked::NotRun(why)) => panic!("@{} is not compared: {why}", m.graphs[gi].name),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Graph `@plain`: `c = a · b` at `m × k × n`, with `MATMUL_OPS`' `@mm`.
fn plain_matmul(m: usize, k: usize, n: usize) -> String {
    format!(
        "graph @plain {{
  %a = source @a : f32[{m}, {k}]
  %b = source @b : f32[{k}, {n}]
  %c = apply @mm(%a, %b)
  sink @c %c
}}"
    )
}

/// `--fp-contract=off` rounds the product and the sum separately, in index order, as the
/// interpreter does: a matmul (register-blocked, packed, at edge shapes) is bit-equal to it,
/// and the default (fused multiply-adds) is not always (the rounding really differs).
#[test]
fn fp_contract_off_matmul_is_bit_equal_to_the_interpreter() {
    let mut contracted_differs = false;
    for (m, k, n) in [(1, 17, 33), (33, 97, 31), (64, 256, 67)] {
        let src = format!("{MATMUL_OPS}\n{}", plain_matmul(m, k, n));
        let (md, facts) = common::compile_ok("matmul", &src);
        let ins = inputs(&md, 0);
        let want = tapc::interp::run(&md, &md.graphs[0], &facts[0], &ins).unwrap();
        let bits = |t: &Tensor| -> Vec<u32> {
            match &t.data {
                Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
                other => panic!("f32 expected, found {:?}", other.dtype()),
            }
        };
        for contract in [FpContract::Off, FpContract::On] {
            let copts = tapc::codegen::Options {
                fp_contract: contract,
                ..Default::default()
            };
            for threads in [1, 2] {
                let opts = Options {
                    threads,
                    record: false,
                };
                let (got, _) =
                    tapc::codegen::run_jit(&md, 0, &facts[0], &ins, &copts, &opts).unwrap();
                let same = bits(&got[0].1) == bits(&want[0].1);
                match contract {
                    FpContract::Off => assert!(same, "{m}x{k}x{n}, {threads}T: not bit-equal"),
                    FpContract::On => contracted_differs |= !same,
                }
            }
        }
    }
    assert!(
        contracted_differs,
        "fused multiply-adds never changed a bit"
    );
}

#[test]
fn the_mlp_on_committed_inputs_matches_the_expected_outputs() {
    let src = common::example("mlp.teg");
    let (m, facts) = common::compile_ok("mlp", &src);
    let data = root().join("tests/data/mlp");
    let mut ins = HashMap::new();
    for n in ["x", "w1", "b1", "w2", "b2"] {
        ins.insert(
            n.to_string(),
            tapc_runtime::npy::read(&data.join(format!("{n}.npy"))).unwrap(),
        );
    }
    let (sinks, _) = tapc::codegen::run_jit(
        &m,
        0,
        &facts[0],
        &ins,
        &Default::default(),
        &Options {
            threads: 2,
            record: false,
        },
    )
    .unwrap();
    let want = tapc_runtime::npy::read(&data.join("expected_logits.npy")).unwrap();
    let (got, want) = (common::f64s(&sinks[0].1), common::f64s(&want));
    let err: f64 = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = want.iter().map(|b| b * b).sum::<f64>().sqrt();
    assert!(err / norm < 1e-5, "normwise relative error {}", err / norm);
}

/// Graphs of the split tests: big applies and (`@tiny`) one too small to split.
const SPLIT_SRC: &str = "op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
op @chain(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i] * 1.5 + 0.25, 0.0) * 2.0
}
graph @mm {
  %a = source @a : f32[128, 96]
  %b = source @b : f32[96, 160]
  %c = apply @matmul(%a, %b)
  sink @c %c
}
graph @ew {
  %x = source @x : f32[262144]
  %y = apply @chain(%x)
  sink @y %y
}
graph @tiny {
  %a = source @a : f32[64, 64]
  %b = source @b : f32[64, 64]
  %c = apply @matmul(%a, %b)
  sink @c %c
}
graph @few_rows {
  %a = source @a : f32[16, 256]
  %b = source @b : f32[256, 1024]
  %c = apply @matmul(%a, %b)
  sink @c %c
}";

/// An unsharded graph is a one-shard schedule (one task per apply), yet 2 threads still share
/// the work of a big apply: the executor splits it into chunks along a dimension its kernel
/// allows (matmul: rows, or columns when there are few rows; an elementwise chain: elements),
/// which is what makes the benchmark's 2-thread column meaningful without a sharding pass.
/// The results still match.
#[test]
fn unsharded_matmul_and_elementwise_applies_are_split_across_two_threads() {
    let (m, facts) = common::compile_ok("split", SPLIT_SRC);
    for (gi, g) in m
        .graphs
        .iter()
        .enumerate()
        .filter(|(_, g)| g.name != "tiny")
    {
        let name = &g.name;
        let (rep, apply) = apply_on_two_threads(&m, &facts, gi);
        let jobs = rep.events.iter().filter(|e| e.task == apply).count();
        // 16 rows are 2 row chunks; 1024 columns are 4 (2 per thread).
        let least = if name == "few_rows" { 4 } else { 2 };
        assert!(jobs >= least, "@{name}: the apply ran as {jobs} job(s)");
    }
}

/// Which dimension a matmul task is split along: rows when there are many, columns when the
/// rows are fewer than 256 and the columns wide. Each row chunk packs all of `b` (K × N), so a
/// 70-row matmul split by rows packed `b` twice at 2 threads and scaled 1.12× (the odd-shape
/// bench's 70×2212×1562); column chunks each pack their own columns.
#[test]
fn matmuls_with_few_rows_split_along_their_columns() {
    let lanes = tapc::codegen::target::host().unwrap().lanes;
    let cases = [
        (70, 64, 1562, 1),
        (255, 64, 1024, 1),
        (256, 64, 1024, 0),
        (70, 64, 100, 0),
    ];
    for (rows, k, cols, want) in cases {
        let src = format!(
            "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {{\n  c[i, j] = sum[k](a[i, k] * b[k, j])\n}}\ngraph @g {{\n  %a = source @a : f32[{rows}, {k}]\n  %b = source @b : f32[{k}, {cols}]\n  %c = apply @mm(%a, %b)\n  sink @c %c\n}}"
        );
        let (m, facts) = common::compile_ok("few-rows", &src);
        let s = tapc::codegen::schedule::build(&m, &m.graphs[0], &facts[0], lanes).unwrap();
        let task = (s.plan.tasks.iter())
            .find(|t| t.name.starts_with("apply"))
            .unwrap();
        assert_eq!(task.split, Some(want), "{rows}×{k}×{cols}: {task:?}");
        apply_on_two_threads(&m, &facts, 0); // the values at 2 threads, against the interpreter
    }
}

/// Runs graph `gi` natively on 2 threads, recording its jobs, and checks its values against
/// the interpreter; returns the report and the index of its one apply task.
pub(crate) fn apply_on_two_threads(
    m: &Module,
    facts: &[GraphFacts],
    gi: usize,
) -> (tapc_runtime::exec::Report, usize) {
    let (g, f) = (&m.graphs[gi], &facts[gi]);
    let ins = inputs(m, gi);
    let want = tapc::interp::run(m, g, f, &ins).unwrap();
    let opts = Options {
        threads: 2,
        record: true,
    };
    let (got, rep) = tapc::codegen::with_jit(m, gi, f, &Default::default(), |p| p.run(&ins, &opts))
        .unwrap()
        .unwrap();
    compare(&want, &got).unwrap_or_else(|e| panic!("@{}: {e}", g.name));
    let applies: Vec<usize> = (0..rep.task_names.len())
        .filter(|&t| rep.task_names[t].starts_with("apply"))
        .collect();
    assert_eq!(applies.len(), 1, "@{}: {:?}", g.name, rep.task_names);
    (rep, applies[0])
}

/// A task too small to pay for handing chunks to another worker (below
/// `exec::MIN_CHUNK_WORK` per chunk) runs as one job even on 2 threads, with the same values.
#[test]
fn a_tiny_apply_runs_as_one_job_on_two_threads() {
    let (m, facts) = common::compile_ok("split", SPLIT_SRC);
    let gi = m.graphs.iter().position(|g| g.name == "tiny").unwrap();
    let (rep, apply) = apply_on_two_threads(&m, &facts, gi);
    let jobs: Vec<_> = rep.events.iter().filter(|e| e.task == apply).collect();
    assert_eq!(jobs.len(), 1, "{:?}", rep.time_summary());
    // The calling thread ran it: no helper was woken for a schedule with nothing to share.
    assert!(rep.events.iter().all(|e| e.worker == 0), "{:?}", rep.events);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_graphs_match_the_interpreter(steps in proptest::collection::vec(common::graphgen::step(), 1..10)) {
        let src = common::graphgen::build(&steps);
        if let Err(e) = compare_every_graph("random graph", &src) {
            prop_assert!(false, "{e}\n{src}");
        }
    }
}

/// Graph `gi` of `src` after `pipeline`, run natively on 1 and then 2 threads.
fn native_after(
    what: &str,
    src: &str,
    gi: usize,
    pipeline: &str,
    ins: &HashMap<String, Tensor>,
) -> [Vec<(String, Tensor)>; 2] {
    let (m, facts) = common::after_pipeline(what, src, pipeline);
    let got = tapc::codegen::with_jit(&m, gi, &facts[gi], &Default::default(), |p| {
        [1, 2].map(|threads| {
            p.run(
                ins,
                &Options {
                    threads,
                    record: false,
                },
            )
            .map(|r| r.0)
        })
    })
    .unwrap_or_else(|d| panic!("{what} after {pipeline}: {}", d.message));
    got.map(|r| r.unwrap_or_else(|e| panic!("{what} after {pipeline}: {e}")))
}

/// Every graph of `src` after each pipeline, natively on 1 and 2 threads, against the
/// interpreter on the graph as written.
pub(crate) fn assert_pipelines(what: &str, src: &str, pipelines: &[&str]) {
    let (m0, facts0) = common::compile_ok(what, src);
    for (gi, (g, f0)) in m0.graphs.iter().zip(&facts0).enumerate() {
        let ins = inputs(&m0, gi);
        let want = tapc::interp::run(&m0, g, f0, &ins).unwrap();
        for pipeline in pipelines {
            let got = native_after(&format!("{what} @{}", g.name), src, gi, pipeline, &ins);
            for (threads, r) in [1, 2].iter().zip(got) {
                compare(&want, &r).unwrap_or_else(|e| {
                    panic!(
                        "{what} @{} after {pipeline}, {threads} threads: {e}",
                        g.name
                    )
                });
            }
        }
    }
}

const MATMUL_OPS: &str = include_str!("../data/matmul_ops.teg");

/// Matmul-like kernels at edge shapes (1, 2, 15, 17, 31, 33, primes in every dimension):
/// plain, A·Bᵀ through a transposed view (packed by gathering), batched (also transposed),
/// and a linear layer with a residual add and an activation reading it three times, unfused
/// and fused (the epilogue substituted into the register-blocked reduction).
#[test]
fn matmul_like_kernels_at_edge_shapes_match_the_interpreter() {
    let shapes = [
        (1, 17, 33),
        (2, 31, 15),
        (15, 1, 17),
        (17, 33, 2),
        (31, 2, 1),
        (33, 15, 31),
        (37, 41, 67),
        (64, 3, 97),
        // A long reduction: panels of 2 vectors (8-row blocks, 4- 2- 1-row edge tiles).
        (17, 2053, 33),
        // Few rows, many columns: 2 threads split the columns (each chunk packs its own).
        (7, 33, 257),
    ];
    for (m, k, n) in shapes {
        check_matmul_like(m, k, n);
    }
}

/// Matmuls without packing, streamed along whole output rows in wide panels with masked
/// partial panels: a row vector times a matrix (M = 1: no rows to reuse a packed panel), few
/// rows (M ≤ 4: one register block) and tiny reductions (K ≤ 8: an outer product), at widths
/// past one panel (and M = 5, K = 9 just past the limits), also
/// batched, through a transposed view and with a fused epilogue, on 1 and 2 threads.
#[test]
fn unpacked_matmuls_at_wide_edge_shapes_match_the_interpreter() {
    let shapes = [
        (1, 1, 257),
        (1, 2, 1031),
        (1, 17, 259),
        (1, 33, 512),
        (1, 131, 263),
        (1, 15, 31),
        (33, 1, 257),
        (17, 2, 1031),
        (2, 8, 263),
        (31, 9, 259),
        (15, 3, 1),
        // Few rows (M ≤ 4): one register block of every row, unpacked.
        (2, 17, 257),
        (3, 131, 259),
        (4, 33, 1031),
        (4, 2, 31),
        (5, 17, 263),
    ];
    for (m, k, n) in shapes {
        check_matmul_like(m, k, n);
    }
}

/// Plain, A·Bᵀ, batched and fused-epilogue matmul-like kernels at `m × k × n` against the
/// interpreter, with and without `fuse`.
fn check_matmul_like(m: usize, k: usize, n: usize) {
    let src = format!(
        "{MATMUL_OPS}
{}
graph @abt {{
  %a = source @a : f32[{m}, {k}]
  %w = source @w : f32[{n}, {k}]
  %t = transpose %w [1, 0]
  %c = apply @mm(%a, %t)
  sink @c %c
}}
graph @batched {{
  %a = source @a : f32[3, {m}, {k}]
  %b = source @b : f32[3, {k}, {n}]
  %w = source @w : f32[3, {n}, {k}]
  %t = transpose %w [0, 2, 1]
  %c = apply @bmm(%a, %b)
  %d = apply @bmm(%a, %t)
  sink @c %c
  sink @d %d
}}
graph @epilogue {{
  %x = source @x : f32[{m}, {k}]
  %w = source @w : f32[{k}, {n}]
  %b = source @b : f32[{n}]
  %r = source @r : f32[{m}, {n}]
  %h = apply @linear(%x, %w, %b)
  %y = apply @add(%h, %r)
  %z = apply @poly(%y)
  sink @z %z
}}",
        plain_matmul(m, k, n)
    );
    assert_pipelines(
        &format!("matmul {m}x{k}x{n}"),
        &src,
        &["canonicalize", "canonicalize,fuse,canonicalize"],
    );
}

/// `fuse` turns a linear layer plus residual add into one two-statement kernel; code
/// generation substitutes the temporary into the output statement, so the kernel keeps one
/// register-blocked statement (and is not split per row like a fused softmax).
#[test]
fn a_fused_residual_linear_is_one_blocked_statement() {
    let src = format!(
        "{MATMUL_OPS}
graph @g {{
  %x = source @x : f32[64, 32]
  %w = source @w : f32[32, 48]
  %b = source @b : f32[48]
  %r = source @r : f32[64, 48]
  %h = apply @linear(%x, %w, %b)
  %y = apply @add(%h, %r)
  sink @y %y
}}"
    );
    let (_, facts) = common::after_pipeline("residual", &src, "canonicalize,fuse,canonicalize");
    let insts: Vec<_> = facts[0].instances.values().collect();
    assert_eq!(insts.len(), 1, "fuse made one apply");
    let inst = insts[0];
    assert_eq!(
        inst.stmts.as_ref().map(Vec::len),
        Some(2),
        "linear then add"
    );
    let stmts = tapc::codegen::epilogue::inline_epilogues(inst);
    assert_eq!(stmts.len(), 1);
    assert!(tapc::codegen::epilogue::has_reduce(&stmts[0].value));
}

/// Issue 23 item 12: a `concat` or `interleave` whose result has no elements (of sources, of
/// applies placed into it, or sunk and read by an apply) runs natively as in the interpreter;
/// it failed with "sink @r was never computed".
#[test]
fn zero_size_concat_and_interleave_match_the_interpreter() {
    assert_source(
        "zero-size concat",
        "op @neg(x: f32[M, N]) -> (y: f32[M, N]) {
  y[i, j] = 0.0 - x[i, j]
}
graph @sources {
  %a = source @a : f32[0, 3]
  %b = source @b : f32[0, 3]
  %c = concat %a, %b axis 0
  %i = interleave %a, %b axis 0
  sink @c %c
  sink @i %i
}
graph @applies {
  %a = source @a : f32[2, 0]
  %na = apply @neg(%a)
  %nb = apply @neg(%a)
  %c = concat %na, %nb axis 0
  %i = interleave %na, %nb axis 1
  %n = apply @neg(%c)
  sink @c %c
  sink @i %i
  sink @n %n
}
graph @nested {
  %a = source @a : f32[0, 2]
  %c = concat %a, %a axis 1
  %d = concat %c, %a axis 1
  sink @d %d
}
",
    );
}
