//! How convolutions split between threads: along their output rows where the positions
//! outnumber the output channels (each chunk then packs the filter once, where a split along
//! the channels gathered every position's patches per chunk) or where the channels, groups
//! or batch would give fewer than 4 chunks (ShuffleNet's 3 groups); and any apply over a
//! batch of 8 in blocks of 2 (a block of 8 rows never split). The split each schedule plans
//! is checked, and the values against the interpreter on 1 and 2 threads, unfused and fused.

use super::depthwise::depthwise;
use super::implicit_gemm::{conv, on_path};
use super::native::apply_on_two_threads;
use crate::common;

/// The apply task of `op` in `src`'s first graph: its split variable, its alignment and how
/// many jobs it runs as on 2 threads.
fn split_of(src: &str, op: &str) -> (Option<u32>, i64, i64) {
    let lanes = tapc::codegen::target::host().unwrap().lanes;
    let (m, facts) = common::compile_ok(op, src);
    let s = tapc::codegen::schedule::build(&m, &m.graphs[0], &facts[0], lanes).unwrap();
    let head = format!("apply @{op}");
    let t = (s.plan.tasks.iter())
        .find(|t| t.name.starts_with(&head))
        .unwrap_or_else(|| panic!("no task `{head}`"));
    (t.split, t.align, tapc_runtime::exec::chunk_count(t, 2))
}

/// Dense convs (`y[n, o, p0, p1]`: variable 0 the batch, 1 the output channels, 2 the output
/// rows) at edge shapes: 28×28, 23×23 (a prime, stride 2), 15×15 (dilation 2) and 5×5 maps
/// split along their rows (align 1); 7×7 with 64 channels along the channels; a batch of 3
/// along the rows, a batch of 8 along itself in blocks of 2. Those above 4 MFLOP run as at
/// least 2 jobs on 2 threads; the ones with rows narrower than 2 vectors and at least 32
/// output channels are implicit GEMMs (counted).
#[test]
fn convs_split_along_their_rows_when_positions_outnumber_channels() {
    // (case: batch, in, out channels, height, width, kernel, stride, dilation, pad;
    //  split variable, alignment, at least 2 jobs)
    let cases = [
        ((1, 32, 48, 28, 28, 3, 1, 1, 1), 2, 1, true),
        ((1, 17, 33, 45, 45, 3, 2, 1, 1), 2, 1, true),
        ((1, 3, 40, 15, 15, 3, 1, 2, 2), 2, 1, false),
        ((1, 33, 64, 7, 7, 3, 1, 1, 1), 1, 8, false),
        ((3, 17, 33, 9, 9, 3, 2, 1, 1), 2, 1, false),
        ((8, 3, 16, 6, 6, 3, 1, 1, 1), 0, 2, false),
    ];
    let (mut implicit, mut wrong) = (0, Vec::new());
    for (case, var, align, splits) in cases {
        let (n, c, o, h, w, k, s, d, p) = case;
        let what = format!("conv n{n} c{c} o{o} {h}x{w} k{k} s{s} d{d} p{p}");
        let src = conv(case);
        let (got_var, got_align, jobs) = split_of(&src, "Conv");
        if got_var != Some(var) || got_align != align || (splits && jobs < 2) {
            wrong.push(format!(
                "{what}: split {got_var:?} align {got_align} ({jobs} jobs), expected {var} align {align}"
            ));
        }
        implicit += on_path(&what, &src, 0) as usize;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // All but the batch of 8, whose 16 output channels are too few for lanes along them.
    assert_eq!(implicit, 5);
}

/// Grouped convs as `tapc import` writes them (`y[n, g, o, p0, p1]`: variable 1 the group, 3
/// the output rows): 3 groups of 32 channels 1×1 at 28×28 (ShuffleNet's) and 3 of 33 3×3 at
/// 17×17 split along the rows (rows a vector wide or more: lanes along the rows, not the
/// channels; the two-vector rule is for dense convs only); 3 groups of 33 at 11×11 and 2
/// groups at batch 2 (7-wide rows) along the rows too, each group an implicit GEMM over its
/// positions (its filter packed once per group, not per output row); a depthwise conv along
/// its 33 groups.
#[test]
fn grouped_convs_with_few_groups_split_along_their_rows() {
    // (case: batch, channels, height, width, kernel, stride, pad, groups;
    //  split variable, alignment, whether an implicit GEMM over the positions; not asserted
    //  for rows a vector wide, whose lanes run along the rows)
    let cases = [
        ((1, 96, 28, 28, 1, 1, 0, 3), 3, 1, None),
        ((1, 99, 17, 17, 3, 1, 1, 3), 3, 1, None),
        ((1, 99, 11, 11, 3, 1, 1, 3), 3, 1, Some(true)),
        ((2, 66, 9, 13, 3, 2, 1, 2), 3, 1, Some(true)),
        ((1, 33, 15, 15, 3, 1, 1, 33), 1, 8, Some(false)),
    ];
    let mut wrong = Vec::new();
    for (case, var, align, gemm) in cases {
        let (n, g, h, w, k, s, p, groups) = case;
        let what = format!("grouped n{n} c{g} {h}x{w} k{k} s{s} p{p} groups {groups}");
        let src = depthwise(case);
        let (got_var, got_align, jobs) = split_of(&src, "ConvGrouped");
        let got_gemm = on_path(&what, &src, 0);
        if got_var != Some(var) || got_align != align || gemm.is_some_and(|g| g != got_gemm) {
            wrong.push(format!(
                "{what}: split {got_var:?} align {got_align} ({jobs} jobs), implicit GEMM \
                 {got_gemm}; expected {var} align {align}, {gemm:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// An apply over a batch of 8 (a 1×1 conv over 64 positions, 128 → 128 channels, 16.8
/// MFLOP) splits along the batch into 4 jobs on 2 threads: with chunk boundaries at
/// multiples of 8 it was one block, one job.
#[test]
fn an_apply_over_a_batch_of_8_runs_as_4_jobs() {
    let src = "op @pw(x: f32[N, C, P], w: f32[O, C]) -> (y: f32[N, O, P]) {
  y[n, o, p] = sum[c](x[n, c, p] * w[o, c])
}
graph @batch8 {
  %x = source @x : f32[8, 128, 64]
  %w = source @w : f32[128, 128]
  %y = apply @pw(%x, %w)
  sink @y %y
}
";
    assert_eq!(split_of(src, "pw"), (Some(0), 2, 4));
    let (m, facts) = common::compile_ok("batch8", src);
    let (rep, apply) = apply_on_two_threads(&m, &facts, 0);
    let jobs = rep.events.iter().filter(|e| e.task == apply).count();
    assert_eq!(jobs, 4, "{:?}", rep.time_summary());
}
