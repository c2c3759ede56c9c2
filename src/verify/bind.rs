//! Binding an op's shape symbols, variadic shape lists and parameters to the argument types of
//! one apply (unification), and evaluating the op's output shapes.

use crate::diag::{codes, Diagnostic, Label, Span};
use crate::ir::kernel::{Dim, IExpr, OpDef, PortDef};
use crate::ir::TensorType;
use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct Bindings {
    pub syms: HashMap<String, i64>,
    pub variadic: HashMap<String, Vec<i64>>,
}

impl Bindings {
    pub fn get(&self, n: &str) -> Option<i64> {
        self.syms.get(n).copied()
    }
    pub fn eval(&self, e: &IExpr) -> Result<Option<i64>, String> {
        e.eval(&|n| self.get(n))
    }
}

/// Where the apply is, for secondary labels.
#[derive(Clone, Copy)]
pub struct Site {
    pub span: Span,
}

impl Site {
    pub fn err(&self, code: crate::diag::Code, msg: String, at: Span, label: &str) -> Diagnostic {
        Diagnostic::error(code, msg)
            .primary(at, label)
            .secondary(self.span, "in this apply")
    }
}

/// Which input ports an apply binds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Ports {
    /// All of them: every shape symbol must be bound.
    All,
    /// Only those whose types are known (see `stub`): a symbol may stay unbound.
    Known,
}

/// Binds parameters and unifies input ports with `args`; returns the bindings or diagnostics.
pub fn bind(
    op: &OpDef,
    params: &[(String, i64)],
    args: &[TensorType],
    site: Site,
) -> Result<Bindings, Vec<Diagnostic>> {
    bind_ports(op, params, &[], args, Ports::All, site)
}

/// [`bind`], for all ports or only the known ones.
/// `param_spans`: where each parameter's name is written (may be empty).
pub(super) fn bind_ports(
    op: &OpDef,
    params: &[(String, i64)],
    param_spans: &[Span],
    args: &[TensorType],
    ports: Ports,
    site: Site,
) -> Result<Bindings, Vec<Diagnostic>> {
    let (mut b, mut errs) = check_call(op, params, param_spans, args.len(), site);
    if !errs.is_empty() {
        return Err(errs);
    }
    for (port, ty) in op.inputs.iter().zip(args) {
        if port.dtype != ty.dtype {
            errs.push(site.err(
                codes::DTYPE_MISMATCH,
                format!(
                    "input `{}` of `@{}` is {} but the argument is {ty}",
                    port.name, op.name, port.dtype
                ),
                port.span,
                "port declared here",
            ));
        }
    }
    // Two rounds: bare symbols bind first, so compound dims like `(H - KH) / s + 1` can then be checked.
    let mut failed = vec![false; args.len()];
    for round in 0..2 {
        for (k, (port, ty)) in op.inputs.iter().zip(args).enumerate() {
            // A port that failed in the first round would only report the same error again.
            if failed[k] {
                continue;
            }
            if let Err(d) = unify(&mut b, port, ty, round == 1 && ports == Ports::All, site) {
                failed[k] = true;
                errs.push(d);
            }
        }
    }
    if errs.is_empty() {
        Ok(b)
    } else {
        Err(errs)
    }
}

/// `args` with each one's dtype replaced by its port's: an argument of the wrong dtype (a
/// reported mistake) does not change the shapes an apply binds.
pub(super) fn with_port_dtypes(op: &OpDef, args: &[TensorType]) -> Vec<TensorType> {
    let dtypes = op
        .inputs
        .iter()
        .map(|p| Some(p.dtype))
        .chain(std::iter::repeat(None));
    args.iter()
        .zip(dtypes)
        .map(|(a, d)| TensorType::new(d.unwrap_or(a.dtype), a.shape.clone()))
        .collect()
}

/// The checks of an apply that need no argument types: its parameters (bound into the
/// returned bindings) and its number of arguments. A parameter that is unknown or given twice
/// is labelled at its name when `param_spans` has it.
pub(super) fn check_call(
    op: &OpDef,
    params: &[(String, i64)],
    param_spans: &[Span],
    given: usize,
    site: Site,
) -> (Bindings, Vec<Diagnostic>) {
    let mut b = Bindings::default();
    let mut errs = Vec::new();
    let missing: Vec<&String> = op
        .params
        .iter()
        .filter(|p| !params.iter().any(|(n, _)| n == *p))
        .collect();
    // An unknown parameter is usually a misspelt missing one: one mistake, one diagnostic.
    let mut unpaired = missing.iter();
    for (k, (n, v)) in params.iter().enumerate() {
        let at = param_spans.get(k).copied().unwrap_or(site.span);
        if !op.params.contains(n) {
            let d = site.err(
                codes::BAD_PARAM,
                format!("`@{}` has no parameter `{n}`", op.name),
                at,
                "unknown parameter",
            );
            errs.push(match unpaired.next() {
                Some(p) => d.note(format!("help: did you mean `{p}`?")),
                None => d,
            });
        } else if b.syms.insert(n.clone(), *v).is_some() {
            errs.push(site.err(
                codes::BAD_PARAM,
                format!("parameter `{n}` is given twice"),
                at,
                "duplicate parameter",
            ));
        }
    }
    for p in unpaired {
        errs.push(
            Diagnostic::error(
                codes::BAD_PARAM,
                format!("missing parameter `{p}` for `@{}`", op.name),
            )
            .primary(
                site.span,
                format!("write `apply @{}<{p} = ...>(...)`", op.name),
            )
            .secondary(op.name_span, "op defined here"),
        );
    }
    if given != op.inputs.len() {
        errs.push(arity_error(
            &op.name,
            op.inputs.len(),
            given,
            op.name_span,
            site,
        ));
    }
    (b, errs)
}

/// An apply of `@name` (which takes `takes` inputs) with `given` arguments.
pub(super) fn arity_error(
    name: &str,
    takes: usize,
    given: usize,
    name_span: Span,
    site: Site,
) -> Diagnostic {
    Diagnostic::error(
        codes::ARITY,
        format!("`@{name}` takes {takes} input(s) but {given} were given"),
    )
    .primary(site.span, "wrong number of arguments")
    .secondary(name_span, "op defined here")
}

fn split_dims(port: &PortDef, rank: usize) -> Option<(usize, Option<&str>)> {
    let fixed = port
        .dims
        .iter()
        .filter(|d| matches!(d, Dim::Expr(_)))
        .count();
    let var = port.dims.iter().find_map(|d| match d {
        Dim::Variadic(n, _) => Some(n.as_str()),
        Dim::Expr(_) => None,
    });
    match var {
        None if rank == fixed => Some((0, None)),
        Some(v) if rank >= fixed => Some((rank - fixed, Some(v))),
        _ => None,
    }
}

fn unify(
    b: &mut Bindings,
    port: &PortDef,
    ty: &TensorType,
    check: bool,
    site: Site,
) -> Result<(), Diagnostic> {
    let Some((vlen, _)) = split_dims(port, ty.rank()) else {
        // A `..S` dim stands for any number of dims: the rank is then a lower bound.
        let fixed = port
            .dims
            .iter()
            .filter(|d| matches!(d, Dim::Expr(_)))
            .count();
        let rank = if fixed < port.dims.len() {
            format!("at least {fixed}")
        } else {
            fixed.to_string()
        };
        return Err(site.err(
            codes::RANK_MISMATCH,
            format!(
                "input `{}` has rank {rank} but the argument {ty} has rank {}",
                port.name,
                ty.rank()
            ),
            port.span,
            "port declared here",
        ));
    };
    let mut k = 0;
    for d in &port.dims {
        match d {
            Dim::Variadic(n, _) => {
                let got = ty.shape[k..k + vlen].to_vec();
                k += vlen;
                match b.variadic.get(n) {
                    Some(prev) if *prev != got => {
                        return Err(site.err(
                            codes::SHAPE_MISMATCH,
                            format!(
                                "`..{n}` is {prev:?} from an earlier input but {got:?} for `{}`",
                                port.name
                            ),
                            port.span,
                            "does not unify",
                        ))
                    }
                    _ => {
                        b.variadic.insert(n.clone(), got);
                    }
                }
            }
            Dim::Expr(e) => {
                let got = ty.shape[k];
                k += 1;
                if let IExpr::Name(n, _) = e {
                    if !b.syms.contains_key(n) {
                        b.syms.insert(n.clone(), got);
                        continue;
                    }
                }
                match b.eval(e) {
                    Ok(Some(v)) if v != got => {
                        return Err(site.err(
                            codes::SHAPE_MISMATCH,
                            format!(
                                "dimension {} of input `{}` must be {v} but the argument is {ty}",
                                k - 1,
                                port.name
                            ),
                            e.span(),
                            &format!("this is {v} here"),
                        ))
                    }
                    Ok(_) => {}
                    Err(n) if check => {
                        return Err(site.err(
                            codes::SHAPE_MISMATCH,
                            format!("symbol `{n}` is not bound by any input dimension"),
                            e.span(),
                            "cannot be inferred",
                        ));
                    }
                    Err(_) => {}
                }
            }
        }
    }
    Ok(())
}

/// The concrete shape of an output port under `b`.
pub fn output_shape(b: &Bindings, port: &PortDef, site: Site) -> Result<Vec<i64>, Diagnostic> {
    let mut shape = Vec::new();
    for d in &port.dims {
        match d {
            Dim::Variadic(n, s) => match b.variadic.get(n) {
                Some(v) => shape.extend(v),
                None => {
                    return Err(site.err(
                        codes::BAD_SHAPE,
                        format!("`..{n}` is not bound by any input"),
                        *s,
                        "unknown shape list",
                    ))
                }
            },
            Dim::Expr(e) => match b.eval(e) {
                Ok(Some(v)) if v >= 0 => shape.push(v),
                // Values the apply chose (its parameters, its argument sizes): labelled there.
                Ok(Some(v)) => {
                    return Err(Diagnostic::error(
                        codes::BAD_SHAPE,
                        format!(
                            "output `{}` would have a negative dimension ({v})",
                            port.name
                        ),
                    )
                    .primary(
                        site.span,
                        format!("output `{}` is negative here", port.name),
                    )
                    .secondary(e.span(), "this dimension"))
                }
                Ok(None) => {
                    return Err(Diagnostic::error(
                        codes::BAD_SHAPE,
                        "shape expression divides by zero or overflows",
                    )
                    .primary(
                        site.span,
                        format!("output `{}` cannot be sized here", port.name),
                    )
                    .secondary(e.span(), "this dimension"))
                }
                Err(n) => {
                    return Err(site.err(
                        codes::BAD_SHAPE,
                        format!("symbol `{n}` is not bound by any input"),
                        e.span(),
                        "cannot be inferred",
                    ))
                }
            },
        }
    }
    Ok(shape)
}

/// An error about an input port moves its primary label to the apply's argument (as rustc
/// labels a call's argument), with the port as the secondary label.
pub(super) fn at_argument(mut d: Diagnostic, op: &OpDef, args: &[Span], site: Span) -> Diagnostic {
    let Some(primary) = d.primary_span() else {
        return d;
    };
    let port = op.inputs.iter().position(|p| {
        p.span.start <= primary.start && primary.end <= p.span.end && p.span.end > p.span.start
    });
    let (Some(k), true) = (
        port,
        d.labels.iter().any(|l| !l.primary && l.span.same_as(site)),
    ) else {
        return d;
    };
    let Some(&arg) = args.get(k) else {
        return d;
    };
    d.labels.retain(|l| l.primary || !l.span.same_as(site));
    for l in &mut d.labels {
        if l.primary {
            l.primary = false;
            l.message = format!("input `{}`: {}", op.inputs[k].name, l.message);
        }
    }
    d.labels.insert(
        0,
        Label {
            primary: true,
            span: arg,
            message: "this argument".into(),
        },
    );
    d
}
