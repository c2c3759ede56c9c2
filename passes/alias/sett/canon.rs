//! Canonical form of a sett's stripes within a window, and compaction: merging disjoint
//! pieces into as few setts as can be found (same outer stripe, runs of a common period).

use super::*;

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
pub fn merge_disjoint(setts: Vec<Sett>, n: i64) -> Vec<Sett> {
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
