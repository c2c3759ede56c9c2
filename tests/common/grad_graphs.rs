//! Random differentiable f64 graphs for the `grad` property test (issue 19): a few sources of
//! small random shapes (rank 1–3, dims 1–5, odd ones included), then a random DAG of steps, each
//! one of [`CONSTRUCTS`] (every construct docs/passes/grad.md marks supported: elementwise
//! math, alone and nested 2–4 deep in one kernel, contractions, reductions, kernels with
//! temporaries, loads that broadcast, shift, stride, read a constant index or gather by
//! integer ids, and every selector), then a scalar loss over every value no later step reads
//! (a sum of squares, or an index-weighted sum) and `grad` with respect to a random non-empty
//! subset of the sources and, in some graphs, one intermediate value.
//!
//! **Away from non-differentiable points, by construction**, so that central differences are a
//! fair oracle. The generator tracks a sound interval for every value: the sources `@s*` hold
//! values in [0.5, 2) and the *gap* sources `@g*` values of magnitude in [0.5, 2) of either sign
//! ([`inputs`]); each kernel's interval follows from its operands'. Then:
//! - `log`, `sqrt` and the base of `pow` read a value whose interval is ≥ 0.2, or `u·u + 0.5`;
//!   a division's denominator likewise; `exp` and `pow`'s exponent are scaled into [-2, 2].
//! - `max(a, b)`, `min(a, b)` and `select` compare `u` with `u + g` for a gap source `g`:
//!   never a tie, and a perturbation of 1e-6 never flips the comparison.
//! - a `max`/`min` reduction adds (subtracts) a *ladder* `f64((k·P + Q·(other vars)) % K)·S`
//!   to its body, `P` coprime with `K` (a permutation of the rows' positions), with the step `S`
//!   larger than the operand's interval: the maximum's position varies by row and no two
//!   positions are ever within 1 of a tie.
//! - a layernorm's variance has `+ 0.01`; `prod` scales its factors to at most 1.5.
//! - a kernel whose interval leaves [-6, 6] (or falls inside [-0.5, 0.5]) has its value scaled
//!   by a literal back to a bound of 4 (2), so values and the loss stay small enough for
//!   differences with h = 1e-6 to resolve every entry. Softmax and log-softmax are never
//!   scaled (it would hide the forms `grad` recognises).

use super::rng::Rng;
use proptest::prelude::*;
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

/// Every construct the generator draws; a test counts each and fails when one never occurred.
pub const CONSTRUCTS: [&str; 44] = [
    "add",
    "sub",
    "mul",
    "div",
    "exp",
    "log",
    "tanh",
    "erf",
    "sqrt",
    "sin",
    "cos",
    "pow",
    "select",
    "max of two",
    "min of two",
    "nested elementwise",
    "contraction",
    "sum reduction",
    "max reduction",
    "min reduction",
    "prod reduction",
    "layernorm",
    "softmax",
    "log-softmax",
    "broadcasting load",
    "shifted load",
    "strided load",
    "constant-index load",
    "gathered load",
    "transpose",
    "slice step 1",
    "slice step -1",
    "slice step 2",
    "slice step -2",
    "concat",
    "broadcast",
    "reshape",
    "reverse",
    "pad constant",
    "pad reflect",
    "interleave",
    "repeat",
    "squeeze",
    "unsqueeze",
];

/// The most elements a value may have (steps that grow a value pick a small enough one).
const MAX_ELEMS: i64 = 150;

/// What a graph is drawn from: the first sources' shapes, the steps (a construct and a seed
/// for its choices) and a seed for the loss, the `wrt` list and the input values.
#[derive(Clone, Debug)]
pub struct Recipe {
    pub shapes: Vec<Vec<i64>>,
    pub steps: Vec<(usize, u64)>,
    pub seed: u64,
}

/// Recipes of 1–3 sources and 2–12 steps.
pub fn recipe() -> impl Strategy<Value = Recipe> {
    (
        proptest::collection::vec(proptest::collection::vec(1i64..=5, 1..=3), 1..=3),
        proptest::collection::vec((0..CONSTRUCTS.len(), any::<u64>()), 2..=12),
        any::<u64>(),
    )
        .prop_map(|(shapes, steps, seed)| Recipe {
            shapes,
            steps,
            seed,
        })
}

/// A generated graph, in three forms over the same ops and values.
pub struct GradGraph {
    /// The graph with its `grad` statement: sinks `@l` (the loss) and `@d_NAME` per `wrt`.
    pub src: String,
    /// The loss alone (sink `@l`), plus a sink `@NAME` of the intermediate `wrt` value if any.
    pub forward: String,
    /// The intermediate `wrt` value and the loss graph with that value made a source `@NAME`
    /// (its gradient holds the sources fixed, so differences perturb it there).
    pub cut: Option<(String, String)>,
    /// Every source, by name, with its shape (`s*`: [0.5, 2); `g*`: ±[0.5, 2)).
    pub sources: Vec<(String, Vec<usize>)>,
    /// The `wrt` values' names, without `%`.
    pub wrt: Vec<String>,
    /// The construct of every step, as drawn.
    pub constructs: Vec<&'static str>,
    pub seed: u64,
}

/// The inputs of a generated graph: `s*` sources uniform in [0.5, 2), gap sources `g*` of
/// magnitude in [0.5, 2) and a random sign.
pub fn inputs(g: &GradGraph) -> HashMap<String, Tensor> {
    let mut rng = Rng(g.seed | 1);
    g.sources
        .iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let vals = (0..n)
                .map(|_| {
                    let v = rng.uniform(0.5, 2.0);
                    if name.starts_with('g') && rng.chance(2) {
                        -v
                    } else {
                        v
                    }
                })
                .collect();
            let t = Tensor::new(shape.clone(), Data::F64(vals)).expect("shape");
            (name.clone(), t)
        })
        .collect()
}

type Iv = (f64, f64);

fn iv_add(a: Iv, b: Iv) -> Iv {
    (a.0 + b.0, a.1 + b.1)
}

fn iv_sub(a: Iv, b: Iv) -> Iv {
    (a.0 - b.1, a.1 - b.0)
}

fn iv_mul(a: Iv, b: Iv) -> Iv {
    let p = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
    (
        p.iter().copied().fold(f64::INFINITY, f64::min),
        p.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

fn iv_scale(a: Iv, c: f64) -> Iv {
    iv_mul(a, (c, c))
}

fn bound(a: Iv) -> f64 {
    a.0.abs().max(a.1.abs())
}

fn union(a: Iv, b: Iv) -> Iv {
    (a.0.min(b.0), a.1.max(b.1))
}

/// A float literal `c` as TEG writes it, and the value the literal is (so intervals stay sound).
fn lit(c: f64) -> (String, f64) {
    let s = format!("{c:.9}");
    let v: f64 = s.parse().expect("a float");
    (s, v)
}

/// A value of the graph.
struct Val {
    name: String,
    shape: Vec<i64>,
    iv: Iv,
    read: bool,
    source: bool,
}

/// A kernel step: its ports (the argument and the declaration), its output, its statements.
struct Kernel {
    construct: &'static str,
    ports: Vec<(String, String)>,
    out_dims: Vec<String>,
    out_shape: Vec<i64>,
    temps: String,
    lhs: Vec<String>,
    expr: String,
    iv: Iv,
    rescale: bool,
}

fn dims(shape: &[i64]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn elems(shape: &[i64]) -> i64 {
    shape.iter().product()
}

/// The index variables `i0 .. i{r-1}`.
fn vars(r: usize) -> Vec<String> {
    (0..r).map(|d| format!("i{d}")).collect()
}

/// `port[i0, i1]`.
fn at(port: &str, idx: &[String]) -> String {
    format!("{port}[{}]", idx.join(", "))
}

/// `idx` with position `d` replaced by `with`.
fn with(idx: &[String], d: usize, with: &str) -> Vec<String> {
    let mut v = idx.to_vec();
    v[d] = with.to_string();
    v
}

/// `idx` without position `d`.
fn without(idx: &[String], d: usize) -> Vec<String> {
    let mut v = idx.to_vec();
    v.remove(d);
    v
}

/// The symbols of port `letter` (`A0, A1, ..`).
fn syms(letter: char, r: usize) -> Vec<String> {
    (0..r).map(|d| format!("{letter}{d}")).collect()
}

struct Builder {
    ops: String,
    lines: Vec<String>,
    vals: Vec<Val>,
    /// The line defining each value.
    def_line: Vec<usize>,
    rng: Rng,
    used: Vec<&'static str>,
}

/// The graph of a recipe.
pub fn build(r: &Recipe) -> GradGraph {
    let mut b = Builder {
        ops: String::new(),
        lines: Vec::new(),
        vals: Vec::new(),
        def_line: Vec::new(),
        rng: Rng(r.seed | 1),
        used: Vec::new(),
    };
    for s in &r.shapes {
        b.source(s.clone(), false);
    }
    for &(c, seed) in &r.steps {
        b.rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        b.step(CONSTRUCTS[c]);
    }
    b.rng = Rng(r.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    b.finish(r.seed)
}

impl Builder {
    fn source(&mut self, shape: Vec<i64>, gap: bool) -> usize {
        let id = self.vals.len();
        let name = format!("{}{id}", if gap { 'g' } else { 's' });
        self.lines
            .push(format!("%{name} = source @{name} : f64[{}]", dims(&shape)));
        self.def_line.push(self.lines.len() - 1);
        let iv = if gap { (-2.0, 2.0) } else { (0.5, 2.0) };
        self.vals.push(Val {
            name,
            shape,
            iv,
            read: false,
            source: true,
        });
        id
    }

    /// Defines value `id` by `line` (`%vID = line`).
    fn define(&mut self, construct: &'static str, line: String, shape: Vec<i64>, iv: Iv) -> usize {
        let id = self.vals.len();
        let name = format!("v{id}");
        self.lines.push(format!("%{name} = {line}"));
        self.def_line.push(self.lines.len() - 1);
        self.vals.push(Val {
            name,
            shape,
            iv,
            read: false,
            source: false,
        });
        self.used.push(construct);
        id
    }

    fn random_shape(&mut self, ranks: (usize, usize)) -> Vec<i64> {
        let r = ranks.0 + self.rng.below(ranks.1 - ranks.0 + 1);
        (0..r).map(|_| 1 + self.rng.below_i64(5)).collect()
    }

    /// An operand whose shape satisfies `ok`: the newest value half of the time when it fits,
    /// else any that fits, else a new source of a random shape that fits.
    fn operand(&mut self, ok: &dyn Fn(&[i64]) -> bool) -> usize {
        let fits: Vec<usize> = (0..self.vals.len())
            .filter(|&v| ok(&self.vals[v].shape))
            .collect();
        let last = self.vals.len() - 1;
        if fits.contains(&last) && self.rng.chance(2) {
            return last;
        }
        if !fits.is_empty() {
            return fits[self.rng.below(fits.len())];
        }
        loop {
            let s = self.random_shape((1, 3));
            if ok(&s) {
                return self.source(s, false);
            }
        }
    }

    /// A second operand of shape `shape`: an existing value (`x` itself included) or a new source.
    fn partner(&mut self, shape: &[i64]) -> usize {
        let same: Vec<usize> = (0..self.vals.len())
            .filter(|&v| self.vals[v].shape == shape)
            .collect();
        if self.rng.chance(3) {
            return self.source(shape.to_vec(), false);
        }
        same[self.rng.below(same.len())]
    }

    /// A vector of `n` elements: an existing one or a new source.
    fn vector(&mut self, n: i64) -> usize {
        let found: Vec<usize> = (0..self.vals.len())
            .filter(|&v| self.vals[v].shape == [n])
            .collect();
        if found.is_empty() || self.rng.chance(2) {
            return self.source(vec![n], false);
        }
        found[self.rng.below(found.len())]
    }

    /// Port `letter` (lower case in the body) reading value `v`: (argument, declaration).
    fn port(&mut self, letter: char, v: usize) -> (String, String) {
        self.vals[v].read = true;
        let r = self.vals[v].shape.len();
        let up = letter.to_ascii_uppercase();
        (
            format!("%{}", self.vals[v].name),
            format!("{letter}: f64[{}]", syms(up, r).join(", ")),
        )
    }

    fn emit(&mut self, k: Kernel) -> usize {
        let id = self.vals.len();
        let (expr, iv) = if k.rescale {
            rescale(k.expr, k.iv)
        } else {
            (k.expr, k.iv)
        };
        let decls: Vec<&str> = k.ports.iter().map(|p| p.1.as_str()).collect();
        self.ops.push_str(&format!(
            "op @k{id}({}) -> (y: f64[{}]) {{\n{}  y[{}] = {expr}\n}}\n",
            decls.join(", "),
            k.out_dims.join(", "),
            k.temps,
            k.lhs.join(", ")
        ));
        let args: Vec<&str> = k.ports.iter().map(|p| p.0.as_str()).collect();
        let line = format!("apply @k{id}({})", args.join(", "));
        self.define(k.construct, line, k.out_shape, iv)
    }

    fn step(&mut self, c: &'static str) {
        match c {
            "add" | "sub" | "mul" | "div" | "pow" => self.binary(c),
            "exp" | "log" | "tanh" | "erf" | "sqrt" | "sin" | "cos" => self.unary(c),
            "select" | "max of two" | "min of two" => self.gapped(c),
            "nested elementwise" => self.nested(),
            "contraction" => self.contraction(),
            "sum reduction" | "max reduction" | "min reduction" | "prod reduction" => {
                self.reduction(c)
            }
            "layernorm" => self.layernorm(),
            "softmax" | "log-softmax" => self.softmax(c),
            "broadcasting load" | "shifted load" | "strided load" | "constant-index load" => {
                self.load(c)
            }
            "gathered load" => self.gather(),
            _ => self.selector(c),
        }
    }
}

/// `expr` scaled back into a bound of 4 when its interval leaves [-6, 6], or up to 2 when
/// it lies inside [-0.5, 0.5] (and is not zero).
fn rescale(expr: String, iv: Iv) -> (String, Iv) {
    let b = bound(iv);
    let target = if b > 6.0 {
        4.0
    } else if b < 0.5 && b > 1e-3 {
        2.0
    } else {
        return (expr, iv);
    };
    let (s, c) = lit(target / b);
    (format!("({expr}) * {s}"), iv_scale(iv, c))
}

mod steps;
mod views;

impl Builder {
    /// The loss over every value no step reads, one term each: `sum(x²)`, or one time in three
    /// the index-weighted `0.25·sum(x[r]·(r0 + r1 + .. + 1))`.
    fn loss(&mut self) -> (String, String) {
        let dangling: Vec<usize> = (0..self.vals.len())
            .filter(|&v| !self.vals[v].read)
            .collect();
        let (mut decls, mut args, mut terms) = (Vec::new(), Vec::new(), Vec::new());
        for (p, &v) in dangling.iter().enumerate() {
            let r = self.vals[v].shape.len();
            let s: Vec<String> = (0..r).map(|d| format!("L{p}x{d}")).collect();
            decls.push(format!("x{p}: f64[{}]", s.join(", ")));
            args.push(format!("%{}", self.vals[v].name));
            let rv: Vec<String> = (0..r).map(|d| format!("r{d}")).collect();
            let load = at(&format!("x{p}"), &rv);
            let sum = rv.join(", ");
            terms.push(if self.rng.chance(3) {
                format!("sum[{sum}]({load} * f64({} + 1)) * 0.25", rv.join(" + "))
            } else {
                format!("sum[{sum}]({load} * {load})")
            });
        }
        let op = format!(
            "op @loss({}) -> (l: f64[]) {{\n  l[] = {}\n}}\n",
            decls.join(", "),
            terms.join(" + ")
        );
        (op, format!("%l = apply @loss({})", args.join(", ")))
    }

    /// The `wrt` list: a random non-empty subset of the sources, and one time in three an
    /// intermediate value.
    fn wrt(&mut self) -> (Vec<String>, Option<usize>) {
        let sources: Vec<usize> = (0..self.vals.len())
            .filter(|&v| self.vals[v].source)
            .collect();
        let mut wrt: Vec<String> = sources
            .iter()
            .filter(|_| self.rng.chance(2))
            .map(|&v| self.vals[v].name.clone())
            .collect();
        if wrt.is_empty() {
            let v = sources[self.rng.below(sources.len())];
            wrt.push(self.vals[v].name.clone());
        }
        let inner: Vec<usize> = (0..self.vals.len())
            .filter(|&v| !self.vals[v].source)
            .collect();
        let cut =
            (!inner.is_empty() && self.rng.chance(3)).then(|| inner[self.rng.below(inner.len())]);
        if let Some(v) = cut {
            let at = self.rng.below(wrt.len() + 1);
            wrt.insert(at, self.vals[v].name.clone());
        }
        (wrt, cut)
    }

    fn finish(mut self, seed: u64) -> GradGraph {
        let (loss_op, loss_line) = self.loss();
        let (wrt, cut) = self.wrt();
        let ops = format!("{}{loss_op}", self.ops);
        let body = |lines: &[String]| format!("  {}\n  {loss_line}\n", lines.join("\n  "));
        let ds: Vec<String> = wrt.iter().map(|w| format!("%d_{w}")).collect();
        let ws: Vec<String> = wrt.iter().map(|w| format!("%{w}")).collect();
        let mut sinks = String::from("  sink @l %l\n");
        for w in &wrt {
            sinks.push_str(&format!("  sink @d_{w} %d_{w}\n"));
        }
        let src = format!(
            "{ops}graph @g {{\n{}  {} = grad %l wrt {}\n{sinks}}}\n",
            body(&self.lines),
            ds.join(", "),
            ws.join(", ")
        );
        let cut_sink = cut.map_or(String::new(), |v| {
            format!("  sink @{0} %{0}\n", self.vals[v].name)
        });
        let forward = format!(
            "{ops}graph @g {{\n{}  sink @l %l\n{cut_sink}}}\n",
            body(&self.lines)
        );
        let cut = cut.map(|v| {
            let mut lines = self.lines.clone();
            let val = &self.vals[v];
            lines[self.def_line[v]] =
                format!("%{0} = source @{0} : f64[{1}]", val.name, dims(&val.shape));
            let g = format!("{ops}graph @g {{\n{}  sink @l %l\n}}\n", body(&lines));
            (val.name.clone(), g)
        });
        let sources = self
            .vals
            .iter()
            .filter(|v| v.source)
            .map(|v| {
                (
                    v.name.clone(),
                    v.shape.iter().map(|&d| d as usize).collect(),
                )
            })
            .collect();
        GradGraph {
            src,
            forward,
            cut,
            sources,
            wrt,
            constructs: self.used,
            seed,
        }
    }
}

/// A proptest runner over a fixed seed (the same recipes every run), `cases` cases, and no
/// regression file.
pub fn runner(cases: u32) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}
