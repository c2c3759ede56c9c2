//! What the model knows of one apply before any plan: its marginal cost table and, per
//! (variable, part count), the layout of its shards (their footprint boxes, output bytes and
//! flops; for a reduction, the combine and what the epilogue reads).

use super::*;
use crate::ir::footprint::{footprint, full_boxes, volume};
use crate::ir::instance::Instance;
use crate::passes::shard::split;

/// One shard of an apply: the boxes it reads of each input and writes of each output, the
/// bytes of its outputs and its flops.
#[derive(Clone, Debug)]
pub(super) struct ShardLayout {
    pub(super) in_boxes: Boxes,
    pub(super) out_boxes: Boxes,
    pub(super) out_bytes: f64,
    pub(super) flops: f64,
    /// Memory traffic: the bytes of every input box read plus every output box written.
    pub(super) traffic: f64,
}

/// An apply split along one variable into some parts (or whole).
#[derive(Clone, Debug)]
pub(super) struct Layout {
    pub(super) shards: Vec<ShardLayout>,
    pub(super) reduction: bool,
    pub(super) combine_flops: f64,
    /// Reduction sharding: the combine reads every partial result and writes the sum.
    pub(super) combine_traffic: f64,
    /// Reduction sharding: per input, what the epilogue (after the combine) reads.
    pub(super) epilogue: Boxes,
}

/// Footprint bytes (inputs read plus outputs written) of `inst` over the variable `boxes`.
pub(super) fn footprint_bytes(inst: &Instance, boxes: &[(i64, i64)]) -> f64 {
    let (ins, _, outs) = footprint(inst, boxes, None);
    traffic(inst, &ins, &outs)
}

/// The bytes of the input boxes `ins` and output boxes `outs` of `inst`.
fn traffic(inst: &Instance, ins: &[Box1], outs: &[Box1]) -> f64 {
    let size = |t: &crate::ir::TensorType| t.dtype.size_bytes() as f64;
    ins.iter()
        .zip(&inst.inputs)
        .map(|(b, t)| volume(b) * size(t))
        .sum::<f64>()
        + outs
            .iter()
            .zip(&inst.outputs)
            .map(|(b, t)| volume(b) * size(t))
            .sum::<f64>()
}

/// The marginal cost table of an instance: one row per index variable (parallel, then
/// reduction). Flops per step are the apply's flops over the extent (constant by
/// construction); bytes per step are the footprint of the full box minus that of the box one
/// step shorter along the variable.
pub fn marginal_table(inst: &Instance) -> Vec<MarginalRow> {
    let full = full_boxes(inst);
    let flops = inst.signature.flops_per_point * inst.points().max(1) as f64;
    let total = footprint_bytes(inst, &full);
    inst.vars
        .iter()
        .enumerate()
        .map(|(v, var)| {
            let ext = var.range.1 - var.range.0;
            let bytes = (ext >= 2).then(|| {
                let mut b = full.clone();
                b[v].1 -= 1;
                total - footprint_bytes(inst, &b)
            });
            MarginalRow {
                dim: var.name.clone(),
                extent: ext,
                reduction: v >= inst.parallel,
                flops: flops / ext.max(1) as f64,
                bytes,
            }
        })
        .collect()
}

/// The layout of `inst` (of `flops` in all) split along variable `v` into `parts`.
pub(super) fn layout(inst: &Instance, v: usize, parts: usize, flops: f64) -> Layout {
    let full = full_boxes(inst);
    let (lo0, hi0) = full[v];
    let ext = hi0 - lo0;
    let reduction = v >= inst.parallel;
    let size = |t: &crate::ir::TensorType| t.dtype.size_bytes() as f64;
    let shards = split(ext, parts as i64)
        .into_iter()
        .map(|(lo, hi)| {
            let mut b = full.clone();
            b[v] = (lo0 + lo, lo0 + hi);
            let (in_boxes, _, mut out_boxes) = footprint(inst, &b, reduction.then_some(v));
            if reduction {
                // Partial results cover the whole output.
                out_boxes = footprint(inst, &full, None).2;
            }
            let out_bytes = out_boxes
                .iter()
                .zip(&inst.outputs)
                .map(|(b, t)| volume(b) * size(t))
                .sum();
            ShardLayout {
                traffic: traffic(inst, &in_boxes, &out_boxes),
                in_boxes,
                out_boxes,
                out_bytes,
                flops: flops * (hi - lo) as f64 / ext.max(1) as f64,
            }
        })
        .collect::<Vec<_>>();
    let out_elems: f64 = inst.outputs.iter().map(|t| t.elements() as f64).sum();
    let (combine_flops, combine_traffic) = if reduction {
        let parts = shards.len() as f64;
        (
            (parts - 1.0) * out_elems,
            (parts + 1.0) * shards.first().map_or(0.0, |s| s.out_bytes),
        )
    } else {
        (0.0, 0.0)
    };
    let epilogue = if reduction {
        footprint(inst, &full, Some(v)).1
    } else {
        vec![]
    };
    Layout {
        shards,
        reduction,
        combine_flops,
        combine_traffic,
        epilogue,
    }
}

/// The layout of `inst` (of `flops`) whole.
pub(super) fn layout_whole(inst: &Instance, flops: f64) -> Layout {
    let full = full_boxes(inst);
    let (in_boxes, _, out_boxes) = footprint(inst, &full, None);
    let out_bytes = out_boxes
        .iter()
        .zip(&inst.outputs)
        .map(|(b, t)| volume(b) * t.dtype.size_bytes() as f64)
        .sum();
    Layout {
        shards: vec![ShardLayout {
            traffic: traffic(inst, &in_boxes, &out_boxes),
            in_boxes,
            out_boxes,
            out_bytes,
            flops,
        }],
        reduction: false,
        combine_flops: 0.0,
        combine_traffic: 0.0,
        epilogue: vec![],
    }
}
