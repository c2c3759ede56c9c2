//! Convolutions as implicit GEMMs (output rows narrower than two vectors, vectorised along the
//! output channels: the input's patches gathered once per chunk into tiles of flattened
//! positions) at edge shapes, against the interpreter on 1 and 2 threads, unfused and fused,
//! counting the cases that compiled to an implicit GEMM; and deep 1×1 convs on tiny maps as
//! dot products along the input channels.

use super::native::assert_pipelines;
use tapc::codegen::kernel::implicit_gemms;

/// A conv as `tapc import` writes it (strides, dilations, a bias), then a ReLU.
const CONV: &str = "op @Conv<s0, s1, d0, d1>(x: f32[N, C, H0, H1], w: f32[O, C, K0, K1], b: f32[O]) -> (y: f32[N, O, (H0 - d0 * (K0 - 1) - 1) / s0 + 1, (H1 - d1 * (K1 - 1) - 1) / s1 + 1]) {
  y[n, o, p0, p1] = sum[c, k0, k1](x[n, c, s0 * p0 + d0 * k0, s1 * p1 + d1 * k1] * w[o, c, k0, k1]) + b[o]
}
op @Relu(a: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(a[..i], 0.0)
}
";

/// Checks `src` unfused and fused against the interpreter on 1 and 2 threads; returns whether
/// it compiled to the path counted by `implicit_gemms().{which}` (0: implicit GEMM, 1: dot
/// products on a tiny map).
pub(crate) fn on_path(what: &str, src: &str, which: usize) -> bool {
    let count = || [implicit_gemms().0, implicit_gemms().1][which];
    let before = count();
    assert_pipelines(
        what,
        src,
        &["canonicalize", "canonicalize,fuse,canonicalize"],
    );
    count() > before
}

/// (batch, in channels, out channels, height, width, kernel, stride, dilation, pad).
pub(crate) type Case = (i64, i64, i64, i64, i64, i64, i64, i64, i64);

pub(crate) fn conv(case: Case) -> String {
    let (n, c, o, h, w, k, s, d, p) = case;
    let (hp, wp) = (h + 2 * p, w + 2 * p);
    let span = d * (k - 1) + 1;
    let (oh, ow) = ((hp - span) / s + 1, (wp - span) / s + 1);
    format!(
        "{CONV}graph @conv {{
  %x = source @x : f32[{n}, {c}, {h}, {w}]
  %f = source @f : f32[{o}, {c}, {k}, {k}]
  %b = source @b : f32[{o}]
  %p = pad %x [0:0, 0:0, {p}:{p}, {p}:{p}] constant 0.0 : f32[{n}, {c}, {hp}, {wp}]
  %y = apply @Conv<s0 = {s}, s1 = {s}, d0 = {d}, d1 = {d}>(%p, %f, %b) : f32[{n}, {o}, {oh}, {ow}]
  %z = apply @Relu(%y) : f32[{n}, {o}, {oh}, {ow}]
  sink @z %z
}}
"
    )
}

/// Dense convs at edge shapes: spatial 1–5, 7, 9, 11, 13, 15, 17; in channels 1, 3, 17, 33
/// and a long reduction (233 × 9 points: 2-vector panels, 8-row tiles); out channels from 33
/// to 259 (partial lane panels; 259 splits along the channels on 2 threads); batch 1, 2 and
/// 3 (3 splits along the batch); strides 1 and 2; dilation 2; pads 0, 1, 2; 1×1, 3×3 and
/// 5×5 kernels; rows of 17 and 31. Rows narrower than two vectors (32 f32 lanes) with at
/// least 32 out channels and at least 2 positions compile to an implicit GEMM.
#[test]
fn implicit_gemm_convs_at_edge_shapes_match_the_interpreter() {
    // (case, whether it is an implicit GEMM)
    let cases: [(Case, bool); 15] = [
        // One position: no rows to block (the lanes along the channels alone).
        ((1, 1, 33, 1, 1, 3, 1, 1, 1), false),
        ((3, 3, 33, 2, 3, 3, 1, 1, 1), true),
        ((1, 17, 37, 4, 5, 3, 2, 1, 1), true),
        ((3, 17, 67, 7, 7, 3, 1, 1, 1), true),
        ((1, 33, 64, 9, 9, 3, 2, 1, 1), true),
        ((1, 3, 40, 15, 15, 3, 1, 2, 2), true),
        ((1, 33, 97, 5, 13, 3, 1, 1, 0), true),
        ((1, 233, 33, 3, 5, 3, 1, 1, 1), true),
        ((1, 8, 259, 3, 5, 3, 1, 1, 1), true),
        ((1, 33, 64, 13, 13, 1, 2, 1, 0), true),
        ((1, 3, 35, 11, 7, 5, 1, 1, 2), true),
        ((2, 1, 48, 5, 2, 3, 2, 1, 1), true),
        ((2, 5, 33, 17, 17, 3, 1, 1, 1), true),
        // Rows of 31 (one vector and a 15-lane masked one): still an implicit GEMM.
        ((1, 5, 33, 31, 31, 3, 1, 1, 1), true),
        // Too few out channels for lanes along them: along the 7-wide rows.
        ((1, 17, 17, 7, 7, 3, 1, 1, 1), false),
    ];
    let (mut implicit, mut wrong) = (0, Vec::new());
    for (case, want) in cases {
        let (n, c, o, h, w, k, s, d, p) = case;
        let what = format!("conv n{n} c{c} o{o} {h}x{w} k{k} s{s} d{d} p{p}");
        let got = on_path(&what, &conv(case), 0);
        if got != want {
            wrong.push(format!("{what}: implicit GEMM {got}, expected {want}"));
        }
        implicit += got as usize;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(implicit, 13);
}

/// A 1×1 conv over flattened positions as `tapc import` writes it (`@ConvPointwise`).
const POINTWISE: &str =
    "op @ConvPointwise(x: f32[N, C, P], w: f32[O, C], b: f32[O]) -> (y: f32[N, O, P]) {
  y[n, o, p] = sum[c](x[n, c, p] * w[o, c]) + b[o]
}
op @Relu(a: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(a[..i], 0.0)
}
";

/// Deep 1×1 convs on tiny maps (at most 64 positions, rows narrower than a vector, at least
/// 32 input channels: dot products along the channels, 4 positions at a time) at edge
/// shapes: positions 2, 3, 5, 8, 15; batch 1, 3 and 8 (8 × 8 = 64 positions, the detector at
/// batch 8; 3 splits along the batch on 2 threads); input channels 32, 33, 97, 384; output
/// channels 1, 3, 5, 17, 33, 384. Not on that path: one position, 65 or 72 positions, a row of
/// 17 or 64 (as wide as a vector: lanes along it), 17 input channels.
#[test]
fn deep_pointwise_convs_on_tiny_maps_match_the_interpreter() {
    // ((batch, in channels, out channels, positions), whether it takes the path)
    let cases: [((i64, i64, i64, i64), bool); 13] = [
        ((1, 32, 1, 2), true),
        ((1, 33, 3, 3), true),
        ((3, 97, 17, 5), true),
        ((1, 384, 384, 8), true),
        ((3, 32, 33, 2), true),
        ((8, 33, 17, 8), true),
        ((3, 33, 5, 15), true),
        ((1, 33, 17, 17), false),
        ((1, 97, 3, 64), false),
        ((1, 33, 5, 1), false),
        ((1, 33, 5, 65), false),
        ((9, 33, 5, 8), false),
        ((1, 17, 33, 8), false),
    ];
    let (mut taken, mut wrong) = (0, Vec::new());
    for ((n, c, o, p), want) in cases {
        let src = format!(
            "{POINTWISE}graph @pw {{
  %x = source @x : f32[{n}, {c}, {p}]
  %w = source @w : f32[{o}, {c}]
  %b = source @b : f32[{o}]
  %y = apply @ConvPointwise(%x, %w, %b) : f32[{n}, {o}, {p}]
  %z = apply @Relu(%y) : f32[{n}, {o}, {p}]
  sink @z %z
}}
"
        );
        let what = format!("pointwise n{n} c{c} o{o} p{p}");
        let got = on_path(&what, &src, 1);
        if got != want {
            wrong.push(format!("{what}: dot products {got}, expected {want}"));
        }
        taken += got as usize;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(taken, 7);
}
