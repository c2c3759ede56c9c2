//! Setts: nested stripes describing periodic sets of integers, with the set
//! algebra (canonical form, intersection, complement, difference, union,
//! counting) and the 1-D view maps (reverse, sample/fill, flatten/unflatten)
//! that alias analysis needs.
//!
//! `z ∈ sett([v1, .., vN])` iff `z ∈ v1` and `(z - v1.phase) mod v1.period ∈
//! sett([v2, .., vN])`; the empty list is every integer.
//!
//! Most internal functions take a *window* `Option<i64>`: `Some(w)` means only
//! `[0, w)` matters (the set is nested in a parent block of length `w`), `None`
//! means the set is exact on all integers. Windows let the algebra localise
//! instead of unfolding to huge common periods.
//!
//! This file holds the [`Sett`] type, its API and counting; the algebra on raw stripe lists
//! is in `canon` (canonical form, compaction), `algebra` (set operations, reverse) and `maps`
//! (sample/fill, flatten/unflatten).

mod algebra;
mod canon;
mod maps;

use algebra::{complement_raw, diff, inter, meets, reverse_raw, union};
pub(crate) use canon::merge_disjoint;
use canon::{canon, compact};
use maps::{compact_pairs, fill, flatten_raw, sample, unflatten};
use smallvec::{smallvec, SmallVec};
use std::collections::BTreeMap;
use std::fmt;

use super::stripe::{
    clipped_blocks, crt_copies, crt_count, floor_div, gcd, lcm, modp, SettError, Stripe, MAX_PIECES,
};

/// A raw (not necessarily canonical) list of nested stripes.
/// Inline up to 4 levels: nesting is shallow, and heap vectors here dominated the analysis.
pub(crate) type Raw = SmallVec<[Stripe; 4]>;
type Res<T> = Result<T, SettError>;

/// A periodic set of integers given by nested stripes, kept in canonical form.
///
/// Equality is structural; use [`Sett::equivalent`] for set equality.
/// Fallible operations return [`SettError::Overflow`] when an exact global
/// answer would need a period beyond `i64` (the `*_in` windowed variants
/// avoid that) and [`SettError::TooComplex`] when one unfolding step would
/// need more than 65536 pieces (only for large coprime periods).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sett {
    stripes: Raw,
}

/// Canonical stripe list of the empty set.
fn empty_raw() -> Raw {
    smallvec![Stripe::make(0, 1, 0)]
}

impl Sett {
    /// The sett of the given nested stripes (outermost first), canonicalised.
    pub fn new(stripes: Vec<Stripe>) -> Sett {
        Sett::from_raw(canon(&stripes, None))
    }

    /// Convenience constructor from `(on, off, phase)` triples.
    pub fn from_triples(triples: &[(i64, i64, i64)]) -> Result<Sett, SettError> {
        let stripes = triples
            .iter()
            .map(|&(on, off, ph)| Stripe::new(on, off, ph))
            .collect::<Res<Vec<_>>>()?;
        Ok(Sett::new(stripes))
    }

    /// Every integer.
    pub fn all() -> Sett {
        Sett {
            stripes: smallvec![],
        }
    }

    /// No integer.
    pub fn empty() -> Sett {
        Sett {
            stripes: empty_raw(),
        }
    }

    /// A single stripe.
    pub fn from_stripe(s: Stripe) -> Sett {
        Sett::new(vec![s])
    }

    fn from_raw(raw: Option<Raw>) -> Sett {
        Sett {
            stripes: raw.unwrap_or_else(empty_raw),
        }
    }

    fn list(pieces: Vec<Raw>) -> Vec<Sett> {
        pieces.into_iter().map(|stripes| Sett { stripes }).collect()
    }

    /// The stripes, outermost first (empty for the set of all integers).
    pub fn stripes(&self) -> &[Stripe] {
        &self.stripes
    }

    /// Nesting depth (number of stripes).
    pub fn depth(&self) -> usize {
        self.stripes.len()
    }

    /// Period of the set (the outer stripe's period; 1 for all integers).
    pub fn period(&self) -> i64 {
        self.stripes.first().map_or(1, Stripe::period)
    }

    /// True if no integer is in the set.
    pub fn is_empty(&self) -> bool {
        self.stripes.first().is_some_and(Stripe::is_empty)
    }

    /// True if every integer is in the set.
    pub fn is_all(&self) -> bool {
        self.stripes.is_empty()
    }

    /// Membership test.
    pub fn contains(&self, z: i64) -> bool {
        contains_raw(&self.stripes, z as i128)
    }

    /// Number of elements in `[a, b)` (0 if `b <= a`).
    pub fn count(&self, a: i64, b: i64) -> i128 {
        if b <= a {
            return 0;
        }
        let c = Counter::new(&self.stripes);
        c.g(b as i128) - c.g(a as i128)
    }

    /// The `k`-th smallest non-negative element (`k` from 0), if any.
    pub fn nth(&self, k: i64) -> Option<i64> {
        let c = Counter::new(&self.stripes);
        if k < 0 || c.per_period() == 0 {
            return None;
        }
        i64::try_from(c.elem(k as i128)).ok()
    }

    /// The set translated by `d`.
    pub fn shifted(&self, d: i64) -> Sett {
        Sett::from_raw(canon(&shift(&self.stripes, d as i128), None))
    }

    /// Canonical form when only `[0, n)` matters (`None` if empty there).
    pub fn canonical_in(&self, n: i64) -> Option<Sett> {
        canon(&self.stripes, Some(n)).map(|stripes| Sett { stripes })
    }

    /// True if the set has no element in `[0, n)`.
    pub fn is_empty_in(&self, n: i64) -> bool {
        self.count(0, n) == 0
    }

    /// Complement, as disjoint setts.
    pub fn complement(&self) -> Vec<Sett> {
        Sett::list(compact(complement_raw(&self.stripes), None))
    }

    /// Complement within `[0, n)`.
    pub fn complement_in(&self, n: i64) -> Vec<Sett> {
        Sett::list(compact(complement_raw(&self.stripes), Some(n)))
    }

    /// True if `other ⊆ self`.
    pub fn contains_sett(&self, other: &Sett) -> Result<bool, SettError> {
        Ok(diff(&other.stripes, &self.stripes, None)?.is_empty())
    }

    /// True if `other ⊆ self` within `[0, n)`.
    pub fn contains_in(&self, other: &Sett, n: i64) -> Result<bool, SettError> {
        Ok(diff(&other.stripes, &self.stripes, Some(n))?.is_empty())
    }

    /// True if both sets have the same elements.
    pub fn equivalent(&self, other: &Sett) -> Result<bool, SettError> {
        Ok(self.contains_sett(other)? && other.contains_sett(self)?)
    }

    /// True if both sets have the same elements within `[0, n)`.
    pub fn equivalent_in(&self, other: &Sett, n: i64) -> Result<bool, SettError> {
        Ok(self.contains_in(other, n)? && other.contains_in(self, n)?)
    }

    /// True if the sets share no element (gcd shortcut for single stripes).
    pub fn disjoint(&self, other: &Sett) -> Result<bool, SettError> {
        Ok(!meets(&self.stripes, &other.stripes, None)?)
    }

    /// True if the sets share no element within `[0, n)`.
    pub fn disjoint_in(&self, other: &Sett, n: i64) -> Result<bool, SettError> {
        Ok(!meets(&self.stripes, &other.stripes, Some(n))?)
    }

    /// The set mirrored in a window of length `n`: `z ↦ n - 1 - z`.
    pub fn reverse(&self, n: i64) -> Sett {
        Sett::from_raw(canon(&reverse_raw(&self.stripes, n as i128), None))
    }

    /// `{r * ncols + c : r ∈ rows, c ∈ cols ∩ [0, ncols)}`.
    pub fn flatten(rows: &Sett, cols: &Sett, ncols: i64) -> Result<Sett, SettError> {
        check_ncols(ncols)?;
        Ok(Sett::from_raw(canon(
            &flatten_raw(&rows.stripes, &cols.stripes, ncols)?,
            None,
        )))
    }

    /// Disjoint `(rows, cols)` products whose flattening (rows of length
    /// `ncols`) is this set.
    pub fn unflatten(&self, ncols: i64) -> Result<Vec<(Sett, Sett)>, SettError> {
        check_ncols(ncols)?;
        let pairs = unflatten(&self.stripes, ncols, None)?;
        Ok(pair_list(compact_pairs(pairs, None, ncols)))
    }

    /// [`Sett::unflatten`] for a set over `[0, n)` (`n` a multiple of `ncols`).
    pub fn unflatten_in(&self, ncols: i64, n: i64) -> Result<Vec<(Sett, Sett)>, SettError> {
        check_ncols(ncols)?;
        let rows = Some(ceil_div(n, ncols));
        let pairs = unflatten(&self.stripes, ncols, Some(n))?;
        Ok(pair_list(compact_pairs(pairs, rows, ncols)))
    }
}

/// Defines a set operation of two setts that yields disjoint pieces twice: exact on all
/// integers, and when only `[0, n)` matters (the `*_in` variant), both over the raw operation.
macro_rules! windowed {
    ($($(#[$doc:meta])* $all:ident, $(#[$doc_in:meta])* $within:ident => $raw:ident;)*) => {
        impl Sett {
            $(
                $(#[$doc])*
                pub fn $all(&self, other: &Sett) -> Result<Vec<Sett>, SettError> {
                    Ok(Sett::list($raw(&self.stripes, &other.stripes, None)?))
                }

                $(#[$doc_in])*
                pub fn $within(&self, other: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
                    Ok(Sett::list($raw(&self.stripes, &other.stripes, Some(n))?))
                }
            )*
        }
    };
}

windowed! {
    /// Intersection, as disjoint setts.
    intersect,
    /// Intersection within `[0, n)`.
    intersect_in => inter;
    /// `self \ other`, as disjoint setts.
    difference,
    /// `self \ other` within `[0, n)`.
    difference_in => diff;
    /// Union, as disjoint setts.
    union,
    /// Union within `[0, n)`.
    union_in => union;
    /// `{i : the i-th element of other is in self}`, elements of `other` indexed from its
    /// first non-negative element (negative indices below it).
    sample,
    /// [`Sett::sample`] when only positions `[0, n)` matter; the result is over
    /// indices `[0, |other ∩ [0, n)|)`.
    sample_in => sample;
    /// Inverse of sample: `{the i-th element of other : i ∈ self}`.
    fill,
    /// [`Sett::fill`] when only positions `[0, n)` of `other` matter.
    fill_in => fill;
}

impl fmt::Display for Sett {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, s) in self.stripes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}")?;
        }
        f.write_str("]")
    }
}

fn check_ncols(ncols: i64) -> Res<()> {
    if ncols < 1 {
        return Err(SettError::ZeroPeriod);
    }
    Ok(())
}

fn pair_list(pairs: Vec<(Raw, Raw)>) -> Vec<(Sett, Sett)> {
    pairs
        .into_iter()
        .map(|(r, c)| (Sett { stripes: r }, Sett { stripes: c }))
        .collect()
}

fn ceil_div(a: i64, b: i64) -> i64 {
    floor_div(a as i128 + b as i128 - 1, b as i128) as i64
}

// ---------------------------------------------------------------------------
// Basic helpers

fn contains_raw(v: &[Stripe], z: i128) -> bool {
    match v.split_first() {
        None => true,
        Some((s, rest)) => {
            let t = modp(z - s.phase() as i128, s.period() as i128);
            t < s.on() as i128 && contains_raw(rest, t)
        }
    }
}

/// The set translated by `d` (only the outer phase moves).
pub(crate) fn shift(v: &[Stripe], d: i128) -> Raw {
    let mut out = Raw::from_slice(v);
    if let Some(s) = out.first_mut() {
        *s = s.shifted(d);
    }
    out
}

fn prefixed(s: Stripe, pieces: Vec<Raw>) -> Vec<Raw> {
    pieces
        .into_iter()
        .map(|r| {
            let mut v = Raw::with_capacity(r.len() + 1);
            v.push(s);
            v.extend(r);
            v
        })
        .collect()
}

/// A stripe whose only block meeting `[0, w)` is `[lo, lo + len)` (inside it).
fn lone(lo: i128, len: i128, w: i128) -> Res<Stripe> {
    Stripe::checked(len, w - len, lo)
}

/// Index of the cheapest available strategy, or an error if none is usable.
fn pick(costs: [Option<i128>; 4]) -> Res<usize> {
    let best = costs
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (c, i)))
        .min();
    match best {
        None => Err(SettError::Overflow),
        Some((c, _)) if c > MAX_PIECES => Err(SettError::TooComplex),
        Some((_, i)) => Ok(i),
    }
}

fn blocks(s: &Stripe, w: Option<i64>) -> Option<i128> {
    w.map(|w| s.blocks_in(0, w as i128).0)
}

// ---------------------------------------------------------------------------
// Counting

/// Prefix counts `G(x) = |S ∩ [0, x)|` (negated count of `[x, 0)` for `x < 0`),
/// with per-level constants cached so one query costs O(depth).
pub(crate) struct Counter {
    v: Raw,
    per_block: SmallVec<[i128; 4]>,
    f0: SmallVec<[i128; 4]>,
}

impl Counter {
    pub(crate) fn new(v: &[Stripe]) -> Counter {
        let d = v.len();
        let mut c = Counter {
            v: Raw::from_slice(v),
            per_block: smallvec![0; d],
            f0: smallvec![0; d],
        };
        for i in (0..d).rev() {
            c.per_block[i] = c.g_at(i + 1, v[i].on() as i128);
            c.f0[i] = c.f_at(i, 0);
        }
        c
    }

    fn g_at(&self, i: usize, x: i128) -> i128 {
        if i == self.v.len() {
            x
        } else {
            self.f_at(i, x) - self.f0[i]
        }
    }

    /// Signed count from the level's phase to `x`.
    fn f_at(&self, i: usize, x: i128) -> i128 {
        let s = self.v[i];
        let (p, ph) = (s.period() as i128, s.phase() as i128);
        let q = floor_div(x - ph, p);
        let r = x - ph - q * p;
        q * self.per_block[i] + self.g_at(i + 1, r.min(s.on() as i128))
    }

    /// `|S ∩ [0, x)|` for `x >= 0`, minus `|S ∩ [x, 0)|` for `x < 0`.
    pub(crate) fn g(&self, x: i128) -> i128 {
        self.g_at(0, x)
    }

    /// Elements per period.
    pub(crate) fn per_period(&self) -> i128 {
        self.per_block.first().copied().unwrap_or(1)
    }

    fn period(&self) -> i128 {
        self.v.first().map_or(1, |s| s.period() as i128)
    }

    /// Position of the element with index `i` (index 0 = first element >= 0).
    /// Requires a non-empty set.
    pub(crate) fn elem(&self, i: i128) -> i128 {
        let m = self.per_period();
        let q = floor_div(i, m);
        let r = i - q * m;
        // Smallest z in [0, period) with G(z + 1) > r.
        let (mut lo, mut hi) = (0i128, self.period() - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.g(mid + 1) > r {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo + q * self.period()
    }
}

fn count_raw(v: &[Stripe], a: i128, b: i128) -> i128 {
    let c = Counter::new(v);
    c.g(b) - c.g(a)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Stripe triples `(on, off, phase)`, outermost first: a sett by its definition.
    pub(in crate::passes::alias) type Triples = Vec<(i64, i64, i64)>;

    /// Membership straight from the definition, independent of the algebra.
    pub(in crate::passes::alias) fn member(t: &[(i64, i64, i64)], z: i64) -> bool {
        match t.split_first() {
            None => true,
            Some((&(on, off, ph), rest)) => {
                let u = (z - ph).rem_euclid(on + off);
                u < on && member(rest, u)
            }
        }
    }

    fn triples(max_depth: usize) -> impl Strategy<Value = Triples> {
        let stripe = (0i64..5, 0i64..5, -6i64..6).prop_filter("period 0", |s| s.0 + s.1 > 0);
        prop::collection::vec(stripe, 0..=max_depth)
    }

    fn sett(t: &Triples) -> Sett {
        Sett::from_triples(t).unwrap()
    }

    const LO: i64 = -100;
    const HI: i64 = 100;

    fn in_pieces(p: &[Sett], z: i64) -> bool {
        let hits = p.iter().filter(|s| s.contains(z)).count();
        assert!(hits <= 1, "pieces overlap at {z}: {p:?}");
        hits == 1
    }

    fn check_pieces(p: &[Sett], want: impl Fn(i64) -> bool) -> Result<(), TestCaseError> {
        for z in LO..HI {
            prop_assert_eq!(in_pieces(p, z), want(z), "z = {} pieces {:?}", z, p);
        }
        Ok(())
    }

    fn check_pieces_in(
        p: &[Sett],
        n: i64,
        want: impl Fn(i64) -> bool,
    ) -> Result<(), TestCaseError> {
        for z in 0..n {
            prop_assert_eq!(in_pieces(p, z), want(z), "z = {} pieces {:?}", z, p);
        }
        Ok(())
    }

    /// Index of `z` among the elements of `b` (0 = first element >= 0).
    fn index(b: &Triples, z: i64) -> i64 {
        if z >= 0 {
            (0..z).filter(|&y| member(b, y)).count() as i64
        } else {
            -((z..0).filter(|&y| member(b, y)).count() as i64)
        }
    }

    #[test]
    fn display_and_basics() {
        let s = Sett::from_triples(&[(1, 3, 0), (2, 1, 0)]).unwrap();
        assert_eq!(s.to_string(), "[(1,3,0)]");
        let s = Sett::from_triples(&[(8, 8, -2), (3, 3, 1), (1, 1, 0)]).unwrap();
        assert_eq!(s.to_string(), "[(8,8,14),(3,3,1),(1,1,0)]");
        assert_eq!(Sett::all().to_string(), "[]");
        assert!(Sett::from_triples(&[(0, 3, 0)]).unwrap().is_empty());
        assert!(Sett::from_triples(&[(4, 0, 1)]).unwrap().is_all());
        // Inner stripe covering the whole parent block is dropped.
        let s = Sett::from_triples(&[(3, 2, 0), (5, 1, 0)]).unwrap();
        assert_eq!(s.to_string(), "[(3,2,0)]");
        // An inner pattern that tiles the outer period drops the outer stripe.
        let s = Sett::from_triples(&[(7, 1, 0), (1, 1, 0)]).unwrap();
        assert_eq!(s.to_string(), "[(1,1,0)]");
    }

    #[test]
    fn intersections_merge_into_few_setts() {
        let evens = Sett::from_triples(&[(1, 1, 0)]).unwrap();
        let b = Sett::from_triples(&[(2, 1, 0)]).unwrap();
        let p = evens.intersect(&b).unwrap();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].to_string(), "[(5,1,0),(1,3,0)]");
        let odds = Sett::from_triples(&[(1, 1, 1)]).unwrap();
        let u = evens.union(&odds).unwrap();
        assert_eq!(u, vec![Sett::all()]);
    }

    #[test]
    fn huge_coprime_periods_are_not_enumerated() {
        let p = 1i64 << 40;
        let a = Sett::from_triples(&[(1, p - 1, 3)]).unwrap();
        let b = Sett::from_triples(&[(1, p, 3)]).unwrap();
        assert!(!a.disjoint(&b).unwrap());
        // The common period exceeds i64: only a window can hold the answer.
        assert_eq!(a.intersect(&b), Err(SettError::Overflow));
        let i = a.intersect_in(&b, i64::MAX).unwrap();
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].count(0, i64::MAX), 1);
        assert!(i[0].contains(3));
        // Big blocks with an inner pattern, coprime periods, in a huge window.
        let a = Sett::from_triples(&[(p / 2, p / 2 + 1, 0), (1, 1, 0)]).unwrap();
        let b = Sett::from_triples(&[(p / 2, p / 2 - 1, 0), (1, 2, 0)]).unwrap();
        assert!(!a.disjoint_in(&b, 1 << 42).unwrap());
        let even = Sett::from_triples(&[(p / 2, p / 2, 0), (1, 1, 0)]).unwrap();
        let odd = Sett::from_triples(&[(p / 2, p / 2 + 2, 1), (1, 1, 0)]).unwrap();
        assert!(even.disjoint_in(&odd, 1 << 42).unwrap());
    }

    #[test]
    fn nth_and_count_on_huge_sets() {
        let s = Sett::from_triples(&[(1 << 20, 1 << 20, 7), (1, 3, 1)]).unwrap();
        assert_eq!(s.count(0, 1 << 41), 1 << 38);
        assert_eq!(s.nth(0), Some(8));
        assert_eq!(s.nth((1 << 18) + 1), Some(8 + (1 << 21) + 4));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(256) })]

        #[test]
        fn canonical_preserves_membership(t in triples(4)) {
            let s = sett(&t);
            for z in LO..HI {
                prop_assert_eq!(s.contains(z), member(&t, z), "z = {} canon {}", z, s);
            }
            prop_assert_eq!(s.is_empty(), (LO..HI).all(|z| !member(&t, z)));
            prop_assert_eq!(Sett::new(s.stripes().to_vec()), s.clone(), "idempotent");
        }

        #[test]
        fn canonical_in_window(t in triples(4), n in 1i64..40) {
            let c = sett(&t).canonical_in(n);
            let any = (0..n).any(|z| member(&t, z));
            prop_assert_eq!(c.is_some(), any);
            if let Some(c) = c {
                for z in 0..n {
                    prop_assert_eq!(c.contains(z), member(&t, z), "z = {} canon {}", z, c);
                }
            }
        }

        #[test]
        fn count_and_nth(t in triples(3), a in -50i64..50, len in 0i64..60, k in 0i64..20) {
            let s = sett(&t);
            let want = (a..a + len).filter(|&z| member(&t, z)).count() as i128;
            prop_assert_eq!(s.count(a, a + len), want);
            let nth = (0..400).filter(|&z| member(&t, z)).nth(k as usize);
            prop_assert_eq!(s.nth(k), nth);
        }

        #[test]
        fn complement_pieces(t in triples(3), n in 1i64..30) {
            let s = sett(&t);
            check_pieces(&s.complement(), |z| !member(&t, z))?;
            check_pieces_in(&s.complement_in(n), n, |z| !member(&t, z))?;
        }

        #[test]
        fn binary_ops(ta in triples(3), tb in triples(3)) {
            let (a, b) = (sett(&ta), sett(&tb));
            let (ma, mb) = (|z| member(&ta, z), |z| member(&tb, z));
            check_pieces(&a.intersect(&b).unwrap(), |z| ma(z) && mb(z))?;
            check_pieces(&a.difference(&b).unwrap(), |z| ma(z) && !mb(z))?;
            check_pieces(&a.union(&b).unwrap(), |z| ma(z) || mb(z))?;
            let sub = (LO..HI).all(|z| !mb(z) || ma(z));
            let sup = (LO..HI).all(|z| !ma(z) || mb(z));
            prop_assert_eq!(a.contains_sett(&b).unwrap(), sub);
            prop_assert_eq!(a.equivalent(&b).unwrap(), sub && sup);
            prop_assert_eq!(a.disjoint(&b).unwrap(), (LO..HI).all(|z| !(ma(z) && mb(z))));
        }

        #[test]
        fn windowed_binary_ops(ta in triples(3), tb in triples(3), n in 1i64..40) {
            let (a, b) = (sett(&ta), sett(&tb));
            let (ma, mb) = (|z| member(&ta, z), |z| member(&tb, z));
            check_pieces_in(&a.intersect_in(&b, n).unwrap(), n, |z| ma(z) && mb(z))?;
            check_pieces_in(&a.difference_in(&b, n).unwrap(), n, |z| ma(z) && !mb(z))?;
            check_pieces_in(&a.union_in(&b, n).unwrap(), n, |z| ma(z) || mb(z))?;
            let sub = (0..n).all(|z| !mb(z) || ma(z));
            let sup = (0..n).all(|z| !ma(z) || mb(z));
            prop_assert_eq!(a.contains_in(&b, n).unwrap(), sub);
            prop_assert_eq!(a.equivalent_in(&b, n).unwrap(), sub && sup);
            prop_assert_eq!(a.disjoint_in(&b, n).unwrap(), (0..n).all(|z| !(ma(z) && mb(z))));
        }

        #[test]
        fn reverse_mirrors(t in triples(3), n in 1i64..30) {
            let r = sett(&t).reverse(n);
            for z in LO..HI {
                prop_assert_eq!(r.contains(z), member(&t, n - 1 - z), "z = {} rev {}", z, r);
            }
        }

        #[test]
        fn sample_and_fill(ta in triples(3), tb in triples(3), n in 1i64..40) {
            let (a, b) = (sett(&ta), sett(&tb));
            prop_assume!(!b.is_empty());
            let s = a.sample(&b).unwrap();
            let f = a.fill(&b).unwrap();
            let (s_in, f_in) = (a.sample_in(&b, n).unwrap(), a.fill_in(&b, n).unwrap());
            for z in LO..HI {
                let i = index(&tb, z);
                if member(&tb, z) {
                    prop_assert_eq!(in_pieces(&s, i), member(&ta, z), "sample z={} i={}", z, i);
                    if (0..n).contains(&z) {
                        prop_assert_eq!(in_pieces(&s_in, i), member(&ta, z), "sample_in z={}", z);
                    }
                }
                let want = member(&tb, z) && member(&ta, i);
                prop_assert_eq!(in_pieces(&f, z), want, "fill z={} {:?}", z, f);
                if (0..n).contains(&z) {
                    prop_assert_eq!(in_pieces(&f_in, z), want, "fill_in z={} {:?}", z, f_in);
                }
            }
        }

        #[test]
        fn flatten_unflatten(tr in triples(2), tc in triples(2), t in triples(3), c in 1i64..7, rows in 1i64..6) {
            let f = Sett::flatten(&sett(&tr), &sett(&tc), c).unwrap();
            for z in LO..HI {
                let want = member(&tr, z.div_euclid(c)) && member(&tc, z.rem_euclid(c));
                prop_assert_eq!(f.contains(z), want, "flatten z={} {}", z, f);
            }
            let check = |pairs: &[(Sett, Sett)], z: i64| {
                let hits = pairs
                    .iter()
                    .filter(|(r, k)| r.contains(z.div_euclid(c)) && k.contains(z.rem_euclid(c)))
                    .count();
                assert!(hits <= 1, "overlap at {z}: {pairs:?}");
                hits == 1
            };
            let u = sett(&t).unflatten(c).unwrap();
            for z in LO..HI {
                prop_assert_eq!(check(&u, z), member(&t, z), "unflatten z={} {:?}", z, u);
            }
            let n = rows * c;
            let u = sett(&t).unflatten_in(c, n).unwrap();
            for z in 0..n {
                prop_assert_eq!(check(&u, z), member(&t, z), "unflatten_in z={} {:?}", z, u);
            }
        }
    }
}
