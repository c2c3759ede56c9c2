//! The signature of a kernel op's instance, derived from its accesses: one projection per port
//! and the costs (flops per index point, bytes touched per point, marginal flops per index
//! dimension). An extern op declares its signature instead (`instance::from_extern`).

use crate::ir::instance::*;
use crate::ir::kernel::{Func, OpDef, PortDef};
use crate::ir::TensorType;

/// Per input, per dimension: where the loads of that dimension reach, as the row of
/// coefficients of the parallel variables (`None`: never loaded; [`DISAGREE`]: loads disagree)
/// and the lowest and highest offset over the reduction variables.
struct Reach {
    rows: Vec<Vec<Option<Vec<i64>>>>,
    bounds: Vec<Vec<(i64, i64)>>,
}

/// The row of a dimension whose loads have different rows: it takes the whole dimension.
const DISAGREE: i64 = i64::MIN;

/// Projections from the kernel's accesses: reduction variables fold into the block shape;
/// several accesses to one port take their hull (widened to the whole dim if they disagree).
pub(super) fn derive_signature(op: &OpDef, inst: &Instance) -> Signature {
    let reach = reach(inst);
    let inputs = port_sigs(&op.inputs, &inst.inputs, |k| {
        input_projection(inst, &reach, k)
    });
    let outputs = port_sigs(&op.outputs, &inst.outputs, |k| output_projection(inst, k));
    costs(inst, inputs, outputs)
}

/// Each port with its type and projection (`projection(k)` of port `k`).
fn port_sigs(
    ports: &[PortDef],
    types: &[TensorType],
    projection: impl Fn(usize) -> Projection,
) -> Vec<PortSig> {
    ports
        .iter()
        .zip(types)
        .enumerate()
        .map(|(k, (p, ty))| PortSig {
            name: p.name.clone(),
            ty: ty.clone(),
            projection: projection(k),
        })
        .collect()
}

/// Where every load of every input reaches (see [`Reach`]); a gathered dimension of a gather
/// reaches the whole dimension.
fn reach(inst: &Instance) -> Reach {
    let mut r = Reach {
        rows: inst.inputs.iter().map(|t| vec![None; t.rank()]).collect(),
        bounds: vec![vec![]; inst.inputs.len()],
    };
    for st in inst.stmts.as_deref().unwrap_or_default() {
        visit_loads(&st.value, &mut |src, index| {
            if let Src::Input(k) = src {
                r.record(inst, k, index, &[]);
            }
        });
        walk(
            &st.value,
            &mut |e, _| {
                if let CKind::Gather(g) = &e.kind {
                    let by: Vec<bool> = g.by.iter().map(Option::is_some).collect();
                    r.record(inst, g.input, &g.index, &by);
                }
            },
            &mut vec![],
        );
    }
    r
}

impl Reach {
    /// One access of input `k` at `index` (the dimensions with `whole[d]` are gathered).
    fn record(&mut self, inst: &Instance, k: usize, index: &[Affine], whole: &[bool]) {
        let np = inst.parallel;
        if self.bounds[k].is_empty() {
            self.bounds[k] = vec![(i64::MAX, i64::MIN); index.len()];
        }
        for (d, a) in index.iter().enumerate() {
            let slot = &mut self.rows[k][d];
            if whole.get(d) == Some(&true) {
                *slot = Some(vec![DISAGREE]);
                continue;
            }
            let row: Vec<i64> = (0..np).map(|v| a.coeff(v)).collect();
            let (mut lo, mut hi) = (a.constant, a.constant);
            for &(v, c) in a.terms.iter().filter(|t| t.0 >= np) {
                let (x, y) = (0, c * (inst.vars[v].range.1 - 1).max(0));
                lo += x.min(y);
                hi += x.max(y);
            }
            let b = &mut self.bounds[k][d];
            *b = (b.0.min(lo), b.1.max(hi));
            match slot {
                None => *slot = Some(row),
                Some(prev) if *prev != row => *slot = Some(vec![DISAGREE]),
                _ => {}
            }
        }
    }
}

/// Input `k`'s projection: per dimension its loads' row and hull, the whole dimension where
/// they disagree, nothing where it is never loaded.
fn input_projection(inst: &Instance, reach: &Reach, k: usize) -> Projection {
    let np = inst.parallel;
    let ty = &inst.inputs[k];
    let mut proj = Projection::default();
    for d in 0..ty.rank() {
        let (row, offset, shape) = match (&reach.rows[k][d], reach.bounds[k].get(d)) {
            (Some(row), Some(&(lo, hi))) if row.first() != Some(&DISAGREE) => {
                (row.clone(), lo, hi - lo + 1)
            }
            (Some(_), _) => (vec![0; np], 0, ty.shape[d]),
            (None, _) => (vec![0; np], 0, 0),
        };
        proj.matrix.push(row);
        proj.offset.push(offset);
        proj.shape.push(shape);
    }
    proj
}

/// Output `k`'s projection: one element at the point of the variables indexing it.
fn output_projection(inst: &Instance, k: usize) -> Projection {
    let np = inst.parallel;
    let vars = inst
        .stmts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|s| s.target == Target::Output(k))
        .map(|s| s.vars.clone())
        .unwrap_or_default();
    let rank = vars.len();
    Projection {
        matrix: vars
            .iter()
            .map(|&v| (0..np).map(|u| i64::from(u == v)).collect())
            .collect(),
        offset: vec![0; rank],
        shape: vec![1; rank],
    }
}

/// The signature with its index space and costs.
fn costs(inst: &Instance, inputs: Vec<PortSig>, outputs: Vec<PortSig>) -> Signature {
    let stmts = inst.stmts.as_deref().unwrap_or_default();
    let points = inst.points().max(1) as f64;
    let flops: f64 = stmts
        .iter()
        .map(|s| lhs_points(inst, &s.vars) * flops_of(&s.value, inst))
        .sum();
    let bytes: f64 = inputs
        .iter()
        .chain(&outputs)
        // In f64: a projection's extents can multiply past i64 (an import of a large model).
        .map(|p| {
            p.projection
                .shape
                .iter()
                .map(|&d| d as f64)
                .product::<f64>()
                * p.ty.dtype.size_bytes() as f64
        })
        .sum();
    let index = inst.vars[..inst.parallel]
        .iter()
        .map(|v| (v.name.clone(), v.extent()))
        .collect::<Vec<(String, i64)>>();
    let marginal = index
        .iter()
        .map(|(n, ext)| {
            let per_step = (flops / (*ext).max(1) as f64).round() as i64;
            (n.clone(), vec![("flops".to_string(), per_step)])
        })
        .collect();
    Signature {
        index,
        inputs,
        outputs,
        marginal,
        flops_per_point: flops / points,
        bytes_per_point: bytes,
    }
}

fn lhs_points(inst: &Instance, vars: &[usize]) -> f64 {
    vars.iter().map(|&v| inst.extent(v) as f64).product()
}

/// Arithmetic operations per evaluation of `e` (loads and casts are free).
fn flops_of(e: &CExpr, inst: &Instance) -> f64 {
    match &e.kind {
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => 0.0,
        CKind::Gather(g) => g.gathered().map(|(_, b)| flops_of(b, inst)).sum(),
        CKind::Reduce { vars, body, .. } => lhs_points(inst, vars) * (flops_of(body, inst) + 1.0),
        CKind::Call(f, args) => {
            let own = if matches!(f, Func::Cast(_)) { 0.0 } else { 1.0 };
            own + args.iter().map(|a| flops_of(a, inst)).sum::<f64>()
        }
        CKind::Unary(_, a) => 1.0 + flops_of(a, inst),
        CKind::Binary(_, a, b) => 1.0 + flops_of(a, inst) + flops_of(b, inst),
    }
}
