//! Selectors in the interpreter: each output element is gathered from the operand element the
//! view maps it to (or is the pad constant). This is the definition of every view.

use super::store::{self, for_each_coord, NoMemory, Value};
use crate::ir::graph::{PadMode, View};
use crate::ir::instance::Scalar;
use crate::ir::TensorType;

/// Where an output coordinate's value comes from: (operand, coordinate), or a constant.
enum From {
    Arg(usize, Vec<i64>),
    Const(Scalar),
}

fn unravel(mut lin: i64, shape: &[i64]) -> Vec<i64> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = lin % shape[d];
        lin /= shape[d];
    }
    c
}

fn ravel(c: &[i64], shape: &[i64]) -> i64 {
    c.iter().zip(shape).fold(0, |acc, (x, n)| acc * n + x)
}

/// Where output coordinate `c` of view `v` (of operands of types `ins`) reads from.
fn source(v: &View, ins: &[&TensorType], c: &[i64]) -> From {
    let s0 = &ins[0].shape;
    match v {
        View::Transpose { perm, .. } => {
            let mut src = vec![0; c.len()];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = c[i];
            }
            From::Arg(0, src)
        }
        View::Reverse { dims, .. } => From::Arg(
            0,
            c.iter()
                .enumerate()
                .map(|(d, &x)| if dims.contains(&d) { s0[d] - 1 - x } else { x })
                .collect(),
        ),
        View::Slice { dims, .. } => From::Arg(
            0,
            c.iter()
                .zip(dims)
                .map(|(&x, s)| s.start.unwrap_or(0) + x * s.step.unwrap_or(1))
                .collect(),
        ),
        View::Squeeze { dims, .. } => From::Arg(0, squeezed(dims, s0.len(), c)),
        View::Unsqueeze { dims, .. } => From::Arg(
            0,
            c.iter()
                .enumerate()
                .filter(|(d, _)| !dims.contains(d))
                .map(|(_, &x)| x)
                .collect(),
        ),
        View::Broadcast { .. } => From::Arg(0, broadcast(s0, c)),
        View::Reshape { shape, .. } => From::Arg(0, unravel(ravel(c, shape), s0)),
        View::Concat { axis, .. } => concat(ins, *axis, c),
        View::Interleave { axis, .. } => {
            let n = ins.len() as i64;
            let mut src = c.to_vec();
            src[*axis] = c[*axis] / n;
            From::Arg((c[*axis] % n) as usize, src)
        }
        View::Repeat { axis, .. } => {
            let mut src = c.to_vec();
            src[*axis] = c[*axis] % s0[*axis];
            From::Arg(0, src)
        }
        View::Pad { widths, mode, .. } => pad(widths, mode, s0, c),
    }
}

/// The operand coordinate of a squeeze (of an operand of rank `rank`): 0 in squeezed dims.
fn squeezed(dims: &[usize], rank: usize, c: &[i64]) -> Vec<i64> {
    let mut it = c.iter();
    (0..rank)
        .map(|d| {
            if dims.contains(&d) {
                0
            } else {
                *it.next().unwrap_or(&0)
            }
        })
        .collect()
}

/// The operand coordinate of a broadcast of an operand of shape `s0`: the trailing dims, 0
/// along the operand's dims of size 1.
fn broadcast(s0: &[i64], c: &[i64]) -> Vec<i64> {
    let lead = c.len() - s0.len();
    s0.iter()
        .enumerate()
        .map(|(i, &n)| if n == 1 { 0 } else { c[lead + i] })
        .collect()
}

/// The operand of a concat that holds coordinate `c`, and the coordinate in it.
fn concat(ins: &[&TensorType], axis: usize, c: &[i64]) -> From {
    let mut x = c[axis];
    for (k, t) in ins.iter().enumerate() {
        if x < t.shape[axis] {
            let mut src = c.to_vec();
            src[axis] = x;
            return From::Arg(k, src);
        }
        x -= t.shape[axis];
    }
    unreachable!("coordinate within the concatenated size")
}

/// The operand coordinate of a pad (mirrored for `reflect`), or its constant outside.
fn pad(widths: &[(i64, i64)], mode: &PadMode, s0: &[i64], c: &[i64]) -> From {
    let mut src = Vec::with_capacity(c.len());
    for ((&x, &(lo, _)), &n) in c.iter().zip(widths).zip(s0) {
        let i = x - lo;
        let i = match mode {
            _ if (0..n).contains(&i) => i,
            PadMode::Reflect if i < 0 => -i,
            PadMode::Reflect => 2 * (n - 1) - i,
            PadMode::Constant(l) => return From::Const(Scalar::from(*l)),
        };
        src.push(i);
    }
    From::Arg(0, src)
}

/// Materializes view `v` of `args` with result type `ty`.
pub fn eval(v: &View, args: &[&Value], ty: TensorType) -> Result<Value, NoMemory> {
    let ins: Vec<&TensorType> = args.iter().map(|a| &a.ty).collect();
    let mut data = store::with_capacity(ty.dtype, ty.elements())?;
    for_each_coord(&ty.shape, |c| {
        let s = match source(v, &ins, c) {
            From::Arg(k, src) => args[k].get(ravel(&src, &ins[k].shape) as usize),
            From::Const(s) => s.cast(ty.dtype),
        };
        store::push(&mut data, s);
    });
    Ok(Value { ty, data })
}
