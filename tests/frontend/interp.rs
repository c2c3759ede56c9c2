//! Interpreter semantics against hand-computed values.

use crate::common;
use common::*;
use std::collections::HashMap;

fn sinks(src: &str) -> HashMap<String, Vec<f64>> {
    let (m, facts) = compile_ok("test", src);
    run(&m, &facts, 0, &HashMap::new())
        .into_iter()
        .map(|(k, v)| (k, f64s(&v)))
        .collect()
}

#[test]
fn views_select_the_right_elements() {
    let s = sinks(
        "graph @g {
          %a = iota axis 0 : i64[10]
          %b = slice %a [8:2:-2]
          %c = reverse %a [0]
          %m = reshape %a [2, 5]
          %t = transpose %m [1, 0]
          %r = slice %t [1:3, 1:2]
          %i = interleave %b, %b axis 0
          %p = pad %b [2:1] reflect
          %q = repeat %b times 2 axis 0
          %k = concat %b, %c axis 0
          sink @b %b
          sink @c %c
          sink @r %r
          sink @i %i
          sink @p %p
          sink @q %q
          sink @k %k
        }",
    );
    assert_eq!(s["b"], vec![8.0, 6.0, 4.0]);
    assert_eq!(s["c"], (0..10).rev().map(f64::from).collect::<Vec<_>>());
    assert_eq!(s["r"], vec![6.0, 7.0]);
    assert_eq!(s["i"], vec![8.0, 8.0, 6.0, 6.0, 4.0, 4.0]);
    assert_eq!(s["p"], vec![4.0, 6.0, 8.0, 6.0, 4.0, 6.0]);
    assert_eq!(s["q"], vec![8.0, 6.0, 4.0, 8.0, 6.0, 4.0]);
    assert_eq!(s["k"].len(), 13);
}

#[test]
fn broadcast_squeeze_and_constant_pad() {
    let s = sinks(
        "graph @g {
          %a = iota axis 0 : f32[3]
          %u = unsqueeze %a [0]
          %b = broadcast %u [2, 3]
          %s = squeeze %u [0]
          %p = pad %s [1:0] constant 9
          sink @b %b
          sink @p %p
        }",
    );
    assert_eq!(s["b"], vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
    assert_eq!(s["p"], vec![9.0, 0.0, 1.0, 2.0]);
}

#[test]
fn integer_kernels_floor_divide_and_wrap() {
    let s = sinks(
        "op @f(x: i32[N]) -> (q: i32[N], r: i32[N], z: i32[N], w: i32[N]) {
          q[i] = x[i] / 3
          r[i] = x[i] % 3
          z[i] = x[i] / 0
          w[i] = x[i] * 2147483647
        }
        graph @g {
          %a = iota axis 0 : i32[4]
          %n = full -7 : i32[4]
          %x = concat %n, %a axis 0
          %q, %r, %z, %w = apply @f(%x)
          sink @q %q
          sink @r %r
          sink @z %z
          sink @w %w
        }",
    );
    assert_eq!(&s["q"][..2], &[-3.0, -3.0]);
    assert_eq!(&s["r"][..2], &[2.0, 2.0]);
    assert!(s["z"].iter().all(|&v| v == 0.0));
    assert_eq!(s["w"][6], -2.0, "2 * (2^31 - 1) wraps to -2 in i32");
}

#[test]
fn reductions_select_and_casts() {
    let s = sinks(
        "op @stats(x: f32[M, N]) -> (y: f32[M, 4]) {
          y[i, c] = select(c == 0, sum[j](x[i, j]), select(c == 1, max[j](x[i, j]), select(c == 2, min[j](x[i, j]), prod[j](x[i, j] + 1.0))))
        }
        graph @g {
          %x = iota axis 1 : f32[2, 3]
          %y = apply @stats(%x) : f32[2, 4]
          sink @y %y
        }",
    );
    assert_eq!(s["y"], vec![3.0, 2.0, 0.0, 6.0, 3.0, 2.0, 0.0, 6.0]);
}

#[test]
fn rand_depends_only_on_seed_and_coordinates() {
    let s = sinks(
        "graph @g {
          %big = rand seed 5 : f32[4, 4]
          %part = slice %big [2:4, 1:3]
          %small = rand seed 5 : f32[4, 3]
          %sp = slice %small [2:4, 1:3]
          %other = rand seed 6 : f32[4, 4]
          sink @part %part
          sink @sp %sp
          sink @other %other
          sink @big %big
        }",
    );
    assert_eq!(s["part"], s["sp"]);
    assert_ne!(s["big"], s["other"]);
    assert!(s["big"].iter().all(|v| (0.0..1.0).contains(v)));
}

#[test]
fn a_sharded_apply_computes_its_block_from_its_input_windows() {
    let s = sinks(
        "op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
          y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
        }
        graph @g {
          %x = rand seed 1 : f32[4, 3]
          %w = rand seed 2 : f32[3, 6]
          %b = rand seed 3 : f32[6]
          %y = apply @linear(%x, %w, %b)
          %x1 = slice %x [2:4, 0:3]
          %w1 = slice %w [0:3, 3:6]
          %b1 = slice %b [3:6]
          %y11 = apply @linear(%x1, %w1, %b1) @[2:4, 3:6] on 1
          %ref = slice %y [2:4, 3:6]
          sink @shard %y11
          sink @ref %ref
        }",
    );
    assert_eq!(s["shard"], s["ref"]);
}

#[test]
fn extern_op_with_reference_kernel_runs() {
    let s = sinks(
        "extern op @mm(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {
          index [i: M, j: N]
          x: [i, 0] + [1, K]
          w: [0, j] + [K, 1]
          y: [i, j] + [1, 1]
          y[i, j] = sum[k](x[i, k] * w[k, j])
        }
        graph @g {
          %x = iota axis 1 : f32[2, 2]
          %w = ones : f32[2, 2]
          %y = apply @mm(%x, %w)
          sink @y %y
        }",
    );
    assert_eq!(s["y"], vec![1.0, 1.0, 1.0, 1.0]);
}
