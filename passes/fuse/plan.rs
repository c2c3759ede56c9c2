//! Which producer→consumer compositions to try, in order of preference (the cost rules).
//!
//! Terms, for a producer `P` whose single output `v` is read by consumer `C`:
//! - a **site** is one load of `v` in `C`; it is **injective** when every loop variable around
//!   it (the statement's left-hand variables and enclosing reduction variables, those with
//!   more than one value) is the only such variable of some index dim, so the load reads each
//!   element at most once;
//! - `sigma` **places** `P`'s index variables on distinct parallel variables of `C` with the
//!   same (global) ranges, so that `P`'s temporaries can live in `C`. It is taken from the
//!   sites when every site indexes `v` by the same parallel variables alone (`v[i, j]`,
//!   `v[j]`); otherwise any placement with matching ranges is used (preferring the variables
//!   of the first site), and the sites keep their own indices into the temporaries;
//! - `P` is **elementwise** when it has no temporaries and its output expression has no
//!   reduction and at most [`INLINE_MAX`] nodes;
//! - `v` **escapes** when anything but `C` uses it (another apply, a view, a sink, a sequence
//!   point).
//!
//! Candidates, first that verifies wins:
//! 1. `P` elementwise and all sites injective → inline `P`'s expression at every site (also when
//!    `v` escapes: cheap recomputation; `P` stays for its other users);
//! 2. only if `v` does not escape, and a placement `sigma` exists:
//!    a. `P`'s output expression has no reduction, all sites are injective and the expression
//!    is small → `P`'s temporaries become `C`'s, its output expression is substituted (a
//!    reduction with an epilogue, e.g. softmax followed by a scale);
//!    b. otherwise `P`'s output becomes a temporary `t[σ...]` (e.g. `linear ⇒ relu`);
//! 3. only if `v` does not escape, `P` has no temporaries and `C` has exactly one site, which
//!    is injective → inline even with a reduction (each element is still computed once).
//!
//! A reduction is never inlined at two sites or at a site that reads an element twice, and
//! never when `v` escapes: the diamond `k = A @ x; sin(k); cos(k)` keeps `k`.

use super::absorb::Absorb;
use super::affine::{as_var, injective, shifted};
use super::kernel::{has_reduction, loads_in_scope, node_count, FKernel};
use crate::ir::graph::ValueId;
use crate::ir::instance::{Affine, Target};

/// Largest producer expression (in nodes) that is inlined at several sites.
pub const INLINE_MAX: usize = 48;

/// A site: a load's index (in the producer's coordinates) and the variables in scope.
type Site = (Vec<Affine>, Vec<usize>);

/// One composition to try.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub mode: Absorb,
    pub sigma: Option<Vec<usize>>,
}

/// The compositions of `p` into `c` worth trying, best first.
pub fn candidates(c: &FKernel, p: &FKernel, v: ValueId, escapes: bool) -> Vec<Candidate> {
    let Some(out) = p.stmts.iter().find(|s| s.target == Target::Output(0)) else {
        return vec![];
    };
    if p.outputs.len() != 1 {
        return vec![];
    }
    // Each site with its index in the producer's global coordinates (see `absorb::absorb`).
    let ranges: Vec<(i64, i64)> = out.vars.iter().map(|&pv| p.vars[pv].range).collect();
    let mut sites = Vec::new();
    for k in c.ports_of(v) {
        let origin = &c.inputs[k].origin;
        if origin.len() != ranges.len() {
            return vec![];
        }
        let shift: Vec<i64> = ranges.iter().zip(origin).map(|(r, o)| r.0 - o).collect();
        for (index, scope) in loads_in_scope(c, k) {
            let Ok(global) = shifted(&index, &shift, 1) else {
                return vec![];
            };
            sites.push((global, scope));
        }
    }
    let inj = sites
        .iter()
        .all(|(index, scope)| injective(index, scope, &c.vars));
    let red = has_reduction(&out.value);
    let small = node_count(&out.value) <= INLINE_MAX;
    let elementwise = p.temps.is_empty() && !red && small;
    let sigma = sigma_of(c, &ranges, &sites).or_else(|| placement(c, &ranges, &sites));
    let mut out_c = Vec::new();
    if elementwise && inj {
        out_c.push(Candidate {
            mode: Absorb::Inline,
            sigma: None,
        });
    }
    if escapes {
        return out_c;
    }
    if let Some(s) = sigma {
        if !red && inj && small && !p.temps.is_empty() {
            out_c.push(Candidate {
                mode: Absorb::Inline,
                sigma: Some(s.clone()),
            });
        }
        out_c.push(Candidate {
            mode: Absorb::Temp,
            sigma: Some(s),
        });
    }
    if p.temps.is_empty() && sites.len() <= 1 && inj {
        let c = Candidate {
            mode: Absorb::Inline,
            sigma: None,
        };
        if !out_c.contains(&c) {
            out_c.push(c);
        }
    }
    out_c
}

/// Some distinct consumer parallel variables with the ranges of the producer's (preferring the
/// ones the first site indexes with): where the producer's temporaries (and output, as a
/// temporary) can live. Loads then index them with the sites' own indices.
fn placement(c: &FKernel, ranges: &[(i64, i64)], sites: &[Site]) -> Option<Vec<usize>> {
    let first = sites.first().map(|s| &s.0);
    let mut s: Vec<usize> = Vec::new();
    for (d, &range) in ranges.iter().enumerate() {
        let fits = |x: usize, s: &[usize]| c.vars[x].range == range && !s.contains(&x);
        let pick = first
            .and_then(|idx| idx.get(d))
            .and_then(as_var)
            .filter(|&x| x < c.parallel && fits(x, &s))
            .or_else(|| (0..c.parallel).find(|&x| fits(x, &s)))?;
        s.push(pick);
    }
    Some(s)
}

/// The consumer variable indexing each dim of `v` at every site, if all sites agree and each
/// is a distinct parallel variable with exactly the range of the producer's variable.
fn sigma_of(c: &FKernel, ranges: &[(i64, i64)], sites: &[Site]) -> Option<Vec<usize>> {
    let mut sigma: Option<Vec<usize>> = None;
    for (index, _) in sites {
        if index.len() != ranges.len() {
            return None;
        }
        let mut s = Vec::new();
        for (d, a) in index.iter().enumerate() {
            let x = as_var(a).filter(|&x| x < c.parallel)?;
            if c.vars[x].range != ranges[d] || s.contains(&x) {
                return None;
            }
            s.push(x);
        }
        match &sigma {
            Some(prev) if *prev != s => return None,
            _ => sigma = Some(s),
        }
    }
    sigma
}
