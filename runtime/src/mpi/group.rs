//! Reduction groups of a distributed plan (issue 17): a reduction split across nodes whose
//! partial results combine through one MPI collective instead of point-to-point sends and a
//! chain of combine tasks. Always built (it is part of the plan's format); `coll.rs` runs it.
//!
//! A group names its partial results (the *leaves*: the task that writes each and its region),
//! the combine tasks it replaces (the last one writes the result), the result's region and the
//! nodes that read the result (its *targets*). One target: `MPI_Reduce` to that node's rank;
//! several, each reading the whole result: `MPI_Allreduce` over the ranks of the leaves;
//! several, each reading its own part (the group's `scatter`: per target, the runs it reads,
//! disjoint, together the whole result): `MPI_Reduce_scatter`, rooted at the last combine's
//! node, each rank receiving its targets' parts. Every target is a leaf's node, so every rank
//! of the collective contributes. The leaves and the result have one shape and one set of
//! strides, so their runs correspond element by element.
//!
//! Bytes moved, counted the way the cost model counts them: a reduce over `p` ranks moves
//! `(p − 1)·n` bytes (each rank but the root sends its `n` bytes once, as in any reduction
//! tree: Open MPI's binomial, binary and linear ones), an allreduce `2(p − 1)·n` (a ring's
//! reduce-scatter then allgather: `2(p − 1)` steps of `n / p` bytes on each of `p` ranks,
//! rank `r` sending `2(n − c_r)` where `c_r` is its chunk), a reduce-scatter `(p − 1)·n` plus
//! the parts of the ranks but the root (Open MPI 4.1's libnbc runs it as a binomial reduce to
//! its root, then the root sends each rank its part: what a reduce and point-to-point sends of
//! the parts move, and what the cost model, which combines on its sink node and sends the
//! readers their parts, predicts).

use crate::tensor::DType;

/// Sorted, merged `(start, len)` runs of element offsets (as `dist::Runs`).
type Runs = Vec<(i64, i64)>;

/// The reduction's monoid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

/// One partial result: the task that writes it and its runs of `buffer`.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    pub task: u32,
    pub buffer: u32,
    pub runs: Runs,
}

/// A split reduction combined by one collective.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// The combined value, e.g. `%y.kacc3` (for `--time` and the trace).
    pub value: String,
    pub op: ReduceOp,
    pub dtype: DType,
    pub leaves: Vec<Leaf>,
    /// The combine tasks it replaces, in plan order; the last one writes the result.
    pub combines: Vec<u32>,
    pub buffer: u32,
    pub runs: Runs,
    /// The nodes that read the result, sorted: one means a reduce to it, more an allreduce
    /// (or a reduce-scatter, with `scatter`).
    pub targets: Vec<u32>,
    /// Per target, the sorted runs of the result it reads, when the targets read disjoint
    /// parts that together make the whole result (a reduce-scatter); empty otherwise.
    pub scatter: Vec<Runs>,
}

/// How a group's collective delivers its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// To one rank (`MPI_Ireduce`).
    Reduce,
    /// The whole result to every rank (`MPI_Iallreduce`).
    Allreduce,
    /// Each rank its part (`MPI_Ireduce_scatter`).
    ReduceScatter,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::ReduceScatter => "reduce-scatter",
        }
    }
}

impl Reduction {
    /// Elements of the result (and of every leaf).
    pub fn elements(&self) -> i64 {
        self.runs.iter().map(|r| r.1).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.elements() as u64 * self.dtype.size_bytes() as u64
    }

    /// The task that writes the result.
    pub fn last(&self) -> u32 {
        *self
            .combines
            .last()
            .expect("validated: a group has combines")
    }

    pub fn kind(&self) -> Kind {
        match (self.scatter.is_empty(), self.targets.len()) {
            (false, _) => Kind::ReduceScatter,
            (true, 1) => Kind::Reduce,
            _ => Kind::Allreduce,
        }
    }

    pub fn all(&self) -> bool {
        self.kind() == Kind::Allreduce
    }

    /// The runs of the result that the targets on `rank` read (a reduce-scatter), sorted;
    /// `node_rank` maps a node to its rank.
    pub fn part_of(&self, rank: u32, node_rank: impl Fn(u32) -> u32) -> Runs {
        let mut runs: Runs = (self.targets.iter().zip(&self.scatter))
            .filter(|(&n, _)| node_rank(n) == rank)
            .flat_map(|(_, r)| r.iter().copied())
            .collect();
        runs.sort_unstable();
        runs
    }

    /// The bytes rank `k` (0 the root) of a reduce-scatter sends and receives, `parts` the
    /// bytes of each rank's part (see the module docs).
    pub fn scatter_traffic(&self, k: usize, parts: &[u64]) -> (u64, u64) {
        let (n, p) = (self.bytes(), parts.len() as u64);
        match k {
            _ if p < 2 => (0, 0),
            0 => (parts[1..].iter().sum(), (p - 1) * n),
            _ => (n, parts[k]),
        }
    }

    /// The bytes rank `k` of `p` ranks sends in this collective (see the module docs), and
    /// the bytes it receives; `root`: the reduce's root.
    pub fn traffic(&self, k: usize, p: usize, root: usize) -> (u64, u64) {
        let n = self.bytes();
        if p < 2 {
            return (0, 0);
        }
        if self.all() {
            let (elems, e) = (self.elements() as u64, self.dtype.size_bytes() as u64);
            let (q, r) = (elems / p as u64, elems % p as u64);
            let chunk = (q + u64::from((k as u64) < r)) * e;
            let moved = 2 * (n - chunk);
            return (moved, moved);
        }
        if k == root {
            (0, (p as u64 - 1) * n)
        } else {
            (n, 0)
        }
    }

    /// Checks the group against a plan of `tasks` tasks on `nodes` and buffers of `sizes`
    /// bytes; `None` when it is sound.
    pub fn check(&self, nodes: &[u32], sizes: &[u64]) -> Option<&'static str> {
        let elem = self.dtype.size_bytes() as u32;
        let tasks = nodes.len();
        let fits = |b: u32, runs: &Runs| {
            sizes
                .get(b as usize)
                .is_some_and(|&s| runs_inside(runs, elem, s))
        };
        let same = |runs: &Runs| {
            runs.len() == self.runs.len() && runs.iter().zip(&self.runs).all(|(a, b)| a.1 == b.1)
        };
        if self.leaves.len() < 2 || self.combines.is_empty() || self.targets.is_empty() {
            return Some("is empty");
        }
        if matches!(self.dtype, DType::F16 | DType::BF16 | DType::Bool) {
            return Some("has a dtype MPI cannot reduce");
        }
        if !fits(self.buffer, &self.runs)
            || self
                .leaves
                .iter()
                .any(|l| !fits(l.buffer, &l.runs) || !same(&l.runs))
        {
            return Some("reaches outside its buffers");
        }
        if !self.scatter.is_empty() && !self.parts_tile_the_result() {
            return Some("has parts that are not its result's, each once");
        }
        let leaf_nodes: Vec<u32> = (self.leaves.iter())
            .filter_map(|l| nodes.get(l.task as usize).copied())
            .collect();
        if leaf_nodes.len() != self.leaves.len()
            || self.combines.iter().any(|&c| c as usize >= tasks)
            || self.targets.iter().any(|t| !leaf_nodes.contains(t))
        {
            return Some("names a missing task or node");
        }
        let root = nodes.get(self.last() as usize);
        if !self.scatter.is_empty() && !root.is_some_and(|r| leaf_nodes.contains(r)) {
            return Some("scatters from a node that holds no partial result");
        }
        None
    }

    /// Whether `scatter` has a part per target, and the parts are disjoint and together the
    /// whole result.
    fn parts_tile_the_result(&self) -> bool {
        let mut all: Runs = self.scatter.iter().flatten().copied().collect();
        all.sort_unstable();
        let mut merged: Runs = Vec::new();
        for (a, n) in all {
            match merged.last_mut() {
                Some((b, m)) if *b + *m == a => *m += n,
                Some((b, m)) if *b + *m > a => return false,
                _ => merged.push((a, n)),
            }
        }
        self.scatter.len() == self.targets.len()
            && self
                .scatter
                .iter()
                .all(|p| !p.is_empty() && p.iter().all(|r| r.1 > 0))
            && merged == self.runs
    }
}

/// The runs `sub` of a region whose runs are `from`, in the coordinates of another region whose
/// runs `to` correspond to `from` element by element (the same lengths, in order): where a
/// leaf holds the elements `sub` of the result. `None` when `sub` is not inside `from`.
pub fn remap(from: &[(i64, i64)], to: &[(i64, i64)], sub: &[(i64, i64)]) -> Option<Runs> {
    let mut out = Vec::new();
    for &(mut a, mut n) in sub {
        while n > 0 {
            let i = from.partition_point(|r| r.0 + r.1 <= a);
            let (&(f, len), &(t, _)) = (from.get(i)?, to.get(i)?);
            if a < f {
                return None;
            }
            let take = n.min(f + len - a);
            out.push((t + a - f, take));
            (a, n) = (a + take, n - take);
        }
    }
    Some(out)
}

/// Whether every run of `elem`-byte elements is non-empty and inside `size` bytes.
pub fn runs_inside(runs: &[(i64, i64)], elem: u32, size: u64) -> bool {
    runs.iter().all(|&(at, n)| {
        let end = at.checked_add(n).and_then(|e| e.checked_mul(elem as i64));
        at >= 0 && n > 0 && end.is_some_and(|e| e as u64 <= size)
    })
}
