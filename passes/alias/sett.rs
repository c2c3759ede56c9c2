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

    /// Intersection, as disjoint setts.
    pub fn intersect(&self, other: &Sett) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(inter(&self.stripes, &other.stripes, None)?))
    }

    /// Intersection within `[0, n)`.
    pub fn intersect_in(&self, other: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(inter(&self.stripes, &other.stripes, Some(n))?))
    }

    /// `self \ other`, as disjoint setts.
    pub fn difference(&self, other: &Sett) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(diff(&self.stripes, &other.stripes, None)?))
    }

    /// `self \ other` within `[0, n)`.
    pub fn difference_in(&self, other: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(diff(&self.stripes, &other.stripes, Some(n))?))
    }

    /// Union, as disjoint setts.
    pub fn union(&self, other: &Sett) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(union(&self.stripes, &other.stripes, None)?))
    }

    /// Union within `[0, n)`.
    pub fn union_in(&self, other: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(union(&self.stripes, &other.stripes, Some(n))?))
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

    /// `{i : the i-th element of b is in self}`, elements of `b` indexed from its
    /// first non-negative element (negative indices below it).
    pub fn sample(&self, b: &Sett) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(sample(&self.stripes, &b.stripes, None)?))
    }

    /// [`Sett::sample`] when only positions `[0, n)` matter; the result is over
    /// indices `[0, |b ∩ [0, n)|)`.
    pub fn sample_in(&self, b: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(sample(&self.stripes, &b.stripes, Some(n))?))
    }

    /// Inverse of sample: `{the i-th element of b : i ∈ self}`.
    pub fn fill(&self, b: &Sett) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(fill(&self.stripes, &b.stripes, None)?))
    }

    /// [`Sett::fill`] when only positions `[0, n)` of `b` matter.
    pub fn fill_in(&self, b: &Sett, n: i64) -> Result<Vec<Sett>, SettError> {
        Ok(Sett::list(fill(&self.stripes, &b.stripes, Some(n))?))
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

// ---------------------------------------------------------------------------
// Canonical form

/// Canonical form within window `w` (`None` = exact on all integers); `None`
/// if the set is empty there.
pub(crate) fn canon(v: &[Stripe], w: Option<i64>) -> Option<Raw> {
    if w.is_some_and(|w| w <= 0) {
        return None;
    }
    let Some((&s, rest)) = v.split_first() else {
        return Some(smallvec![]);
    };
    if s.on() == 0 {
        return None;
    }
    if let Some(w) = w {
        let (n, x) = s.blocks_in(0, w as i128);
        if n == 0 || (n == 2 && count_raw(v, 0, w as i128) == 0) {
            // Two clipped blocks can both miss the inner pattern: count decides.
            return None;
        }
        if n == 1 {
            let (lo, hi) = (x.max(0), (x + s.on() as i128).min(w as i128));
            return canon_interval(lo as i64, (hi - lo) as i64, shift(rest, x - lo), w);
        }
    }
    let inner = canon(rest, Some(s.on()))?;
    build(s, inner, w)
}

/// Canonical form of `[a, a + len) ∩ (a + rest)` within window `w`.
fn canon_interval(mut a: i64, mut len: i64, mut rest: Raw, w: i64) -> Option<Raw> {
    loop {
        let inner = canon(&rest, Some(len))?;
        let single = inner
            .first()
            .map(|c| c.blocks_in(0, len as i128))
            .filter(|&(n, _)| n == 1);
        if let (Some(c), Some((_, x))) = (inner.first(), single) {
            // The inner stripe is one interval too: fold it into ours.
            let (lo, hi) = (x.max(0), (x + c.on() as i128).min(len as i128));
            a += lo as i64;
            len = (hi - lo) as i64;
            rest = shift(&inner[1..], x - lo);
            continue;
        }
        if len == w {
            return Some(inner);
        }
        let mut out = smallvec![Stripe::make(len, w - len, a as i128)];
        out.extend(inner);
        return Some(out);
    }
}

/// Canonical `[s] ++ inner` (inner canonical within `s.on`), for an `s` with
/// several blocks in the window (or no window).
fn build(s: Stripe, inner: Raw, w: Option<i64>) -> Option<Raw> {
    let Some(&c) = inner.first() else {
        return Some(if s.is_full() {
            smallvec![]
        } else {
            smallvec![s]
        });
    };
    let (n, x) = c.blocks_in(0, s.on() as i128);
    if n == 1 {
        // The inner stripe picks one sub-interval of each block: merge it in.
        let (lo, hi) = (x.max(0), (x + c.on() as i128).min(s.on() as i128));
        let len = (hi - lo) as i64;
        let mut v: Raw = smallvec![Stripe::make(len, s.period() - len, s.phase() as i128 + lo)];
        v.extend(shift(&inner[1..], x - lo));
        return canon(&v, w);
    }
    let p = s.period() as i128;
    if p % c.period() as i128 == 0 && count_raw(&inner, s.on() as i128, p) == 0 {
        // The inner pattern tiles the whole period and never hits the gap.
        return canon(&shift(&inner, s.phase() as i128), w);
    }
    let mut out = smallvec![s];
    out.extend(inner);
    Some(out)
}

// ---------------------------------------------------------------------------
// Compaction: merge disjoint pieces into as few setts as we can find.

/// Canonicalise, drop empties and merge pieces (which must be disjoint).
pub(crate) fn compact(pieces: Vec<Raw>, w: Option<i64>) -> Vec<Raw> {
    let v = merge_all(pieces.iter().filter_map(|p| canon(p, w)).collect(), w);
    if v.len() <= 1 {
        return v;
    }
    // Pieces of different periods may only merge once unfolded to a common one.
    let lifted = match lift(&v) {
        Some(u) => merge_all(u, w),
        None => return v,
    };
    if lifted.len() < v.len() {
        lifted
    } else {
        v
    }
}

/// Most copies [`lift`] may create.
const MAX_LIFT: i128 = 64;

/// All pieces unfolded to the lcm of their outer periods, if that is cheap.
fn lift(v: &[Raw]) -> Option<Vec<Raw>> {
    let periods = v
        .iter()
        .map(|p| p.first().map_or(1, |s| s.period() as i128));
    let l = periods.clone().try_fold(1i128, lcm)?;
    if periods.map(|p| l / p).sum::<i128>() > MAX_LIFT {
        return None;
    }
    let mut out = Vec::new();
    for p in v {
        let s = *p.first()?;
        let per = s.period() as i128;
        for k in 0..l / per {
            let mut q = smallvec![Stripe::make(
                s.on(),
                (l - s.on() as i128) as i64,
                s.phase() as i128 + k * per,
            )];
            q.extend_from_slice(&p[1..]);
            out.push(q);
        }
    }
    Some(out)
}

/// Repeatedly merge canonical disjoint pieces until nothing changes.
fn merge_all(mut v: Vec<Raw>, w: Option<i64>) -> Vec<Raw> {
    if v.len() <= 1 {
        return v; // nothing to merge with (the common case)
    }
    loop {
        // A piece covering everything leaves no room for others (disjointness).
        if v.iter().any(|p| p.is_empty()) {
            return vec![smallvec![]];
        }
        let n = v.len();
        v = merge_same_outer(v, w);
        if !v.iter().any(|p| p.is_empty()) {
            v = merge_runs(v, w);
        }
        if v.len() >= n && !v.iter().any(|p| p.is_empty()) {
            break;
        }
    }
    v.sort();
    v
}

/// Merge pairwise-disjoint setts (only `[0, n)` matters) into as few as found.
pub(crate) fn merge_disjoint(setts: Vec<Sett>, n: i64) -> Vec<Sett> {
    let raw = setts.into_iter().map(|s| s.stripes).collect();
    Sett::list(compact(raw, Some(n)))
}

/// Pieces sharing their outer stripe: compact their inner parts together.
fn merge_same_outer(v: Vec<Raw>, w: Option<i64>) -> Vec<Raw> {
    let mut groups: BTreeMap<Stripe, Vec<Raw>> = BTreeMap::new();
    for p in v {
        groups
            .entry(p[0])
            .or_default()
            .push(Raw::from_slice(&p[1..]));
    }
    let mut out = Vec::new();
    for (s, inners) in groups {
        let n = inners.len();
        let merged = if n > 1 {
            compact(inners.clone(), Some(s.on()))
        } else {
            inners.clone()
        };
        let chosen = if merged.len() < n { merged } else { inners };
        out.extend(prefixed(s, chosen).iter().filter_map(|p| canon(p, w)));
    }
    out
}

/// Pieces equal up to their outer phase, whose phases form an arithmetic
/// run, become one sett with an extra nesting level.
fn merge_runs(v: Vec<Raw>, w: Option<i64>) -> Vec<Raw> {
    let mut groups: BTreeMap<(i64, i64, Raw), Vec<i64>> = BTreeMap::new();
    for p in v {
        let key = (p[0].period(), p[0].on(), Raw::from_slice(&p[1..]));
        groups.entry(key).or_default().push(p[0].phase());
    }
    let mut out = Vec::new();
    for ((period, on, rest), mut xs) in groups {
        xs.sort_unstable();
        let mut i = 0;
        while i < xs.len() {
            let j = run_end(&xs, i, on, period);
            let piece = run_piece(&xs[i..=j], on, period, &rest);
            out.extend(canon(&piece, w));
            i = j + 1;
        }
    }
    out
}

/// Last index of the arithmetic run of block starts beginning at `i`.
fn run_end(xs: &[i64], i: usize, on: i64, period: i64) -> usize {
    if i + 1 >= xs.len() {
        return i;
    }
    let d = xs[i + 1] - xs[i];
    if d < on {
        return i;
    }
    let mut j = i + 1;
    while j + 1 < xs.len() && xs[j + 1] - xs[j] == d {
        j += 1;
    }
    while j > i && (xs[j] - xs[i]) as i128 + on as i128 > period as i128 {
        j -= 1;
    }
    j
}

fn run_piece(xs: &[i64], on: i64, period: i64, rest: &[Stripe]) -> Raw {
    if xs.len() == 1 {
        let mut v = smallvec![Stripe::make(on, period - on, xs[0] as i128)];
        v.extend_from_slice(rest);
        return v;
    }
    let d = xs[1] - xs[0];
    let span = xs[xs.len() - 1] - xs[0] + on;
    let mut v = smallvec![
        Stripe::make(span, period - span, xs[0] as i128),
        Stripe::make(on, d - on, 0),
    ];
    v.extend_from_slice(rest);
    v
}

// ---------------------------------------------------------------------------
// Set operations

/// Complement as disjoint pieces: level `i` holds the gaps of stripe `i`
/// inside the blocks of stripes `0..i`.
fn complement_raw(v: &[Stripe]) -> Vec<Raw> {
    (0..v.len())
        .filter(|&i| !v[i].is_full())
        .map(|i| {
            let s = v[i];
            let mut r = Raw::from_slice(&v[..i]);
            r.push(Stripe::make(
                s.off(),
                s.on(),
                s.phase() as i128 + s.on() as i128,
            ));
            r
        })
        .collect()
}

/// Intersection as disjoint canonical pieces.
pub(crate) fn inter(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let (Some(a), Some(b)) = (canon(a, w), canon(b, w)) else {
        return Ok(vec![]);
    };
    let (Some(&sa), Some(&sb)) = (a.first(), b.first()) else {
        return Ok(vec![if a.is_empty() { b } else { a }]);
    };
    if !sa.meets(&sb) {
        return Ok(vec![]);
    }
    let (p, q) = (sa.period(), sb.period());
    let pieces = if p % q == 0 {
        absorb(&a, &b)?
    } else if q % p == 0 {
        absorb(&b, &a)?
    } else {
        // Unfolding past i64 periods only works inside a window.
        let fits = w.is_some() || lcm(p as i128, q as i128).is_some();
        let costs = [
            fits.then(|| crt_count(&sa, &sb)),
            fits.then(|| crt_count(&sb, &sa)),
            blocks(&sa, w),
            blocks(&sb, w),
        ];
        match pick(costs)? {
            0 => unfold_inter(&a, &b, w)?,
            1 => unfold_inter(&b, &a, w)?,
            2 => localize_inter(&a, &b, w)?,
            _ => localize_inter(&b, &a, w)?,
        }
    };
    Ok(compact(pieces, w))
}

/// `b`'s period divides `a`'s: `b` looks the same in every block of `a`.
fn absorb(a: &[Stripe], b: &[Stripe]) -> Res<Vec<Raw>> {
    let s = a[0];
    let inner = inter(&a[1..], &shift(b, -(s.phase() as i128)), Some(s.on()))?;
    Ok(prefixed(s, inner))
}

/// Unfold `a` to the common period, keeping only blocks that meet `b`.
fn unfold_inter(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let (sa, sb) = (a[0], b[0]);
    let on = sa.on() as i128;
    let (l, starts) = crt_copies(&sa, &sb);
    let mut out = Vec::new();
    for x in starts {
        let inner = inter(&a[1..], &shift(b, -x), Some(sa.on()))?;
        if inner.is_empty() {
            continue;
        }
        if l <= i64::MAX as i128 {
            out.extend(prefixed(Stripe::checked(on, l - on, x)?, inner));
            continue;
        }
        // The common period is too big for a stripe: place the (at most two)
        // copies of this block that meet the window as lone intervals.
        let w = w.ok_or(SettError::Overflow)? as i128;
        for y in [x - l, x].into_iter().filter(|&y| y < w && y + on > 0) {
            let (lo, hi) = (y.max(0), (y + on).min(w));
            let shifted: Vec<Raw> = inner.iter().map(|r| shift(r, y - lo)).collect();
            out.extend(prefixed(lone(lo, hi - lo, w)?, shifted));
        }
    }
    Ok(out)
}

/// Treat each block of `a` inside the window as its own interval.
fn localize_inter(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let w = w.ok_or(SettError::Overflow)? as i128;
    let mut out = Vec::new();
    for (x, lo, hi) in clipped_blocks(&a[0], w) {
        let s = lone(lo, hi - lo, w)?;
        let inner = inter(
            &shift(&a[1..], x - lo),
            &shift(b, -lo),
            Some((hi - lo) as i64),
        )?;
        out.extend(prefixed(s, inner));
    }
    Ok(out)
}

fn diff(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let mut out = Vec::new();
    for c in complement_raw(b) {
        out.extend(inter(a, &c, w)?);
    }
    Ok(compact(out, w))
}

fn union(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let mut out = diff(b, a, w)?;
    out.push(Raw::from_slice(a));
    Ok(compact(out, w))
}

/// Whether the sets share an element; single stripes use the gcd criterion only.
fn meets(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<bool> {
    if let (None, [sa], [sb]) = (w, a, b) {
        return Ok(sa.meets(sb));
    }
    if let (Some(sa), Some(sb)) = (a.first(), b.first()) {
        if !sa.meets(sb) {
            return Ok(false);
        }
    }
    Ok(!inter(a, b, w)?.is_empty())
}

// ---------------------------------------------------------------------------
// Reverse

fn reverse_raw(v: &[Stripe], n: i128) -> Raw {
    let Some((&s, rest)) = v.split_first() else {
        return smallvec![];
    };
    let mut out = smallvec![Stripe::make(
        s.on(),
        s.off(),
        n - s.phase() as i128 - s.on() as i128,
    )];
    out.extend(reverse_raw(rest, s.on() as i128));
    out
}

// ---------------------------------------------------------------------------
// Sample (generalised slice) and fill (its inverse)

/// `{G_b(z) : z ∈ a ∩ b}` with `G_b(z)` the index of `z` among `b`'s elements.
pub(crate) fn sample(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let (Some(a), Some(b)) = (canon(a, w), canon(b, w)) else {
        return Ok(vec![]);
    };
    let cb = Counter::new(&b);
    let wi = w.map(|w| cb.g(w as i128) as i64);
    if wi == Some(0) {
        return Ok(vec![]);
    }
    let Some(&sb) = b.first() else {
        return Ok(compact(vec![a], wi));
    };
    let Some(&sa) = a.first() else {
        return Ok(vec![smallvec![]]);
    };
    let m = cb.per_period();
    let (p, q) = (sa.period() as i128, sb.period() as i128);
    let pieces = if q % p == 0 {
        sample_bblock(&a, &b[1..], sb.on(), sb.phase() as i128, &cb, m, m)?
    } else if p % q == 0 {
        sample_block(&a[1..], sa.on(), sa.phase() as i128, &b, &cb, p / q * m)?
    } else {
        sample_split(&a, &b, &cb, w)?
    };
    Ok(compact(pieces, wi))
}

/// Sample when neither period divides the other.
fn sample_split(a: &[Stripe], b: &[Stripe], cb: &Counter, w: Option<i64>) -> Res<Vec<Raw>> {
    let (sa, sb) = (a[0], b[0]);
    let (p, q, m) = (sa.period() as i128, sb.period() as i128, cb.per_period());
    let l = lcm(p, q);
    let costs = [
        l.map(|_| crt_count(&sa, &sb)),
        l.map(|_| crt_count(&sb, &sa)),
        blocks(&sa, w),
        blocks(&sb, w),
    ];
    let mut out = Vec::new();
    match (pick(costs)?, l, w) {
        (0, Some(l), _) => {
            for x in crt_copies(&sa, &sb).1 {
                out.extend(sample_block(&a[1..], sa.on(), x, b, cb, l / q * m)?);
            }
        }
        (1, Some(l), _) => {
            for y in crt_copies(&sb, &sa).1 {
                out.extend(sample_bblock(a, &b[1..], sb.on(), y, cb, l / q * m, m)?);
            }
        }
        (2, _, Some(w)) => {
            for (x, lo, hi) in clipped_blocks(&sa, w as i128) {
                let inner = shift(&a[1..], x - lo);
                let wi = cb.g(w as i128);
                out.extend(sample_block(&inner, (hi - lo) as i64, lo, b, cb, wi)?);
            }
        }
        (_, _, Some(w)) => {
            for (y, lo, hi) in clipped_blocks(&sb, w as i128) {
                let inner = shift(&b[1..], y - lo);
                let (wi, mb) = (cb.g(w as i128), cb.g(hi) - cb.g(lo));
                out.extend(sample_bblock(a, &inner, (hi - lo) as i64, lo, cb, wi, mb)?);
            }
        }
        _ => return Err(SettError::Overflow),
    }
    Ok(out)
}

/// Image of one block `[x, x + on_a)` of `a` (inner `inner_a`): an index
/// interval repeating with period `per`, with the inner sampled inside it.
fn sample_block(
    inner_a: &[Stripe],
    on_a: i64,
    x: i128,
    b: &[Stripe],
    cb: &Counter,
    per: i128,
) -> Res<Vec<Raw>> {
    let i0 = cb.g(x);
    let len = cb.g(x + on_a as i128) - i0;
    if len == 0 {
        return Ok(vec![]);
    }
    let s = Stripe::checked(len, per - len, i0)?;
    Ok(prefixed(s, sample(inner_a, &shift(b, -x), Some(on_a))?))
}

/// Indices of one block of `b` starting at `y` (inner `inner_b`, `mb` elements),
/// repeating with period `per`; `a` is sampled by the block's pattern.
fn sample_bblock(
    a: &[Stripe],
    inner_b: &[Stripe],
    on_b: i64,
    y: i128,
    cb: &Counter,
    per: i128,
    mb: i128,
) -> Res<Vec<Raw>> {
    if mb == 0 {
        return Ok(vec![]);
    }
    let s = Stripe::checked(mb, per - mb, cb.g(y))?;
    Ok(prefixed(s, sample(&shift(a, -y), inner_b, Some(on_b))?))
}

/// `{z ∈ b : G_b(z) ∈ a}`: place index set `a` back at `b`'s positions.
pub(crate) fn fill(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let Some(b) = canon(b, w) else {
        return Ok(vec![]);
    };
    let cb = Counter::new(&b);
    let wi = w.map(|w| cb.g(w as i128) as i64);
    let Some(a) = canon(a, wi) else {
        return Ok(vec![]);
    };
    let Some(&sb) = b.first() else {
        return Ok(compact(vec![a], w));
    };
    let Some(&sa) = a.first() else {
        return Ok(vec![b]);
    };
    let m = cb.per_period();
    let (p, q) = (sa.period() as i128, sb.period() as i128);
    let pieces = if m % p == 0 {
        fill_bblock(&a, &b[1..], sb.on(), sb.phase() as i128, &cb, q)?
    } else if p % m == 0 {
        fill_block(&a[1..], sa.on(), sa.phase() as i128, &b, &cb, p / m * q)?
    } else {
        fill_split(&a, &b, &cb, w)?
    };
    Ok(compact(pieces, w))
}

/// Fill when neither the index period of `a` nor `b`'s count divides the other.
fn fill_split(a: &[Stripe], b: &[Stripe], cb: &Counter, w: Option<i64>) -> Res<Vec<Raw>> {
    let (sa, sb) = (a[0], b[0]);
    let (p, q, m) = (sa.period() as i128, sb.period() as i128, cb.per_period());
    // Common index period, kept only if the matching position period fits.
    let l = lcm(p, m).filter(|l| l / m * q <= i64::MAX as i128);
    let g = gcd(p, m);
    let wi = w.map(|w| cb.g(w as i128) as i64);
    let costs = [
        l.map(|_| m / g),
        l.map(|_| p / g),
        blocks(&sa, wi),
        blocks(&sb, w),
    ];
    let mut out = Vec::new();
    match (pick(costs)?, l, w) {
        (0, Some(l), _) => {
            for j in 0..l / p {
                let x = sa.phase() as i128 + j * p;
                out.extend(fill_block(&a[1..], sa.on(), x, b, cb, l / m * q)?);
            }
        }
        (1, Some(l), _) => {
            for k in 0..l / m {
                let y = sb.phase() as i128 + k * q;
                out.extend(fill_bblock(a, &b[1..], sb.on(), y, cb, l / m * q)?);
            }
        }
        (2, _, Some(w)) => {
            for (x, lo, hi) in clipped_blocks(&sa, cb.g(w as i128)) {
                let inner = shift(&a[1..], x - lo);
                out.extend(fill_block(&inner, (hi - lo) as i64, lo, b, cb, w as i128)?);
            }
        }
        (_, _, Some(w)) => {
            for (y, lo, hi) in clipped_blocks(&sb, w as i128) {
                let inner = shift(&b[1..], y - lo);
                out.extend(fill_bblock(a, &inner, (hi - lo) as i64, lo, cb, w as i128)?);
            }
        }
        _ => return Err(SettError::Overflow),
    }
    Ok(out)
}

/// Positions of one index block `[x, x + on_a)` of `a`: the interval from its
/// first to its last element, repeating with period `per`.
fn fill_block(
    inner_a: &[Stripe],
    on_a: i64,
    x: i128,
    b: &[Stripe],
    cb: &Counter,
    per: i128,
) -> Res<Vec<Raw>> {
    let x0 = cb.elem(x);
    let len = cb.elem(x + on_a as i128 - 1) + 1 - x0;
    let s = Stripe::checked(len, per - len, x0)?;
    let len = i64::try_from(len).map_err(|_| SettError::Overflow)?;
    Ok(prefixed(s, fill(inner_a, &shift(b, -x0), Some(len))?))
}

/// One block of `b` at `y` (period `per`), filled with the part of `a` that
/// indexes into it.
fn fill_bblock(
    a: &[Stripe],
    inner_b: &[Stripe],
    on_b: i64,
    y: i128,
    cb: &Counter,
    per: i128,
) -> Res<Vec<Raw>> {
    let s = Stripe::checked(on_b as i128, per - on_b as i128, y)?;
    Ok(prefixed(s, fill(&shift(a, -cb.g(y)), inner_b, Some(on_b))?))
}

// ---------------------------------------------------------------------------
// Flatten / unflatten between 1-D and (rows x cols)

/// Every element `r` of `v` becomes the block `[r*c, r*c + c)`.
fn scale(v: &[Stripe], c: i64) -> Res<Raw> {
    let c = c as i128;
    v.iter()
        .map(|s| {
            Stripe::checked(
                s.on() as i128 * c,
                s.off() as i128 * c,
                s.phase() as i128 * c,
            )
        })
        .collect()
}

pub(crate) fn flatten_raw(rows: &[Stripe], cols: &[Stripe], ncols: i64) -> Res<Raw> {
    let mut v = scale(rows, ncols)?;
    // Each row block restarts the column pattern, restricted to [0, ncols).
    v.push(Stripe::make(ncols, 0, 0));
    v.extend_from_slice(cols);
    Ok(v)
}

/// `(rows, cols)` pieces whose flattening with rows of length `c` is `v`
/// (within window `w`, a multiple of `c`, if given).
pub(crate) fn unflatten(v: &[Stripe], c: i64, w: Option<i64>) -> Res<Vec<(Raw, Raw)>> {
    let Some(v) = canon(v, w) else {
        return Ok(vec![]);
    };
    let Some((&s, rest)) = v.split_first() else {
        return Ok(vec![(smallvec![], smallvec![])]);
    };
    let (p, ci) = (s.period() as i128, c as i128);
    if p % ci == 0 {
        return unflatten_aligned(s, rest, c);
    }
    let g = gcd(p, ci);
    let rows_w = w.map(|w| ceil_div(w, c) as i128);
    let classes = p / g;
    let costs = [
        Some(rows_w.map_or(classes, |r| r.min(classes))),
        Some(ci / g),
        blocks(&s, w),
        None,
    ];
    match pick(costs)? {
        0 => unflatten_classes(&v, c, costs[0].unwrap_or(0), classes),
        1 => unflatten_unfold(s, rest, c, w),
        _ => unflatten_local(s, rest, c, w),
    }
}

/// Rows `≡ i (mod classes)` all see the same column pattern.
fn unflatten_classes(v: &[Stripe], c: i64, n: i128, classes: i128) -> Res<Vec<(Raw, Raw)>> {
    let mut out = Vec::new();
    for i in 0..n {
        let rows = smallvec![Stripe::checked(1, classes - 1, i)?];
        let mut cols = smallvec![Stripe::make(c, 0, 0)];
        cols.extend(shift(v, -i * c as i128));
        out.push((rows, cols));
    }
    Ok(out)
}

/// Unfold the outer stripe to a period that is a multiple of the row length.
fn unflatten_unfold(s: Stripe, rest: &[Stripe], c: i64, w: Option<i64>) -> Res<Vec<(Raw, Raw)>> {
    let (p, ci) = (s.period() as i128, c as i128);
    let l = lcm(p, ci).ok_or(SettError::Overflow)?;
    let mut out = Vec::new();
    for k in 0..l / p {
        let mut piece: Raw = smallvec![Stripe::checked(
            s.on() as i128,
            l - s.on() as i128,
            s.phase() as i128 + k * p,
        )?];
        piece.extend_from_slice(rest);
        out.extend(unflatten(&piece, c, w)?);
    }
    Ok(out)
}

/// Unflatten each block inside the window separately.
fn unflatten_local(s: Stripe, rest: &[Stripe], c: i64, w: Option<i64>) -> Res<Vec<(Raw, Raw)>> {
    let wv = w.ok_or(SettError::Overflow)?;
    let per = ceil_div(wv, c) as i128 * c as i128;
    let mut out = Vec::new();
    for (x, lo, hi) in clipped_blocks(&s, wv as i128) {
        let mut piece: Raw = smallvec![lone(lo, hi - lo, per)?];
        piece.extend(shift(rest, x - lo));
        out.extend(unflatten(&piece, c, w)?);
    }
    Ok(out)
}

/// The outer period is a whole number of rows: split its block into a partial
/// first row, full rows (recursing on the inner pattern) and a partial last row.
fn unflatten_aligned(s: Stripe, rest: &[Stripe], c: i64) -> Res<Vec<(Raw, Raw)>> {
    let (c, on) = (c as i128, s.on() as i128);
    let p = s.period() as i128 / c;
    let (q, r0) = (s.phase() as i128 / c, s.phase() as i128 % c);
    let one_row = |row: i128| Stripe::checked(1, p - 1, row);
    let mut out = Vec::new();
    let (mut consumed, mut row) = (0i128, q);
    if r0 != 0 || on < c {
        let len = (c - r0).min(on);
        let mut cols = smallvec![Stripe::checked(len, c - len, r0)?];
        cols.extend_from_slice(rest);
        out.push((smallvec![one_row(q)?], cols));
        consumed = len;
        row += 1;
    }
    let full = (on - consumed) / c;
    let tail = (on - consumed) % c;
    if full > 0 {
        let window = i64::try_from(full * c).map_err(|_| SettError::Overflow)?;
        let rows = Stripe::checked(full, p - full, row)?;
        for (r, cols) in unflatten(&shift(rest, -consumed), c as i64, Some(window))? {
            let mut rr = smallvec![rows];
            rr.extend(r);
            out.push((rr, cols));
        }
        row += full;
    }
    if tail > 0 {
        let mut cols = smallvec![Stripe::checked(tail, c - tail, 0)?];
        cols.extend(shift(rest, -(consumed + full * c)));
        out.push((smallvec![one_row(row)?], cols));
    }
    Ok(out)
}

/// Canonicalise `(rows, cols)` pieces and merge those sharing one component.
pub(crate) fn compact_pairs(
    pairs: Vec<(Raw, Raw)>,
    rows_w: Option<i64>,
    cols_w: i64,
) -> Vec<(Raw, Raw)> {
    let mut v: Vec<(Raw, Raw)> = pairs
        .into_iter()
        .filter_map(|(r, c)| Some((canon(&r, rows_w)?, canon(&c, Some(cols_w))?)))
        .collect();
    loop {
        let n = v.len();
        v = merge_pairs(v, |(r, c)| (c, r), rows_w);
        v = merge_pairs(v, |(r, c)| (r, c), Some(cols_w));
        if v.len() >= n {
            break;
        }
    }
    v.sort();
    v
}

/// Group by one component (`key` puts it first) and compact the other.
fn merge_pairs(
    v: Vec<(Raw, Raw)>,
    key: fn((Raw, Raw)) -> (Raw, Raw),
    other_w: Option<i64>,
) -> Vec<(Raw, Raw)> {
    let mut groups: BTreeMap<Raw, Vec<Raw>> = BTreeMap::new();
    for p in v {
        let (k, o) = key(p);
        groups.entry(k).or_default().push(o);
    }
    let mut out = Vec::new();
    for (k, others) in groups {
        let merged = if others.len() > 1 {
            compact(others.clone(), other_w)
        } else {
            others
        };
        for o in merged {
            // `key` is an involution on the pair order, so apply it again.
            out.push(key((k.clone(), o)));
        }
    }
    out
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
