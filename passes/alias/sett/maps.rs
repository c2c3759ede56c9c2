//! The 1-D view maps on raw stripe lists: sample (a generalised slice: the indices, among
//! `b`'s elements, of the elements of `a`) and fill (its inverse), and flatten / unflatten
//! between 1-D sets and (rows x cols) products.

use super::*;

/// One block `[at, at + on)` of a stripe list whose elements inside it follow `inner`.
#[derive(Clone, Copy)]
struct Block<'s> {
    inner: &'s [Stripe],
    on: i64,
    at: i128,
}

impl<'s> Block<'s> {
    fn new(inner: &'s [Stripe], on: i64, at: i128) -> Self {
        Block { inner, on, at }
    }
}

/// What a split sample or fill returns.
type Pieces = Res<Vec<Raw>>;

/// The leading stripes of two non-empty lists, their periods `p` and `q`, and `b`'s count per period.
#[derive(Clone, Copy)]
struct Leads {
    sa: Stripe,
    sb: Stripe,
    p: i128,
    q: i128,
    m: i128,
}

/// Sample and fill both dispatch on the leading stripes; `None` when either list is empty.
fn leads(a: &[Stripe], b: &[Stripe], cb: &Counter) -> Option<Leads> {
    let (&sa, &sb) = (a.first()?, b.first()?);
    let (p, q) = (sa.period() as i128, sb.period() as i128);
    Some(Leads {
        sa,
        sb,
        p,
        q,
        m: cb.per_period(),
    })
}

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
    let lead = match leads(&a, &b, &cb) {
        Some(lead) => lead,
        None if b.is_empty() => return Ok(compact(vec![a], wi)),
        None => return Ok(vec![smallvec![]]),
    };
    let Leads { sa, sb, p, q, m } = lead;
    let pieces = if q % p == 0 {
        sample_bblock(
            &a,
            Block::new(&b[1..], sb.on(), sb.phase() as i128),
            &cb,
            m,
            m,
        )?
    } else if p % q == 0 {
        sample_block(
            Block::new(&a[1..], sa.on(), sa.phase() as i128),
            &b,
            &cb,
            p / q * m,
        )?
    } else {
        sample_split(&a, &b, &cb, lead, w)?
    };
    Ok(compact(pieces, wi))
}

/// Sample when neither period divides the other.
fn sample_split(a: &[Stripe], b: &[Stripe], cb: &Counter, ld: Leads, w: Option<i64>) -> Pieces {
    let Leads { sa, sb, p, q, m } = ld;
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
                out.extend(sample_block(
                    Block::new(&a[1..], sa.on(), x),
                    b,
                    cb,
                    l / q * m,
                )?);
            }
        }
        (1, Some(l), _) => {
            for y in crt_copies(&sb, &sa).1 {
                out.extend(sample_bblock(
                    a,
                    Block::new(&b[1..], sb.on(), y),
                    cb,
                    l / q * m,
                    m,
                )?);
            }
        }
        (2, _, Some(w)) => {
            for (x, lo, hi) in clipped_blocks(&sa, w as i128) {
                let inner = shift(&a[1..], x - lo);
                let wi = cb.g(w as i128);
                out.extend(sample_block(
                    Block::new(&inner, (hi - lo) as i64, lo),
                    b,
                    cb,
                    wi,
                )?);
            }
        }
        (_, _, Some(w)) => {
            for (y, lo, hi) in clipped_blocks(&sb, w as i128) {
                let inner = shift(&b[1..], y - lo);
                let (wi, mb) = (cb.g(w as i128), cb.g(hi) - cb.g(lo));
                out.extend(sample_bblock(
                    a,
                    Block::new(&inner, (hi - lo) as i64, lo),
                    cb,
                    wi,
                    mb,
                )?);
            }
        }
        _ => return Err(SettError::Overflow),
    }
    Ok(out)
}

/// Image of one block `[x, x + on_a)` of `a` (inner `inner_a`): an index
/// interval repeating with period `per`, with the inner sampled inside it.
fn sample_block(blk: Block, b: &[Stripe], cb: &Counter, per: i128) -> Pieces {
    let Block {
        inner: inner_a,
        on: on_a,
        at: x,
    } = blk;
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
fn sample_bblock(a: &[Stripe], blk: Block, cb: &Counter, per: i128, mb: i128) -> Pieces {
    let Block {
        inner: inner_b,
        on: on_b,
        at: y,
    } = blk;
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
    let lead = match leads(&a, &b, &cb) {
        Some(lead) => lead,
        None if b.is_empty() => return Ok(compact(vec![a], w)),
        None => return Ok(vec![b]),
    };
    let Leads { sa, sb, p, q, m } = lead;
    let pieces = if m % p == 0 {
        fill_bblock(&a, Block::new(&b[1..], sb.on(), sb.phase() as i128), &cb, q)?
    } else if p % m == 0 {
        fill_block(
            Block::new(&a[1..], sa.on(), sa.phase() as i128),
            &b,
            &cb,
            p / m * q,
        )?
    } else {
        fill_split(&a, &b, &cb, lead, w)?
    };
    Ok(compact(pieces, w))
}

/// Fill when neither the index period of `a` nor `b`'s count divides the other.
fn fill_split(a: &[Stripe], b: &[Stripe], cb: &Counter, ld: Leads, w: Option<i64>) -> Pieces {
    let Leads { sa, sb, p, q, m } = ld;
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
                out.extend(fill_block(
                    Block::new(&a[1..], sa.on(), x),
                    b,
                    cb,
                    l / m * q,
                )?);
            }
        }
        (1, Some(l), _) => {
            for k in 0..l / m {
                let y = sb.phase() as i128 + k * q;
                out.extend(fill_bblock(
                    a,
                    Block::new(&b[1..], sb.on(), y),
                    cb,
                    l / m * q,
                )?);
            }
        }
        (2, _, Some(w)) => {
            for (x, lo, hi) in clipped_blocks(&sa, cb.g(w as i128)) {
                let inner = shift(&a[1..], x - lo);
                out.extend(fill_block(
                    Block::new(&inner, (hi - lo) as i64, lo),
                    b,
                    cb,
                    w as i128,
                )?);
            }
        }
        (_, _, Some(w)) => {
            for (y, lo, hi) in clipped_blocks(&sb, w as i128) {
                let inner = shift(&b[1..], y - lo);
                out.extend(fill_bblock(
                    a,
                    Block::new(&inner, (hi - lo) as i64, lo),
                    cb,
                    w as i128,
                )?);
            }
        }
        _ => return Err(SettError::Overflow),
    }
    Ok(out)
}

/// Positions of one index block `[x, x + on_a)` of `a`: the interval from its
/// first to its last element, repeating with period `per`.
fn fill_block(blk: Block, b: &[Stripe], cb: &Counter, per: i128) -> Pieces {
    let Block {
        inner: inner_a,
        on: on_a,
        at: x,
    } = blk;
    let x0 = cb.elem(x);
    let len = cb.elem(x + on_a as i128 - 1) + 1 - x0;
    let s = Stripe::checked(len, per - len, x0)?;
    let len = i64::try_from(len).map_err(|_| SettError::Overflow)?;
    Ok(prefixed(s, fill(inner_a, &shift(b, -x0), Some(len))?))
}

/// One block of `b` at `y` (period `per`), filled with the part of `a` that
/// indexes into it.
fn fill_bblock(a: &[Stripe], blk: Block, cb: &Counter, per: i128) -> Pieces {
    let Block {
        inner: inner_b,
        on: on_b,
        at: y,
    } = blk;
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
