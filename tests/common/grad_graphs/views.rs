//! The selector steps of [`super::Builder`]: every selector of docs/teg.md §9, each on a
//! random operand (small enough for the ones that grow it), with random attributes.

use super::{dims, elems, union, Builder, MAX_ELEMS};

impl Builder {
    /// Defines `%vID = line` reading `x` (and `others`), of `shape`, with `x`'s interval.
    fn view(&mut self, c: &'static str, x: usize, others: &[usize], line: String, shape: Vec<i64>) {
        let mut iv = self.vals[x].iv;
        for &o in others {
            iv = union(iv, self.vals[o].iv);
            self.vals[o].read = true;
        }
        self.vals[x].read = true;
        self.define(c, line, shape, iv);
    }

    fn name(&self, v: usize) -> String {
        format!("%{}", self.vals[v].name)
    }

    pub(super) fn selector(&mut self, c: &'static str) {
        match c {
            "transpose" => self.transpose(),
            "slice step 1" => self.slice(c, 1),
            "slice step -1" => self.slice(c, -1),
            "slice step 2" => self.slice(c, 2),
            "slice step -2" => self.slice(c, -2),
            "concat" | "interleave" => self.join(c),
            "broadcast" => self.broadcast(),
            "reshape" => self.reshape(),
            "reverse" => self.reverse(),
            "pad constant" => self.pad_constant(),
            "pad reflect" => self.pad_reflect(),
            "repeat" => self.repeat(),
            "squeeze" => self.squeeze(),
            "unsqueeze" => self.unsqueeze(),
            other => panic!("no step for {other}"),
        }
    }

    fn transpose(&mut self) {
        let x = self.operand(&|s| s.len() >= 2);
        let shape = self.vals[x].shape.clone();
        let r = shape.len();
        let mut perm: Vec<usize> = (0..r).collect();
        for i in (1..r).rev() {
            perm.swap(i, self.rng.below(i + 1));
        }
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            perm.swap(0, 1);
        }
        let out: Vec<i64> = perm.iter().map(|&p| shape[p]).collect();
        let p: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
        let line = format!("transpose {} [{}]", self.name(x), p.join(", "));
        self.view("transpose", x, &[], line, out);
    }

    /// A slice of one random dimension with `step`, the others whole.
    fn slice(&mut self, c: &'static str, step: i64) {
        let x = self.operand(&|_| true);
        let mut shape = self.vals[x].shape.clone();
        let d = self.rng.below(shape.len());
        let n = shape[d];
        let st = self.rng.below_i64(n);
        let s = step.abs();
        let (spec, count) = if step > 0 {
            let sp = st + 1 + self.rng.below_i64(n - st);
            (format!("{st}:{sp}:{step}"), (sp - st + s - 1) / s)
        } else if st == 0 || self.rng.chance(2) {
            (format!("{st}::{step}"), (st + s) / s)
        } else {
            let sp = self.rng.below_i64(st);
            (format!("{st}:{sp}:{step}"), (st - sp + s - 1) / s)
        };
        let specs: Vec<String> = (0..shape.len())
            .map(|k| if k == d { spec.clone() } else { ":".into() })
            .collect();
        shape[d] = count;
        let line = format!("slice {} [{}]", self.name(x), specs.join(", "));
        self.view(c, x, &[], line, shape);
    }

    /// `concat` of `x` and a value equal in shape but along the axis (`x` itself, another, or
    /// a new source); `interleave` of two values of one shape.
    fn join(&mut self, c: &'static str) {
        let x = self.operand(&|s| elems(s) * 2 <= MAX_ELEMS);
        let shape = self.vals[x].shape.clone();
        let d = self.rng.below(shape.len());
        let y = if c == "interleave" {
            self.partner(&shape)
        } else {
            let fits: Vec<usize> = (0..self.vals.len())
                .filter(|&v| {
                    let s = &self.vals[v].shape;
                    s.len() == shape.len()
                        && (0..s.len()).all(|k| k == d || s[k] == shape[k])
                        && elems(s) + elems(&shape) <= MAX_ELEMS
                })
                .collect();
            if self.rng.chance(3) {
                let mut s = shape.clone();
                s[d] = 1 + self.rng.below_i64(5);
                self.source(s, false)
            } else {
                fits[self.rng.below(fits.len())]
            }
        };
        let mut out = shape.clone();
        out[d] += self.vals[y].shape[d];
        let line = format!("{c} {}, {} axis {d}", self.name(x), self.name(y));
        self.view(c, x, &[y], line, out);
    }

    /// Size-1 dimensions expanded and, below rank 4, a leading one added.
    fn broadcast(&mut self) {
        let x = self.operand(&|s| elems(s) <= 40 && (s.len() < 4 || s.contains(&1)));
        let shape = self.vals[x].shape.clone();
        let mut out = shape.clone();
        for k in 0..out.len() {
            if out[k] == 1 && elems(&out) * 3 <= MAX_ELEMS && self.rng.chance(2) {
                out[k] = 2 + self.rng.below_i64(2);
            }
        }
        if out.len() < 4 && (out == shape || (elems(&out) * 3 <= MAX_ELEMS && self.rng.chance(2))) {
            out.insert(0, 2 + self.rng.below_i64(2));
        } else if out == shape {
            let k = out.iter().position(|&n| n == 1).expect("a size-1 dim");
            out[k] = 2;
        }
        let line = format!("broadcast {} [{}]", self.name(x), dims(&out));
        self.view("broadcast", x, &[], line, out);
    }

    /// Another factorisation of the element count, of rank 1 to 3.
    fn reshape(&mut self) {
        let x = self.operand(&|_| true);
        let shape = self.vals[x].shape.clone();
        let n = elems(&shape);
        let mut out = vec![n];
        for _ in 0..4 {
            let r = 1 + self.rng.below(3);
            let mut left = n;
            out = Vec::new();
            for _ in 1..r {
                let divs: Vec<i64> = (1..=left).filter(|d| left % d == 0).collect();
                let f = divs[self.rng.below(divs.len())];
                out.push(f);
                left /= f;
            }
            out.push(left);
            if out != shape {
                break;
            }
        }
        let line = format!("reshape {} [{}]", self.name(x), dims(&out));
        self.view("reshape", x, &[], line, out);
    }

    fn reverse(&mut self) {
        let x = self.operand(&|_| true);
        let shape = self.vals[x].shape.clone();
        let mut ds: Vec<String> = (0..shape.len())
            .filter(|_| self.rng.chance(2))
            .map(|d| d.to_string())
            .collect();
        if ds.is_empty() {
            ds.push(self.rng.below(shape.len()).to_string());
        }
        let line = format!("reverse {} [{}]", self.name(x), ds.join(", "));
        self.view("reverse", x, &[], line, shape);
    }

    /// Widths per dimension below `cap(size)` + 1, at least one not zero, the result small.
    fn pad_widths(&mut self, shape: &[i64], cap: &dyn Fn(i64) -> i64) -> Vec<(i64, i64)> {
        let mut w: Vec<(i64, i64)> = shape
            .iter()
            .map(|&n| {
                (
                    self.rng.below_i64(cap(n) + 1),
                    self.rng.below_i64(cap(n) + 1),
                )
            })
            .collect();
        let grown = |w: &[(i64, i64)]| -> i64 {
            shape.iter().zip(w).map(|(n, (l, h))| n + l + h).product()
        };
        for k in (0..w.len()).rev() {
            if grown(&w) > MAX_ELEMS {
                w[k] = (0, 0);
            }
        }
        if w.iter().all(|&p| p == (0, 0)) {
            let k = shape
                .iter()
                .position(|&n| cap(n) > 0)
                .expect("a dim to pad");
            w[k] = (1, 0);
        }
        w
    }

    fn pad(&mut self, c: &'static str, x: usize, w: &[(i64, i64)], mode: &str) {
        let shape = self.vals[x].shape.clone();
        let out: Vec<i64> = shape.iter().zip(w).map(|(n, (l, h))| n + l + h).collect();
        let spec: Vec<String> = w.iter().map(|(l, h)| format!("{l}:{h}")).collect();
        let line = format!("pad {} [{}] {mode}", self.name(x), spec.join(", "));
        self.view(c, x, &[], line, out);
    }

    fn pad_constant(&mut self) {
        let x = self.operand(&|s| elems(s) <= 40);
        let shape = self.vals[x].shape.clone();
        let w = self.pad_widths(&shape, &|_| 2);
        let (v, f) = [("0.0", 0.0), ("0.5", 0.5), ("-1.0", -1.0)][self.rng.below(3)];
        self.pad("pad constant", x, &w, &format!("constant {v}"));
        let last = self.vals.len() - 1;
        self.vals[last].iv = union(self.vals[last].iv, (f, f));
    }

    fn pad_reflect(&mut self) {
        let x = self.operand(&|s| elems(s) <= 40 && s.iter().any(|&n| n >= 2));
        let shape = self.vals[x].shape.clone();
        let w = self.pad_widths(&shape, &|n| (n - 1).min(2));
        self.pad("pad reflect", x, &w, "reflect");
    }

    fn repeat(&mut self) {
        let x = self.operand(&|s| elems(s) * 3 <= MAX_ELEMS);
        let mut shape = self.vals[x].shape.clone();
        let d = self.rng.below(shape.len());
        let t = 2 + self.rng.below_i64(2);
        shape[d] *= t;
        let line = format!("repeat {} times {t} axis {d}", self.name(x));
        self.view("repeat", x, &[], line, shape);
    }

    /// Removes some of the size-1 dimensions of a value of rank ≥ 2, keeping rank ≥ 1.
    fn squeeze(&mut self) {
        let x = self.operand(&|s| s.len() >= 2 && s.contains(&1));
        let shape = self.vals[x].shape.clone();
        let ones: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] == 1).collect();
        let mut ds: Vec<usize> = ones
            .iter()
            .copied()
            .filter(|_| self.rng.chance(2))
            .collect();
        if ds.is_empty() {
            ds.push(ones[self.rng.below(ones.len())]);
        }
        if ds.len() == shape.len() {
            ds.pop();
        }
        let out: Vec<i64> = (0..shape.len())
            .filter(|d| !ds.contains(d))
            .map(|d| shape[d])
            .collect();
        let list: Vec<String> = ds.iter().map(|d| d.to_string()).collect();
        let line = format!("squeeze {} [{}]", self.name(x), list.join(", "));
        self.view("squeeze", x, &[], line, out);
    }

    fn unsqueeze(&mut self) {
        let x = self.operand(&|s| s.len() <= 3);
        let mut shape = self.vals[x].shape.clone();
        let p = self.rng.below(shape.len() + 1);
        shape.insert(p, 1);
        let line = format!("unsqueeze {} [{p}]", self.name(x));
        self.view("unsqueeze", x, &[], line, shape);
    }
}
