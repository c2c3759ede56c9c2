//! Sharding's checks and report, on the alias set algebra: shard outputs must be pairwise
//! disjoint and cover the output exactly; and each shard input's exact footprint (strided
//! and halo accesses as setts, not just a bounding box) is reported next to its box.

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::instance::{Affine, Instance, Src};
use crate::passes::alias::{Region, Regions, Sett};
use crate::verify::visit_loads;

fn algebra(e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(codes::PASS_FAILED, format!("alias algebra: {e}"))
}

/// `[lo, hi)` within a dimension of size `n`.
fn interval(lo: i64, hi: i64, n: i64) -> Result<Sett, Diagnostic> {
    Sett::from_triples(&[((hi - lo).max(0), n.max(1), lo)]).map_err(algebra)
}

/// The shard blocks `bounds` along `axis` are disjoint and cover `shape`.
pub fn check_cover(
    shape: &[i64],
    axis: usize,
    bounds: &[(i64, i64)],
    span: Span,
) -> Result<(), Diagnostic> {
    let mut acc = Regions::empty(shape).map_err(algebra)?;
    for &(lo, hi) in bounds {
        let setts = (0..shape.len())
            .map(|d| {
                if d == axis {
                    interval(lo, hi, shape[d])
                } else {
                    Ok(Sett::all())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let r = Regions::from_region(Region::new(shape.to_vec(), setts).map_err(algebra)?);
        if !acc.disjoint(&r).map_err(algebra)? {
            return Err(Diagnostic::error(
                codes::BAD_SHARD,
                format!("shard {lo}:{hi} overlaps another shard"),
            )
            .primary(span, "shards must be disjoint"));
        }
        acc = acc.union(&r).map_err(algebra)?;
    }
    let total: i128 = shape.iter().map(|&n| n as i128).product();
    if acc.count() != total {
        return Err(Diagnostic::error(
            codes::BAD_SHARD,
            format!("shards cover {} of {total} elements", acc.count()),
        )
        .primary(span, "shards must cover the output"));
    }
    Ok(())
}

/// The set of coordinates an affine index takes over `ranges`: exact for one variable (a
/// stride) or a variable plus a unit-coefficient window (a halo or sparse window), else the hull.
fn coords(a: &Affine, ranges: &[(i64, i64)], n: i64) -> Result<Sett, Diagnostic> {
    let (lo, hi) = a.range(ranges);
    let hull = interval(lo, hi + 1, n)?;
    let terms: Vec<(i64, i64)> = a
        .terms
        .iter()
        .filter(|t| ranges[t.0].1 - ranges[t.0].0 > 1)
        .map(|&(v, c)| (c.abs(), ranges[v].1 - ranges[v].0))
        .collect();
    let (stride, window) = match terms.as_slice() {
        [(s, _)] => (*s, 1),
        [(s, _), (1, w)] | [(1, w), (s, _)] => (*s, *w),
        _ => return Ok(hull),
    };
    if window >= stride {
        return Ok(hull);
    }
    let pattern = Sett::from_triples(&[(window, stride - window, lo)]).map_err(algebra)?;
    let pieces = pattern.intersect_in(&hull, n).map_err(algebra)?;
    Ok(match pieces.as_slice() {
        [one] => one.clone(),
        _ => hull,
    })
}

fn count(s: &Sett, n: i64) -> i128 {
    s.count(0, n)
}

/// One line per input of a shard: its bounding box and its exact footprint, in elements.
pub fn describe_inputs(
    shard: &str,
    inst: &Instance,
    range: &[(i64, i64)],
) -> Result<String, Diagnostic> {
    let mut ranges: Vec<(i64, i64)> = inst.vars.iter().map(|v| v.range).collect();
    ranges[..range.len()].copy_from_slice(range);
    let mut out = String::new();
    for (k, port) in inst.signature.inputs.iter().enumerate() {
        let shape = &inst.inputs[k].shape;
        let mut per_dim: Vec<Option<Sett>> = vec![None; shape.len()];
        let mut boxes: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); shape.len()];
        let mut failure = None;
        for st in inst.stmts.iter().flatten() {
            visit_loads(&st.value, &mut |src, index| {
                if src != Src::Input(k) || failure.is_some() {
                    return;
                }
                for (d, a) in index.iter().enumerate() {
                    let (lo, hi) = a.range(&ranges);
                    boxes[d] = (boxes[d].0.min(lo), boxes[d].1.max(hi + 1));
                    let merged = coords(a, &ranges, shape[d]).and_then(|c| match &per_dim[d] {
                        None => Ok(c),
                        Some(prev) => {
                            match prev.union_in(&c, shape[d]).map_err(algebra)?.as_slice() {
                                [one] => Ok(one.clone()),
                                _ => interval(boxes[d].0, boxes[d].1, shape[d]),
                            }
                        }
                    });
                    match merged {
                        Ok(s) => per_dim[d] = Some(s),
                        Err(e) => failure = Some(e),
                    }
                }
            });
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if per_dim.iter().any(Option::is_none) {
            continue; // the shard does not read this input
        }
        let box_elems: i128 = boxes
            .iter()
            .map(|&(lo, hi)| (hi - lo).max(0) as i128)
            .product();
        let exact: i128 = per_dim
            .iter()
            .zip(shape)
            .map(|(s, &n)| count(s.as_ref().expect("checked"), n))
            .product();
        let dims: Vec<String> = boxes.iter().map(|(lo, hi)| format!("{lo}:{hi}")).collect();
        out.push_str(&format!(
            "%{shard} reads {}: box [{}] = {box_elems} elements, footprint {exact} elements\n",
            port.name,
            dims.join(", ")
        ));
    }
    Ok(out)
}
