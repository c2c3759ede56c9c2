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

pub mod algebra;
pub mod canon;
pub mod maps;

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
