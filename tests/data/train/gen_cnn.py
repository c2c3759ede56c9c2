#!/usr/bin/env python3
"""Generates the fixtures of tests/native/grad_cnn.rs: the gradients, from `jax.grad` in
float64, of a small CNN's loss (the program in that test): a 2-D convolution with stride 2
over a zero-padded input (pad 1), ReLU, a 2-D convolution with stride 1, and a 1-D
convolution with stride 2 and no padding on another input; loss = mean(y2²) + mean(y1²).

Inputs (numpy.random.default_rng(SEED), float32, uniform [-1, 1) times the scale):
    x [2, 3, 9, 9], f1 [4, 3, 3, 3] (0.5), f2 [5, 4, 2, 2] (0.5), s [2, 3, 16], g [4, 3, 3] (0.5)
Expected (float32, computed in float64 from the float32 inputs):
    expected_l.npy, expected_d_x.npy, expected_d_f1.npy, expected_d_f2.npy, expected_d_s.npy,
    expected_d_g.npy

Regenerate (JAX is not needed by the tests; the .npy files are committed):
    pip install jax numpy && python3 tests/data/train/gen_cnn.py
"""

import os

import numpy as np

SEED = 20261128
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cnn")
SHAPES = {"x": ((2, 3, 9, 9), 1.0), "f1": ((4, 3, 3, 3), 0.5), "f2": ((5, 4, 2, 2), 0.5),
          "s": ((2, 3, 16), 1.0), "g": ((4, 3, 3), 0.5)}


def main():
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(SEED)
    ins = {k: ((rng.random(s) * 2 - 1) * m).astype(np.float32) for k, (s, m) in SHAPES.items()}

    def conv(x, f, stride, pad):
        nd = x.ndim - 2
        dn = ("NCHW", "OIHW", "NCHW") if nd == 2 else ("NCH", "OIH", "NCH")
        return lax.conv_general_dilated(x, f, (stride,) * nd, [(pad, pad)] * nd,
                                        dimension_numbers=dn, precision=lax.Precision.HIGHEST)

    def loss(x, f1, f2, s, g):
        h = jax.nn.relu(conv(x, f1, 2, 1))
        y2 = conv(h, f2, 1, 0)
        y1 = conv(s, g, 2, 0)
        return jnp.mean(y2 * y2) + jnp.mean(y1 * y1)

    args = [jnp.asarray(ins[k], jnp.float64) for k in ["x", "f1", "f2", "s", "g"]]
    l, grads = jax.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))(*args)
    os.makedirs(OUT, exist_ok=True)
    for k, v in ins.items():
        np.save(os.path.join(OUT, f"{k}.npy"), v)
    np.save(os.path.join(OUT, "expected_l.npy"), np.asarray(l, np.float32))
    for k, d in zip(["x", "f1", "f2", "s", "g"], grads):
        np.save(os.path.join(OUT, f"expected_d_{k}.npy"), np.asarray(d, np.float32))
    print("loss", float(l))


if __name__ == "__main__":
    main()
