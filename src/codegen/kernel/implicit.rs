//! Implicit GEMM for a convolution vectorised along its output channels (the lane variable,
//! chosen when the output rows are narrower than two vectors: a 7×7, 14×14 or 28×28 map).
//! For a grouped conv, each group is one such GEMM over the chunk's positions, its filter
//! packed once per group.
//!
//! The GEMM's rows are the output positions of the task's chunk (the block variable and the
//! outer variables, flattened row-major), its columns the output channels, its depth the
//! reduction points (input channels × window). The input's patches are gathered once per
//! chunk into a buffer of *position tiles*, each `reduction points × tile rows` elements with
//! the folded pad's zeros written while gathering (no im2col of the whole input, no pad mask in
//! the inner loop); every lane panel of the packed filter then streams the tiles, reading one
//! contiguous scalar per row and reduction point. A tile is a register block of `rows`
//! flattened positions, so a 7×7 map is 49 positions in blocks of 8 rather than 7 output rows
//! in blocks of 4 + 2 + 1. The values are the direct path's: each output point still sums its
//! reduction in index order.

// The kernel's state, types and imports (`super`), plus what only this file uses.
use super::*;

/// The packed input of a chunk larger than this (bytes, at the largest chunk: the whole
/// output) is not built; the direct path runs instead.
const IMPLICIT_BYTES: i64 = 8 << 20;

/// A convolution whose output rows are narrower than this many vectors runs along its output
/// channels (as an implicit GEMM when its patches fit), not along its rows: a 28-wide row is
/// one full vector and a 12-lane masked one of 16 f32 lanes.
pub(super) const CONV_ROW_VECTORS: i64 = 2;

thread_local! {
    /// Kernels this thread compiled with an implicit GEMM, and as dot products on a tiny map.
    static EMITTED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many kernels the calling thread has compiled as an implicit GEMM, and as a deep conv's
/// dot products on a tiny map (the JIT compiles on the caller's thread; tests count which
/// cases took each path).
pub fn implicit_gemms() -> (usize, usize) {
    EMITTED.with(|c| c.get())
}

/// The input gathered into position tiles, and the tile being computed.
#[derive(Clone)]
pub(super) struct RowPack<'ctx> {
    src: Src,
    index: Vec<Affine>,
    rvars: Vec<usize>,
    ptr: PointerValue<'ctx>,
    /// The current tile: its element offset in the buffer and its rows.
    tile: Option<(IntValue<'ctx>, i64)>,
    /// The flattened reduction point, while a tile's reduction runs as one loop.
    flat: Option<IntValue<'ctx>>,
    /// For a deep conv on a tiny map: the position variables of a buffer laid out one row of
    /// reduction points per position (see [`K::tiny_map_rows`]), not in tiles.
    rows_of: Option<Vec<usize>>,
}

/// Whether `e` reads a variable's value (not only through loads).
fn reads_var(e: &CExpr) -> bool {
    match &e.kind {
        CKind::Var(_) => true,
        CKind::Const(_) | CKind::Load { .. } => false,
        CKind::Gather(_) => true,
        CKind::Reduce { body, .. } => reads_var(body),
        CKind::Call(_, a) => a.iter().any(reads_var),
        CKind::Unary(_, a) => reads_var(a),
        CKind::Binary(_, a, b) => reads_var(a) || reads_var(b),
    }
}

/// The loads inside the top-level reductions of `e`, with each reduction's variables; `None`
/// when a reduction nests another or gathers.
fn reduction_loads(e: &CExpr, out: &mut Vec<(PackCand, usize)>, nred: &mut usize) -> Option<()> {
    match &e.kind {
        CKind::Reduce { vars, body, .. } => {
            *nred += 1;
            let mut stack = vec![&**body];
            while let Some(b) = stack.pop() {
                match &b.kind {
                    CKind::Load { src, index, .. } => {
                        out.push(((src.clone(), index.clone(), vars.clone(), b.dtype), *nred))
                    }
                    CKind::Reduce { .. } | CKind::Gather(_) => return None,
                    CKind::Call(_, a) => stack.extend(a.iter()),
                    CKind::Unary(_, a) => stack.push(a),
                    CKind::Binary(_, a, c) => stack.extend([&**a, &**c]),
                    CKind::Const(_) | CKind::Var(_) => {}
                }
            }
            Some(())
        }
        CKind::Call(_, a) => a.iter().try_for_each(|x| reduction_loads(x, out, nred)),
        CKind::Unary(_, a) => reduction_loads(a, out, nred),
        CKind::Binary(_, a, c) => {
            reduction_loads(a, out, nred)?;
            reduction_loads(c, out, nred)
        }
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } | CKind::Gather(_) => Some(()),
    }
}

impl<'ctx> K<'_, '_, 'ctx> {
    /// The input a convolution's implicit GEMM gathers into position tiles: the one load of
    /// `st`'s single reduction that is not a packed panel (`packs`, the filter) and moves
    /// with the block variable but not the lanes, when it is a float and its packed size
    /// stays under [`IMPLICIT_BYTES`].
    pub(super) fn row_operand(
        &self,
        st: &CStmt,
        packs: &[PackCand],
        t: Shape,
        outer: &[usize],
    ) -> Option<PackCand> {
        let mut loads = Vec::new();
        let mut nred = 0;
        reduction_loads(&st.value, &mut loads, &mut nred)?;
        let rvars = loads.first()?.0 .2.clone();
        if nred != 1 || packs.iter().any(|p| p.2 != rvars) {
            return None;
        }
        let mut rest = loads
            .into_iter()
            .map(|l| l.0)
            .filter(|l| !packs.iter().any(|p| p.0 == l.0 && p.1 == l.1));
        let row = rest.next()?;
        if rest.any(|l| l.0 != row.0 || l.1 != row.1) {
            return None;
        }
        let a = self.lin(&row.0, &row.1);
        if a.coeff(t.j) != 0 || a.coeff(t.i) == 0 || !matches!(row.3, DType::F32 | DType::F64) {
            return None;
        }
        let positions: i64 = outer
            .iter()
            .chain([&t.i])
            .map(|&v| self.inst.extent(v))
            .product();
        let points: i64 = row.2.iter().map(|&v| self.inst.extent(v)).product();
        (positions * points * row.3.size_bytes() as i64 <= IMPLICIT_BYTES).then_some(row)
    }

    /// Statement `st` as an implicit GEMM (see the module docs): the input `row` gathered into
    /// position tiles once, then for every lane panel the filter (`packs`) packed and every
    /// tile computed.
    pub(super) fn implicit(
        &mut self,
        st: &CStmt,
        t: Shape,
        outer: &[usize],
        packs: Vec<PackCand>,
        row: PackCand,
    ) -> R<()> {
        EMITTED.with(|c| c.set((c.get().0 + 1, c.get().1)));
        let g = self.g;
        let pos: Vec<usize> = outer.iter().copied().chain([t.i]).collect();
        let depth: i64 = row.2.iter().map(|&v| self.inst.extent(v)).product();
        let (n, a) = self.gather_input(row, &pos, t.rows, false)?;
        let jb = t.u * g.w as i64;
        let packs = self.alloc_packs(packs, jb);
        let (lo, hi) = (self.lo_of(t.j), self.hi_of(t.j));
        self.lane_blocks(lo, hi, jb, &mut |k, j0, rem| {
            k.pack(&packs, t.j, t.u, j0, rem)?;
            k.flat_tiles(n, t.rows, &mut |k, s, r| {
                let base = k.g.b.build_int_mul(s, k.g.i64c(depth), "");
                let rp = k.rowpack.as_mut().expect("set above");
                rp.tile = Some((base.expect("positioned"), r));
                k.tile(st, &pos, t, (j0, rem), s, r)
            })?;
            k.rowpack.as_mut().expect("set above").tile = None;
            k.packed.clear();
            Ok(())
        })?;
        self.rowpack = None;
        for p in packs {
            self.free(p.ptr);
        }
        self.free(a);
        Ok(())
    }

    /// Gathers input `x` at every position of the chunk (variables `pos`, flattened) into a
    /// new buffer, in tiles of `rows` positions (`by_rows`: one row of reduction points per
    /// position instead), and makes it the kernel's gathered input; returns the number of
    /// positions and the buffer (for `free`).
    fn gather_input(
        &mut self,
        x: PackCand,
        pos: &[usize],
        rows: i64,
        by_rows: bool,
    ) -> R<(IntValue<'ctx>, PointerValue<'ctx>)> {
        let g = self.g;
        let b = g.b;
        let mut n = g.i64c(1);
        for &v in pos {
            let e = b.build_int_sub(self.hi_of(v), self.lo_of(v), "");
            n = b
                .build_int_mul(n, e.expect("positioned"), "")
                .expect("positioned");
        }
        let (src, index, rvars, d) = x;
        let depth: i64 = rvars.iter().map(|&v| self.inst.extent(v)).product();
        let bytes = b.build_int_mul(n, g.i64c(depth * d.size_bytes() as i64), "");
        let a = self.malloc_bytes(bytes.expect("positioned"));
        let rp = RowPack {
            src,
            index,
            rvars,
            ptr: ptr::cast(b, a, g.mty(d)),
            tile: None,
            flat: None,
            rows_of: by_rows.then(|| pos.to_vec()),
        };
        self.flat_tiles(n, rows, &mut |k, s, r| k.gather_tile(&rp, pos, d, s, r))?;
        self.rowpack = Some(rp);
        Ok((n, a))
    }

    /// Positions `0..n` in tiles of `rows`, the rest in tiles of `rows / 2`, `rows / 4`, ...
    /// (at most one each) and single positions: `f(first position, tile rows)`.
    fn flat_tiles(
        &mut self,
        n: IntValue<'ctx>,
        rows: i64,
        f: &mut dyn FnMut(&mut Self, IntValue<'ctx>, i64) -> R<()>,
    ) -> R<()> {
        let g = self.g;
        let loops = Loops { g, f: self.loops.f };
        let mut start = g.i64c(0);
        let mut r = rows;
        while r >= 1 {
            let full = if r > 1 {
                self.round_down(start, n, r)
            } else {
                n
            };
            loops.counted(self, start, full, r, vec![], &mut |k, s, _| {
                f(k, s, r)?;
                Ok(vec![])
            })?;
            start = full;
            r /= 2;
        }
        Ok(())
    }

    /// The values of variables `pos` at flattened position `q` of the chunk (row-major, the
    /// last variable fastest).
    fn position(&self, pos: &[usize], q: IntValue<'ctx>) -> Vec<(usize, IntValue<'ctx>)> {
        let b = self.g.b;
        let mut q = q;
        let mut out = Vec::new();
        for (x, &v) in pos.iter().enumerate().rev() {
            let lo = self.lo_of(v);
            let e = b.build_int_sub(self.hi_of(v), lo, "").expect("positioned");
            let at = if x == 0 {
                q
            } else {
                b.build_int_unsigned_rem(q, e, "").expect("positioned")
            };
            out.push((v, b.build_int_add(lo, at, "").expect("positioned")));
            if x > 0 {
                q = b.build_int_unsigned_div(q, e, "").expect("positioned");
            }
        }
        out.reverse();
        out
    }

    /// The tile of `r` positions from `s`: every reduction point's input values (zeros in
    /// the pad), row after row, at element `s · depth` of the buffer.
    fn gather_tile(
        &mut self,
        rp: &RowPack<'ctx>,
        pos: &[usize],
        d: DType,
        s: IntValue<'ctx>,
        r: i64,
    ) -> R<()> {
        let g = self.g;
        let groups = (0..r)
            .map(|x| {
                let q = g.b.build_int_add(s, g.i64c(x), "").expect("positioned");
                Group {
                    over: self.position(pos, q),
                    lane_base: None,
                    mask: None,
                    slot: 0,
                    row: x,
                }
            })
            .collect();
        let cx = Cx { lane: None, groups };
        let depth: i64 = rp.rvars.iter().map(|&v| self.inst.extent(v)).product();
        let base = g.b.build_int_mul(s, g.i64c(depth), "").expect("positioned");
        let ety = g.mty(d);
        self.reduce_loops(&rp.rvars, vec![], &mut |k, _| {
            let g = k.g;
            let vals = k.load(&rp.src, &rp.index, d, &cx);
            // Tiles: `[point][row]`; rows: `[row][point]`.
            let (step, point_step) = match rp.rows_of {
                None => (1, r),
                Some(_) => (depth, 1),
            };
            let at =
                g.b.build_int_mul(k.point_index(&rp.rvars), g.i64c(point_step), "");
            let at = g.b.build_int_add(base, at.expect("positioned"), "");
            let at = at.expect("positioned");
            for (x, v) in vals.into_iter().enumerate() {
                let off = g.b.build_int_add(at, g.i64c(x as i64 * step), "");
                let off = off.expect("positioned");
                ptr::store(g.b, ptr::element(g.b, rp.ptr, ety, off), v);
            }
            Ok(vec![])
        })?;
        Ok(())
    }

    /// The reduction over `vars` of a tile as one loop over its flattened points (both of
    /// its operands are packed by flattened point, so no reduction variable is bound), when
    /// `vars` are the gathered input's.
    pub(super) fn tile_reduce(
        &mut self,
        kind: Reduction,
        vars: &[usize],
        body: &CExpr,
        d: DType,
        cx: &Cx<'ctx>,
    ) -> Option<R<Vec<V<'ctx>>>> {
        let rp = self.rowpack.as_ref()?;
        if rp.tile.is_none() || rp.rvars != vars || reads_var(body) {
            return None;
        }
        let g = self.g;
        let depth: i64 = vars.iter().map(|&v| self.inst.extent(v)).product();
        let vec = cx.lane.is_some_and(|l| self.depends(body, &[l]));
        let id = match g.identity(kind, d) {
            Ok(id) => id,
            Err(e) => return Some(Err(e)),
        };
        let init = vec![if vec { g.splat(id) } else { id }; cx.groups.len()];
        let loops = Loops { g, f: self.loops.f };
        let r = loops.counted(
            self,
            g.i64c(0),
            g.i64c(depth),
            1,
            init,
            &mut |k, iv, acc| {
                k.rowpack.as_mut().expect("checked").flat = Some(iv);
                k.accumulate(kind, body, d, &acc, cx)
            },
        );
        self.rowpack.as_mut().expect("checked").flat = None;
        Some(r)
    }

    /// The flattened reduction point of a tile's single loop (see [`K::tile_reduce`]) when
    /// `rvars` are its variables.
    pub(super) fn flat_point(&self, rvars: &[usize]) -> Option<IntValue<'ctx>> {
        let rp = self.rowpack.as_ref()?;
        rp.flat.filter(|_| rp.rvars == rvars)
    }

    /// The load of the gathered input at the current reduction point for each group (its
    /// row of the current tile), when `src[index]` is the gathered input.
    pub(super) fn tile_load(
        &self,
        src: &Src,
        index: &[Affine],
        d: DType,
        cx: &Cx<'ctx>,
    ) -> Option<Vec<V<'ctx>>> {
        let rp = self.rowpack.as_ref()?;
        if self.depth == 0 || rp.src != *src || rp.index != index {
            return None;
        }
        if let Some(pos) = &rp.rows_of {
            return Some(self.row_load(rp, pos, d, cx));
        }
        let (base, r) = rp.tile?;
        let g = self.g;
        let ety = g.mty(d);
        let at =
            g.b.build_int_mul(self.point_index(&rp.rvars), g.i64c(r), "");
        let at = g.b.build_int_add(base, at.expect("positioned"), "");
        let at = at.expect("positioned");
        Some(
            cx.groups
                .iter()
                .map(|grp| {
                    let off =
                        g.b.build_int_add(at, g.i64c(grp.row), "")
                            .expect("positioned");
                    ptr::load(g.b, ety, ptr::element(g.b, rp.ptr, ety, off))
                })
                .collect(),
        )
    }

    /// One tile: `r` positions from `s` times the lane panel at `j0` (`rem` lanes left in a
    /// partial panel).
    fn tile(
        &mut self,
        st: &CStmt,
        pos: &[usize],
        t: Shape,
        (j0, rem): (IntValue<'ctx>, Option<IntValue<'ctx>>),
        s: IntValue<'ctx>,
        r: i64,
    ) -> R<()> {
        let g = self.g;
        let mut groups = Vec::new();
        for x in 0..r {
            let q = g.b.build_int_add(s, g.i64c(x), "").expect("positioned");
            let over = self.position(pos, q);
            groups.extend(
                self.lane_groups(&over, t.u, j0, rem)
                    .into_iter()
                    .map(|grp| Group { row: x, ..grp }),
            );
        }
        let cx = Cx {
            lane: Some(t.j),
            groups,
        };
        self.memo.clear();
        let vals = self.eval(&st.value, &cx)?;
        self.store(st, vals, st.value.dtype, &cx);
        Ok(())
    }
}

/// Positions of a map this small or smaller make a deep conv's filter too little reused to
/// pack it (see [`K::tiny_map_rows`]).
const TINY_MAP: i64 = 64;

impl<'ctx> K<'_, '_, 'ctx> {
    /// A deep conv on a tiny map (`y[n, o, p] = sum[c](x[n, c, p] · w[o, c])` with at most
    /// [`TINY_MAP`] positions and rows narrower than a vector, a 2×4 map of 384 channels): the input's rows gathered once,
    /// one row of input channels per position, then each output point a dot product along
    /// the channels, contiguous in both the filter and the gathered rows, 4 positions at a
    /// time sharing the filter's loads (the documented reassociation of a vectorised
    /// reduction). Packing the whole filter into panels along the output channels, as the
    /// register-blocked path does, would cost more than its 8 uses. Returns whether it
    /// applied.
    pub(super) fn tiny_map_rows(&mut self, st: &CStmt, lv: &[usize]) -> R<bool> {
        let Some((x, pos, i)) = self.tiny_map_input(st, lv) else {
            return Ok(false);
        };
        EMITTED.with(|c| c.set((c.get().0, c.get().1 + 1)));
        // (Any tile size: the rows layout does not depend on it.)
        let (_, a) = self.gather_input(x, &pos, 4, true)?;
        self.stream_rows(st, lv, i)?;
        self.rowpack = None;
        self.free(a);
        Ok(true)
    }

    /// For [`K::tiny_map_rows`]: the input (strided along the single reduction variable),
    /// its position variables and the one `stream_rows` blocks, when `st` qualifies.
    fn tiny_map_input(&self, st: &CStmt, lv: &[usize]) -> Option<(PackCand, Vec<usize>, usize)> {
        let mut loads = Vec::new();
        let mut nred = 0;
        reduction_loads(&st.value, &mut loads, &mut nred)?;
        let (first, _) = loads.first()?;
        let rvars = first.2.clone();
        if nred != 1 || rvars.len() != 1 || loads.len() != 2 {
            return None;
        }
        let c = rvars[0];
        let lin: Vec<Affine> = loads.iter().map(|l| self.lin(&l.0 .0, &l.0 .1)).collect();
        let (wi, xi) = if lin[0].coeff(c) == 1 { (0, 1) } else { (1, 0) };
        let (wl, xl) = (&lin[wi], &lin[xi]);
        let x = loads[xi].0.clone();
        if wl.coeff(c) != 1
            || matches!(xl.coeff(c), 0 | 1)
            || !matches!(x.3, DType::F32 | DType::F64)
        {
            return None;
        }
        let pos: Vec<usize> = lv.iter().copied().filter(|&v| xl.coeff(v) != 0).collect();
        let points: i64 = pos.iter().map(|&v| self.inst.extent(v)).product();
        let w = self.g.w as i64;
        if pos.is_empty() || pos.iter().any(|&v| wl.coeff(v) != 0) || points > TINY_MAP {
            return None;
        }
        if self.inst.extent(c) < 2 * w || reads_var(&st.value) {
            return None;
        }
        // Only where the output's rows are narrower than a vector (where lanes would run
        // along the filter's rows, packing it transposed), and not under
        // `--fp-contract=off`, which promises a contraction in the interpreter's order.
        let i = self.stream_rows_var(st, lv).filter(|i| pos.contains(i))?;
        (self.inst.extent(i) < w && self.g.contract).then_some((x, pos, i))
    }

    /// The gathered rows' values for each group: its position's row at the current
    /// reduction point (a vector of points when the lanes run along the reduction).
    fn row_load(&self, rp: &RowPack<'ctx>, pos: &[usize], d: DType, cx: &Cx<'ctx>) -> Vec<V<'ctx>> {
        let g = self.g;
        let b = g.b;
        let c = rp.rvars[0];
        let depth = self.inst.extent(c);
        let ety = g.mty(d);
        cx.groups
            .iter()
            .map(|grp| {
                let mut q = g.i64c(0);
                for &v in pos {
                    let lo = self.lo_of(v);
                    let e = b.build_int_sub(self.hi_of(v), lo, "").expect("positioned");
                    let at = b
                        .build_int_sub(self.var(v, grp), lo, "")
                        .expect("positioned");
                    let qe = b.build_int_mul(q, e, "").expect("positioned");
                    q = b.build_int_add(qe, at, "").expect("positioned");
                }
                let row = b.build_int_mul(q, g.i64c(depth), "").expect("positioned");
                let lane = cx.lane == Some(c);
                let point = match (lane, grp.lane_base) {
                    (true, Some(base)) => base,
                    _ => self.var(c, grp),
                };
                let point = b.build_int_sub(point, g.i64c(self.static_lo(c)), "");
                let off = b.build_int_add(row, point.expect("positioned"), "");
                let p = ptr::element(b, rp.ptr, ety, off.expect("positioned"));
                if lane {
                    g.vload(ety, p, grp.mask)
                } else {
                    ptr::load(b, ety, p)
                }
            })
            .collect()
    }
}
