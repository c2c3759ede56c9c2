//! The distributed section of a [`crate::plan::Plan`]: the node of every task and the
//! transfers the compiler planned between nodes (issue 10). Empty for a single-process plan.
//!
//! A transfer moves exactly the elements one task reads from a buffer that a task on another
//! node wrote (the footprint of the reader intersected with the region of the writer), as a
//! list of runs of contiguous elements, so a strided window is packed and a slice never ships
//! the whole tensor. Node `n` runs on rank `n mod R`; transfers whose two nodes share a rank
//! are skipped at run time.

use super::group::runs_inside;
pub use super::group::{Leaf, ReduceOp, Reduction};

/// Placement and transfers; `nodes` is empty when the plan is not distributed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dist {
    /// The node of every task, by task index.
    pub nodes: Vec<u32>,
    /// In plan order (producers before consumers).
    pub transfers: Vec<Transfer>,
    /// Per node and source buffer, the elements its tasks (and, on node 0, the sinks) read:
    /// what a rank reads from the source's file when every rank reads its own inputs.
    pub windows: Vec<Window>,
    /// Groups of transfers (indices) of the same data from one writer to distinct nodes that
    /// run as one broadcast (`MPI_Ibcast` over the ranks involved) instead of point to point.
    pub broadcasts: Vec<Vec<u32>>,
    /// The nodes that compute a generator (`iota`, `rand`): every node that reads it, its own
    /// included, each computing the same elements from their global coordinates, so its output
    /// never moves (as the cost model assumes); each only the rows it reads.
    pub replicas: Vec<Replica>,
    /// Split reductions whose partial results combine through one collective
    /// (`MPI_Reduce`/`MPI_Allreduce`/`MPI_Reduce_scatter`) instead of transfers and combine
    /// tasks.
    pub reductions: Vec<Reduction>,
}

/// Generator task `task` runs on `node` over rows `rows` (of its range's first dimension).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Replica {
    pub task: u32,
    pub node: u32,
    pub rows: (i64, i64),
}

/// Where a rank stands in a job of `size` ranks: node `n` runs on rank `n mod size`.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub rank: u32,
    pub size: u32,
}

impl Place {
    /// The rank that runs node `node`.
    pub fn rank_of(self, node: u32) -> u32 {
        node % self.size
    }
}

/// The elements of a source's buffer that the tasks of one node read.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub node: u32,
    pub buffer: u32,
    /// Bytes per element.
    pub elem: u32,
    /// Sorted, disjoint `(first element, length)` runs.
    pub runs: Runs,
}

/// One planned message.
#[derive(Clone, Debug, PartialEq)]
pub struct Transfer {
    /// The value it carries, e.g. `%h` (for `--time`).
    pub value: String,
    pub from: u32,
    pub to: u32,
    pub buffer: u32,
    /// Bytes per element.
    pub elem: u32,
    /// `(first element, length)` runs, in elements from the start of `buffer`.
    pub runs: Vec<(i64, i64)>,
    /// The task on `from` that writes the data; `None`: a source's buffer (read on node 0).
    pub after: Option<u32>,
    /// The task on `to` that reads it; `None`: a sink, gathered on node 0.
    pub before: Option<u32>,
}

impl Transfer {
    pub fn elements(&self) -> i64 {
        self.runs.iter().map(|r| r.1).sum()
    }
    pub fn bytes(&self) -> u64 {
        self.elements() as u64 * self.elem as u64
    }
}

impl Dist {
    /// The reduction group whose combine tasks include `task`, if any.
    pub fn reduction_of(&self, task: usize) -> Option<usize> {
        (self.reductions.iter()).position(|g| g.combines.iter().any(|&c| c as usize == task))
    }

    /// The number of nodes the plan uses (0 when it is not distributed).
    pub fn node_count(&self) -> u32 {
        let replicas = self.replicas.iter().map(|r| r.node);
        (self.nodes.iter().copied().chain(replicas))
            .map(|n| n + 1)
            .max()
            .unwrap_or(0)
    }

    /// Whether task `task` runs on rank `at.rank` (on its node or as a replica).
    pub fn runs_on(&self, task: usize, at: Place) -> bool {
        at.rank_of(self.nodes[task]) == at.rank || self.rows_on(task, at).is_some()
    }

    /// The rows a replicated task computes on rank `at.rank`: the hull of its replicas' rows
    /// there (`None`: not replicated there).
    pub fn rows_on(&self, task: usize, at: Place) -> Option<(i64, i64)> {
        (self.replicas.iter())
            .filter(|r| r.task as usize == task && at.rank_of(r.node) == at.rank)
            .map(|r| r.rows)
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }

    /// Checks indices and that every run stays inside its buffer.
    pub fn validate(&self, tasks: usize, buffers: &[u64]) -> Result<(), String> {
        let bad = |what: String| Err(format!("corrupt plan: {what}"));
        if !self.nodes.is_empty() && self.nodes.len() != tasks {
            return bad(format!("{} task nodes for {tasks} tasks", self.nodes.len()));
        }
        for (i, t) in self.transfers.iter().enumerate() {
            let Some(&size) = buffers.get(t.buffer as usize) else {
                return bad(format!("transfer {i} names a missing buffer"));
            };
            if t.after.is_some_and(|a| a as usize >= tasks)
                || t.before.is_some_and(|b| b as usize >= tasks)
                || t.elem == 0
            {
                return bad(format!("transfer {i} is malformed"));
            }
            if !runs_inside(&t.runs, t.elem, size) {
                return bad(format!("transfer {i} reaches outside its buffer"));
            }
        }
        for (i, g) in self.broadcasts.iter().enumerate() {
            let first = g.first().and_then(|&k| self.transfers.get(k as usize));
            let same = |k: &u32| {
                self.transfers.get(*k as usize).is_some_and(|t| {
                    first.is_some_and(|f| {
                        (t.from, t.buffer, t.elem, &t.runs, t.after)
                            == (f.from, f.buffer, f.elem, &f.runs, f.after)
                            && t.before.is_some()
                    })
                })
            };
            if g.len() < 2 || !g.iter().all(same) {
                return bad(format!("broadcast {i} is malformed"));
            }
        }
        if (self.replicas.iter()).any(|r| r.task as usize >= tasks || r.rows.0 > r.rows.1) {
            return bad("a replica names a missing task".into());
        }
        for (i, g) in self.reductions.iter().enumerate() {
            if let Some(why) = g.check(&self.nodes, buffers) {
                return bad(format!("reduction group {i} {why}"));
            }
        }
        for (i, w) in self.windows.iter().enumerate() {
            let size = buffers.get(w.buffer as usize).copied();
            if w.elem == 0 || size.is_none_or(|size| !runs_inside(&w.runs, w.elem, size)) {
                return bad(format!("input window {i} is malformed"));
            }
        }
        Ok(())
    }
}

/// Sorted, merged `(start, len)` runs of element offsets.
pub type Runs = Vec<(i64, i64)>;

/// The element offsets of the strided region `offset + Σ i_d * strides[d]`, `0 <= i_d <
/// shape[d]`, as sorted, merged runs.
pub fn region_runs(offset: i64, shape: &[i64], strides: &[i64]) -> Runs {
    if shape.contains(&0) {
        return vec![];
    }
    // Broadcast dimensions add no elements and a negative stride walks the same set backwards;
    // sorted by stride, the unit-stride dimension is innermost and contiguous ones collapse.
    let mut offset = offset;
    let mut dims: Vec<(i64, i64)> = Vec::new();
    for (&n, &st) in shape.iter().zip(strides) {
        if n > 1 && st != 0 {
            if st < 0 {
                offset += (n - 1) * st;
            }
            dims.push((n, st.abs()));
        }
    }
    dims.sort_by_key(|&(_, st)| std::cmp::Reverse(st));
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (n, st) in dims {
        match merged.last_mut() {
            Some((m, s)) if *s == n * st => {
                *m *= n;
                *s = st;
            }
            _ => merged.push((n, st)),
        }
    }
    let (inner, len) = match merged.last() {
        Some(&(n, 1)) => (merged.len() - 1, n),
        _ => (merged.len(), 1),
    };
    let mut runs = Vec::new();
    let mut idx = vec![0i64; inner];
    loop {
        let at = offset + idx.iter().zip(&merged).map(|(i, d)| i * d.1).sum::<i64>();
        runs.push((at, len));
        let mut d = inner;
        loop {
            if d == 0 {
                return normalize(runs);
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < merged[d].0 {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Sorts runs and merges overlapping or adjacent ones.
pub fn normalize(mut runs: Runs) -> Runs {
    runs.sort_unstable();
    let mut out: Runs = Vec::with_capacity(runs.len());
    for (a, n) in runs {
        match out.last_mut() {
            Some((b, m)) if *b + *m >= a => *m = (*m).max(a + n - *b),
            _ => out.push((a, n)),
        }
    }
    out
}

/// The intersection of two normalized run lists.
pub fn intersect(a: &[(i64, i64)], b: &[(i64, i64)]) -> Runs {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let (ea, eb) = (a[i].0 + a[i].1, b[j].0 + b[j].1);
        if lo < ea.min(eb) {
            out.push((lo, ea.min(eb) - lo));
        }
        if ea < eb {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The runs of `a` not in `b` (both sorted and disjoint).
pub fn subtract(a: &[(i64, i64)], b: &[(i64, i64)]) -> Runs {
    let (mut out, mut j) = (Vec::new(), 0);
    for &(start, n) in a {
        let (mut at, end) = (start, start + n);
        while j < b.len() && b[j].0 + b[j].1 <= at {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < end {
            if b[k].0 > at {
                out.push((at, b[k].0 - at));
            }
            at = at.max(b[k].0 + b[k].1);
            k += 1;
        }
        if end > at {
            out.push((at, end - at));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_become_merged_runs() {
        // Rows 1..3 of a 4×5 row-major matrix: one run.
        assert_eq!(region_runs(5, &[2, 5], &[5, 1]), vec![(5, 10)]);
        // Columns 1..3: a run per row.
        assert_eq!(region_runs(1, &[2, 2], &[5, 1]), vec![(1, 2), (6, 2)]);
        // A transposed, reversed or broadcast view covers the same elements.
        assert_eq!(region_runs(0, &[2, 2], &[1, 2]), vec![(0, 4)]);
        assert_eq!(region_runs(3, &[2, 2], &[-2, -1]), vec![(0, 4)]);
        assert_eq!(region_runs(0, &[3, 2], &[0, 2]), vec![(0, 1), (2, 1)]);
        assert_eq!(region_runs(0, &[0, 3], &[3, 1]), vec![]);
        assert_eq!(
            intersect(&[(0, 10), (20, 5)], &[(5, 17)]),
            vec![(5, 5), (20, 2)]
        );
    }
}
