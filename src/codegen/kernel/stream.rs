//! Reductions streamed along whole rows (issue 22): a statement vectorised along `j` with no
//! rows to block (a row vector × matrix, `c[0, j] = sum[k](x[0, k] * b[k, j])`) whose lane
//! range is wider than a register panel keeps the accumulators of a block of
//! [`BLOCK_LANES`] lanes in a stack buffer and adds [`STREAMS`] reduction points at a time into
//! it in one pass along the block. The streamed operand is read as `STREAMS` sequential runs
//! along its rows, where register panels step down its rows one short run per row (a new page
//! at every step, which the hardware prefetcher does not follow). Each point still accumulates
//! in index order, so the results are those of the register path. (Software prefetch of the
//! next points' runs was tried and cost CPU time without a measurable gain: the notes in
//! docs/benchmarks.md.)

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;
use crate::codegen::epilogue::has_reduce;

/// Lanes of a block of accumulators (16 KiB of f32). A whole row of up to this many lanes is
/// one block, so the [`STREAMS`] runs of a pass are whole consecutive rows and the matrix is
/// read in one sequential sweep; with blocks of 2,048 lanes a 4,096-lane row was read as two
/// 8 KiB runs a row apart, and 1×4096×4096 took 3.3–7.3 ms at 1 thread against 2.7 with
/// whole rows (docs/benchmarks.md, "Cold runs").
const BLOCK_LANES: i64 = 4096;

/// Reduction points whose rows are read together (independent sequential read streams).
const STREAMS: i64 = 4;

/// Vectors per step along a block.
const STEP_VECTORS: i64 = 4;

/// Lane ranges up to this many vectors wide stay in registers (`blocking`'s stream panels).
const REGISTER_VECTORS: i64 = 16;

impl<'ctx> K<'_, '_, 'ctx> {
    /// Top-level reductions of `e` (not those inside another reduction).
    pub(super) fn top_reduces<'e>(&self, e: &'e CExpr) -> Vec<&'e CExpr> {
        match &e.kind {
            CKind::Reduce { .. } => vec![e],
            CKind::Call(_, a) => a.iter().flat_map(|x| self.top_reduces(x)).collect(),
            CKind::Unary(_, a) => self.top_reduces(a),
            CKind::Binary(_, a, b) => {
                let mut out = self.top_reduces(a);
                out.extend(self.top_reduces(b));
                out
            }
            _ => vec![],
        }
    }

    /// The one top-level reduction of `st` (vectorised along `j`, no block variable) when it
    /// streams along whole rows: wider than [`REGISTER_VECTORS`] vectors, over one variable
    /// of more than `min_points` points, reading some operand contiguously along `j` that
    /// moves with the reduction, no load strided along `j`.
    pub(super) fn streamed(&self, st: &CStmt, j: usize, min_points: i64) -> Option<CExpr> {
        let w = self.g.w as i64;
        if self.inst.extent(j) <= REGISTER_VECTORS * w {
            return None;
        }
        let tops = self.top_reduces(&st.value);
        let first = *tops.first()?;
        if tops.iter().any(|t| *t != first) {
            return None;
        }
        let CKind::Reduce { kind, vars, body } = &first.kind else {
            return None;
        };
        let [r] = vars.as_slice() else { return None };
        if kind.is_arg()
            || first.dtype == DType::Bool
            || has_reduce(body)
            || self.inst.extent(*r) <= min_points
        {
            return None;
        }
        let loads = self.loads_of(body);
        let strided = loads.iter().any(|a| !matches!(a.coeff(j), 0 | 1));
        let streams = loads.iter().any(|a| a.coeff(j) == 1 && a.coeff(*r) != 0);
        (streams && !strided).then(|| first.clone())
    }

    /// Statement `st` along `j` at every point of the `outer` variables, its reduction `red`
    /// streamed (see the module docs).
    pub(super) fn stream(&mut self, st: &CStmt, outer: &[usize], j: usize, red: &CExpr) -> R<()> {
        let g = self.g;
        let aty = g.sty(red.dtype);
        // Room for 8-byte accumulators whatever the dtype.
        let buf = self.entry_alloca(BLOCK_LANES * 8);
        let buf = (ptr::cast(g.b, buf, aty), aty);
        self.point_loops(outer, &mut |k| {
            let (lo, hi) = (k.lo_of(j), k.hi_of(j));
            k.lane_blocks(lo, hi, BLOCK_LANES, &mut |k, b0, rem| {
                let n = rem.unwrap_or(k.g.i64c(BLOCK_LANES));
                let b1 = k.g.b.build_int_add(b0, n, "").expect("positioned");
                k.stream_block(st, j, red, buf, (b0, b1))
            })
        })
    }

    /// A 64-byte aligned stack buffer of `bytes`, allocated once in the entry block.
    fn entry_alloca(&self, bytes: i64) -> PointerValue<'ctx> {
        let g = self.g;
        let here = g.b.get_insert_block().expect("positioned");
        let entry = self
            .loops
            .f
            .get_first_basic_block()
            .expect("an entry block");
        match entry.get_first_instruction() {
            Some(i) => g.b.position_before(&i),
            None => g.b.position_at_end(entry),
        }
        let arr = g.cx.i8_type().array_type(bytes as u32);
        let a = g.b.build_alloca(arr, "stream").expect("positioned");
        if let Some(i) = a.as_instruction() {
            let _ = i.set_alignment(64);
        }
        g.b.position_at_end(here);
        a
    }

    /// Lanes `b0 .. b1` of `j`: accumulators set to the identity, every reduction point added
    /// `STREAMS` at a time, then the statement evaluated and stored.
    fn stream_block(
        &mut self,
        st: &CStmt,
        j: usize,
        red: &CExpr,
        buf: (PointerValue<'ctx>, BasicTypeEnum<'ctx>),
        (b0, b1): (IntValue<'ctx>, IntValue<'ctx>),
    ) -> R<()> {
        let g = self.g;
        let CKind::Reduce { kind, vars, body } = &red.kind else {
            unreachable!("a streamed reduction")
        };
        let (kind, r, d) = (*kind, vars[0], red.dtype);
        let id = g.splat(g.identity(kind, d)?);
        self.acc_steps(j, (b0, b1), buf, &mut |_, _, a| Ok(Some(vec![id; a.len()])))?;
        let (lo, hi) = self.inst.vars[r].range;
        let full = lo + (hi - lo) / STREAMS * STREAMS;
        let loops = Loops { g, f: self.loops.f };
        let add = |k: &mut Self, k0: IntValue<'ctx>, points: i64| {
            k.acc_steps(j, (b0, b1), buf, &mut |k, cx, mut acc| {
                k.depth += 1;
                for p in 0..points {
                    let kp =
                        k.g.b
                            .build_int_add(k0, k.g.i64c(p), "")
                            .expect("positioned");
                    k.env[r] = Some(kp);
                    acc = k.accumulate(kind, body, d, &acc, cx)?;
                }
                k.depth -= 1;
                Ok(Some(acc))
            })
        };
        loops.counted(
            self,
            g.i64c(lo),
            g.i64c(full),
            STREAMS,
            vec![],
            &mut |k, k0, _| {
                add(k, k0, STREAMS)?;
                Ok(vec![])
            },
        )?;
        if full < hi {
            add(self, g.i64c(full), hi - full)?;
        }
        self.acc_steps(j, (b0, b1), buf, &mut |k, cx, acc| {
            k.memo.clear();
            k.memo.push((red.clone(), cx.groups.len(), acc));
            let v = k.eval(&st.value, cx)?;
            k.store(st, v, st.value.dtype, cx);
            Ok(None)
        })
    }

    /// Lanes `b0 .. b1` of `j` in steps of [`STEP_VECTORS`] vectors (the last one masked):
    /// `f` gets the step's lanes and its accumulators from `buf` (of `aty`, indexed from
    /// `b0`), and returns the accumulators to store back, if any.
    #[allow(clippy::type_complexity)]
    fn acc_steps(
        &mut self,
        j: usize,
        (b0, b1): (IntValue<'ctx>, IntValue<'ctx>),
        (buf, aty): (PointerValue<'ctx>, BasicTypeEnum<'ctx>),
        f: &mut dyn FnMut(&mut Self, &Cx<'ctx>, Vec<V<'ctx>>) -> R<Option<Vec<V<'ctx>>>>,
    ) -> R<()> {
        let w = self.g.w as i64;
        self.lane_blocks(b0, b1, STEP_VECTORS * w, &mut |k, j0, rem| {
            let g = k.g;
            let cx = Cx {
                lane: Some(j),
                groups: k.lane_groups(&[], STEP_VECTORS, j0, rem),
            };
            let rel = g.b.build_int_sub(j0, b0, "").expect("positioned");
            let at: Vec<PointerValue> = (0..STEP_VECTORS)
                .map(|s| {
                    let o =
                        g.b.build_int_add(rel, g.i64c(s * w), "")
                            .expect("positioned");
                    ptr::element(g.b, buf, aty, o)
                })
                .collect();
            let acc = at.iter().map(|&p| g.vload(aty, p, None)).collect();
            if let Some(out) = f(k, &cx, acc)? {
                for (p, v) in at.into_iter().zip(out) {
                    g.vstore(p, v, None);
                }
            }
            Ok(())
        })
    }
}
