//! In-place buffer reuse (issue 22): an apply that is the last reader of an input and writes
//! an output of the input's layout writes it into the input's buffer (softmax into the scores'
//! buffer, a residual add into an operand, an activation into its input), so the two never
//! live at once.
//!
//! Decided once, on the schedule, before the plan is embedded: the output's buffer is renamed
//! to the input's everywhere (task arguments, sinks, footprints) and the task waits for every
//! other reader of the input, so the executor's allocation (a buffer lives from its first
//! task to its last), `--time`'s peak, the pre-run memory check (`memory::peak`) all see the
//! same assignment. Distributed (`--mpi`) plans get no reuse (their buffers are cut into
//! pieces and sent between ranks), so the cost pass, which plans those, is unaffected.
//!
//! A task writes in place only when that is safe:
//! - the input's buffer is scratch (never a source: caller memory is only read; never a
//!   constant), no sink reads it, and no later task touches it; no other argument of the task
//!   touches it;
//! - input and output views are one and the same: whole buffers of equal size, the same
//!   dtype, shape and row-major strides, no folded pad;
//! - the kernel reads the input before writing the output at the same place: the output
//!   statement (the last) reads the input only at the output's own index, outside any
//!   reduction; earlier statements (temporaries) read it at the output's index, or along a
//!   reduction over the last dimension when the temporary is per row (softmax's max and
//!   sum, layernorm's mean and variance), and then the task is never split along that
//!   dimension. No gathered loads of it, no shards (whose inputs carry halos).
//!
//! The kernel is compiled knowing that the two arguments are one pointer
//! ([`super::ops::Gen::alias`]).

use super::epilogue::inline_epilogues;
use super::schedule::{KernelSpec, Schedule};
use super::view::row_major;
use crate::ir::instance::{walk, Affine, CKind, CStmt, Instance, Src, Target};
use std::collections::HashMap;
use tapc_runtime::plan::Init;

/// Rewrites `s` so that every task that can write an output in place of an input does
/// (see the module docs); returns how many tasks now do.
pub fn in_place(s: &mut Schedule) -> usize {
    let mut merged = Vec::new();
    let mut kernels: HashMap<(u32, usize, usize), u32> = HashMap::new();
    for t in 0..s.plan.tasks.len() {
        let Some((k, j)) = candidate(s, t) else {
            continue;
        };
        let (bx, by) = (
            s.plan.tasks[t].args[j].buffer,
            s.plan.tasks[t].args[k].buffer,
        );
        let earlier: Vec<u32> = (0..t)
            .filter(|&i| s.plan.tasks[i].args.iter().any(|a| a.buffer == bx))
            .map(|i| i as u32)
            .collect();
        let old = s.plan.tasks[t].kernel;
        let kernel = match kernels.get(&(old, k, j)) {
            Some(&n) => n,
            None => aliased_kernel(s, old, k, j),
        };
        kernels.insert((old, k, j), kernel);
        let task = &mut s.plan.tasks[t];
        task.deps.extend(earlier);
        task.deps.sort_unstable();
        task.deps.dedup();
        task.kernel = kernel;
        rename(s, by, bx);
        merged.push(by);
    }
    drop_buffers(s, &merged);
    drop_unused_kernels(s);
    merged.len()
}

/// Removes the kernels no task calls any more (those whose every task now writes in place),
/// so they are not compiled.
fn drop_unused_kernels(s: &mut Schedule) {
    let mut used = vec![false; s.kernels.len()];
    for t in &s.plan.tasks {
        used[t.kernel as usize] = true;
    }
    let map = renumbering(&used);
    retain_by(&mut s.kernels, &used);
    retain_by(&mut s.names, &used);
    for t in &mut s.plan.tasks {
        t.kernel = map[t.kernel as usize];
    }
}

/// Per old index, its new index once the items not `kept` are removed.
fn renumbering(kept: &[bool]) -> Vec<u32> {
    let mut next = 0u32;
    (kept.iter())
        .map(|&k| {
            next += u32::from(k);
            next - u32::from(k)
        })
        .collect()
}

/// Keeps the items of `v` whose `kept` flag is set.
fn retain_by<T>(v: &mut Vec<T>, kept: &[bool]) {
    let mut flags = kept.iter().copied();
    v.retain(|_| flags.next().unwrap_or(false));
}

/// `(k, j)` when task `t` can write its argument `k` (its output) in place of argument `j`.
fn candidate(s: &Schedule, t: usize) -> Option<(usize, usize)> {
    let task = &s.plan.tasks[t];
    let KernelSpec::Apply {
        inst,
        inputs,
        outputs,
        plan,
        alias: None,
    } = &s.kernels[task.kernel as usize]
    else {
        return None;
    };
    if outputs.len() != 1 || inst.sharded || task.args.len() != inputs.len() + 1 {
        return None;
    }
    let k = inputs.len();
    let out = task.args[k];
    let out_view = &outputs[0];
    let whole = |b: u32, a: &tapc_runtime::plan::Arg| {
        let buf = &s.plan.buffers[b as usize];
        buf.init == Init::Scratch && a.offset == 0 && a.lo == 0 && a.hi as u64 == buf.bytes
    };
    let fresh_output = whole(out.buffer, &out)
        && out_view.pad.is_none()
        && out_view.strides == row_major(&out_view.shape)
        && !touched(s, out.buffer, 0..t)
        && !written_by_other(s, out.buffer, t);
    if !fresh_output {
        return None;
    }
    (0..k)
        .find(|&j| {
            let a = task.args[j];
            a.buffer != out.buffer
                && a == tapc_runtime::plan::Arg {
                    buffer: a.buffer,
                    ..out
                }
                && whole(a.buffer, &a)
                && s.plan.buffers[a.buffer as usize].bytes
                    == s.plan.buffers[out.buffer as usize].bytes
                && inputs[j] == *out_view
                && task
                    .args
                    .iter()
                    .enumerate()
                    .all(|(i, b)| i == j || b.buffer != a.buffer)
                && !s.plan.sinks.iter().any(|x| x.view.buffer == a.buffer)
                && !touched(s, a.buffer, t + 1..s.plan.tasks.len())
                && row_local(inst, j, plan.split)
        })
        .map(|j| (k, j))
}

/// Whether any task in `range` has an argument in buffer `b`.
fn touched(s: &Schedule, b: u32, range: std::ops::Range<usize>) -> bool {
    s.plan.tasks[range]
        .iter()
        .any(|t| t.args.iter().any(|a| a.buffer == b))
}

/// Whether a task other than `t` writes buffer `b`.
fn written_by_other(s: &Schedule, b: u32, t: usize) -> bool {
    (s.access.iter().enumerate()).any(|(i, a)| i != t && a.writes.iter().any(|r| r.buffer == b))
}

/// Whether the kernel of `inst` reads input `j` before writing output 0 at the same place
/// (see the module docs); `split` is the variable the executor may split the task along.
pub fn row_local(inst: &Instance, j: usize, split: Option<usize>) -> bool {
    let stmts = inline_epilogues(inst);
    let Some((last, earlier)) = stmts.split_last() else {
        return false;
    };
    let out = &last.vars;
    if last.target != Target::Output(0)
        || inst.outputs.len() != 1
        || out.len() != inst.parallel
        || earlier.iter().any(|st| st.target == Target::Output(0))
    {
        return false;
    }
    let at = |d: usize| Affine::var(out[d]);
    let exact =
        |index: &[Affine]| index.len() == out.len() && (0..out.len()).all(|d| index[d] == at(d));
    let mut ok = reads(last, j)
        .iter()
        .all(|(index, red)| !red && exact(index));
    let lastv = out.last().copied();
    for st in earlier {
        let per_row = lastv.is_none_or(|l| !st.vars.contains(&l));
        for (index, _) in reads(st, j) {
            let n = index.len();
            let along_row = n == out.len()
                && n > 0
                && (0..n - 1).all(|d| index[d] == at(d))
                && index[n - 1].terms.len() == 1
                && index[n - 1].constant == 0
                && index[n - 1].terms[0].1 == 1
                && index[n - 1].terms[0].0 >= inst.parallel;
            ok &= exact(&index) || (along_row && per_row && split != lastv);
        }
    }
    ok
}

/// Every read of input `j` in `st`: its index, and whether it is inside a reduction (`None`
/// index for a gathered read, which is never safe).
fn reads(st: &CStmt, j: usize) -> Vec<(Vec<Affine>, bool)> {
    let mut out = Vec::new();
    walk(
        &st.value,
        &mut |e, red| match &e.kind {
            CKind::Load {
                src: Src::Input(i),
                index,
                ..
            } if *i == j => out.push((index.clone(), !red.is_empty())),
            // A gathered read of the input: never at the output's index; an index no view has.
            CKind::Gather(g) if g.input == j => out.push((vec![], true)),
            _ => {}
        },
        &mut vec![],
    );
    out
}

/// A copy of kernel `old` compiled with argument `k` aliasing argument `j`.
fn aliased_kernel(s: &mut Schedule, old: u32, k: usize, j: usize) -> u32 {
    let mut spec = s.kernels[old as usize].clone();
    if let KernelSpec::Apply { alias, .. } = &mut spec {
        *alias = Some((k, j));
    }
    s.kernels.push(spec);
    let name = format!("{} (in place)", s.names[old as usize]);
    s.names.push(name);
    (s.kernels.len() - 1) as u32
}

/// Every use of buffer `from` (task arguments, sinks, footprints) becomes `to`.
pub(super) fn rename(s: &mut Schedule, from: u32, to: u32) {
    each_buffer_ref(s, |b| {
        if *b == from {
            *b = to;
        }
    });
}

/// Removes the (now unused) buffers `gone`, renumbering the others.
pub(super) fn drop_buffers(s: &mut Schedule, gone: &[u32]) {
    let kept: Vec<bool> = (0..s.plan.buffers.len() as u32)
        .map(|b| !gone.contains(&b))
        .collect();
    let map = renumbering(&kept);
    retain_by(&mut s.plan.buffers, &kept);
    each_buffer_ref(s, |b| *b = map[*b as usize]);
}

/// Calls `f` on every buffer index of the schedule: task arguments, sources, sinks and the
/// footprints (a local plan has no distributed section).
fn each_buffer_ref(s: &mut Schedule, mut f: impl FnMut(&mut u32)) {
    let args = s.plan.tasks.iter_mut().flat_map(|t| &mut t.args);
    args.for_each(|a| f(&mut a.buffer));
    s.plan.sources.iter_mut().for_each(|x| f(&mut x.buffer));
    s.plan.sinks.iter_mut().for_each(|x| f(&mut x.view.buffer));
    let regions = (s.access.iter_mut()).flat_map(|a| a.reads.iter_mut().chain(&mut a.writes));
    regions
        .chain(&mut s.sink_reads)
        .for_each(|r| f(&mut r.buffer));
}
