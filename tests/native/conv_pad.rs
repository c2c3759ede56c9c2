//! Convolutions reading a constant `pad` folded into their loads: values against the
//! interpreter, and the pad copy left out when only a conv reads it.

use crate::common::{self, inputs};
use crate::native::assert_pipelines;
use tapc::ir::Module;
use tapc::verify::GraphFacts;
use tapc_runtime::exec::Options;

/// Convolutions reading a `pad` (folded into their loads: bounds-guarded, never copied) at
/// edge shapes: 1×1, 3×3 and 7×7 kernels, strides 1 and 2, uneven pads, odd and prime sizes;
/// plus a pad that is also sunk (so it is materialized) and a pad of a transposed view.
#[test]
fn convs_reading_a_folded_pad_match_the_interpreter() {
    let cases = [
        // (channels, outputs, height, width, kernel, stride, pad lo, pad hi)
        (1, 2, 5, 5, 3, 1, 1, 1),
        (2, 3, 7, 6, 3, 2, 1, 1),
        (3, 1, 9, 11, 7, 2, 3, 3),
        (2, 17, 4, 5, 1, 2, 0, 0),
        (5, 15, 15, 17, 3, 1, 2, 0),
        (1, 1, 1, 2, 3, 1, 1, 1),
        (3, 33, 13, 31, 3, 2, 1, 2),
        // Outputs narrower than a vector with many channels: vectorised along the output
        // channels, the filter packed once per panel (and panels of 2 vectors when the
        // reduction is long: 233 × 9 points).
        (5, 37, 7, 7, 3, 1, 1, 1),
        (17, 67, 14, 3, 3, 1, 1, 1),
        (2, 33, 1, 1, 3, 1, 1, 1),
        (31, 97, 2, 15, 3, 1, 1, 1),
        (233, 33, 3, 3, 3, 1, 1, 1),
    ];
    for (c, o, h, w, k, s, lo, hi) in cases {
        let src = format!(
            "op @conv(x: f32[N, C, H, W], f: f32[O, C, KH, KW]) -> (y: f32[N, O, (H - KH) / {s} + 1, (W - KW) / {s} + 1]) {{
  y[n, o, i, j] = sum[c, kh, kw](x[n, c, {s} * i + kh, {s} * j + kw] * f[o, c, kh, kw])
}}
op @relu(x: f32[..S]) -> (y: f32[..S]) {{
  y[..i] = max(x[..i], 0.0)
}}
graph @folded {{
  %x = source @x : f32[1, {c}, {h}, {w}]
  %f = source @f : f32[{o}, {c}, {k}, {k}]
  %p = pad %x [0:0, 0:0, {lo}:{hi}, {lo}:{hi}] constant 0.5
  %y = apply @conv(%p, %f)
  %z = apply @relu(%y)
  sink @z %z
}}
graph @sunk {{
  %x = source @x : f32[1, {c}, {h}, {w}]
  %f = source @f : f32[{o}, {c}, {k}, {k}]
  %p = pad %x [0:0, 0:0, {lo}:{hi}, {lo}:{hi}] constant 0.0
  %y = apply @conv(%p, %f)
  sink @y %y
  sink @p %p
}}
graph @transposed {{
  %x = source @x : f32[1, {c}, {w}, {h}]
  %f = source @f : f32[{o}, {c}, {k}, {k}]
  %t = transpose %x [0, 1, 3, 2]
  %p = pad %t [0:0, 0:0, {lo}:{hi}, {hi}:{lo}] constant -1.0
  %y = apply @conv(%p, %f)
  sink @y %y
}}"
        );
        assert_pipelines(
            &format!("conv c{c} o{o} {h}x{w} k{k} s{s} pad {lo}:{hi}"),
            &src,
            &["canonicalize", "canonicalize,fuse,canonicalize"],
        );
    }
}

/// A constant `pad` read only by applies is folded into their loads: the schedule has no
/// task materializing it (a pad that is also sunk still gets one).
#[test]
fn a_pad_read_only_by_a_conv_is_not_copied() {
    let src = "op @conv(x: f32[C, H, W], f: f32[O, C, K, K]) -> (y: f32[O, H - K + 1, W - K + 1]) {
  y[o, i, j] = sum[c, kh, kw](x[c, i + kh, j + kw] * f[o, c, kh, kw])
}
graph @folded {
  %x = source @x : f32[3, 8, 8]
  %f = source @f : f32[4, 3, 3, 3]
  %p = pad %x [0:0, 1:1, 1:1] constant 0.0
  %y = apply @conv(%p, %f)
  sink @y %y
}
graph @sunk {
  %x = source @x : f32[3, 8, 8]
  %f = source @f : f32[4, 3, 3, 3]
  %p = pad %x [0:0, 1:1, 1:1] constant 0.0
  %y = apply @conv(%p, %f)
  sink @y %y
  sink @p %p
}";
    let (m, facts) = common::compile_ok("pad", src);
    for (gi, copied) in [(0, false), (1, true)] {
        let names = task_names(&m, &facts, gi);
        let pads = names.iter().filter(|n| n.starts_with("pad")).count();
        assert_eq!(pads > 0, copied, "{names:?}");
    }
}

/// The names of the tasks graph `gi` runs natively, on one thread.
pub(crate) fn task_names(m: &Module, facts: &[GraphFacts], gi: usize) -> Vec<String> {
    let ins = inputs(m, gi);
    let opts = Options {
        threads: 1,
        record: true,
    };
    let (_, rep) = tapc::codegen::with_jit(m, gi, &facts[gi], &Default::default(), |p| {
        p.run(&ins, &opts)
    })
    .unwrap()
    .unwrap();
    rep.task_names
}
