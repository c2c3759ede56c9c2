//! Layout operators written as views: `DepthToSpace` and `SpaceToDepth` (a reshape, a
//! transpose and a reshape, constants folded), and `EyeLike` (a constant of its input's shape).

use super::views::{apply_view, out_hint, View};
use super::{Cx, Val, R};
use crate::import::onnx::elem;
use crate::import::onnx::model::{dtype_of, Node};
use tapc_runtime::Tensor;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "DepthToSpace" | "SpaceToDepth" => depth_space,
        "EyeLike" => eye_like,
        _ => return None,
    })
}

/// The reshape, permutation and final shape that move blocks of `b × b` between the channel
/// and the spatial dims of an `[N, C, H, W]` input.
fn plan(n: &Node, s: &[usize], b: usize) -> Option<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let [bn, c, hh, w] = s.try_into().ok()?;
    let crd = n.string("mode").as_deref() == Some("CRD");
    if n.op_type == "SpaceToDepth" {
        let split = vec![bn, c, hh / b, b, w / b, b];
        let out = vec![bn, c * b * b, hh / b, w / b];
        let perm = match crd {
            true => vec![0, 1, 3, 5, 2, 4],
            false => vec![0, 3, 5, 1, 2, 4],
        };
        return (hh % b == 0 && w % b == 0).then_some((split, perm, out));
    }
    let out = vec![bn, c / (b * b), hh * b, w * b];
    let (split, perm) = match crd {
        true => (vec![bn, c / (b * b), b, b, hh, w], vec![0, 1, 4, 2, 5, 3]),
        false => (vec![bn, b, b, c / (b * b), hh, w], vec![0, 3, 4, 1, 5, 2]),
    };
    (c % (b * b) == 0).then_some((split, perm, out))
}

fn depth_space(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let b = n.int("blocksize", 0);
    let shape = v.shape().to_vec();
    let Some((split, perm, out)) = (b > 0).then(|| plan(n, &shape, b as usize)).flatten() else {
        return Err(cx.invalid(n, format!("blocksize {b} for an input of shape {shape:?}")));
    };
    let h = out_hint(n, 0);
    let a = apply_view(cx, &format!("{h}_blocks"), &v, &View::Reshape(split));
    let t = apply_view(cx, &format!("{h}_moved"), &a, &View::Transpose(perm));
    Ok(vec![apply_view(cx, &h, &t, &View::Reshape(out))])
}

/// Ones on the `k`-th diagonal of a 2-D shape, in the `dtype` attribute's type (the input's
/// by default).
fn eye_like(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?;
    let (shape, input_dtype) = (v.shape().to_vec(), v.dtype());
    let dtype = match n.attr("dtype") {
        Some(_) => dtype_of(n.int("dtype", 1) as i32)
            .ok_or_else(|| cx.unsupported(n, "a `dtype` TEG has no type for"))?,
        None => input_dtype,
    };
    let [rows, cols] = shape[..] else {
        return Err(cx.invalid(n, format!("an input of shape {shape:?}")));
    };
    let k = n.int("k", 0);
    let ones: Vec<i64> = (0..rows * cols)
        .map(|p| i64::from((p % cols) as i64 - (p / cols) as i64 == k))
        .collect();
    let data = elem::from_i64s(dtype, &ones);
    Ok(vec![Val::Const(Tensor { shape, data })])
}
