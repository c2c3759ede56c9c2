//! The set operations on raw stripe lists: complement, intersection (by absorbing, unfolding
//! to a common period, or localising to a window), difference, union, the disjointness test,
//! and the mirror image in a window.

use super::*;

/// Complement as disjoint pieces: level `i` holds the gaps of stripe `i`
/// inside the blocks of stripes `0..i`.
pub(super) fn complement_raw(v: &[Stripe]) -> Vec<Raw> {
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

pub(super) fn diff(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let mut out = Vec::new();
    for c in complement_raw(b) {
        out.extend(inter(a, &c, w)?);
    }
    Ok(compact(out, w))
}

pub(super) fn union(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<Vec<Raw>> {
    let mut out = diff(b, a, w)?;
    out.push(Raw::from_slice(a));
    Ok(compact(out, w))
}

/// Whether the sets share an element; single stripes use the gcd criterion only.
pub(super) fn meets(a: &[Stripe], b: &[Stripe], w: Option<i64>) -> Res<bool> {
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

pub(super) fn reverse_raw(v: &[Stripe], n: i128) -> Raw {
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
