//! The view maps of the alias analysis on regions: which elements of each operand a region
//! of a view's result reads ([`pull_view`], backwards, what footprints are made of), and which
//! elements of the result read memory given those of its operands ([`push_backed`], forwards,
//! through constant padding). Concat, interleave and pad are cut into *pieces*, slices of the
//! result that are slices of one operand.

use super::*;

/// The union of possibly overlapping region lists over `shape`: each region loses what the
/// regions kept so far cover, and the disjoint result is compacted once at the end (a chain
/// of [`Regions::union`]s would compact the growing list at every step).
pub(super) fn union_all(shape: &[i64], parts: Vec<Regions>) -> Res<Regions> {
    let mut parts = parts.into_iter().filter(|p| !p.is_empty());
    let Some(first) = parts.next() else {
        return Regions::empty(shape);
    };
    let rest: Vec<Regions> = parts.filter(|p| *p != first).collect();
    if rest.is_empty() {
        return Ok(first);
    }
    // Projections often produce the same region many times: drop exact repeats first.
    let mut extra: Vec<&Region> = rest.iter().flat_map(|p| p.regions()).collect();
    extra.sort();
    extra.dedup();
    let mut acc: Vec<Region> = first.regions().to_vec();
    for x in extra {
        if acc.contains(x) {
            continue;
        }
        let mut left = vec![x.clone()];
        for y in &acc {
            let mut next = Vec::with_capacity(left.len());
            for l in &left {
                next.extend_from_slice(l.difference(y)?.regions());
            }
            left = next;
            if left.is_empty() {
                break;
            }
        }
        acc.extend(left);
    }
    Ok(Regions::from_disjoint(shape.to_vec(), acc))
}

/// True if the whole result of the view reads every element of every operand (so its
/// footprint is the union of theirs): all views but a slice that drops elements, a pad that
/// crops, and views with an empty result.
pub(super) fn reads_all_operands(view: &View, ins: &[&[i64]], out: &[i64]) -> bool {
    if volume(out) == 0 {
        return ins.iter().all(|s| volume(s) == 0);
    }
    match view {
        View::Slice { dims, .. } => slice_dims(dims, ins[0])
            .iter()
            .zip(ins[0])
            .all(|(d, &n)| n <= 1 || (d.start == 0 && d.stop >= n && d.step == 1)),
        View::Pad { widths, .. } => widths.iter().all(|w| w.0 >= 0 && w.1 >= 0),
        _ => true,
    }
}

/// A slice of a view's result that is, element for element, a slice of operand `arg`.
struct Piece {
    arg: usize,
    out_sel: Vec<SliceDim>,
    arg_sel: Vec<SliceDim>,
}

fn full_sel(shape: &[i64]) -> Vec<SliceDim> {
    shape.iter().map(|&n| SliceDim::full(n)).collect()
}

/// The algebra's slice of a canonical IR slice (a missing stop is "past index 0").
fn slice_dims(dims: &[IrSliceDim], shape: &[i64]) -> Vec<SliceDim> {
    let mut out: Vec<SliceDim> = dims
        .iter()
        .zip(shape)
        .map(|(d, &n)| {
            let step = d.step.unwrap_or(1);
            let (start, stop) = if step > 0 {
                (d.start.unwrap_or(0), d.stop.unwrap_or(n))
            } else {
                (d.start.unwrap_or(n - 1), d.stop.unwrap_or(-1))
            };
            SliceDim::new(start, stop, step)
        })
        .collect();
    out.extend(
        shape[out.len().min(shape.len())..]
            .iter()
            .map(|&n| SliceDim::full(n)),
    );
    out
}

/// Along one padded dimension (operand size `n`, result size `out_n`, `lo` before): the
/// (result, operand) slices that read the operand. Reflected parts only with `reflect`.
fn pad_parts(n: i64, out_n: i64, lo: i64, reflect: bool) -> Vec<(SliceDim, SliceDim)> {
    let mut parts = Vec::new();
    let (a, b) = (lo.max(0), (lo + n).min(out_n));
    if b > a {
        parts.push((SliceDim::new(a, b, 1), SliceDim::new(a - lo, b - lo, 1)));
    }
    if reflect {
        // Result x < lo reads operand lo - x.
        let l = lo.min(out_n);
        if l > 0 {
            parts.push((
                SliceDim::new(l - 1, -1, -1),
                SliceDim::new(lo - l + 1, lo + 1, 1),
            ));
        }
        // Result x >= lo + n reads operand 2(n - 1) - (x - lo).
        let r0 = (lo + n).max(0);
        let count = out_n - r0;
        if count > 0 {
            let s0 = 2 * n - 2 - r0 + lo;
            parts.push((
                SliceDim::new(r0, out_n, 1),
                SliceDim::new(s0, s0 - count, -1),
            ));
        }
    }
    parts
}

/// The pieces of a concat, interleave or pad (`None` for the other views).
fn pieces(view: &View, ins: &[&[i64]], out: &[i64]) -> Option<Vec<Piece>> {
    let along = |axis: usize, d: SliceDim| {
        let mut sel = full_sel(out);
        sel[axis] = d;
        sel
    };
    let mut list = Vec::new();
    match view {
        View::Concat { axis, .. } => {
            let mut off = 0;
            for (k, s) in ins.iter().enumerate() {
                let n = s[*axis];
                if n > 0 {
                    list.push(Piece {
                        arg: k,
                        out_sel: along(*axis, SliceDim::new(off, off + n, 1)),
                        arg_sel: full_sel(s),
                    });
                }
                off += n;
            }
        }
        View::Interleave { axis, .. } => {
            let count = ins.len() as i64;
            for (k, s) in ins.iter().enumerate() {
                list.push(Piece {
                    arg: k,
                    out_sel: along(*axis, SliceDim::new(k as i64, out[*axis], count)),
                    arg_sel: full_sel(s),
                });
            }
        }
        View::Pad { widths, mode, .. } => {
            let reflect = *mode == PadMode::Reflect;
            let mut combos = vec![(Vec::new(), Vec::new())];
            for (d, (&n, &out_n)) in ins[0].iter().zip(out).enumerate() {
                let lo = widths.get(d).map_or(0, |w| w.0);
                let parts = pad_parts(n, out_n, lo, reflect);
                let mut next = Vec::with_capacity(combos.len() * parts.len());
                for (o, a) in &combos {
                    for &(po, pa) in &parts {
                        let (mut o, mut a): (Vec<SliceDim>, Vec<SliceDim>) = (o.clone(), a.clone());
                        o.push(po);
                        a.push(pa);
                        next.push((o, a));
                    }
                }
                combos = next;
            }
            list = combos
                .into_iter()
                .map(|(out_sel, arg_sel)| Piece {
                    arg: 0,
                    out_sel,
                    arg_sel,
                })
                .collect();
        }
        _ => return None,
    }
    Some(list)
}

/// True if `sel` selects all of `shape`, in order.
fn is_identity(sel: &[SliceDim], shape: &[i64]) -> bool {
    sel.len() == shape.len()
        && sel
            .iter()
            .zip(shape)
            .all(|(d, &n)| d.start == 0 && d.stop == n && d.step == 1)
}

/// `r.fill_into(full, sel)`, skipping the work when `sel` selects all of `full` in order.
fn place(r: Regions, full: &[i64], sel: &[SliceDim]) -> Res<Regions> {
    if is_identity(sel, full) && r.shape() == full {
        Ok(r)
    } else {
        r.fill_into(full, sel)
    }
}

/// `r.slice(sel)`, skipping the work when `sel` selects all of `r` in order.
fn select(r: Regions, sel: &[SliceDim]) -> Res<Regions> {
    if is_identity(sel, r.shape()) {
        Ok(r)
    } else {
        r.slice(sel)
    }
}

/// The elements of a `repeat` operand (shape `arg`) that region `r` of the result reads:
/// along `axis`, result index `x` reads `x mod n`, so each region's sett on that axis is
/// split into rows of `n` (one per copy) whose columns are the operand indices.
fn fold_repeat(r: &Regions, arg: &[i64], axis: usize, times: i64) -> Res<Regions> {
    let n = arg[axis];
    let mut parts = Vec::new();
    for reg in r.regions() {
        let s = &reg.setts()[axis];
        let mut cols: Vec<Sett> = if s.is_all() {
            vec![Sett::all()]
        } else {
            let pairs = s.unflatten_in(n, n.saturating_mul(times))?;
            pairs.into_iter().map(|(_, c)| c).collect()
        };
        cols.sort();
        cols.dedup();
        for c in cols {
            let mut setts = reg.setts().to_vec();
            setts[axis] = c;
            parts.push(Regions::from_region(Region::new(arg.to_vec(), setts)?));
        }
    }
    union_all(arg, parts)
}

/// The elements of a `repeat` result (shape `out`) that read region `q` of its operand: the
/// operand's sett on `axis` repeated with period `n` (disjoint regions stay disjoint).
fn unfold_repeat(q: &Regions, out: &[i64], axis: usize) -> Res<Regions> {
    let n = q.shape()[axis];
    if q.is_empty() || n == 0 {
        return Regions::empty(out);
    }
    let period = Stripe::new(n, 0, 0)?;
    let mut list = Vec::new();
    for reg in q.regions() {
        let mut setts = reg.setts().to_vec();
        let mut nested = vec![period];
        nested.extend_from_slice(setts[axis].stripes());
        setts[axis] = Sett::new(nested);
        list.push(Region::new(out.to_vec(), setts)?);
    }
    Ok(Regions::from_disjoint(out.to_vec(), list))
}

/// The elements of each operand that region `r` of the view's result reads (operands by
/// index; one operand may appear more than once, e.g. for reflect padding).
pub(super) fn pull_view(
    view: &View,
    ins: &[&[i64]],
    out: &[i64],
    r: &Regions,
) -> Res<Vec<(usize, Regions)>> {
    if r.is_empty() {
        return Ok(vec![]);
    }
    let a0 = ins[0];
    let one = |x: Regions| Ok(vec![(0, x)]);
    match view {
        View::Transpose { perm, .. } => {
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                if let Some(slot) = inv.get_mut(p) {
                    *slot = i;
                }
            }
            one(r.permute(&inv)?)
        }
        View::Reverse { dims, .. } => one(r.reverse(dims)?),
        View::Slice { dims, .. } => one(r.fill_into(a0, &slice_dims(dims, a0))?),
        View::Squeeze { .. } | View::Unsqueeze { .. } | View::Reshape { .. } => one(r.reshape(a0)?),
        View::Broadcast { .. } => {
            let parts = r
                .regions()
                .iter()
                .map(|x| Ok(Regions::from_region(x.reduce(a0)?)));
            one(union_all(a0, parts.collect::<Res<_>>()?)?)
        }
        View::Repeat { times, axis, .. } => one(fold_repeat(r, a0, *axis, *times)?),
        View::Concat { .. } | View::Interleave { .. } | View::Pad { .. } => {
            let mut list = Vec::new();
            for p in pieces(view, ins, out).unwrap_or_default() {
                let sub = r.slice(&p.out_sel)?;
                if !sub.is_empty() {
                    list.push((p.arg, place(sub, ins[p.arg], &p.arg_sel)?));
                }
            }
            Ok(list)
        }
    }
}

/// The elements of a view's result that read memory, given those of its operands (`None`:
/// every element). Only constant padding drops elements; the pieces of a concat, interleave
/// or pad are disjoint parts of the result, so their images are put together without unions.
pub(super) fn push_backed(
    view: &View,
    ins: &[&[i64]],
    out: &[i64],
    sets: &[Option<&Regions>],
) -> Res<Option<Regions>> {
    let constant_pad = matches!(
        view,
        View::Pad {
            mode: PadMode::Constant(_),
            ..
        }
    );
    if !constant_pad && sets.iter().all(Option::is_none) {
        return Ok(None);
    }
    let set = |k: usize| match sets[k] {
        Some(q) => Ok(q.clone()),
        None => Regions::full(ins[k]),
    };
    let pushed = match view {
        View::Transpose { perm, .. } => set(0)?.permute(perm)?,
        View::Reverse { dims, .. } => set(0)?.reverse(dims)?,
        View::Slice { dims, .. } => set(0)?.slice(&slice_dims(dims, ins[0]))?,
        View::Squeeze { .. } | View::Unsqueeze { .. } | View::Reshape { .. } => {
            set(0)?.reshape(out)?
        }
        View::Broadcast { .. } => set(0)?.broadcast(out)?,
        View::Repeat { axis, .. } => unfold_repeat(&set(0)?, out, *axis)?,
        View::Concat { .. } | View::Interleave { .. } | View::Pad { .. } => {
            let mut list = Vec::new();
            for p in pieces(view, ins, out).unwrap_or_default() {
                let placed = place(select(set(p.arg)?, &p.arg_sel)?, out, &p.out_sel)?;
                list.extend_from_slice(placed.regions());
            }
            Regions::from_disjoint(out.to_vec(), list)
        }
    };
    Ok(Some(pushed))
}

/// The box `[lo, hi)` per dimension of `shape` as a region (bounds are clamped to the shape).
pub fn box_region(shape: &[i64], ranges: &[(i64, i64)]) -> Result<Region, RegionError> {
    if ranges.len() != shape.len() {
        return Err(RegionError::RankMismatch {
            expected: shape.len(),
            got: ranges.len(),
        });
    }
    let mut setts = Vec::with_capacity(shape.len());
    for (&n, &(lo, hi)) in shape.iter().zip(ranges) {
        let (lo, hi) = (lo.clamp(0, n), hi.clamp(0, n));
        setts.push(if hi <= lo {
            Sett::empty()
        } else {
            Sett::from_stripe(Stripe::new(hi - lo, n - (hi - lo), lo)?)
        });
    }
    Region::new(shape.to_vec(), setts)
}
