//! Affine index helpers of the fused kernels: canonical forms, shifts by a window origin,
//! substitution of variables, and the checks built on them. Both the kernel composition
//! (`kernel.rs`) and the view maps (`views.rs`) use them; neither depends on the other for them.

use crate::ir::instance::{Affine, Var};

/// Why a composition was not possible (never an error: the rewrite is just not done).
pub type Res<T> = Result<T, &'static str>;

/// `index[d] + sign·offset[d]` per dim.
pub fn shifted(index: &[Affine], offset: &[i64], sign: i64) -> Res<Vec<Affine>> {
    if index.len() != offset.len() {
        return Err("index rank");
    }
    index
        .iter()
        .zip(offset)
        .map(|(a, &o)| {
            let o = o.checked_mul(sign).ok_or("index overflow")?;
            a.clone()
                .add(&Affine::constant(o), 1)
                .ok_or("index overflow")
        })
        .collect()
}

/// An affine function with its terms sorted by variable and zero terms dropped.
pub fn canonical(a: &Affine) -> Affine {
    let mut terms: Vec<(usize, i64)> = Vec::new();
    for &(v, c) in &a.terms {
        match terms.iter_mut().find(|t| t.0 == v) {
            Some(t) => t.1 = t.1.wrapping_add(c),
            None => terms.push((v, c)),
        }
    }
    terms.retain(|t| t.1 != 0);
    terms.sort_unstable();
    Affine {
        terms,
        constant: a.constant,
    }
}

/// `Σ c·img(v) + k`: an affine function with every variable replaced by an affine image.
pub fn substitute(a: &Affine, img: &dyn Fn(usize) -> Res<Affine>) -> Res<Affine> {
    let mut out = Affine::constant(a.constant);
    for &(v, c) in &a.terms {
        let t = img(v)?.scale(c).ok_or("index overflow")?;
        out = out.add(&t, 1).ok_or("index overflow")?;
    }
    Ok(canonical(&out))
}

/// The single variable `a` is, if it is exactly one variable.
pub fn as_var(a: &Affine) -> Option<usize> {
    let a = canonical(a);
    (a.constant == 0 && a.terms.len() == 1 && a.terms[0].1 == 1).then(|| a.terms[0].0)
}

/// Whether a load with this index reads each element at most once over the loops around it:
/// every variable in `scope` with more than one value is the only such variable of some dim.
pub fn injective(index: &[Affine], scope: &[usize], vars: &[Var]) -> bool {
    let wide = |v: usize| vars[v].range.1 - vars[v].range.0 > 1;
    scope.iter().filter(|&&v| wide(v)).all(|&v| {
        index.iter().any(|a| {
            let live: Vec<usize> = canonical(a)
                .terms
                .iter()
                .map(|t| t.0)
                .filter(|&w| wide(w))
                .collect();
            live == [v]
        })
    })
}
