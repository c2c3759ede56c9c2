//! Loads whose index shares a dimension between two variables or scales one
//! (`x[n, c, 2 * h + kh, 2 * w + kw]`, a convolution's window): the variables that share a
//! dimension with a wider one (usually the kernel offsets `kh`, `kw`) are fixed to each of
//! their values, so that every dimension of each resulting load is a constant or one variable
//! with a positive step; `kernel.rs` gives each such load an adjoint op over the wide
//! variables, spread by the step and padded into place (`Emitter::place`), and rule 3 sums
//! the pieces. This is the transposed convolution written as one strided piece per kernel
//! offset (docs/passes/grad.md).

use super::expr;
use super::rules::Contribution;
use crate::ir::instance::{Affine, Instance};

/// At most this many values of the fixed variables per load (each is an op and a placement).
const MAX_PIECES: i64 = 64;

/// The contributions `c` stands for with its narrow shared variables fixed; `c` itself when no
/// dimension has two variables.
pub fn unroll(
    c: Contribution,
    inst: &Instance,
    names: &[String],
) -> Result<Vec<Contribution>, String> {
    let extent = |v: usize| inst.vars[v].range.1 - inst.vars[v].range.0;
    let mut fixed: Vec<usize> = Vec::new();
    for a in &c.index {
        if a.terms.len() < 2 {
            continue;
        }
        // The widest variable stays (on a tie the op's own variable, then the first).
        let key = |v: usize| (extent(v), v < inst.parallel);
        let wide = a.terms.iter().rev().map(|t| t.0).max_by_key(|v| key(*v));
        for &(v, _) in &a.terms {
            if Some(v) != wide && !fixed.contains(&v) {
                fixed.push(v);
            }
        }
    }
    if fixed.is_empty() {
        return Ok(vec![c]);
    }
    let count: i64 = fixed.iter().map(|v| extent(*v)).product();
    if count > MAX_PIECES {
        let vs: Vec<&str> = fixed.iter().map(|v| names[*v].as_str()).collect();
        return Err(format!(
            "a load shares dimensions with `{}` over {count} values (at most {MAX_PIECES} strided pieces)",
            vs.join("`, `")
        ));
    }
    let mut out = Vec::new();
    let mut at: Vec<i64> = fixed.iter().map(|v| inst.vars[*v].range.0).collect();
    loop {
        out.push(fixed_at(&c, &fixed, &at, names));
        // The next point of the fixed variables' box, last variable fastest.
        let mut k = fixed.len();
        loop {
            if k == 0 {
                return Ok(out);
            }
            k -= 1;
            at[k] += 1;
            if at[k] < inst.vars[fixed[k]].range.1 {
                break;
            }
            at[k] = inst.vars[fixed[k]].range.0;
        }
    }
}

/// `c` with each variable of `fixed` replaced by its value in `at`.
fn fixed_at(c: &Contribution, fixed: &[usize], at: &[i64], names: &[String]) -> Contribution {
    let index = c
        .index
        .iter()
        .map(|a| {
            let mut b = Affine {
                terms: vec![],
                constant: a.constant,
            };
            for &(v, k) in &a.terms {
                match fixed.iter().position(|f| *f == v) {
                    Some(p) => b.constant += k * at[p],
                    None => b.terms.push((v, k)),
                }
            }
            b
        })
        .collect();
    let mut adj = c.adj.clone();
    for (v, x) in fixed.iter().zip(at) {
        expr::substitute(&mut adj, &names[*v], *x);
    }
    Contribution {
        index,
        adj,
        bound: c
            .bound
            .iter()
            .copied()
            .filter(|v| !fixed.contains(v))
            .collect(),
        gather: None,
    }
}
