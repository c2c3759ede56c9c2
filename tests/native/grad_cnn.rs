//! `grad` through convolutions against `jax.grad`: a small CNN (a 2-D convolution with stride
//! 2 over a zero-padded input, ReLU, a 2-D convolution with stride 1; a 1-D convolution with
//! stride 2 on another input) whose loss and five gradients match JAX's
//! (`tests/data/train/gen_cnn.py`, float64, committed `.npy` files) within the f32 contract
//! (`common::tolerance`), in the interpreter (after the `grad` pass alone, the lowered text
//! re-parsed) and the JIT (after the standard pipeline).

use crate::common;
use common::jax_fixtures;
use std::collections::HashMap;
use tapc_runtime::Tensor;

const SRC: &str = "op @conv2d<stride>(x: f32[N, C, H, W], f: f32[O, C, KH, KW])
    -> (y: f32[N, O, (H - KH) / stride + 1, (W - KW) / stride + 1]) {
  y[n, o, h, w] = sum[c, kh, kw](x[n, c, stride * h + kh, stride * w + kw] * f[o, c, kh, kw])
}

op @conv1d<stride>(x: f32[N, C, H], f: f32[O, C, K]) -> (y: f32[N, O, (H - K) / stride + 1]) {
  y[n, o, h] = sum[c, k](x[n, c, stride * h + k] * f[o, c, k])
}

op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}

op @meansq2(a: f32[N, O, P, Q], b: f32[M, R, T]) -> (l: f32[]) {
  l[] = sum[n, o, p, q](a[n, o, p, q] * a[n, o, p, q]) / f32(N * O * P * Q) + sum[m, r, t](b[m, r, t] * b[m, r, t]) / f32(M * R * T)
}

graph @cnn {
  %x = source @x : f32[2, 3, 9, 9]
  %f1 = source @f1 : f32[4, 3, 3, 3]
  %f2 = source @f2 : f32[5, 4, 2, 2]
  %s = source @s : f32[2, 3, 16]
  %g = source @g : f32[4, 3, 3]
  %xp = pad %x [0:0, 0:0, 1:1, 1:1] constant 0.0
  %h = apply @conv2d<stride = 2>(%xp, %f1)
  %r = apply @relu(%h)
  %y2 = apply @conv2d<stride = 1>(%r, %f2)
  %y1 = apply @conv1d<stride = 2>(%s, %g)
  %l = apply @meansq2(%y2, %y1)
  %d_x, %d_f1, %d_f2, %d_s, %d_g = grad %l wrt %x, %f1, %f2, %s, %g
  sink @l %l
  sink @d_x %d_x
  sink @d_f1 %d_f1
  sink @d_f2 %d_f2
  sink @d_s %d_s
  sink @d_g %d_g
}
";

const SINKS: [&str; 6] = ["l", "d_x", "d_f1", "d_f2", "d_s", "d_g"];

#[test]
fn cnn_gradients_match_jax_in_the_interpreter_and_the_jit() {
    let (m, facts) = common::grad_cases::lowered("cnn", SRC);
    let ins: HashMap<String, Tensor> = ["x", "f1", "f2", "s", "g"]
        .iter()
        .map(|n| (n.to_string(), jax_fixtures::read("cnn", n)))
        .collect();
    let names: Vec<String> = SINKS.iter().map(|s| s.to_string()).collect();
    let interp = common::run(&m, &facts, 0, &ins);
    assert_eq!(
        jax_fixtures::check("cnn", "interpreter", &interp, &names),
        6
    );
    let jit = jax_fixtures::jit("cnn", SRC, &ins);
    assert_eq!(jax_fixtures::check("cnn", "JIT", &jit, &names), 6);
}
