//! Single-pass online softmax statistics: the pair of statements
//! `m[i] = max[j](E)` and `s[i] = sum[j](exp(E − m[i]))` (softmax's row max and row sum, with
//! the same `E`) computed in one read of the row instead of two. The row is read as vectors
//! along a contiguous `j`; a running max `M` (one vector, shared by the `u` unrolled groups) and
//! sums `S_k` kept relative to it: per block, `M' = max(M, x_1 … x_u)`,
//! `S_k' = S_k·e^(M − M') + e^(x_k − M')` (one rescaling `exp` per block of `u` vectors). At
//! the end `m = max(M)` over the lanes and `s = Σ S·e^(M − m)`.
//!
//! Against the interpreter (`m` exact, `s = Σ e^(E − m)` in index order) `m` is identical and
//! `s` is a reassociation (products of two `exp`s for one): within a few ulps times the row
//! length, as the vectorised row sum already is (docs/teg.md §5.3). Special values give the
//! interpreter's classes: a row of `-inf` gives `s = NaN` (`e^(−inf − −inf)`), a `+inf` or NaN
//! in the row gives NaN, and `-inf` entries add 0.

use super::*;
use crate::ir::kernel::{BinOp, Func};
use inkwell::FloatPredicate as FP;

/// Rows shorter than this many blocks of 4 vectors stay two passes: they are in L1 for the
/// second pass anyway, and the rescaling `exp`s would cost more than the pass saves (a BERT
/// attention row of 8 took 3 `exp`s a vector instead of 1).
const ONLINE_MIN_BLOCKS: i64 = 2;

/// Whether `a` with variable `ra` is `b` with variable `rb` (the spans of the source text
/// aside); a gather or a nested reduction is never the same.
fn same_expr(a: &CExpr, b: &CExpr, ra: usize, rb: usize) -> bool {
    let var = |x: usize, y: usize| x == y && x != ra && y != rb || x == ra && y == rb;
    let same_affine = |x: &Affine, y: &Affine| {
        x.constant == y.constant
            && x.terms.len() == y.terms.len()
            && x.terms
                .iter()
                .zip(&y.terms)
                .all(|(p, q)| p.1 == q.1 && var(p.0, q.0))
    };
    a.dtype == b.dtype
        && match (&a.kind, &b.kind) {
            (CKind::Const(x), CKind::Const(y)) => x == y,
            (CKind::Var(x), CKind::Var(y)) => var(*x, *y),
            (
                CKind::Load {
                    src: sx, index: ix, ..
                },
                CKind::Load {
                    src: sy, index: iy, ..
                },
            ) => {
                sx == sy
                    && ix.len() == iy.len()
                    && ix.iter().zip(iy).all(|(x, y)| same_affine(x, y))
            }
            (CKind::Call(f, xs), CKind::Call(g, ys)) => {
                f == g
                    && xs.len() == ys.len()
                    && xs.iter().zip(ys).all(|(x, y)| same_expr(x, y, ra, rb))
            }
            (CKind::Unary(o, x), CKind::Unary(p, y)) => o == p && same_expr(x, y, ra, rb),
            (CKind::Binary(o, x1, x2), CKind::Binary(p, y1, y2)) => {
                o == p && same_expr(x1, y1, ra, rb) && same_expr(x2, y2, ra, rb)
            }
            _ => false,
        }
}

/// The pieces of an online softmax pair: the reduction variable and the shared `E`.
pub(super) struct OnlinePair<'s> {
    r: usize,
    e: &'s CExpr,
}

impl<'ctx> K<'_, '_, 'ctx> {
    /// Whether `a` and `b` are a row max into a temporary and the row sum of `exp(E − max)`
    /// read back at the current point, both at fused points only, with `E` read contiguously
    /// along the (single) reduction variable.
    pub(super) fn online_pair<'s>(&self, a: &'s CStmt, b: &'s CStmt) -> Option<OnlinePair<'s>> {
        let Target::Temp(ta) = a.target else {
            return None;
        };
        let fused_only = |st: &CStmt| st.vars.iter().all(|&v| self.fused[v]);
        if !fused_only(a) || !fused_only(b) {
            return None;
        }
        let d = a.value.dtype;
        if !matches!(d, DType::F32 | DType::F64) || b.value.dtype != d {
            return None;
        }
        let CKind::Reduce {
            kind: Reduction::Max,
            vars: rv,
            body: e,
        } = &a.value.kind
        else {
            return None;
        };
        let CKind::Reduce {
            kind: Reduction::Sum,
            vars: sv,
            body: sb,
        } = &b.value.kind
        else {
            return None;
        };
        let (&[r], &[r2]) = (rv.as_slice(), sv.as_slice()) else {
            return None;
        };
        let CKind::Call(Func::Exp, args) = &sb.kind else {
            return None;
        };
        let CKind::Binary(BinOp::Sub, e2, m) = &args.first()?.kind else {
            return None;
        };
        let at_point = match &m.kind {
            CKind::Load {
                src: Src::Temp(t),
                index,
                ..
            } => {
                *t == ta
                    && index.len() == a.vars.len()
                    && index
                        .iter()
                        .zip(&a.vars)
                        .all(|(ix, &v)| ix.constant == 0 && ix.terms == [(v, 1)])
            }
            _ => false,
        };
        let ok = at_point
            && same_expr(e, e2, r, r2)
            && e.dtype == d
            && self.inst.extent(r2) == self.inst.extent(r)
            && self.inst.extent(r) >= ONLINE_MIN_BLOCKS * 4 * self.g.w as i64
            && self.contiguous_loads(e, r) > 0;
        ok.then_some(OnlinePair { r, e })
    }

    /// Emits the pair `a`, `b` recognised by [`K::online_pair`] as one pass over the row.
    pub(super) fn online_softmax(&mut self, a: &CStmt, b: &CStmt, p: &OnlinePair) -> R<()> {
        let g = self.g;
        let (r, e, d) = (p.r, p.e, p.e.dtype);
        let w = g.w as i64;
        let (lo, hi) = self.inst.vars[r].range;
        let (u, full_end) = self.along_blocks(r);
        let mut acc = vec![g.splat(g.identity(Reduction::Max, d)?)];
        acc.extend(vec![g.splat(g.identity(Reduction::Sum, d)?); u as usize]);
        self.memo.clear();
        if full_end > lo {
            let loops = Loops { g, f: self.loops.f };
            acc = loops.counted(
                self,
                g.i64c(lo),
                g.i64c(full_end),
                u * w,
                acc,
                &mut |k, r0, acc| {
                    let groups = (0..u)
                        .map(|j| k.online_group(k.g.b.build_int_add(r0, k.g.i64c(j * w), ""), j))
                        .collect();
                    k.online_step(e, r, groups, &acc)
                },
            )?;
        }
        let rem = hi - full_end;
        if rem > 0 {
            let groups = (0..(rem + w - 1) / w)
                .map(|j| Group {
                    mask: Some(self.tail_mask(j, rem)),
                    ..self.online_group(Ok(g.i64c(full_end + j * w)), j)
                })
                .collect();
            let new = self.online_step(e, r, groups, &acc)?;
            let nt = new.len();
            acc[..nt].copy_from_slice(&new);
        }
        let (m, s) = self.online_finish(&acc, d)?;
        let point = Cx::point();
        self.store(a, vec![m], d, &point);
        self.store(b, vec![s], d, &point);
        Ok(())
    }

    /// A group of lanes starting at `base` (no mask), the `slot`-th of its block.
    fn online_group(
        &self,
        base: Result<IntValue<'ctx>, inkwell::builder::BuilderError>,
        slot: i64,
    ) -> Group<'ctx> {
        Group {
            over: vec![],
            lane_base: Some(base.expect("positioned")),
            mask: None,
            slot,
        }
    }

    /// One block: `acc = [M, S_1 … S_u]`; returns `[M', S_1' … S_g']` for the `g` groups
    /// (masked lanes of a tail group neither raise `M` nor add to `S`).
    fn online_step(
        &mut self,
        e: &CExpr,
        r: usize,
        groups: Vec<Group<'ctx>>,
        acc: &[V<'ctx>],
    ) -> R<Vec<V<'ctx>>> {
        let g = self.g;
        let d = e.dtype;
        let ninf = g.splat(g.identity(Reduction::Max, d)?);
        let masks: Vec<Option<VectorValue<'ctx>>> = groups.iter().map(|gr| gr.mask).collect();
        let xs = self.eval(
            e,
            &Cx {
                lane: Some(r),
                groups,
            },
        )?;
        let xs: Vec<V<'ctx>> = xs
            .into_iter()
            .zip(&masks)
            .map(|(x, m)| m.map_or(x, |m| g.select(m.into(), x, ninf)))
            .collect();
        let mut mn = acc[0];
        for &x in &xs {
            mn = g.combine(Reduction::Max, mn, x, d)?;
        }
        let scale = self.exp_relative(acc[0], mn, d)?;
        let mut out = vec![mn];
        for (k, &x) in xs.iter().enumerate() {
            // Where `M'` is still `-inf` the term is 1, but every later rescaling of it is 0
            // (or the row is all `-inf`: see `online_finish`).
            let term = self.exp_relative(x, mn, d)?;
            let s = g.binary(BinOp::Mul, acc[1 + k], scale, d)?;
            out.push(g.binary(BinOp::Add, s, term, d)?);
        }
        // Groups this (tail) block does not have keep their sums, rescaled.
        for &s in &acc[1 + xs.len()..] {
            out.push(g.binary(BinOp::Mul, s, scale, d)?);
        }
        Ok(out)
    }

    /// `e^(x − m)` for `x ≤ m` (or NaN), but 1 where `m` is `-inf` (so is `x`): a lane that
    /// has seen only `-inf` holds a zero sum, which that 1 leaves zero. `+inf − +inf` stays
    /// NaN, as in the interpreter's sum.
    fn exp_relative(&self, x: V<'ctx>, m: V<'ctx>, d: DType) -> R<V<'ctx>> {
        let g = self.g;
        let diff = g.binary(BinOp::Sub, x, m, d)?;
        let ex = g.func(Func::Exp, &[diff], &[d], d)?;
        let one = g.c_like(ex, g.konst(crate::ir::instance::Scalar::F(1.0), d));
        let ninf = g.c_like(ex, g.identity(Reduction::Max, d)?);
        Ok(g.select(g.fcmp(FP::OEQ, m, ninf), one, ex))
    }

    /// `(m, s)` from the running `[M, S_1 … S_u]`: the lanes' max, and their sums rescaled to
    /// it; NaN for a row of `-inf`, as the interpreter's `e^(−inf − −inf)`.
    fn online_finish(&self, acc: &[V<'ctx>], d: DType) -> R<(V<'ctx>, V<'ctx>)> {
        let g = self.g;
        let m = g.hreduce(Reduction::Max, acc[0], d)?;
        let mut s = acc[1];
        for &x in &acc[2..] {
            s = g.binary(BinOp::Add, s, x, d)?;
        }
        let scale = self.exp_relative(acc[0], g.splat(m), d)?;
        let s = g.hreduce(Reduction::Sum, g.binary(BinOp::Mul, s, scale, d)?, d)?;
        let ninf = g.identity(Reduction::Max, d)?;
        let nan = g.konst(crate::ir::instance::Scalar::F(f64::NAN), d);
        let s = g.select(g.fcmp(FP::OEQ, m, ninf), nan, s);
        Ok((m, s))
    }
}
