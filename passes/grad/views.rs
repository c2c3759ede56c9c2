//! Adjoints of selectors and the small ops the `grad` pass needs besides kernel adjoints: the
//! sum of several adjoints of one value, and sums over dimensions (the adjoint of `broadcast`
//! and of `repeat`). A selector's adjoint is a selector where one exists (`transpose` by the
//! inverse permutation, `slice` → `pad` with zeros, `pad` → `slice`, `concat` → slices).

use super::emit::Emitter;
use super::expr::{self, access_vars};
use super::kernel::{port, Place};
use crate::diag::Span;
use crate::ir::graph::{GenKind, Generator, NodeKind, PadMode, SliceDim, ValueId, View};
use crate::ir::kernel::{BinOp, IndexVar, OpBody, OpDef, Reduction, Stmt};
use crate::ir::{Literal, TensorType};

impl Emitter<'_> {
    /// The adjoint of each operand of view `v` (operands of the rebuilt graph), given the
    /// adjoint `dy` of its value; an error names a selector with no adjoint yet.
    pub fn view_adjoint(
        &mut self,
        v: &View,
        dy: ValueId,
        want: &dyn Fn(ValueId) -> bool,
    ) -> Result<Vec<(ValueId, ValueId)>, String> {
        let x = v.operands()[0];
        let (xt, yt) = (self.ty(x), self.ty(dy));
        let name = format!("d_{}", self.name(x));
        let one = |e: &mut Self, view: View| {
            let r = e.view(view, &name, xt.clone());
            Ok(vec![(x, r)])
        };
        match v {
            View::Transpose { perm, .. } => {
                let mut inv = vec![0; perm.len()];
                for (i, p) in perm.iter().enumerate() {
                    inv[*p] = i;
                }
                one(self, View::Transpose { arg: dy, perm: inv })
            }
            View::Reverse { dims, .. } => one(
                self,
                View::Reverse {
                    arg: dy,
                    dims: dims.clone(),
                },
            ),
            View::Squeeze { dims, .. } => one(
                self,
                View::Unsqueeze {
                    arg: dy,
                    dims: dims.clone(),
                },
            ),
            View::Unsqueeze { dims, .. } => one(
                self,
                View::Squeeze {
                    arg: dy,
                    dims: dims.clone(),
                },
            ),
            View::Reshape { .. } => one(
                self,
                View::Reshape {
                    arg: dy,
                    shape: xt.shape.clone(),
                },
            ),
            View::Pad {
                widths,
                mode: PadMode::Constant(_),
                ..
            } => {
                let dims = widths
                    .iter()
                    .zip(&xt.shape)
                    .map(|((lo, _), n)| SliceDim::from_count(*lo, 1, *n))
                    .collect();
                one(self, View::Slice { arg: dy, dims })
            }
            View::Slice { dims, .. } => self.slice_adjoint(x, dims, dy, &name),
            View::Concat { args, axis } => Ok(self.concat_adjoint(args, *axis, dy, want)),
            View::Broadcast { .. } => {
                let keep = broadcast_keep(&xt.shape, &yt.shape);
                let r = self.sum_dims(dy, &keep, &xt, &name);
                Ok(vec![(x, r)])
            }
            View::Repeat { times, axis, .. } => {
                let mut shape = xt.shape.clone();
                shape.insert(*axis, *times);
                let t = TensorType::new(yt.dtype, shape);
                let r = self.view(
                    View::Reshape {
                        arg: dy,
                        shape: t.shape.clone(),
                    },
                    &name,
                    t,
                );
                let keep: Vec<Option<usize>> = (0..=xt.shape.len())
                    .map(|d| match d.cmp(axis) {
                        std::cmp::Ordering::Less => Some(d),
                        std::cmp::Ordering::Equal => None,
                        std::cmp::Ordering::Greater => Some(d - 1),
                    })
                    .collect();
                let r = self.sum_dims(r, &keep, &xt, &name);
                Ok(vec![(x, r)])
            }
            View::Pad {
                widths,
                mode: PadMode::Reflect,
                ..
            } => {
                let mut r = dy;
                for (d, (lo, hi)) in widths.iter().enumerate() {
                    r = self.unreflect(r, d, (*lo, *hi), xt.shape[d], &name);
                }
                Ok(vec![(x, r)])
            }
            View::Interleave { args, axis } => Ok(self.interleave_adjoint(args, *axis, dy, want)),
        }
    }

    /// `slice` → the adjoint spread out by the step (interleaved with zeros) where the step is
    /// not ±1, reversed where it is negative, padded with zeros to the operand's shape.
    fn slice_adjoint(
        &mut self,
        x: ValueId,
        dims: &[SliceDim],
        dy: ValueId,
        name: &str,
    ) -> Result<Vec<(ValueId, ValueId)>, String> {
        let xt = self.ty(x);
        let (mut r, mut rev, mut widths) = (dy, Vec::new(), Vec::new());
        for (d, s) in dims.iter().enumerate() {
            let (start, step) = (s.start.unwrap_or(0), s.step.unwrap_or(1));
            let count = self.ty(r).shape[d];
            let a = step.abs();
            if a > 1 && count > 0 {
                r = self.spread(r, d, a, name);
            }
            if step < 0 {
                rev.push(d);
            }
            let len = if count == 0 { 0 } else { (count - 1) * a + 1 };
            let lo = match (count, step > 0) {
                (0, _) => 0,
                (_, true) => start,
                (_, false) => start - (count - 1) * a,
            };
            widths.push((lo, xt.shape[d] - lo - len));
        }
        if !rev.is_empty() {
            let t = self.ty(r);
            r = self.view(View::Reverse { arg: r, dims: rev }, name, t);
        }
        let zero = Literal::Float(0.0);
        let pad = View::Pad {
            arg: r,
            widths,
            mode: PadMode::Constant(zero),
        };
        Ok(vec![(x, self.view(pad, name, xt))])
    }

    /// The adjoint of a reflecting pad of `lo`/`hi` along `d` (operand size `n`): the interior,
    /// plus each mirrored border reversed and padded into place.
    fn unreflect(
        &mut self,
        v: ValueId,
        d: usize,
        (lo, hi): (i64, i64),
        n: i64,
        name: &str,
    ) -> ValueId {
        if lo == 0 && hi == 0 {
            return v;
        }
        let mut parts = vec![self.slice_along(v, d, lo, n, name)];
        for (from, len, before) in [(0, lo, 1), (lo + n, hi, n - 1 - hi)] {
            if len == 0 {
                continue;
            }
            let s = self.slice_along(v, d, from, len, name);
            let t = self.ty(s);
            let r = self.view(
                View::Reverse {
                    arg: s,
                    dims: vec![d],
                },
                name,
                t.clone(),
            );
            let mut w = vec![(0, 0); t.shape.len()];
            w[d] = (before, n - before - len);
            let mut pt = t;
            pt.shape[d] = n;
            let zero = PadMode::Constant(Literal::Float(0.0));
            parts.push(self.view(
                View::Pad {
                    arg: r,
                    widths: w,
                    mode: zero,
                },
                name,
                pt,
            ));
        }
        self.accumulate(&parts, name)
    }

    /// `v[.., from:from + len, ..]` along `d`.
    fn slice_along(&mut self, v: ValueId, d: usize, from: i64, len: i64, name: &str) -> ValueId {
        let mut t = self.ty(v);
        let dims = t
            .shape
            .iter()
            .enumerate()
            .map(|(k, n)| match k == d {
                true => SliceDim::from_count(from, 1, len),
                false => SliceDim::from_count(0, 1, *n),
            })
            .collect();
        t.shape[d] = len;
        self.view(View::Slice { arg: v, dims }, name, t)
    }

    /// `v` with `a - 1` zeros after each element along `d`, but not after the last.
    fn spread(&mut self, v: ValueId, d: usize, a: i64, name: &str) -> ValueId {
        let t = self.ty(v);
        let zeros = Generator {
            kind: GenKind::Zeros,
            ty: t.clone(),
        };
        let z = self.b.emit(
            NodeKind::Generator(zeros),
            &format!("{name}.zeros"),
            t.clone(),
            self.span,
        );
        let mut args = vec![v];
        args.extend(std::iter::repeat_n(z, (a - 1) as usize));
        let mut wide = t.clone();
        wide.shape[d] *= a;
        let w = self.view(View::Interleave { args, axis: d }, name, wide);
        let keep = (t.shape[d] - 1) * a + 1;
        self.slice_along(w, d, 0, keep, name)
    }

    /// `concat` → one slice of the adjoint per operand.
    fn concat_adjoint(
        &mut self,
        args: &[ValueId],
        axis: usize,
        dy: ValueId,
        want: &dyn Fn(ValueId) -> bool,
    ) -> Vec<(ValueId, ValueId)> {
        let mut off = 0;
        let mut out = Vec::new();
        for &a in args {
            let (from, len) = (off, self.ty(a).shape[axis]);
            off += len;
            if !want(a) {
                continue;
            }
            let name = format!("d_{}", self.name(a));
            out.push((a, self.slice_along(dy, axis, from, len, &name)));
        }
        out
    }

    /// `interleave` → the adjoint reshaped to split the axis into (size, operands), one slice
    /// per operand along the second, reshaped back.
    fn interleave_adjoint(
        &mut self,
        args: &[ValueId],
        axis: usize,
        dy: ValueId,
        want: &dyn Fn(ValueId) -> bool,
    ) -> Vec<(ValueId, ValueId)> {
        let (xt, yt) = (self.ty(args[0]), self.ty(dy));
        let mut split = xt.shape.clone();
        split.insert(axis + 1, args.len() as i64);
        let st = TensorType::new(yt.dtype, split.clone());
        let name = format!("d_{}", self.name(dy));
        let r = self.view(
            View::Reshape {
                arg: dy,
                shape: split.clone(),
            },
            &name,
            st,
        );
        let mut out = Vec::new();
        for (k, &a) in args.iter().enumerate() {
            if !want(a) {
                continue;
            }
            let dims = split
                .iter()
                .enumerate()
                .map(|(d, n)| match d == axis + 1 {
                    true => SliceDim::from_count(k as i64, 1, 1),
                    false => SliceDim::from_count(0, 1, *n),
                })
                .collect();
            let mut one = split.clone();
            one[axis + 1] = 1;
            let name = format!("d_{}", self.name(a));
            let s = self.view(
                View::Slice { arg: r, dims },
                &name,
                TensorType::new(yt.dtype, one),
            );
            let back = View::Reshape {
                arg: s,
                shape: xt.shape.clone(),
            };
            out.push((a, self.view(back, &name, xt.clone())));
        }
        out
    }

    /// The adjoint `d` of a window of `x` placed in a tensor of `x`'s type: constant indices
    /// unsqueezed, the window padded with zeros (nothing to do for a whole-tensor window).
    pub fn place(&mut self, d: ValueId, places: &[Place], x: ValueId, name: &str) -> ValueId {
        let xt = self.ty(x);
        let whole = places.iter().zip(&xt.shape).all(|(p, n)| {
            *p == Place::Var {
                lo: 0,
                len: *n,
                step: 1,
            }
        });
        if whole {
            return d;
        }
        let consts: Vec<usize> = (0..places.len())
            .filter(|k| matches!(places[*k], Place::Const(_)))
            .collect();
        let mut r = d;
        let mut dim = 0;
        for p in places {
            match p {
                Place::Var { len, step, .. } if *step > 1 && *len > 1 => {
                    r = self.spread(r, dim, *step, name);
                    dim += 1;
                }
                Place::Var { .. } => dim += 1,
                Place::Const(_) => {}
            }
        }
        if !consts.is_empty() {
            let mut t = self.ty(r);
            consts.iter().for_each(|k| t.shape.insert(*k, 1));
            r = self.view(
                View::Unsqueeze {
                    arg: r,
                    dims: consts,
                },
                name,
                t,
            );
        }
        let widths = places
            .iter()
            .zip(&xt.shape)
            .map(|(p, n)| match p {
                Place::Var { lo, len, step } => (*lo, n - lo - ((len - 1) * step + 1).max(0)),
                Place::Const(c) => (*c, n - c - 1),
            })
            .collect();
        let zero = PadMode::Constant(Literal::Float(0.0));
        self.view(
            View::Pad {
                arg: r,
                widths,
                mode: zero,
            },
            name,
            xt,
        )
    }

    /// An op summing `v` over the dims whose `keep` is `None`; a kept dim `d` of `v` becomes
    /// dim `keep[d]` of the result, of type `out`.
    pub fn sum_dims(
        &mut self,
        v: ValueId,
        keep: &[Option<usize>],
        out: &TensorType,
        name: &str,
    ) -> ValueId {
        let vt = self.ty(v);
        let lhs: Vec<String> = (0..out.shape.len()).map(|d| format!("i{d}")).collect();
        let mut summed = Vec::new();
        let idx: Vec<String> = keep
            .iter()
            .enumerate()
            .map(|(d, k)| match k {
                Some(o) => lhs[*o].clone(),
                None => {
                    summed.push(format!("k{d}"));
                    format!("k{d}")
                }
            })
            .collect();
        let mut value = access_vars("x", &idx);
        if !summed.is_empty() {
            value = expr::reduce(Reduction::Sum, summed, value);
        }
        let op = one_stmt(
            self.op_name(&format!("grad_sum_{}", self.name(v))),
            vec![port("x", &vt)],
            out,
            lhs,
            value,
        );
        self.apply(op, vec![v], &[name.to_string()])[0]
    }

    /// The sum of several adjoints of one value (all of its type).
    pub fn accumulate(&mut self, parts: &[ValueId], name: &str) -> ValueId {
        if parts.len() == 1 {
            return parts[0];
        }
        let t = self.ty(parts[0]);
        let lhs: Vec<String> = (0..t.shape.len()).map(|d| format!("i{d}")).collect();
        let names: Vec<String> = (0..parts.len()).map(|k| format!("a{k}")).collect();
        let value = names
            .iter()
            .map(|n| access_vars(n, &lhs))
            .reduce(|a, b| expr::bin(BinOp::Add, a, b))
            .expect("two parts or more");
        let ports = names.iter().map(|n| port(n, &t)).collect();
        let op = one_stmt(
            self.op_name(&format!("grad_acc_{name}")),
            ports,
            &t,
            lhs,
            value,
        );
        self.apply(op, parts.to_vec(), &[name.to_string()])[0]
    }
}

/// For each dim of a broadcast's result: the operand dim it reads, or `None` when it is summed
/// (a leading dim, or a size-1 operand dim stretched).
fn broadcast_keep(x: &[i64], y: &[i64]) -> Vec<Option<usize>> {
    let lead = y.len() - x.len();
    (0..y.len())
        .map(|d| {
            if d < lead || (x[d - lead] == 1 && y[d] != 1) {
                None
            } else {
                Some(d - lead)
            }
        })
        .collect()
}

/// An op `name` with one statement `y[lhs] = value`.
pub(super) fn one_stmt(
    name: String,
    inputs: Vec<crate::ir::PortDef>,
    out: &TensorType,
    lhs: Vec<String>,
    value: crate::ir::kernel::KExpr,
) -> OpDef {
    let sp = Span::default();
    OpDef {
        name,
        params: vec![],
        inputs,
        outputs: vec![port("y", out)],
        body: OpBody::Kernel(vec![Stmt {
            target: "y".into(),
            indices: lhs.into_iter().map(|v| IndexVar::Var(v, sp)).collect(),
            value,
            span: sp,
            target_span: sp,
        }]),
        span: sp,
        name_span: sp,
    }
}
