//! `scatter %base, %idx, %upd axis A reduce R` in the interpreter: the definition (docs/teg.md
//! §9.1, §12). The result starts as `base`; the updates are visited in row-major order, each
//! at coordinate `c` combined into `c` with `c[A]` replaced by `idx[c]` (wrapped once when
//! negative, an error naming the scatter, the input, the index and the value when still out of
//! range, before anything is written).

use super::scalar;
use super::store::{self, for_each_coord, NoMemory, Value};
use crate::ir::graph::{Scatter, ScatterReduce};
use crate::ir::instance::Scalar;
use crate::ir::kernel::Reduction;

/// Why a scatter failed: no memory, or an out-of-range index (the message).
pub enum Failure {
    NoMemory(NoMemory),
    Index(String),
}

/// The message of an out-of-range scattered index; native code reports the same
/// (`tapc_runtime::fault::scatter_message`).
pub use tapc_runtime::fault::scatter_message;

/// The scatter `s` (printed as `text`, its indices named `idx_name`) of `base`, `idx`, `upd`.
pub fn eval(
    s: &Scatter,
    text: &str,
    idx_name: &str,
    base: &Value,
    idx: &Value,
    upd: &Value,
) -> Result<Value, Failure> {
    let shape = &base.ty.shape;
    let size = shape[s.axis];
    let strides = row_major(shape);
    let mut out = Vec::new();
    out.try_reserve_exact(base.ty.elements().max(0) as usize)
        .map_err(|_| {
            Failure::NoMemory(NoMemory {
                bytes: base.ty.bytes() as u128,
            })
        })?;
    out.extend((0..base.ty.elements() as usize).map(|i| base.get(i)));
    let mut bad = None;
    let mut k = 0usize;
    for_each_coord(&upd.ty.shape, |c| {
        let pos = k;
        k += 1;
        if bad.is_some() {
            return;
        }
        let v = idx.get(pos).as_i64();
        let Some(j) = wrap(v, size) else {
            bad = Some(scatter_message(text, idx_name, c, v, size));
            return;
        };
        let at: i64 = (0..c.len())
            .map(|d| if d == s.axis { j } else { c[d] } * strides[d])
            .sum();
        let at = at as usize;
        out[at] = step(s.reduce, out[at], upd.get(pos), base.ty.dtype);
    });
    if let Some(msg) = bad {
        return Err(Failure::Index(msg));
    }
    let mut data =
        store::with_capacity(base.ty.dtype, base.ty.elements()).map_err(Failure::NoMemory)?;
    out.into_iter().for_each(|x| store::push(&mut data, x));
    Ok(Value {
        ty: base.ty.clone(),
        data,
    })
}

/// Index `v` along a dimension of `size`: wrapped once when negative, `None` when outside.
pub fn wrap(v: i64, size: i64) -> Option<i64> {
    let j = if v < 0 { v.wrapping_add(size) } else { v };
    (0..size).contains(&j).then_some(j)
}

/// `acc` combined with the update `x` (`max`/`min` as the reductions: numpy's `maximum`).
fn step(r: ScatterReduce, acc: Scalar, x: Scalar, d: crate::ir::DType) -> Scalar {
    match r {
        ScatterReduce::None => x,
        ScatterReduce::Add => scalar::combine(Reduction::Sum, acc, x, d),
        ScatterReduce::Max => scalar::combine(Reduction::Max, acc, x, d),
        ScatterReduce::Min => scalar::combine(Reduction::Min, acc, x, d),
    }
}

fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}
