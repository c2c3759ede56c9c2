//! The steps of [`super::Builder`]: one function per family of constructs, each choosing its
//! operands, writing a kernel op or a selector line and the result's interval (see the parent
//! module's doc for how each keeps away from non-differentiable points).

use super::{
    at, bound, elems, iv_add, iv_mul, iv_scale, iv_sub, lit, rescale, syms, union, vars, with,
    without, Builder, Iv, Kernel, MAX_ELEMS,
};

/// `u` if its interval is ≥ 0.2, else `(u * u + 0.5)`: a positive operand, and its interval.
fn positive(u: &str, iv: Iv) -> (String, Iv) {
    if iv.0 >= 0.2 {
        (u.to_string(), iv)
    } else {
        let b = bound(iv);
        (format!("({u} * {u} + 0.5)"), (0.5, b * b + 0.5))
    }
}

/// A literal that scales an interval of bound `b` to at most `to` (1.0 when it already is).
fn shrink(b: f64, to: f64) -> (String, f64) {
    if b > to {
        lit(to / b)
    } else {
        ("1.0".to_string(), 1.0)
    }
}

/// `a c b` for an arithmetic construct, or `pow`: each operand an expression (a load or a
/// parenthesised one) and its interval.
fn binary_expr(c: &str, (a, xi): (&str, Iv), (b, yi): (&str, Iv)) -> (String, Iv) {
    match c {
        "add" => (format!("{a} + {b}"), iv_add(xi, yi)),
        "sub" => (format!("{a} - {b}"), iv_sub(xi, yi)),
        "mul" => (format!("{a} * {b}"), iv_mul(xi, yi)),
        "div" => {
            let (d, di) = positive(b, yi);
            (format!("{a} / {d}"), iv_mul(xi, (1.0 / di.1, 1.0 / di.0)))
        }
        _ => {
            // pow: a positive base, the exponent scaled into [-2, 2].
            let (p, pi) = positive(a, xi);
            let (s, sv) = shrink(bound(yi), 2.0);
            let ln = iv_mul(iv_scale(yi, sv), (pi.0.ln(), pi.1.ln()));
            (format!("pow({p}, {b} * {s})"), (ln.0.exp(), ln.1.exp()))
        }
    }
}

/// A unary function of the expression `a` (a load or a parenthesised one) of interval `xi`.
fn unary_expr(c: &str, (a, xi): (&str, Iv)) -> (String, Iv) {
    match c {
        "exp" => {
            let (s, sv) = shrink(bound(xi), 2.0);
            let iv = ((xi.0 * sv).exp(), (xi.1 * sv).exp());
            (format!("exp({a} * {s})"), iv)
        }
        "log" => {
            let (p, pi) = positive(a, xi);
            (format!("log({p})"), (pi.0.ln(), pi.1.ln()))
        }
        "sqrt" => {
            let (p, pi) = positive(a, xi);
            (format!("sqrt({p})"), (pi.0.sqrt(), pi.1.sqrt()))
        }
        "tanh" => (format!("tanh({a})"), (xi.0.tanh(), xi.1.tanh())),
        _ => (format!("{c}({a})"), (-1.0, 1.0)),
    }
}

/// The elementwise constructs a nested kernel composes.
const NESTED: [&str; 12] = [
    "add", "sub", "mul", "div", "pow", "exp", "log", "tanh", "erf", "sqrt", "sin", "cos",
];

/// An expression's loads times its operators and brackets (a bound on its adjoint's size).
fn size(e: &str) -> usize {
    let loads = e.matches("a[").count() + e.matches("b[").count();
    let ops = e.chars().filter(|c| "+-*/([".contains(*c)).count();
    loads * ops
}

/// An operand, the ports reading it and its partner, and their loads with their intervals.
type Pair = (usize, Vec<(String, String)>, [(String, Iv); 2]);

/// An operand, its shape, a dimension `d` of it and its extent `n`, its interval, and the
/// index variables of its rank.
struct Along {
    x: usize,
    shape: Vec<i64>,
    d: usize,
    n: i64,
    xi: Iv,
    idx: Vec<String>,
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Builder {
    /// An operand whose shape satisfies `ok`, and a random dimension `d` of it.
    fn along(&mut self, ok: &dyn Fn(&[i64]) -> bool) -> Along {
        let x = self.operand(ok);
        let shape = self.vals[x].shape.clone();
        let d = self.rng.below(shape.len());
        Along {
            x,
            n: shape[d],
            xi: self.vals[x].iv,
            idx: vars(shape.len()),
            shape,
            d,
        }
    }

    /// An elementwise kernel of `x` (port `a`) and the other ports, over `x`'s shape.
    fn elementwise(
        &mut self,
        c: &'static str,
        x: usize,
        ports: Vec<(String, String)>,
        e: (String, Iv),
    ) {
        let shape = self.vals[x].shape.clone();
        let r = shape.len();
        self.emit(Kernel {
            construct: c,
            ports,
            out_dims: syms('A', r),
            out_shape: shape,
            temps: String::new(),
            lhs: vars(r),
            expr: e.0,
            iv: e.1,
            rescale: true,
        });
    }

    /// An operand `x` and a partner of its shape, read through ports `a` and `b`: `x`, the
    /// ports, and the loads `a[I]`, `b[I]` with their intervals.
    fn pair(&mut self) -> Pair {
        let x = self.operand(&|_| true);
        let shape = self.vals[x].shape.clone();
        let y = self.partner(&shape);
        let ports = vec![self.port('a', x), self.port('b', y)];
        let idx = vars(shape.len());
        let (xi, yi) = (self.vals[x].iv, self.vals[y].iv);
        (x, ports, [(at("a", &idx), xi), (at("b", &idx), yi)])
    }

    pub(super) fn binary(&mut self, c: &'static str) {
        let (x, ports, [a, b]) = self.pair();
        let e = binary_expr(c, (&a.0, a.1), (&b.0, b.1));
        self.elementwise(c, x, ports, e);
    }

    pub(super) fn unary(&mut self, c: &'static str) {
        let x = self.operand(&|_| true);
        let xi = self.vals[x].iv;
        let ports = vec![self.port('a', x)];
        let a = at("a", &vars(self.vals[x].shape.len()));
        let e = unary_expr(c, (&a, xi));
        self.elementwise(c, x, ports, e);
    }

    /// One kernel composing 2–4 of the elementwise constructs (an expression tree: the chain
    /// rule inside a kernel), each stage's value scaled back like a kernel's, the second
    /// operand of a binary stage `b` or `a` read again.
    ///
    /// The composition stops before its size (loads × operators, [`size`]) passes 400: the
    /// adjoint of a kernel reading its input many times in a deep expression has one term per
    /// load, each recomputing its path, and passes the parser's 256 operators well below that
    /// size; `grad` splits it into temporaries (passes/grad/split.rs), so these graphs also
    /// check that the lowered module re-parses.
    pub(super) fn nested(&mut self) {
        let (x, ports, [(a, xi), (b, yi)]) = self.pair();
        let mut e = (a.clone(), xi);
        for _ in 0..2 + self.rng.below(3) {
            let c = NESTED[self.rng.below(NESTED.len())];
            let inner = format!("({})", e.0);
            let other = if self.rng.chance(2) {
                (&b, yi)
            } else {
                (&a, xi)
            };
            let next = if ["exp", "log", "tanh", "erf", "sqrt", "sin", "cos"].contains(&c) {
                unary_expr(c, (&inner, e.1))
            } else if self.rng.chance(2) {
                binary_expr(c, (&inner, e.1), (other.0, other.1))
            } else {
                binary_expr(c, (other.0, other.1), (&inner, e.1))
            };
            let next = rescale(next.0, next.1);
            if size(&next.0) > 400 && e.0 != a {
                break;
            }
            e = next;
        }
        self.elementwise("nested elementwise", x, ports, e);
    }

    /// `select`, `max` and `min` of two values, comparing `u` with `u + g` for a new gap
    /// source `g` (|g| ≥ 0.5): never a tie.
    pub(super) fn gapped(&mut self, c: &'static str) {
        let x = self.operand(&|_| true);
        let shape = self.vals[x].shape.clone();
        let g = self.source(shape.clone(), true);
        let xi = self.vals[x].iv;
        let mut ports = vec![self.port('a', x), self.port('g', g)];
        let idx = vars(shape.len());
        let (a, gv) = (at("a", &idx), at("g", &idx));
        let e = match c {
            "select" => {
                let y = self.partner(&shape);
                let yi = self.vals[y].iv;
                ports.push(self.port('b', y));
                let b = at("b", &idx);
                (format!("select({a} < {a} + {gv}, {a}, {b})"), union(xi, yi))
            }
            "max of two" => (format!("max({a}, {a} + {gv})"), (xi.0, xi.1 + 2.0)),
            _ => (format!("min({a}, {a} + {gv})"), (xi.0 - 2.0, xi.1)),
        };
        self.elementwise(c, x, ports, e);
    }

    /// `y[I, J] = sum[k](a[I, k] * b[k, J])` with another value or a new source `b`.
    pub(super) fn contraction(&mut self) {
        let x = self.operand(&|s| s.len() <= 3);
        let xs = self.vals[x].shape.clone();
        let (r1, k) = (xs.len(), xs[xs.len() - 1]);
        let fits = |s: &[i64]| {
            let r = r1 + s.len() - 2;
            s[0] == k && (1..=3).contains(&r) && elems(&xs) / k * elems(s) / k <= MAX_ELEMS
        };
        let found: Vec<usize> = (0..self.vals.len())
            .filter(|&v| fits(&self.vals[v].shape))
            .collect();
        let w = if found.is_empty() || self.rng.chance(3) {
            let room = (MAX_ELEMS / (elems(&xs) / k)).clamp(1, 5);
            let n = 1 + self.rng.below_i64(room);
            self.source(vec![k, n], false)
        } else {
            found[self.rng.below(found.len())]
        };
        let ws = self.vals[w].shape.clone();
        let r2 = ws.len();
        let (xi, wi) = (self.vals[x].iv, self.vals[w].iv);
        let ports = vec![self.port('a', x), self.port('b', w)];
        let out = vars(r1 + r2 - 2);
        let mut xv = out[..r1 - 1].to_vec();
        xv.push("k".into());
        let mut wv = vec!["k".to_string()];
        wv.extend_from_slice(&out[r1 - 1..]);
        let mut out_dims = syms('A', r1 - 1);
        out_dims.extend(syms('B', r2).into_iter().skip(1));
        let mut out_shape = xs[..r1 - 1].to_vec();
        out_shape.extend_from_slice(&ws[1..]);
        self.emit(Kernel {
            construct: "contraction",
            ports,
            out_dims,
            out_shape,
            temps: String::new(),
            lhs: out,
            expr: format!("sum[k]({} * {})", at("a", &xv), at("b", &wv)),
            iv: iv_scale(iv_mul(xi, wi), k as f64),
            rescale: true,
        });
    }

    /// A reduction over one dimension `d` of a value of rank ≥ 2 (`max`/`min` with a ladder).
    pub(super) fn reduction(&mut self, c: &'static str) {
        let Along {
            x,
            shape,
            d,
            n: kk,
            xi,
            idx,
        } = self.along(&|s| s.len() >= 2);
        let r = shape.len();
        let ports = vec![self.port('a', x)];
        let a = at("a", &with(&idx, d, "k"));
        let out = without(&idx, d);
        let (expr, iv) = match c {
            "sum reduction" => (format!("sum[k]({a})"), iv_scale(xi, kk as f64)),
            "prod reduction" => {
                let (s, sv) = lit(1.5 / bound(xi).max(1e-9));
                let f = iv_scale(xi, sv);
                let iv = if f.0 > 0.0 {
                    (f.0.powi(kk as i32), f.1.powi(kk as i32))
                } else {
                    let m = bound(f).powi(kk as i32);
                    (-m, m)
                };
                (format!("prod[k]({a} * {s})"), iv)
            }
            _ => {
                // The ladder: a permutation of 0..K per row, steps wider than `x`'s interval.
                let coprime: Vec<i64> = (1..=4).filter(|&p| gcd(p, kk) == 1).collect();
                let p = coprime[self.rng.below(coprime.len())];
                let q = self.rng.below_i64(kk.max(1));
                let off = if q == 0 {
                    String::new()
                } else {
                    format!(" + ({}) * {q}", out.join(" + "))
                };
                let step = (xi.1 - xi.0).ceil() + 1.0;
                let ladder = format!("f64((k * {p}{off}) % {kk}) * {step:.1}");
                let top = (kk - 1) as f64 * step;
                if c == "max reduction" {
                    (format!("max[k]({a} + {ladder})"), (xi.0, xi.1 + top))
                } else {
                    (format!("min[k]({a} - {ladder})"), (xi.0 - top, xi.1))
                }
            }
        };
        self.emit(Kernel {
            construct: c,
            ports,
            out_dims: without(&syms('A', r), d),
            out_shape: without_dim(&shape, d),
            temps: String::new(),
            lhs: out,
            expr,
            iv,
            rescale: true,
        });
    }

    /// A layernorm along dimension `d` (temporaries `mu`, `v`), scaled and shifted by vectors.
    pub(super) fn layernorm(&mut self) {
        let Along {
            x,
            shape,
            d,
            n: kk,
            idx,
            ..
        } = self.along(&|_| true);
        let r = shape.len();
        let (g, h) = (self.vector(kk), self.vector(kk));
        let (gi, hi) = (self.vals[g].iv, self.vals[h].iv);
        let ports = vec![self.port('a', x), self.port('b', g), self.port('c', h)];
        let (a, ak) = (at("a", &idx), at("a", &with(&idx, d, "k")));
        let rv = without(&idx, d);
        let (mu, v) = (at("mu", &rv), at("v", &rv));
        let temps = format!(
            "  {mu} = sum[k]({ak}) / f64({kk})\n  {v} = sum[k](({ak} - {mu}) * ({ak} - {mu})) / f64({kk})\n"
        );
        let n = ((kk - 1) as f64).sqrt();
        let i = &idx[d];
        self.emit(Kernel {
            construct: "layernorm",
            ports,
            out_dims: syms('A', r),
            out_shape: shape,
            temps,
            lhs: idx.clone(),
            expr: format!("({a} - {mu}) / sqrt({v} + 0.01) * b[{i}] + c[{i}]"),
            iv: iv_add(iv_mul((-n, n), gi), hi),
            rescale: true,
        });
    }

    /// A stabilised softmax or log-softmax along dimension `d` (never rescaled).
    pub(super) fn softmax(&mut self, c: &'static str) {
        let Along {
            x,
            shape,
            d,
            n: kk,
            xi,
            idx,
        } = self.along(&|_| true);
        let r = shape.len();
        let ports = vec![self.port('a', x)];
        let (a, ak) = (at("a", &idx), at("a", &with(&idx, d, "k")));
        let rv = without(&idx, d);
        let (m, s) = (at("m", &rv), at("s", &rv));
        let temps = format!("  {m} = max[k]({ak})\n  {s} = sum[k](exp({ak} - {m}))\n");
        let (expr, iv) = if c == "softmax" {
            (format!("exp({a} - {m}) / {s}"), (0.0, 1.0))
        } else {
            let lo = -(xi.1 - xi.0) - (kk as f64).ln();
            (format!("{a} - {m} - log({s})"), (lo, 0.0))
        };
        self.emit(Kernel {
            construct: c,
            ports,
            out_dims: syms('A', r),
            out_shape: shape,
            temps,
            lhs: idx,
            expr,
            iv,
            rescale: false,
        });
    }

    /// Loads that broadcast a vector, read a shifted window, a stride or a constant index.
    pub(super) fn load(&mut self, c: &'static str) {
        let x = if c == "shifted load" {
            self.operand(&|s| s.iter().any(|&n| n >= 2))
        } else {
            self.operand(&|_| true)
        };
        let shape = self.vals[x].shape.clone();
        let r = shape.len();
        let wide: Vec<usize> = (0..r).filter(|&d| shape[d] >= 2).collect();
        let d = match c {
            "shifted load" => wide[self.rng.below(wide.len())],
            _ => self.rng.below(r),
        };
        let n = shape[d];
        let xi = self.vals[x].iv;
        let mut ports = vec![self.port('a', x)];
        let idx = vars(r);
        let i = idx[d].clone();
        let a = at("a", &idx);
        let mut out_dims = syms('A', r);
        let mut out_shape = shape.clone();
        let (expr, iv) = match c {
            "broadcasting load" => {
                let b = self.vector(n);
                let bi = self.vals[b].iv;
                ports.push(self.port('b', b));
                if self.rng.chance(2) {
                    (format!("{a} * b[{i}]"), iv_mul(xi, bi))
                } else {
                    (format!("{a} + b[{i}]"), iv_add(xi, bi))
                }
            }
            "shifted load" => {
                out_dims[d] = format!("A{d} - 1");
                out_shape[d] = n - 1;
                let next = at("a", &with(&idx, d, &format!("{i} + 1")));
                if self.rng.chance(2) {
                    (format!("{next} * {a}"), iv_mul(xi, xi))
                } else {
                    (format!("{next} - {a}"), iv_sub(xi, xi))
                }
            }
            "strided load" => {
                let even = at("a", &with(&idx, d, &format!("2 * {i}")));
                if n >= 2 && self.rng.chance(2) {
                    out_dims[d] = format!("A{d} / 2");
                    out_shape[d] = n / 2;
                    let odd = at("a", &with(&idx, d, &format!("2 * {i} + 1")));
                    (format!("{even} * {odd}"), iv_mul(xi, xi))
                } else {
                    out_dims[d] = format!("(A{d} + 1) / 2");
                    out_shape[d] = (n + 1) / 2;
                    (even, xi)
                }
            }
            _ => {
                let k = self.rng.below_i64(n);
                let fixed = at("a", &with(&idx, d, &k.to_string()));
                (format!("{a} * {fixed}"), iv_mul(xi, xi))
            }
        };
        self.emit(Kernel {
            construct: c,
            ports,
            out_dims,
            out_shape,
            temps: String::new(),
            lhs: idx,
            expr,
            iv,
            rescale: true,
        });
    }

    /// `y[b, h] = a[ids[b], h]`: a table of rank 2 read at integer ids computed from an `iota`
    /// (duplicates, and negative ids that wrap, in about half the graphs).
    pub(super) fn gather(&mut self) {
        let x = self.operand(&|s| s.len() == 2);
        let (v, id) = (self.vals[x].shape[0], self.vals.len());
        let b = 1 + self.rng.below_i64(5);
        let p = 1 + self.rng.below_i64(4);
        let q = self.rng.below_i64(v);
        let neg = if self.rng.chance(2) {
            format!(" - {v} * (x[i] % 2)")
        } else {
            String::new()
        };
        self.ops.push_str(&format!(
            "op @k{id}_ids(x: i64[N]) -> (y: i64[N]) {{\n  y[i] = (x[i] * {p} + {q}) % {v}{neg}\n}}\n"
        ));
        self.lines
            .push(format!("%v{id}.i = iota axis 0 : i64[{b}]"));
        self.lines
            .push(format!("%v{id}.ids = apply @k{id}_ids(%v{id}.i)"));
        let xi = self.vals[x].iv;
        let ports = vec![
            self.port('a', x),
            (format!("%v{id}.ids"), "ids: i64[B0]".to_string()),
        ];
        let out_shape = vec![b, self.vals[x].shape[1]];
        self.emit(Kernel {
            construct: "gathered load",
            ports,
            out_dims: vec!["B0".into(), "A1".into()],
            out_shape,
            temps: String::new(),
            lhs: vars(2),
            expr: "a[ids[i0], i1]".into(),
            iv: xi,
            rescale: false,
        });
    }
}

/// `shape` without dimension `d`.
pub(super) fn without_dim(shape: &[i64], d: usize) -> Vec<i64> {
    let mut s = shape.to_vec();
    s.remove(d);
    s
}
