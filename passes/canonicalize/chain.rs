//! Canonicalization of chains of single-operand views (after poprithms' Chain canonicalizer):
//! remove identities, merge neighbours of the same kind, and bubble views toward the fixed
//! order permute < broadcast < reshape < reverse < slice, rewriting attributes on every swap.
//! A swap across a reshape is made only where dimensions split or merge cleanly.

/// One view, with the shape it reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `out[i] = in[perm[i]]` (TEG `transpose`).
    Perm(Vec<usize>),
    /// Numpy broadcast to this shape.
    Bcast(Vec<i64>),
    /// Row-major reshape to this shape (also squeeze/unsqueeze).
    Reshape(Vec<i64>),
    /// Reverse these dims (sorted, no duplicates).
    Rev(Vec<usize>),
    /// Per dim `(start, step, count)`.
    Slice(Vec<(i64, i64, i64)>),
}

impl Op {
    fn rank(&self) -> u8 {
        match self {
            Op::Perm(_) => 0,
            Op::Bcast(_) => 1,
            Op::Reshape(_) => 2,
            Op::Rev(_) => 3,
            Op::Slice(_) => 4,
        }
    }

    pub fn out_shape(&self, input: &[i64]) -> Vec<i64> {
        match self {
            Op::Perm(p) => p.iter().map(|&d| input[d]).collect(),
            Op::Bcast(s) | Op::Reshape(s) => s.clone(),
            Op::Rev(_) => input.to_vec(),
            Op::Slice(s) => s.iter().map(|x| x.2).collect(),
        }
    }

    fn is_identity(&self, input: &[i64]) -> bool {
        match self {
            Op::Perm(p) => p.iter().enumerate().all(|(i, &d)| i == d),
            Op::Bcast(s) | Op::Reshape(s) => s.as_slice() == input,
            Op::Rev(d) => d.iter().all(|&d| input[d] <= 1),
            Op::Slice(s) => s.iter().zip(input).all(|(&(st, step, c), &n)| {
                c == n && (n <= 1 || (st == 0 && step == 1)) && (n != 1 || st == 0)
            }),
        }
    }
}

/// A chain applied to an input of shape `input`.
pub fn canonicalize(input: &[i64], ops: &[Op]) -> Vec<Op> {
    let mut ops = ops.to_vec();
    // Every step removes an op or strictly sorts a pair, so this terminates; the cap is a guard.
    for _ in 0..(4 * ops.len() * ops.len() + 16) {
        if !step(input, &mut ops) {
            break;
        }
    }
    ops
}

fn shapes(input: &[i64], ops: &[Op]) -> Vec<Vec<i64>> {
    let mut out = vec![input.to_vec()];
    for op in ops {
        let next = op.out_shape(out.last().expect("non-empty"));
        out.push(next);
    }
    out
}

/// One rewrite; false when the chain is canonical.
fn step(input: &[i64], ops: &mut Vec<Op>) -> bool {
    let sh = shapes(input, ops);
    if let Some(i) = (0..ops.len()).find(|&i| ops[i].is_identity(&sh[i])) {
        ops.remove(i);
        return true;
    }
    for i in 0..ops.len().saturating_sub(1) {
        if let Some(m) = merge(&ops[i], &ops[i + 1], &sh[i]) {
            ops.splice(i..i + 2, [m]);
            return true;
        }
    }
    for i in 0..ops.len().saturating_sub(1) {
        if ops[i].rank() > ops[i + 1].rank() {
            if let Some((a, b)) = swap(&ops[i], &ops[i + 1], &sh[i]) {
                ops[i] = a;
                ops[i + 1] = b;
                return true;
            }
        }
    }
    false
}

fn merge(a: &Op, b: &Op, _input: &[i64]) -> Option<Op> {
    Some(match (a, b) {
        (Op::Perm(p0), Op::Perm(p1)) => Op::Perm(p1.iter().map(|&i| p0[i]).collect()),
        (Op::Rev(d0), Op::Rev(d1)) => {
            let mut d: Vec<usize> = d0
                .iter()
                .filter(|x| !d1.contains(x))
                .chain(d1.iter().filter(|x| !d0.contains(x)))
                .copied()
                .collect();
            d.sort_unstable();
            Op::Rev(d)
        }
        (Op::Reshape(_), Op::Reshape(s)) => Op::Reshape(s.clone()),
        (Op::Bcast(_), Op::Bcast(s)) => Op::Bcast(s.clone()),
        (Op::Slice(s0), Op::Slice(s1)) => Op::Slice(
            s0.iter()
                .zip(s1)
                .map(|(&(a0, st0, _), &(a1, st1, c1))| (a0 + a1 * st0, st0 * st1, c1))
                .collect(),
        ),
        _ => return None,
    })
}

/// `a -> b` as an equivalent `b' -> a'` (b' sorts before a'), when one exists.
fn swap(a: &Op, b: &Op, input: &[i64]) -> Option<(Op, Op)> {
    match (a, b) {
        (Op::Rev(d), Op::Perm(p)) => {
            let mut nd: Vec<usize> = (0..p.len()).filter(|&i| d.contains(&p[i])).collect();
            nd.sort_unstable();
            Some((Op::Perm(p.clone()), Op::Rev(nd)))
        }
        (Op::Slice(s), Op::Perm(p)) => Some((
            Op::Perm(p.clone()),
            Op::Slice(p.iter().map(|&i| s[i]).collect()),
        )),
        (Op::Slice(s), Op::Rev(d)) => {
            let ns = s
                .iter()
                .enumerate()
                .map(|(k, &(st, step, c))| {
                    if d.contains(&k) && c > 0 {
                        (input[k] - 1 - (st + (c - 1) * step), step, c)
                    } else {
                        (st, step, c)
                    }
                })
                .collect();
            // Reversing the full dim then slicing keeps the selected elements in reversed order.
            Some((Op::Rev(d.clone()), Op::Slice(ns)))
        }
        (Op::Rev(d), Op::Bcast(shape)) => {
            let lead = shape.len() - input.len();
            let ok = d
                .iter()
                .all(|&k| input[k] == shape[lead + k] || input[k] == 1);
            ok.then(|| {
                (
                    Op::Bcast(shape.clone()),
                    Op::Rev(
                        d.iter()
                            .filter(|&&k| input[k] > 1)
                            .map(|k| k + lead)
                            .collect(),
                    ),
                )
            })
        }
        (Op::Reshape(to), Op::Perm(p)) => swap_reshape_perm(input, to, p),
        _ => None,
    }
}

/// Groups `from` and `to` into runs with equal products, as fine as possible; each run must be
/// a pure split (one `from` dim) or a pure merge (one `to` dim) for a swap to be legal.
fn groups(
    from: &[i64],
    to: &[i64],
) -> Option<Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < from.len() || j < to.len() {
        let (si, sj) = (i, j);
        let (mut pa, mut pb) = (1i64, 1i64);
        if i < from.len() {
            pa *= from[i];
            i += 1;
        }
        if j < to.len() {
            pb *= to[j];
            j += 1;
        }
        while pa != pb {
            if pa < pb && i < from.len() {
                pa *= from[i];
                i += 1;
            } else if pb < pa && j < to.len() {
                pb *= to[j];
                j += 1;
            } else {
                return None;
            }
        }
        if i - si > 1 && j - sj > 1 {
            return None; // mixed: dims neither split nor merge cleanly
        }
        out.push((si..i, sj..j));
    }
    Some(out)
}

fn swap_reshape_perm(input: &[i64], to: &[i64], p: &[usize]) -> Option<(Op, Op)> {
    if input.contains(&1) || to.contains(&1) || input.contains(&0) {
        return None; // size-1 dims make groupings ambiguous; leave such chains alone
    }
    let gs = groups(input, to)?;
    // The permutation must move whole groups of `to` dims, keeping each group in order.
    let mut order = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let g = gs.iter().position(|(_, r)| r.contains(&p[i]))?;
        let r = &gs[g].1;
        if p[i] != r.start || i + r.len() > p.len() || (0..r.len()).any(|k| p[i + k] != r.start + k)
        {
            return None;
        }
        order.push(g);
        i += r.len();
    }
    let new_perm: Vec<usize> = order.iter().flat_map(|&g| gs[g].0.clone()).collect();
    let new_shape: Vec<i64> = order
        .iter()
        .flat_map(|&g| gs[g].1.clone().map(|d| to[d]))
        .collect();
    Some((Op::Perm(new_perm), Op::Reshape(new_shape)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_reverse_permute_is_one_reverse() {
        let c = canonicalize(
            &[2, 3, 4],
            &[
                Op::Perm(vec![1, 2, 0]),
                Op::Rev(vec![0]),
                Op::Perm(vec![2, 0, 1]),
            ],
        );
        assert_eq!(c, vec![Op::Rev(vec![1])]);
    }

    #[test]
    fn chains_that_cancel_become_empty() {
        let c = canonicalize(
            &[2, 3, 4],
            &[
                Op::Perm(vec![2, 0, 1]),
                Op::Rev(vec![0]),
                Op::Perm(vec![1, 2, 0]),
                Op::Rev(vec![2]),
            ],
        );
        assert_eq!(c, vec![]);
        let c = canonicalize(
            &[2, 3],
            &[
                Op::Rev(vec![0]),
                Op::Perm(vec![1, 0]),
                Op::Rev(vec![1]),
                Op::Perm(vec![1, 0]),
            ],
        );
        assert_eq!(c, vec![]);
    }

    #[test]
    fn slice_then_reverse_becomes_reverse_then_slice() {
        assert_eq!(
            canonicalize(&[10], &[Op::Slice(vec![(1, 1, 2)]), Op::Rev(vec![0])]),
            vec![Op::Rev(vec![0]), Op::Slice(vec![(7, 1, 2)])]
        );
    }

    #[test]
    fn slice_then_permute_swaps() {
        let c = canonicalize(
            &[4, 5, 6],
            &[
                Op::Slice(vec![(1, 1, 2), (0, 1, 5), (0, 1, 6)]),
                Op::Perm(vec![1, 2, 0]),
            ],
        );
        assert_eq!(
            c,
            vec![
                Op::Perm(vec![1, 2, 0]),
                Op::Slice(vec![(0, 1, 5), (0, 1, 6), (1, 1, 2)])
            ]
        );
    }

    #[test]
    fn reshape_permute_swaps_only_where_dims_split_or_merge_cleanly() {
        // (25,3,2) reshape(5,5,6) -> permute(2 0 1)  ==  permute(1 2 0) -> reshape(6,5,5)
        let c = canonicalize(
            &[25, 3, 2],
            &[Op::Reshape(vec![5, 5, 6]), Op::Perm(vec![2, 0, 1])],
        );
        assert_eq!(c, vec![Op::Perm(vec![1, 2, 0]), Op::Reshape(vec![6, 5, 5])]);
        // (3,2) reshape(2,3) -> permute(1 0) cannot be swapped.
        let ops = vec![Op::Reshape(vec![2, 3]), Op::Perm(vec![1, 0])];
        assert_eq!(canonicalize(&[3, 2], &ops), ops);
    }

    #[test]
    fn slices_compose_including_negative_steps() {
        // [8:2:-2] then [1:3] of that = elements 6, 4
        let c = canonicalize(
            &[10],
            &[Op::Slice(vec![(8, -2, 3)]), Op::Slice(vec![(1, 1, 2)])],
        );
        assert_eq!(c, vec![Op::Slice(vec![(6, -2, 2)])]);
    }
}
