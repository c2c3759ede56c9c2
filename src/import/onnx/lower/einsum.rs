//! `Einsum`: one kernel whose index variables are the equation's letters, `y[out] =
//! sum[others](x0[..] * x1[..] * ...)`. A letter repeated within an operand reads its diagonal
//! (`x[i, i]`); `...` stands for leading dimensions, broadcast (numpy rules) across the
//! operands; without `->` the output is `...` and then the letters used once, in order.

use super::emit::D;
use super::{broadcast_shapes, Cx, Val, R};
use crate::import::onnx::model::Node;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    match op {
        "Einsum" => Some(einsum),
        _ => None,
    }
}

/// The index variables of the `...` dims: two-letter names no equation letter maps to (`ea`,
/// `eb`, ...).
fn ellipsis_vars(k: usize) -> Vec<String> {
    (0..k)
        .map(|i| format!("e{}", (b'a' + i as u8) as char))
        .collect()
}

/// A letter's index variable (lower case kept; an upper-case `B` is `b_`).
fn var(c: char) -> String {
    if c.is_ascii_lowercase() {
        c.to_string()
    } else {
        format!("{}_", c.to_ascii_lowercase())
    }
}

/// An operand's term as index variables, with `...` expanded to the last `k` of `ell`.
fn term_vars(term: &str, ell: &[String], rank: usize) -> Option<Vec<String>> {
    let letters = term.replace("...", "").chars().count();
    let mut out = Vec::new();
    let mut rest = term;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            let k = rank.checked_sub(letters)?;
            out.extend_from_slice(&ell[ell.len().checked_sub(k)?..]);
            rest = r;
        } else {
            let c = rest.chars().next()?;
            if !c.is_ascii_alphabetic() {
                return None;
            }
            out.push(var(c));
            rest = &rest[1..];
        }
    }
    (out.len() == rank).then_some(out)
}

fn einsum(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let eq: String = n
        .string("equation")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    let xs: Vec<D> = (0..n.inputs.len())
        .map(|i| cx.data(n, i))
        .collect::<R<_>>()?;
    if terms.len() != xs.len() || xs.iter().any(|x| x.dtype != xs[0].dtype) {
        return Err(cx.invalid(n, format!("equation `{eq}` for {} operands", xs.len())));
    }
    // The `...` dims: as many as the most any operand has, broadcast across operands.
    let ell_rank = terms
        .iter()
        .zip(&xs)
        .filter(|(t, _)| t.contains("..."))
        .map(|(t, x)| x.rank().saturating_sub(t.replace("...", "").len()))
        .max()
        .unwrap_or(0);
    let ell = ellipsis_vars(ell_rank);
    let mut vars = Vec::new();
    for (t, x) in terms.iter().zip(&xs) {
        let v = term_vars(t, &ell, x.rank()).ok_or_else(|| {
            cx.invalid(n, format!("term `{t}` for an operand of rank {}", x.rank()))
        })?;
        vars.push(v);
    }
    let out = match &rhs {
        Some(r) => term_vars(r, &ell, ell_rank + r.replace("...", "").len()),
        None => Some(implicit_output(&lhs, &ell)),
    }
    .ok_or_else(|| cx.invalid(n, format!("equation `{eq}`")))?;
    let sizes = extents(cx, n, &xs, &vars, &ell)?;
    let unique = out.iter().enumerate().all(|(k, v)| !out[..k].contains(v));
    if !unique || out.iter().any(|v| !sizes.contains_key(v)) {
        return Err(cx.invalid(
            n,
            format!("equation `{eq}`: an output letter twice or on no input"),
        ));
    }
    let xs: Vec<D> = (xs.iter().zip(&vars).enumerate())
        .map(|(k, (x, v))| {
            let shape: Vec<usize> = v.iter().map(|w| sizes[w]).collect();
            // Only the `...` dims may broadcast (a size-1 dim read at the full extent).
            cx.broadcast(
                x,
                &shape,
                &format!("{}_in{k}", super::views::out_hint(n, 0)),
            )
        })
        .collect();
    Ok(vec![Val::Data(emit(cx, n, &xs, &vars, &out, &sizes))])
}

/// The output of an equation without `->`: the `...` dims, then the letters used once, sorted.
fn implicit_output(lhs: &str, ell: &[String]) -> Vec<String> {
    let letters: String = lhs.replace("...", "").replace(',', "");
    let mut once: Vec<char> = letters
        .chars()
        .filter(|c| letters.matches(*c).count() == 1)
        .collect();
    once.sort_unstable();
    let mut out = if lhs.contains("...") {
        ell.to_vec()
    } else {
        Vec::new()
    };
    out.extend(once.into_iter().map(var));
    out
}

/// Each variable's extent: the operands' sizes of its dims, which must agree (a size 1 of a
/// `...` dim broadcasts).
fn extents(
    cx: &Cx,
    n: &Node,
    xs: &[D],
    vars: &[Vec<String>],
    ell: &[String],
) -> R<std::collections::HashMap<String, usize>> {
    let mut sizes = std::collections::HashMap::new();
    for (x, vs) in xs.iter().zip(vars) {
        for (v, &d) in vs.iter().zip(&x.shape) {
            let e = sizes.entry(v.clone()).or_insert(d);
            let ellipsis = ell.contains(v);
            match broadcast_shapes(&[*e], &[d]) {
                Some(b) if ellipsis || *e == d => *e = b[0],
                _ => return Err(cx.invalid(n, format!("`{v}` has sizes {e} and {d}"))),
            }
        }
    }
    Ok(sizes)
}

/// The kernel and its apply.
fn emit(
    cx: &mut Cx,
    n: &Node,
    xs: &[D],
    vars: &[Vec<String>],
    out: &[String],
    sizes: &std::collections::HashMap<String, usize>,
) -> D {
    let t = xs[0].dtype.name();
    let sym = |v: &str| v.to_ascii_uppercase();
    let ports: Vec<String> = (xs.iter().zip(vars).enumerate())
        .map(|(k, (_, vs))| {
            // A repeated letter gets a second symbol: its extent comes from the first.
            let mut seen = Vec::new();
            let dims: Vec<String> = vs
                .iter()
                .map(|v| {
                    let s = if seen.contains(v) {
                        format!("{}{}", sym(v), seen.len())
                    } else {
                        sym(v)
                    };
                    seen.push(v.clone());
                    s
                })
                .collect();
            format!("x{k}: {t}[{}]", dims.join(", "))
        })
        .collect();
    let loads: Vec<String> = (vars.iter().enumerate())
        .map(|(k, vs)| format!("x{k}[{}]", vs.join(", ")))
        .collect();
    let mut reduced: Vec<&String> = vars.iter().flatten().filter(|v| !out.contains(v)).collect();
    reduced.sort();
    reduced.dedup();
    let prod = loads.join(" * ");
    let body = if reduced.is_empty() {
        prod
    } else {
        let rs: Vec<&str> = reduced.iter().map(|s| s.as_str()).collect();
        format!("sum[{}]({prod})", rs.join(", "))
    };
    let outs: Vec<String> = out.iter().map(|v| sym(v)).collect();
    let text = format!(
        "op @{{NAME}}({}) -> (y: {t}[{}]) {{\n  y[{}] = {body}\n}}",
        ports.join(", "),
        outs.join(", "),
        out.join(", ")
    );
    let op = cx.e.op("Einsum", &text);
    let shape = out.iter().map(|v| sizes[v]).collect();
    let args: Vec<&D> = xs.iter().collect();
    let h = super::views::out_hint(n, 0);
    cx.e.apply(&h, &op, &[], &args, xs[0].dtype, shape)
}
