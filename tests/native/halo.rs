//! A constant `pad` read by kernels through unit-step slices (what the shard pass makes of a
//! padded stencil) is folded into the kernels' loads, never copied: each shard reads only its
//! own rows and halos of the unpadded tensor (issue 17, "halos, not copies"). Checked against the
//! interpreter at odd and prime sizes, on 1 and 2 threads, with slices that end in the padding,
//! start in it or lie wholly inside it, and after `shard` into 2, 3 and 5 parts.

use crate::common;
use crate::conv_pad::task_names;
use crate::native::assert_pipelines;

const STENCIL: &str = "op @stencil(x: f32[M, N]) -> (y: f32[M - 2, N - 2]) {
  y[i, j] = 0.25 * (x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]) + x[i + 1, j + 1]
}
op @copy(x: f32[M, N]) -> (y: f32[M, N]) {
  y[i, j] = x[i, j] + 1.0
}
";

/// Three heat steps over an `m`×`n` grid with a constant boundary, and hand-written slices of
/// a pad: the top shard with its halo, a window inside the padding only, one straddling the
/// bottom edge.
fn graphs(m: usize, n: usize) -> String {
    let (pm, pn) = (m + 2, n + 2);
    format!(
        "{STENCIL}graph @heat {{
  %u0 = source @u : f32[{m}, {n}]
  %p0 = pad %u0 [1:1, 1:1] constant 0.5
  %u1 = apply @stencil(%p0)
  %p1 = pad %u1 [1:1, 1:1] constant 0.5
  %u2 = apply @stencil(%p1)
  %p2 = pad %u2 [1:1, 1:1] constant 0.5
  %u3 = apply @stencil(%p2)
  sink @v %u3
}}
graph @windows {{
  %u = source @u : f32[{m}, {n}]
  %p = pad %u [2:3, 1:2] constant -1.0
  %top = slice %p [0:{top}, 0:{pn1}]
  %a = apply @stencil(%top)
  %corner = slice %p [0:2, 0:1]
  %b = apply @copy(%corner)
  %bottom = slice %p [{bs}:{pm3}, 1:{pn1}]
  %c = apply @stencil(%bottom)
  sink @a %a
  sink @b %b
  sink @c %c
}}
",
        top = (m / 2 + 3).min(pm + 3),
        pn1 = pn + 1,
        bs = m.saturating_sub(1),
        pm3 = pm + 3,
    )
}

#[test]
fn stencils_reading_a_pad_through_slices_match_the_interpreter() {
    let shapes = [(1, 1), (2, 3), (5, 7), (13, 17), (31, 8), (64, 33)];
    let pipelines = [
        "canonicalize",
        "canonicalize,shard{parts=2},fuse,canonicalize",
        "canonicalize,shard{parts=3},canonicalize",
        "canonicalize,shard{parts=5},fuse,canonicalize",
    ];
    for (m, n) in shapes {
        assert_pipelines(&format!("halo {m}x{n}"), &graphs(m, n), &pipelines);
    }
}

/// After `shard`, the heat steps run with no task that copies a pad: every shard reads its
/// rows and halos straight from the unsharded value.
#[test]
fn a_sharded_stencil_reading_a_pad_copies_no_pad() {
    let pipeline = "canonicalize,shard{parts=3},fuse,canonicalize";
    let (m, facts) = common::after_pipeline("halo", &graphs(40, 24), pipeline);
    let names = task_names(&m, &facts, 0);
    let stencils = names.iter().filter(|n| n.contains("@stencil")).count();
    assert_eq!(stencils, 9, "3 steps × 3 shards: {names:?}");
    let pads: Vec<_> = names.iter().filter(|n| n.starts_with("pad")).collect();
    assert!(pads.is_empty(), "pads copied: {pads:?}");
}
