//! Depthwise convolutions as `tapc import` writes them (pad, reshape to a unit group dim,
//! grouped conv, reshape back) at edge shapes, against the interpreter on 1 and 2 threads;
//! and the pad they read through the reshape folded into the conv's loads, not copied.

use super::common;
use super::native::{assert_pipelines, task_names};

/// The grouped conv of `tapc import` (tests/data and src/import write this op).
const GROUPED: &str = "op @ConvGrouped<s0, s1, d0, d1>(x: f32[N, G, C, H0, H1], w: f32[G, O, C, K0, K1]) -> (y: f32[N, G, O, (H0 - d0 * (K0 - 1) - 1) / s0 + 1, (H1 - d1 * (K1 - 1) - 1) / s1 + 1]) {
  y[n, g, o, p0, p1] = sum[c, k0, k1](x[n, g, c, s0 * p0 + d0 * k0, s1 * p1 + d1 * k1] * w[g, o, c, k0, k1])
}
op @Relu(a: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(a[..i], 0.0)
}
";

/// A graph: depthwise conv of `[n, g, h, w]` with a `k`×`k` filter, stride `s`, pad `p` on
/// both sides (`groups` groups of `g / groups` channels, as many outputs per group).
fn depthwise(n: i64, g: i64, h: i64, w: i64, k: i64, s: i64, p: i64, groups: i64) -> String {
    let c = g / groups;
    let (hp, wp) = (h + 2 * p, w + 2 * p);
    let (oh, ow) = ((hp - k) / s + 1, (wp - k) / s + 1);
    format!(
        "{GROUPED}graph @dw {{
  %x = source @x : f32[{n}, {g}, {h}, {w}]
  %f = source @f : f32[{g}, {c}, {k}, {k}]
  %p = pad %x [0:0, 0:0, {p}:{p}, {p}:{p}] constant 0.0 : f32[{n}, {g}, {hp}, {wp}]
  %xg = reshape %p [{n}, {groups}, {c}, {hp}, {wp}] : f32[{n}, {groups}, {c}, {hp}, {wp}]
  %wg = reshape %f [{groups}, {c}, {c}, {k}, {k}] : f32[{groups}, {c}, {c}, {k}, {k}]
  %yg = apply @ConvGrouped<s0 = {s}, s1 = {s}, d0 = 1, d1 = 1>(%xg, %wg) : f32[{n}, {groups}, {c}, {oh}, {ow}]
  %y = reshape %yg [{n}, {g}, {oh}, {ow}] : f32[{n}, {g}, {oh}, {ow}]
  %z = apply @Relu(%y) : f32[{n}, {g}, {oh}, {ow}]
  sink @z %z
}}
"
    )
}

/// Depthwise (and grouped) convs at edge shapes: spatial 1–5, 7, 9, 15, 17 and primes;
/// channels 1, 3, 17, 33; 3×3 and 5×5 filters; strides 1 and 2; pads 0, 1, 2; batch 1 and 2.
#[test]
fn depthwise_convs_at_edge_shapes_match_the_interpreter() {
    let cases = [
        // (batch, channels, height, width, kernel, stride, pad, groups)
        (1, 1, 1, 1, 3, 1, 1, 1),
        (1, 3, 2, 3, 3, 1, 1, 3),
        (1, 17, 4, 5, 3, 2, 1, 17),
        (2, 33, 7, 7, 5, 1, 2, 33),
        (1, 33, 9, 15, 5, 2, 2, 33),
        (1, 17, 17, 13, 3, 1, 1, 17),
        (2, 3, 15, 31, 3, 2, 1, 3),
        (1, 33, 3, 96, 5, 1, 2, 33),
        (1, 16, 34, 66, 3, 2, 0, 16),
        // Grouped, not depthwise: 2 channels per group.
        (1, 34, 7, 5, 3, 1, 1, 17),
    ];
    for (n, g, h, w, k, s, p, groups) in cases {
        let src = depthwise(n, g, h, w, k, s, p, groups);
        assert_pipelines(
            &format!("depthwise n{n} g{g} {h}x{w} k{k} s{s} p{p} groups {groups}"),
            &src,
            &["canonicalize", "canonicalize,fuse,canonicalize"],
        );
    }
}

/// The pad a depthwise conv reads through the reshape that adds its unit group dim is folded
/// into the conv's loads: no task copies it (it was copied: 20% of the PP-OCR classifier's
/// time). A pad reshaped into more than unit dims, or reshaped and also sunk, is still copied.
#[test]
fn a_pad_read_through_a_unit_dim_reshape_is_not_copied() {
    let folded = depthwise(1, 8, 6, 10, 3, 1, 1, 8);
    let (m, facts) = common::compile_ok("dw", &folded);
    let names = task_names(&m, &facts, 0);
    assert!(!names.iter().any(|n| n.starts_with("pad")), "{names:?}");
    // Two channels per group: the reshape splits a dim, so the pad is materialised.
    let split = depthwise(1, 8, 6, 10, 3, 1, 1, 4);
    let (m, facts) = common::compile_ok("grouped", &split);
    let names = task_names(&m, &facts, 0);
    assert_eq!(
        names.iter().filter(|n| n.starts_with("pad")).count(),
        1,
        "{names:?}"
    );
    let sunk = folded.replace("  sink @z %z", "  sink @z %z\n  sink @p %p");
    let (m, facts) = common::compile_ok("sunk", &sunk);
    let names = task_names(&m, &facts, 0);
    assert_eq!(
        names.iter().filter(|n| n.starts_with("pad")).count(),
        1,
        "{names:?}"
    );
}
