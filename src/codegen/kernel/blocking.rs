//! Register blocking: a statement's lane variable in panels of up to 4 vectors, times a block
//! of rows of the variable whose loads are shared, with a masked partial panel at the edge.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

/// A packed panel (reduction points × panel width) larger than this is narrowed to 2 vectors,
/// so that it stays in L2 while every row block streams it (a K-dominant matmul, a conv over
/// 512 channels).
const PANEL_BYTES: i64 = 512 << 10;

/// Vectors per lane panel of a reduction without row blocking: 16 accumulators, so each
/// reduction step reads a 1 KiB run (f32) of the streamed operand, not 128 bytes.
const STREAM_VECTORS: i64 = 16;

/// A reduction over at most this many points (an outer product, K = 1) does too little work
/// per output point to pay for row blocking and packing: the output's writes dominate, and
/// lane panels down columns would write each row in short pieces.
const TINY_REDUCTION: i64 = 8;

/// A block variable with at most this many values is blocked whole and not packed.
const FEW_ROWS: i64 = 4;

/// Vector accumulators of a register block.
const ACCUMULATORS: i64 = 16;

/// The register tile of a blocked statement: lane variable `j` in panels of `u` vectors, block
/// variable `i` in blocks of `rows`.
#[derive(Clone, Copy)]
struct Tile {
    j: usize,
    u: i64,
    i: usize,
    rows: i64,
    /// Whether the reused operand is packed (not when too few rows reuse a panel).
    pack: bool,
}

/// One panel of lanes: lane variable `j` in `u` vectors from `j0`, only the first `rem`
/// lanes of them when given (the partial last panel).
#[derive(Clone, Copy)]
struct Panel<'ctx> {
    j: usize,
    u: i64,
    j0: IntValue<'ctx>,
    rem: Option<IntValue<'ctx>>,
}

/// Rows of a register block of `u` vectors per row: 16 accumulators (4 × 4, or 2 × 8).
fn block_rows(u: i64) -> i64 {
    (16 / u).clamp(1, 8)
}

impl<'ctx> K<'_, '_, 'ctx> {
    /// Statement `st` vectorised along lane variable `j` (of its loop variables `lv`): in lane
    /// panels, times register blocks of rows of a block variable when it reduces and has one.
    pub(super) fn lanes(&mut self, st: &CStmt, lv: &[usize], j: usize, red: bool) -> R<()> {
        let inst = self.inst;
        let w = self.g.w as i64;
        let ej = inst.extent(j);
        let (u, block) = if red {
            let u = self.panel_vectors(st, j);
            let tiny = self.reduce_points(&st.value) <= TINY_REDUCTION;
            match self.block_var(st, lv, j, u) {
                Some(i) if !tiny => (u, Some(i)),
                // No rows to reuse a panel and rows wider than the registers (a row vector
                // times a wide matrix): accumulators in memory, several rows streamed.
                _ if self.streamed(st, j, TINY_REDUCTION).is_some() => {
                    let r = self.streamed(st, j, TINY_REDUCTION).expect("checked");
                    let outer: Vec<usize> = lv.iter().copied().filter(|&v| v != j).collect();
                    return self.stream(st, &outer, j, &r);
                }
                // No rows to reuse a panel (a row vector times a matrix), or too little work
                // per point to pay for a panel (an outer product): no packing, and wide
                // panels along whole output rows, so each step streams a long contiguous run.
                _ => (((ej + w - 1) / w).clamp(1, STREAM_VECTORS), None),
            }
        } else {
            (if ej >= 2 * w { 2 } else { 1 }, None)
        };
        // Few rows: all of them in one register block, each step's wide run of the reused
        // operand read once from memory and used by every row, with no packing pass (unless
        // a load strides along the lanes: a transposed operand is gathered into the panel).
        let few = block.is_some_and(|i| inst.extent(i) <= FEW_ROWS)
            && self
                .loads_of(&st.value)
                .iter()
                .all(|a| matches!(a.coeff(j), 0 | 1));
        let u = if few {
            let r = block.map_or(1, |i| inst.extent(i));
            (ACCUMULATORS / r).min((ej + w - 1) / w).max(1)
        } else {
            u
        };
        let rows = block.map_or(1, |i| block_rows(u).min(inst.extent(i)));
        let outer: Vec<usize> = lv
            .iter()
            .copied()
            .filter(|&v| v != j && Some(v) != block)
            .collect();
        match block {
            None => self.point_loops(&outer, &mut |k| k.row_block(st, j, u)),
            Some(i) => {
                let pack = !few;
                self.panels(
                    st,
                    Tile {
                        j,
                        u,
                        i,
                        rows,
                        pack,
                    },
                    &outer,
                )
            }
        }
    }

    /// Vectors per lane panel of reduction statement `st` vectorised along `j`: up to 4, or 2
    /// when a 4-vector panel of its reduction would outgrow [`PANEL_BYTES`].
    fn panel_vectors(&self, st: &CStmt, j: usize) -> i64 {
        let w = self.g.w as i64;
        let u = ((self.inst.extent(j) + w - 1) / w).clamp(1, 4);
        let points = self.reduce_points(&st.value);
        if u > 2 && points * u * w * st.value.dtype.size_bytes() as i64 > PANEL_BYTES {
            2
        } else {
            u
        }
    }

    /// The largest number of points of a top-level reduction in `e`.
    fn reduce_points(&self, e: &CExpr) -> i64 {
        match &e.kind {
            CKind::Reduce { vars, .. } => vars.iter().map(|&v| self.inst.extent(v)).product(),
            CKind::Call(_, a) => a.iter().map(|x| self.reduce_points(x)).max().unwrap_or(0),
            CKind::Unary(_, a) => self.reduce_points(a),
            CKind::Binary(_, a, b) => self.reduce_points(a).max(self.reduce_points(b)),
            _ => 0,
        }
    }

    /// A register-blocked statement: for every point of the `outer` variables, the lane
    /// variable `j` in panels of `u` vectors (so a panel of the reused operand stays in
    /// cache), and for each panel every value of the block variable `i`, `rows` at a time.
    /// When no packed operand depends on an `outer` variable (a conv's filter, vectorised
    /// along output channels, does not depend on the output row), the panels go outermost
    /// instead, so each is packed once per task chunk, not once per outer point.
    ///
    /// Operands of the reduction that vary along `j` but not along `i` (matmul's `b[k, j]`)
    /// are *packed*: for each panel they are first copied into a contiguous buffer of
    /// `reduction points × panel width` elements, so the inner loop streams them
    /// sequentially instead of striding across rows (which thrashes cache sets and TLBs).
    fn panels(&mut self, st: &CStmt, t: Tile, outer: &[usize]) -> R<()> {
        let Tile { j, u, i, rows, .. } = t;
        let g = self.g;
        let (lo, hi) = (self.lo_of(j), self.hi_of(j));
        let jb = u * g.w as i64;
        let packs = if rows > 1 && t.pack {
            self.pack_candidates(&st.value, j, i)
        } else {
            vec![]
        };
        let hoist = !packs.is_empty()
            && packs.iter().all(|(src, index, _, _)| {
                let a = self.lin(src, index);
                outer.iter().all(|&v| a.coeff(v) == 0)
            });
        if !hoist && !outer.is_empty() {
            // Loop over the outer variables a packed operand moves with (a grouped conv's
            // group); the others stay inside the panels, which are packed once per point of
            // the former (a group's filter serves all its positions).
            let (dep, free): (Vec<usize>, Vec<usize>) = outer.iter().copied().partition(|&v| {
                packs.is_empty()
                    || packs
                        .iter()
                        .any(|(src, index, _, _)| self.lin(src, index).coeff(v) != 0)
            });
            return self.point_loops(&dep, &mut |k| k.panels(st, t, &free));
        }
        if hoist {
            let tile = Shape { j, u, i, rows };
            if let Some(row) = self.row_operand(st, &packs, tile, outer) {
                return self.implicit(st, tile, outer, packs, row);
            }
        }
        let packs = self.alloc_packs(packs, jb);
        self.lane_blocks(lo, hi, jb, &mut |k, j0, rem| {
            k.pack(&packs, j, u, j0, rem)?;
            k.point_loops(outer, &mut |k| k.rows_at(st, t, j0, rem))?;
            k.packed.clear();
            Ok(())
        })?;
        for p in packs {
            self.free(p.ptr);
        }
        Ok(())
    }

    /// A buffer of `reduction points × jb` elements for each operand of `packs`.
    pub(super) fn alloc_packs(&mut self, packs: Vec<PackCand>, jb: i64) -> Vec<Packed<'ctx>> {
        let g = self.g;
        packs
            .into_iter()
            .map(|(src, index, rvars, dtype)| {
                let points: i64 = rvars.iter().map(|&v| self.inst.extent(v)).product();
                let p = self.malloc_or_fail(points * jb * dtype.size_bytes() as i64);
                Packed {
                    src,
                    index,
                    rvars,
                    ptr: ptr::cast(g.b, p, g.mty(dtype)),
                    width: jb,
                    dtype,
                }
            })
            .collect()
    }

    /// The lane variable from `lo` to `hi` in blocks of `jb` lanes: `f(block start, None)`
    /// for every full block, then `f(start, Some(lanes left))` for a partial last block.
    pub(super) fn lane_blocks(
        &mut self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        jb: i64,
        f: &mut BlockBody<'_, 'ctx, Self>,
    ) -> R<()> {
        let g = self.g;
        let full = self.round_down(lo, hi, jb);
        let loops = Loops { g, f: self.loops.f };
        loops.counted(self, lo, full, jb, vec![], &mut |k, j0, _| {
            f(k, j0, None)?;
            Ok(vec![])
        })?;
        let tail =
            g.b.build_int_compare(IntPredicate::SLT, full, hi, "")
                .expect("positioned");
        loops.when(self, tail, &mut |k| {
            let rem = k.g.b.build_int_sub(hi, full, "").expect("positioned");
            f(k, full, Some(rem))
        })
    }

    /// `u` groups of vector lanes starting at `j0`, `j0 + w`, ... (`slot` 0 to `u - 1`),
    /// masked to the first `rem` lanes when given; `over` binds the other varying variables.
    pub(super) fn lane_groups(
        &self,
        over: &[(usize, IntValue<'ctx>)],
        u: i64,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> Vec<Group<'ctx>> {
        let g = self.g;
        let w = g.w as i64;
        (0..u)
            .map(|s| Group {
                over: over.to_vec(),
                lane_base: Some(
                    g.b.build_int_add(j0, g.i64c(s * w), "")
                        .expect("positioned"),
                ),
                mask: rem.map(|rem| {
                    let idx = g.bin(Op::Add, g.iota().into(), g.splat(g.i64c(s * w).into()));
                    g.icmp(IntPredicate::SLT, idx, g.splat(rem.into()))
                        .into_vector_value()
                }),
                slot: s,
                row: 0,
            })
            .collect()
    }

    /// `lo + (hi - lo) / step * step`.
    pub(super) fn round_down(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        step: i64,
    ) -> IntValue<'ctx> {
        let b = self.g.b;
        let n = b.build_int_sub(hi, lo, "").expect("positioned");
        let nb = b
            .build_int_signed_div(n, self.g.i64c(step), "")
            .expect("positioned");
        let span = b
            .build_int_mul(nb, self.g.i64c(step), "")
            .expect("positioned");
        b.build_int_add(lo, span, "").expect("positioned")
    }

    /// Every value of `i`, `rows` at a time, for the panel starting at `j0`; the rows left
    /// over run as edge tiles of `rows / 2`, `rows / 4`, ... rows (at most one each), then
    /// single rows.
    fn rows_at(
        &mut self,
        st: &CStmt,
        t: Tile,
        j0: IntValue<'ctx>,
        rem: Option<IntValue<'ctx>>,
    ) -> R<()> {
        let Tile { j, u, i, rows, .. } = t;
        let g = self.g;
        let (lo, hi) = (self.lo_of(i), self.hi_of(i));
        let loops = Loops { g, f: self.loops.f };
        let mut start = lo;
        let mut r = rows;
        while r > 1 {
            let full = self.round_down(start, hi, r);
            loops.counted(self, start, full, r, vec![], &mut |k, i0, _| {
                let vals: Vec<IntValue> = (0..r)
                    .map(|x| {
                        k.g.b
                            .build_int_add(i0, k.g.i64c(x), "")
                            .expect("positioned")
                    })
                    .collect();
                k.lane_group(st, Panel { j, u, j0, rem }, Some((i, &vals)))?;
                Ok(vec![])
            })?;
            start = full;
            r /= 2;
        }
        loops.counted(self, start, hi, 1, vec![], &mut |k, iv, _| {
            k.lane_group(st, Panel { j, u, j0, rem }, Some((i, &[iv])))?;
            Ok(vec![])
        })?;
        Ok(())
    }

    /// Whether lanes along `j` get register blocking with every load that strides along `j`
    /// packed (A·Bᵀ through a transposed view): then vectorising along `j` beats a dot
    /// product per point along the contiguous reduction.
    pub(super) fn packs_strided(&self, st: &CStmt, lv: &[usize], j: usize) -> bool {
        let u = self.panel_vectors(st, j);
        let Some(i) = self.block_var(st, lv, j, u) else {
            return false;
        };
        if block_rows(u).min(self.inst.extent(i)) < 2 {
            return false;
        }
        let packs = self.pack_candidates(&st.value, j, i);
        let mut all = !packs.is_empty();
        visit_loads(&st.value, &mut |src, index| {
            let c = self.lin(&src, index).coeff(j);
            if c != 0 && c != 1 && !packs.iter().any(|p| p.0 == src && p.1 == index) {
                all = false;
            }
        });
        all
    }

    /// The variable to block rows over: the one whose blocking reuses loads best (loads not
    /// depending on it are shared by every row of the block).
    fn block_var(&self, st: &CStmt, lv: &[usize], j: usize, u: i64) -> Option<usize> {
        let loads = self.loads_of(&st.value);
        let mut best: Option<(i64, usize)> = None;
        for &v in lv {
            if v == j || self.inst.extent(v) < 2 {
                continue;
            }
            if loads.iter().all(|a| a.coeff(v) != 0) {
                continue; // nothing to reuse
            }
            let cost: i64 = loads
                .iter()
                .filter(|a| a.coeff(v) != 0)
                .map(|a| match a.coeff(j) {
                    0 => 1,
                    1 => u,
                    _ => 4 * u, // a gather per row (packed instead when another var is blocked)
                })
                .sum();
            if best.is_none_or(|(c, _)| cost <= c) {
                best = Some((cost, v));
            }
        }
        best.map(|b| b.1)
    }

    /// One panel row: the lane variable `j` in steps of `u` vectors, then a masked tail.
    fn row_block(&mut self, st: &CStmt, j: usize, u: i64) -> R<()> {
        let (lo, hi) = (self.lo_of(j), self.hi_of(j));
        let jb = u * self.g.w as i64;
        self.lane_blocks(lo, hi, jb, &mut |k, j0, rem| {
            k.lane_group(st, Panel { j, u, j0, rem }, None)
        })
    }

    /// Statement `st` at panel `p`, for each of the `rows` values of block variable `i` when
    /// given.
    fn lane_group(
        &mut self,
        st: &CStmt,
        p: Panel<'ctx>,
        rows: Option<(usize, &[IntValue<'ctx>])>,
    ) -> R<()> {
        let row_over: Vec<Vec<(usize, IntValue)>> = match rows {
            Some((i, rows)) => rows.iter().map(|&r| vec![(i, r)]).collect(),
            None => vec![vec![]],
        };
        let groups = row_over
            .iter()
            .flat_map(|over| self.lane_groups(over, p.u, p.j0, p.rem))
            .collect();
        let cx = Cx {
            lane: Some(p.j),
            groups,
        };
        self.memo.clear();
        let vals = self.eval(&st.value, &cx)?;
        self.store(st, vals, st.value.dtype, &cx);
        Ok(())
    }
}
