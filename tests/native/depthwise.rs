//! Depthwise and grouped convolutions as `tapc import` writes them (pad, reshape to a group
//! dim, grouped conv, reshape back) at edge shapes, against the interpreter on 1 and 2
//! threads, unfused and fused; and the constant pads they copy.

use super::native::assert_pipelines;

/// The grouped conv of `tapc import` (tests/data and src/import write this op).
const GROUPED: &str = "op @ConvGrouped<s0, s1, d0, d1>(x: f32[N, G, C, H0, H1], w: f32[G, O, C, K0, K1]) -> (y: f32[N, G, O, (H0 - d0 * (K0 - 1) - 1) / s0 + 1, (H1 - d1 * (K1 - 1) - 1) / s1 + 1]) {
  y[n, g, o, p0, p1] = sum[c, k0, k1](x[n, g, c, s0 * p0 + d0 * k0, s1 * p1 + d1 * k1] * w[g, o, c, k0, k1])
}
op @Relu(a: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(a[..i], 0.0)
}
";

/// (batch, channels, height, width, kernel, stride, pad, groups).
pub(crate) type Case = (i64, i64, i64, i64, i64, i64, i64, i64);

/// A graph: depthwise conv of `[n, g, h, w]` with a `k`×`k` filter, stride `s`, pad `p` on
/// both sides (`groups` groups of `g / groups` channels, as many outputs per group).
pub(crate) fn depthwise(case: Case) -> String {
    let (n, g, h, w, k, s, p, groups) = case;
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
    let cases: [Case; 10] = [
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
    for case in cases {
        let (n, g, h, w, k, s, p, groups) = case;
        let src = depthwise(case);
        assert_pipelines(
            &format!("depthwise n{n} g{g} {h}x{w} k{k} s{s} p{p} groups {groups}"),
            &src,
            &["canonicalize", "canonicalize,fuse,canonicalize"],
        );
    }
}

/// Constant pads that are materialised (sunk, or read by a depthwise conv through its reshape)
/// copy each row as fill, the source's run, fill: at edge shapes (rank 1 to 4, rows of 1, 2,
/// 17 and 1,031 elements split by 2 threads, pads wider than the row, pads only on outer
/// dims, only on one side) against the interpreter.
#[test]
fn materialised_constant_pads_at_edge_shapes_match_the_interpreter() {
    let cases: [(&str, &str); 9] = [
        ("1031", "3:5"),
        ("1", "0:0"),
        ("2", "7:9"),
        ("17", "0:4"),
        ("3, 17", "1:0, 2:2"),
        ("5, 2", "2:3, 0:0"),
        ("2, 3, 1, 9", "0:0, 1:1, 2:2, 1:1"),
        ("1, 33, 7, 7", "0:0, 0:0, 2:2, 2:2"),
        ("4, 1031", "1:1, 0:1"),
    ];
    for (shape, widths) in cases {
        let src = format!(
            "op @neg(a: f32[..S]) -> (y: f32[..S]) {{
  y[..i] = 0.0 - a[..i]
}}
graph @padded {{
  %x = source @x : f32[{shape}]
  %p = pad %x [{widths}] constant 1.5
  %y = apply @neg(%p)
  sink @p %p
  sink @y %y
}}"
        );
        assert_pipelines(&format!("pad {shape} by {widths}"), &src, &["canonicalize"]);
    }
}
