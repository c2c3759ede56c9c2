//! Footprints of an apply: the box of each input it reads and of each output it writes, for a
//! box of its index variables. They are plain functions of an [`Instance`]: the cost model
//! charges them (`passes::cost`) and the native scheduler plans MPI transfers from them
//! (`codegen::schedule`), so both count the same bytes.
//!
//! A box is one half-open `(lo, hi)` range per dimension. Inputs of a kernel op are the hull of
//! its loads' affine indices over the variable box (a gathered dimension: the whole
//! dimension); inputs of an extern op are the image of the
//! box under their projections. A shard's ports hold only its window, so boxes are relative to
//! the port's origin, clipped to the port.

use super::instance::{Affine, CExpr, CKind, Instance, Src};

/// One `(lo, hi)` range per dimension.
pub type Box1 = Vec<(i64, i64)>;
/// One box per port.
pub type Boxes = Vec<Box1>;

/// The boxes an apply reads of each input and writes of each output over its whole index
/// space: the footprint the cost model charges, which the MPI schedule also plans its
/// transfers from.
pub fn io_boxes(inst: &Instance) -> (Boxes, Boxes) {
    let (ins, _, outs) = footprint(inst, &full_boxes(inst), None);
    (ins, outs)
}

/// Every index variable's whole range (parallel ones first).
pub fn full_boxes(inst: &Instance) -> Box1 {
    inst.vars.iter().map(|v| v.range).collect()
}

/// Number of points in box `b` (0 when a range is empty).
// Inlined across modules: the cost model's costing calls it in its innermost loop.
#[inline]
pub fn volume(b: &[(i64, i64)]) -> f64 {
    b.iter().map(|&(l, h)| (h - l).max(0) as f64).product()
}

/// The footprint boxes of every input and output of `inst` for the variable ranges `boxes`
/// (every variable, parallel ones first). With `red = Some(v)` the inputs are split in two:
/// those read inside the reduction over `v` (the partial results) and those read outside it
/// (the epilogue, run once after the combine); otherwise the second list is empty boxes.
pub fn footprint(
    inst: &Instance,
    boxes: &[(i64, i64)],
    red: Option<usize>,
) -> (Boxes, Boxes, Boxes) {
    let (ins, epi) = match &inst.stmts {
        Some(_) => load_hulls(inst, boxes, red),
        None => (projected_inputs(inst, boxes), empty_inputs(inst)),
    };
    (ins, epi, output_boxes(inst, boxes))
}

/// Box `b` relative to a port's `origin` (a shard's window), clipped to its `shape`.
fn clip(b: Box1, shape: &[i64], origin: Option<&Vec<i64>>) -> Box1 {
    b.into_iter()
        .zip(shape)
        .enumerate()
        .map(|(d, ((l, h), &n))| {
            let o = origin.and_then(|o| o.get(d)).copied().unwrap_or(0);
            let (l, h) = (l - o, h - o);
            (l.clamp(0, n), h.clamp(0, n).max(l.clamp(0, n)))
        })
        .collect()
}

fn empty_inputs(inst: &Instance) -> Boxes {
    inst.inputs
        .iter()
        .map(|t| vec![(0, 0); t.shape.len()])
        .collect()
}

/// A kernel op's inputs: the hull of its loads, split into those inside and outside the
/// reduction over `red` when it is given.
fn load_hulls(inst: &Instance, boxes: &[(i64, i64)], red: Option<usize>) -> (Boxes, Boxes) {
    let mut hull: [Vec<Option<Box1>>; 2] =
        [vec![None; inst.inputs.len()], vec![None; inst.inputs.len()]];
    for s in inst.stmts.iter().flatten() {
        input_loads(&s.value, red, false, &mut |k, index, whole, inside| {
            let b: Box1 = index
                .iter()
                .enumerate()
                .map(|(d, a)| {
                    if whole.get(d) == Some(&true) {
                        return (i64::MIN, i64::MAX); // clipped to the whole dimension
                    }
                    let (l, h) = a.range(boxes);
                    (l, h.saturating_add(1))
                })
                .collect();
            let slot = &mut hull[usize::from(red.is_some() && !inside)][k];
            *slot = Some(match slot.take() {
                None => b,
                Some(old) => old
                    .iter()
                    .zip(&b)
                    .map(|(&(a, c), &(x, y))| (a.min(x), c.max(y)))
                    .collect(),
            });
        });
    }
    let fin = |h: Vec<Option<Box1>>| -> Boxes {
        h.into_iter()
            .zip(&inst.inputs)
            .enumerate()
            .map(|(k, (h, t))| match h {
                Some(b) => clip(b, &t.shape, inst.origins.get(k)),
                None => vec![(0, 0); t.shape.len()],
            })
            .collect()
    };
    let [inside, outside] = hull;
    (fin(inside), fin(outside))
}

/// An extern op's inputs: the image of the parallel box under each input's projection.
fn projected_inputs(inst: &Instance, boxes: &[(i64, i64)]) -> Boxes {
    let np = inst.parallel;
    inst.signature
        .inputs
        .iter()
        .zip(&inst.inputs)
        .enumerate()
        .map(|(k, (p, t))| {
            clip(
                p.projection.image(&boxes[..np]),
                &t.shape,
                inst.origins.get(k),
            )
        })
        .collect()
}

/// The outputs: the image of the parallel box under each output's projection (a shard's
/// output starts where its range's image starts).
fn output_boxes(inst: &Instance, boxes: &[(i64, i64)]) -> Boxes {
    let np = inst.parallel;
    inst.signature
        .outputs
        .iter()
        .zip(&inst.outputs)
        .map(|(p, t)| {
            let origin: Option<Vec<i64>> = inst.sharded.then(|| {
                let whole: Box1 = inst.range();
                p.projection
                    .image(&whole)
                    .into_iter()
                    .map(|r| r.0)
                    .collect()
            });
            clip(p.projection.image(&boxes[..np]), &t.shape, origin.as_ref())
        })
        .collect()
}

/// `f(input, index, whole, inside)` of [`input_loads`].
type LoadVisitor<'a> = dyn FnMut(usize, &[Affine], &[bool], bool) + 'a;

/// Calls `f(input, index, whole, inside)` for every load of an input in `e`; `whole[d]` says
/// that dimension `d` is gathered (it reads the whole dimension), `inside` whether the load
/// sits inside a reduction over variable `red`.
fn input_loads(e: &CExpr, red: Option<usize>, inside: bool, f: &mut LoadVisitor) {
    match &e.kind {
        CKind::Load {
            src: Src::Input(k),
            index,
            ..
        } => f(*k, index, &[], inside),
        CKind::Gather(g) => {
            let whole: Vec<bool> = g.by.iter().map(Option::is_some).collect();
            f(g.input, &g.index, &whole, inside);
            for (_, b) in g.gathered() {
                input_loads(b, red, inside, f);
            }
        }
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => {}
        CKind::Reduce { vars, body, .. } => input_loads(
            body,
            red,
            inside || red.is_some_and(|v| vars.contains(&v)),
            f,
        ),
        CKind::Call(_, args) => args.iter().for_each(|a| input_loads(a, red, inside, f)),
        CKind::Unary(_, a) => input_loads(a, red, inside, f),
        CKind::Binary(_, a, b) => {
            input_loads(a, red, inside, f);
            input_loads(b, red, inside, f);
        }
    }
}
