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
///
/// The result is built like an insertion sort: the ops kept so far are canonical (no rule applies
/// to them), and each new op is settled against the last kept one only, since a rewrite at the
/// end never changes what comes before it. A canonical chain is short (sorted runs, one op per
/// kind between reshapes that cannot swap), so this is linear in the chain's length.
pub fn canonicalize(input: &[i64], ops: &[Op]) -> Vec<Op> {
    canonicalize_counting(input, ops).0
}

/// [`canonicalize`], also returning how many ops were settled (the work done, for tests).
pub fn canonicalize_counting(input: &[i64], ops: &[Op]) -> (Vec<Op>, usize) {
    let mut settled = 0;
    let mut kept = Kept {
        ops: Vec::new(),
        shapes: vec![input.to_vec()],
    };
    let mut pending = Vec::new();
    for op in ops {
        pending.push(op.clone());
        while let Some(op) = pending.pop() {
            kept.settle(op, &mut pending);
            settled += 1;
        }
    }
    (kept.ops, settled)
}

/// A canonical chain and the shape each op reads (`shapes[i]` is `ops[i]`'s input; one more
/// shape than ops: the last is the chain's output).
struct Kept {
    ops: Vec<Op>,
    shapes: Vec<Vec<i64>>,
}

impl Kept {
    /// Appends `op`, or rewrites it with the last op into `pending` (pushed in reverse order)
    /// when a rule applies: an identity disappears, neighbours of one kind merge, and an op
    /// sorting before the last one swaps under it.
    fn settle(&mut self, op: Op, pending: &mut Vec<Op>) {
        let n = self.ops.len();
        if op.is_identity(&self.shapes[n]) {
            return;
        }
        if let Some(last) = self.ops.last() {
            let rewrite = merge(last, &op, &self.shapes[n - 1])
                .map(|m| vec![m])
                .or_else(|| {
                    (last.rank() > op.rank())
                        .then(|| swap(last, &op, &self.shapes[n - 1]))
                        .flatten()
                        .map(|(a, b)| vec![b, a])
                });
            if let Some(rewrite) = rewrite {
                self.ops.pop();
                self.shapes.pop();
                pending.extend(rewrite);
                return;
            }
        }
        self.shapes.push(op.out_shape(&self.shapes[n]));
        self.ops.push(op);
    }
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
