//! Building an [`Instance`] for one apply: bind, lower the kernel (or read the extern
//! signature), derive projections, place shard windows and check every access's static bounds.

use super::bind::{bind, output_shape, with_port_dtypes, Bindings, Site};
use super::kernel;
use crate::diag::{codes, Diagnostic};
use crate::ir::instance::*;
use crate::ir::kernel::{ExternSig, OpBody, OpDef};
use crate::ir::TensorType;
use std::collections::HashMap;

/// Instantiates `op` for an apply with these parameters, argument types and optional range.
pub fn instantiate(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
) -> Result<Instance, Vec<Diagnostic>> {
    let b = bind(op, params, args, site)?;
    if let Some(r) = range {
        if let Some(&(lo, hi)) = r.iter().find(|(lo, hi)| *lo < 0 || hi < lo) {
            let d = Diagnostic::error(codes::BAD_RANGE, format!("invalid index range {lo}:{hi}"))
                .primary(site.span, "ranges must satisfy 0 <= lo <= hi");
            return Err(vec![d]);
        }
    }
    let full: Vec<TensorType> = match range {
        Some(_) => op
            .outputs
            .iter()
            .map(|p| TensorType::new(p.dtype, vec![]))
            .collect(),
        None => op
            .outputs
            .iter()
            .map(|p| output_shape(&b, p, site).map(|s| TensorType::new(p.dtype, s)))
            .collect::<Result<_, _>>()
            .map_err(|d| vec![d])?,
    };
    let mut inst = match &op.body {
        OpBody::Kernel(stmts) => from_kernel(op, stmts, &b, args, &full, range, site)?,
        OpBody::Extern(sig) => from_extern(op, sig, &b, args, &full, range, site)?,
    };
    inst.sharded = range.is_some();
    inst.origins = inst
        .signature
        .inputs
        .iter()
        .map(|p| match range {
            Some(r) => p
                .projection
                .image(r)
                .into_iter()
                .map(|(lo, _)| lo)
                .collect(),
            None => vec![0; p.ty.rank()],
        })
        .collect();
    check_bounds(op, &inst, site)?;
    Ok(inst)
}

/// The output types of a whole (unsharded) apply from its port shapes alone, when binding
/// the shapes succeeds: an apply of an op whose kernel has errors, or with an argument of the
/// wrong dtype, still has these types.
pub(super) fn declared_outputs(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    site: Site,
) -> Option<Vec<TensorType>> {
    let b = bind(op, params, &with_port_dtypes(op, args), site).ok()?;
    op.outputs
        .iter()
        .map(|p| {
            output_shape(&b, p, site)
                .ok()
                .map(|s| TensorType::new(p.dtype, s))
        })
        .collect()
}

fn from_kernel(
    op: &OpDef,
    stmts: &[crate::ir::kernel::Stmt],
    b: &Bindings,
    args: &[TensorType],
    full: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
) -> Result<Instance, Vec<Diagnostic>> {
    let low = kernel::lower(op, stmts, b, args, full, range, site)?;
    let mut inst = Instance {
        inputs: args.to_vec(),
        outputs: low.outputs,
        vars: low.vars,
        parallel: low.parallel,
        temps: low.temps,
        stmts: Some(low.stmts),
        origins: vec![],
        signature: Signature {
            index: vec![],
            inputs: vec![],
            outputs: vec![],
            marginal: vec![],
            flops_per_point: 0.0,
            bytes_per_point: 0.0,
        },
        sharded: false,
    };
    inst.signature = derive_signature(op, &inst);
    Ok(inst)
}

#[allow(clippy::needless_range_loop)] // d indexes three parallel tables
/// Projections from the kernel's accesses: reduction variables fold into the block shape;
/// several accesses to one port take their hull (widened to the whole dim if they disagree).
fn derive_signature(op: &OpDef, inst: &Instance) -> Signature {
    let stmts = inst.stmts.as_deref().unwrap_or_default();
    let np = inst.parallel;
    let mut per_input: Vec<Vec<(Vec<i64>, i64, i64)>> = vec![vec![]; inst.inputs.len()];
    let mut rows_of: Vec<Vec<Option<Vec<i64>>>> =
        inst.inputs.iter().map(|t| vec![None; t.rank()]).collect();
    for st in stmts {
        visit_loads(&st.value, &mut |src, index| {
            let Src::Input(k) = src else { return };
            if per_input[k].is_empty() {
                per_input[k] = vec![(vec![], i64::MAX, i64::MIN); index.len()];
            }
            for (d, a) in index.iter().enumerate() {
                let row: Vec<i64> = (0..np).map(|v| a.coeff(v)).collect();
                let (mut lo, mut hi) = (a.constant, a.constant);
                for &(v, c) in a.terms.iter().filter(|t| t.0 >= np) {
                    let (x, y) = (0, c * (inst.vars[v].range.1 - 1).max(0));
                    lo += x.min(y);
                    hi += x.max(y);
                }
                let slot = &mut per_input[k][d];
                slot.1 = slot.1.min(lo);
                slot.2 = slot.2.max(hi);
                let r = &mut rows_of[k][d];
                match r {
                    None => *r = Some(row),
                    Some(prev) if *prev != row => *r = Some(vec![i64::MIN]),
                    _ => {}
                }
            }
        });
    }
    let inputs = op
        .inputs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let ty = inst.inputs[k].clone();
            let mut proj = Projection {
                matrix: vec![],
                offset: vec![],
                shape: vec![],
            };
            for d in 0..ty.rank() {
                match (&rows_of[k][d], per_input[k].get(d)) {
                    (Some(row), Some(&(_, lo, hi))) if row.first() != Some(&i64::MIN) => {
                        proj.matrix.push(row.clone());
                        proj.offset.push(lo);
                        proj.shape.push(hi - lo + 1);
                    }
                    (Some(_), _) => {
                        proj.matrix.push(vec![0; np]);
                        proj.offset.push(0);
                        proj.shape.push(ty.shape[d]);
                    }
                    (None, _) => {
                        proj.matrix.push(vec![0; np]);
                        proj.offset.push(0);
                        proj.shape.push(0);
                    }
                }
            }
            PortSig {
                name: p.name.clone(),
                ty,
                projection: proj,
            }
        })
        .collect::<Vec<_>>();
    let outputs = op
        .outputs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let vars = stmts
                .iter()
                .find(|s| s.target == Target::Output(k))
                .map(|s| s.vars.clone())
                .unwrap_or_default();
            let matrix = vars
                .iter()
                .map(|&v| (0..np).map(|u| i64::from(u == v)).collect())
                .collect();
            let rank = vars.len();
            PortSig {
                name: p.name.clone(),
                ty: inst.outputs[k].clone(),
                projection: Projection {
                    matrix,
                    offset: vec![0; rank],
                    shape: vec![1; rank],
                },
            }
        })
        .collect::<Vec<_>>();
    let points = inst.points().max(1) as f64;
    let flops: f64 = stmts
        .iter()
        .map(|s| lhs_points(inst, &s.vars) * flops_of(&s.value, inst))
        .sum();
    let bytes: f64 = inputs
        .iter()
        .chain(&outputs)
        .map(|p| p.projection.shape.iter().product::<i64>() as f64 * p.ty.dtype.size_bytes() as f64)
        .sum();
    let index = inst.vars[..np]
        .iter()
        .map(|v| (v.name.clone(), v.range.1 - v.range.0))
        .collect::<Vec<(String, i64)>>();
    let marginal = index
        .iter()
        .map(|(n, ext)| {
            (
                n.clone(),
                vec![(
                    "flops".to_string(),
                    (flops / (*ext).max(1) as f64).round() as i64,
                )],
            )
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
    vars.iter()
        .map(|&v| (inst.vars[v].range.1 - inst.vars[v].range.0) as f64)
        .product()
}

/// Arithmetic operations per evaluation of `e` (loads and casts are free).
fn flops_of(e: &CExpr, inst: &Instance) -> f64 {
    match &e.kind {
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => 0.0,
        CKind::Reduce { vars, body, .. } => lhs_points(inst, vars) * (flops_of(body, inst) + 1.0),
        CKind::Call(f, args) => {
            let own = if matches!(f, crate::ir::kernel::Func::Cast(_)) {
                0.0
            } else {
                1.0
            };
            own + args.iter().map(|a| flops_of(a, inst)).sum::<f64>()
        }
        CKind::Unary(_, a) => 1.0 + flops_of(a, inst),
        CKind::Binary(_, a, b) => 1.0 + flops_of(a, inst) + flops_of(b, inst),
    }
}

/// Calls `f` on every load in `e`.
pub fn visit_loads(e: &CExpr, f: &mut dyn FnMut(Src, &[Affine])) {
    walk(
        e,
        &mut |e, _| {
            if let CKind::Load { src, index, .. } = &e.kind {
                f(src.clone(), index);
            }
        },
        &mut vec![],
    );
}

/// Pre-order walk that also passes the reduction variables enclosing each node.
fn walk(e: &CExpr, f: &mut dyn FnMut(&CExpr, &[usize]), red: &mut Vec<usize>) {
    f(e, red);
    match &e.kind {
        CKind::Reduce { vars, body, .. } => {
            let n = red.len();
            red.extend(vars);
            walk(body, f, red);
            red.truncate(n);
        }
        CKind::Call(_, args) => args.iter().for_each(|a| walk(a, f, red)),
        CKind::Unary(_, a) => walk(a, f, red),
        CKind::Binary(_, a, b) => {
            walk(a, f, red);
            walk(b, f, red);
        }
        CKind::Const(_) | CKind::Var(_) | CKind::Load { .. } => {}
    }
}

fn from_extern(
    op: &OpDef,
    sig: &ExternSig,
    b: &Bindings,
    args: &[TensorType],
    full: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
) -> Result<Instance, Vec<Diagnostic>> {
    let bad = |msg: String, at| vec![site.err(codes::BAD_SIGNATURE, msg, at, "in this signature")];
    let mut index = Vec::new();
    let mut names = HashMap::new();
    for (k, (n, e)) in sig.index.iter().enumerate() {
        let ext = match b.eval(e) {
            Ok(Some(v)) if v >= 0 => v,
            _ => {
                return Err(bad(
                    format!("the extent of index `{n}` cannot be evaluated"),
                    e.span(),
                ))
            }
        };
        if names.insert(n.clone(), k).is_some() {
            return Err(bad(format!("index `{n}` is declared twice"), e.span()));
        }
        index.push((n.clone(), ext));
    }
    if let Some(r) = range {
        if r.len() != index.len() {
            let d = Diagnostic::error(
                codes::BAD_RANGE,
                format!(
                    "the op's index space has {} dimension(s) but the range has {}",
                    index.len(),
                    r.len()
                ),
            )
            .primary(site.span, "wrong number of ranges");
            return Err(vec![d]);
        }
    }
    let ranges: Vec<(i64, i64)> = match range {
        Some(r) => r.to_vec(),
        None => index.iter().map(|(_, e)| (0, *e)).collect(),
    };
    let mut ports: Vec<PortSig> = Vec::new();
    for (p, ty) in op
        .inputs
        .iter()
        .zip(args)
        .chain(op.outputs.iter().zip(full))
    {
        let Some(pr) = sig.projections.iter().find(|x| x.port == p.name) else {
            return Err(bad(
                format!("port `{}` has no projection", p.name),
                sig.index_span,
            ));
        };
        if pr.start.len() != p.dims.len() || pr.shape.len() != p.dims.len() {
            return Err(bad(
                format!(
                    "the projection of `{}` must have {} entries",
                    p.name,
                    p.dims.len()
                ),
                pr.span,
            ));
        }
        let mut proj = Projection {
            matrix: vec![],
            offset: vec![],
            shape: vec![],
        };
        for (s, sh) in pr.start.iter().zip(&pr.shape) {
            let lookup = |n: &str| {
                names
                    .get(n)
                    .map(|&v| Affine::var(v))
                    .or_else(|| b.get(n).map(Affine::constant))
            };
            let a = affine_of(s, &lookup).map_err(|_| {
                bad(
                    format!(
                        "projection start of `{}` is not affine in the index",
                        p.name
                    ),
                    s.span(),
                )
            })?;
            proj.matrix
                .push((0..index.len()).map(|v| a.coeff(v)).collect());
            proj.offset.push(a.constant);
            match b.eval(sh) {
                Ok(Some(v)) if v >= 0 => proj.shape.push(v),
                _ => {
                    return Err(bad(
                        format!(
                            "projection shape of `{}` must be a non-negative constant",
                            p.name
                        ),
                        sh.span(),
                    ))
                }
            }
        }
        ports.push(PortSig {
            name: p.name.clone(),
            ty: ty.clone(),
            projection: proj,
        });
    }
    let outputs: Vec<PortSig> = ports.split_off(op.inputs.len());
    let outputs: Vec<PortSig> = outputs
        .into_iter()
        .map(|mut p| {
            if range.is_some() {
                p.ty.shape = p
                    .projection
                    .image(&ranges)
                    .iter()
                    .map(|(lo, hi)| hi - lo)
                    .collect();
            }
            p
        })
        .collect();
    let mut marginal = Vec::new();
    for (d, entries) in &sig.costs {
        let mut row = Vec::new();
        for (res, e) in entries {
            match b.eval(e) {
                Ok(Some(v)) => row.push((res.clone(), v)),
                _ => {
                    return Err(bad(
                        format!("cost `{res}` of `{d}` cannot be evaluated"),
                        e.span(),
                    ))
                }
            }
        }
        marginal.push((d.clone(), row));
    }
    let vars: Vec<Var> = index
        .iter()
        .zip(&ranges)
        .map(|((n, _), r)| Var {
            name: n.clone(),
            range: *r,
        })
        .collect();
    let mut inst = Instance {
        inputs: args.to_vec(),
        outputs: outputs.iter().map(|p| p.ty.clone()).collect(),
        parallel: vars.len(),
        vars,
        temps: vec![],
        stmts: None,
        origins: vec![],
        signature: Signature {
            index,
            inputs: ports,
            outputs,
            marginal,
            flops_per_point: 0.0,
            bytes_per_point: 0.0,
        },
        sharded: false,
    };
    if !sig.kernel.is_empty() {
        let low = kernel::lower(op, &sig.kernel, b, args, &inst.outputs, range, site)?;
        let declared: Vec<&str> = inst.vars.iter().map(|v| v.name.as_str()).collect();
        let got: Vec<&str> = low.vars[..low.parallel]
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        if declared != got {
            return Err(bad(format!("the reference kernel's index variables {got:?} differ from the declared index {declared:?}"), sig.index_span));
        }
        inst.vars = low.vars;
        inst.temps = low.temps;
        inst.stmts = Some(low.stmts);
    }
    Ok(inst)
}

/// Every access must stay inside its tensor (inputs: inside the shard's window).
fn check_bounds(op: &OpDef, inst: &Instance, site: Site) -> Result<(), Vec<Diagnostic>> {
    let mut errs = Vec::new();
    let ranges: Vec<(i64, i64)> = inst.vars.iter().map(|v| v.range).collect();
    for st in inst.stmts.iter().flatten() {
        walk(
            &st.value,
            &mut |e, red| {
                let CKind::Load { src, index, texts } = &e.kind else {
                    return;
                };
                if red.iter().any(|&v| ranges[v].0 >= ranges[v].1)
                    || st.vars.iter().any(|&v| ranges[v].0 >= ranges[v].1)
                {
                    return; // never executed
                }
                for (d, a) in index.iter().enumerate() {
                    let (lo, hi) = a.range(&ranges);
                    let (name, allowed) = match src {
                        Src::Input(k) => {
                            let o = inst.origins[*k][d];
                            (
                                op.inputs[*k].name.clone(),
                                (o, o + inst.inputs[*k].shape[d]),
                            )
                        }
                        Src::Temp(t) => {
                            (inst.temps[*t].name.clone(), ranges[inst.temps[*t].vars[d]])
                        }
                    };
                    if lo < allowed.0 || hi >= allowed.1 {
                        let (span, text) = &texts[d];
                        let size = allowed.1 - allowed.0;
                        let msg = if allowed.0 == 0 {
                            format!("index `{text}` of `{name}` ranges over [{lo}, {hi}] but dimension {d} has size {size}")
                        } else {
                            format!("index `{text}` of `{name}` ranges over [{lo}, {hi}] but the shard's window of dimension {d} is [{}, {})", allowed.0, allowed.1)
                        };
                        errs.push(
                            site.err(
                                codes::OUT_OF_BOUNDS,
                                msg,
                                *span,
                                "can leave the tensor's bounds",
                            )
                            .note("pad or slice the input so that every index stays in range"),
                        );
                    }
                }
            },
            &mut vec![],
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}
