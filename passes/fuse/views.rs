//! Views as affine maps: for the selectors whose every output element reads one input element
//! at an affine function of the output coordinate, [`view_map`] gives that function, and
//! [`ViewMap::compose`] pushes it into a kernel load (`u[L(p)]` → `a[M·L(p) + c]`).
//!
//! | view | source coordinate `a_k` from view coordinate `u` |
//! |---|---|
//! | `transpose [p..]` | `a[p_i] = u_i` |
//! | `reverse [d..]` | `a_d = size_d − 1 − u_d` for listed dims |
//! | `slice [s:e:t, ..]` | `a_d = s + t·u_d` |
//! | `squeeze [d..]` | `a_d = 0` for removed dims, the others in order |
//! | `unsqueeze [d..]` | inserted dims dropped (their index is always 0) |
//! | `broadcast [..]` | right-aligned; size-1 source dims read 0 |
//! | `reshape [..]` | only when every source dim is the row-major product of a run of consecutive view dims (splits, unit dims): `a_k = Σ stride·u_j` over the run |
//!
//! `concat`, `interleave`, `repeat` and `pad` are piecewise, not affine: they never fold.
//! Views of tensors without elements are not folded either.

use super::affine::{canonical, Res};
use crate::ir::graph::View;
use crate::ir::instance::Affine;

/// Per source dim, an affine function of the view's coordinates (variable `d` = view dim `d`).
#[derive(Clone, Debug, PartialEq)]
pub struct ViewMap {
    pub rows: Vec<Affine>,
}

impl ViewMap {
    /// The source index of a load whose view index is `index` (affine in kernel variables).
    pub fn compose(&self, index: &[Affine]) -> Res<Vec<Affine>> {
        self.rows
            .iter()
            .map(|row| {
                let mut out = Affine::constant(row.constant);
                for &(d, c) in &row.terms {
                    let l = index.get(d).ok_or("view rank")?;
                    let t = l.clone().scale(c).ok_or("index overflow")?;
                    out = out.add(&t, 1).ok_or("index overflow")?;
                }
                Ok(canonical(&out))
            })
            .collect()
    }
}

fn u(d: usize) -> Affine {
    Affine::var(d)
}

/// The affine map of `view` from its output (shape `out`) to its operand (shape `src`), if it
/// has one.
pub fn view_map(view: &View, src: &[i64], out: &[i64]) -> Option<ViewMap> {
    if src.iter().chain(out).any(|&d| d <= 0) {
        return None;
    }
    let rows = match view {
        View::Transpose { perm, .. } => {
            if perm.len() != src.len() {
                return None;
            }
            let mut rows = vec![Affine::constant(0); src.len()];
            for (i, &p) in perm.iter().enumerate() {
                *rows.get_mut(p)? = u(i);
            }
            rows
        }
        View::Reverse { dims, .. } => (0..src.len())
            .map(|d| {
                if dims.contains(&d) {
                    Affine {
                        terms: vec![(d, -1)],
                        constant: src[d] - 1,
                    }
                } else {
                    u(d)
                }
            })
            .collect(),
        View::Slice { dims, .. } => (0..src.len())
            .map(|d| match dims.get(d) {
                Some(s) => {
                    let (start, step) = (s.start.unwrap_or(0), s.step.unwrap_or(1));
                    Affine {
                        terms: vec![(d, step)],
                        constant: start,
                    }
                }
                None => u(d),
            })
            .collect(),
        View::Squeeze { dims, .. } => {
            let mut next = 0;
            (0..src.len())
                .map(|d| {
                    if dims.contains(&d) {
                        Affine::constant(0)
                    } else {
                        next += 1;
                        u(next - 1)
                    }
                })
                .collect()
        }
        View::Unsqueeze { dims, .. } => (0..out.len())
            .filter(|d| !dims.contains(d))
            .map(u)
            .collect(),
        View::Broadcast { .. } => {
            let off = out.len().checked_sub(src.len())?;
            (0..src.len())
                .map(|k| {
                    if src[k] == 1 {
                        Affine::constant(0)
                    } else {
                        u(k + off)
                    }
                })
                .collect()
        }
        View::Reshape { .. } => reshape_rows(src, out)?,
        View::Concat { .. } | View::Interleave { .. } | View::Repeat { .. } | View::Pad { .. } => {
            return None
        }
    };
    (rows.len() == src.len()).then_some(ViewMap { rows })
}

/// Source dims as row-major products of runs of consecutive view dims.
fn reshape_rows(src: &[i64], out: &[i64]) -> Option<Vec<Affine>> {
    let mut rows = Vec::new();
    let mut j = 0;
    for &size in src {
        let mut run = Vec::new();
        let mut prod: i64 = 1;
        while prod < size {
            let d = *out.get(j)?;
            prod = prod.checked_mul(d)?;
            run.push(j);
            j += 1;
        }
        if prod != size {
            return None;
        }
        let mut row = Affine::constant(0);
        let mut stride: i64 = 1;
        for &d in run.iter().rev() {
            row = row.add(&Affine::var(d).scale(stride)?, 1)?;
            stride = stride.checked_mul(out[d])?;
        }
        rows.push(canonical(&row));
    }
    // Whatever is left are unit dims, whose index is always 0.
    out[j..].iter().all(|&d| d == 1).then_some(rows)
}
