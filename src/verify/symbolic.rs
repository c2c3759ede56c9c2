//! Checking every op once on its own, whether or not a graph applies it: names, affinity,
//! targets, reductions and dtype typing, with the port dtypes. Port shapes are symbols, so the
//! op is instantiated at stand-in sizes and only the diagnostics that cannot depend on sizes
//! are kept (bounds and shape errors are left to the applies, which know the real sizes).

use super::bind::Site;
use super::instance::instantiate;
use crate::diag::{codes, Code, Diagnostics};
use crate::ir::kernel::{Dim, IExpr, OpDef};
use crate::ir::TensorType;
use std::collections::HashMap;

/// Codes whose diagnostics do not depend on the sizes an op is applied at.
const SIZE_FREE: [Code; 10] = [
    codes::DTYPE_MISMATCH,
    codes::RANK_MISMATCH,
    codes::UNDEFINED_NAME,
    codes::NON_AFFINE,
    codes::UNKNOWN_EXTENT,
    codes::BAD_TARGET,
    codes::MISSING_OUTPUT,
    codes::UNKNOWN_FUNCTION,
    codes::USE_BEFORE_DEF,
    codes::BAD_REDUCTION,
];

/// Checks each op of `ops` at stand-in sizes; see the module doc.
pub fn check_ops<'a>(ops: impl IntoIterator<Item = &'a OpDef>) -> Diagnostics {
    let mut diags = Diagnostics::default();
    for op in ops {
        let Some((params, args)) = stand_in(op) else {
            continue;
        };
        let site = Site { span: op.name_span };
        let Err(ds) = instantiate(op, &params, &args, None, site) else {
            continue;
        };
        for mut d in ds {
            if d.code.is_some_and(|c| SIZE_FREE.contains(&c)) {
                // There is no apply to point at: drop the "in this apply" label.
                d.labels
                    .retain(|l| l.primary || !l.span.same_as(op.name_span));
                diags.push(d);
            }
        }
    }
    diags
}

/// Parameter values and argument types to instantiate an op at.
type StandIn = (Vec<(String, i64)>, Vec<TensorType>);

/// Parameters and argument types for `op`: distinct sizes for its shape symbols (large and
/// decreasing in order of appearance, so that shape arithmetic such as `(H - K) / s + 1` stays
/// positive), 1 for its parameters,
/// rank 2 for `..S` lists. `None` when a port shape cannot be evaluated that way.
fn stand_in(op: &OpDef) -> Option<StandIn> {
    let params: Vec<(String, i64)> = op.params.iter().map(|p| (p.clone(), 1)).collect();
    let mut syms: HashMap<String, i64> = params.iter().cloned().collect();
    let mut lists: HashMap<&str, Vec<i64>> = HashMap::new();
    let mut fresh = 0;
    // Decreasing, so that a later symbol subtracted from an earlier one (`L - R + 1`, data
    // before filter) stays positive.
    let mut next = || {
        fresh += 1;
        (2000 - 13 * fresh).max(30 + fresh)
    };
    let mut args = Vec::new();
    for port in &op.inputs {
        let mut shape = Vec::new();
        for d in &port.dims {
            match d {
                Dim::Variadic(n, _) => {
                    let l = lists.entry(n).or_insert_with(|| vec![next(), next()]);
                    shape.extend(l.iter().copied());
                }
                Dim::Expr(e) => {
                    let mut names = Vec::new();
                    e.visit_names(&mut |n, _| names.push(n.to_string()));
                    for n in names {
                        syms.entry(n).or_insert_with(&mut next);
                    }
                    let v = IExpr::eval(e, &|n| syms.get(n).copied()).ok()??;
                    if v < 0 {
                        return None;
                    }
                    shape.push(v);
                }
            }
        }
        args.push(TensorType::new(port.dtype, shape));
    }
    Some((params, args))
}
