#!/usr/bin/env python3
"""Generates the fixtures of tests/native/train_block.rs: the gradients, from `jax.grad` in
float64, of the `train_block` program (tests/common/train_block.rs: the GPT-2-style block of
examples/transformer.teg with loss mean(y²)) at a small size, T = 8 tokens, width D = 16,
H = 2 heads of 8, FFN F = 64.

Inputs (numpy.random.default_rng(SEED), float32; names as the program's sources and states):
    x [T, D] uniform [-1, 1); weights 0.05·u (w_proj 0.025·u); biases 0.02·u; LayerNorm gains
    1 + 0.1·u and shifts 0.1·u; the AdamW moments m_*, v_* and the step count t zero.
Expected (float32, computed in float64 from the float32 inputs):
    expected_loss.npy []    the loss
    expected_d_NAME.npy     the gradient of the loss with respect to each of the 12 parameters

Regenerate (JAX is not needed by the tests; the .npy files are committed):
    pip install jax numpy && python3 tests/data/train/gen_block.py
"""

import os

import numpy as np

SEED = 20261128
T, D, H, F = 8, 16, 2, 64
E = D // H
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "block")
PARAMS = ["g1", "b1", "w_qkv", "b_qkv", "w_o", "b_o", "g2", "b2", "w_fc", "b_fc", "w_proj", "b_proj"]
SHAPES = {"g1": (D,), "b1": (D,), "w_qkv": (D, 3 * D), "b_qkv": (3 * D,), "w_o": (D, D), "b_o": (D,),
          "g2": (D,), "b2": (D,), "w_fc": (D, F), "b_fc": (F,), "w_proj": (F, D), "b_proj": (D,)}


def inputs(rng):
    def u(shape, m, one=0.0):
        return ((rng.random(shape) * 2 - 1) * m + one).astype(np.float32)

    scale = {"g1": (0.1, 1.0), "g2": (0.1, 1.0), "b1": (0.1, 0.0), "b2": (0.1, 0.0), "w_proj": (0.025, 0.0)}
    out = {"x": u((T, D), 1.0), "t": np.zeros((), np.float32)}
    for p in PARAMS:
        m, one = scale.get(p, (0.05 if p.startswith("w_") else 0.02, 0.0))
        out[p] = u(SHAPES[p], m, one)
        out["m_" + p] = np.zeros(SHAPES[p], np.float32)
        out["v_" + p] = np.zeros(SHAPES[p], np.float32)
    return out


def loss_fn(jnp, p, x):
    def layernorm(x, g, b):
        mu = jnp.sum(x, axis=-1, keepdims=True) / D
        c = x - mu
        var = jnp.sum(c * c, axis=-1, keepdims=True) / D
        return c / jnp.sqrt(var + 1e-5) * g + b

    def gelu(x):
        return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

    qkv = layernorm(x, p["g1"], p["b1"]) @ p["w_qkv"] + p["b_qkv"]
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, E).transpose(1, 0, 2) for i in range(3))
    s = jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool)), q @ k.transpose(0, 2, 1) / jnp.sqrt(E), -1e30)
    s = s - jnp.max(s, axis=-1, keepdims=True)
    pr = jnp.exp(s) / jnp.sum(jnp.exp(s), axis=-1, keepdims=True)
    x1 = x + (pr @ v).transpose(1, 0, 2).reshape(T, D) @ p["w_o"] + p["b_o"]
    f = gelu(layernorm(x1, p["g2"], p["b2"]) @ p["w_fc"] + p["b_fc"])
    y = x1 + f @ p["w_proj"] + p["b_proj"]
    return jnp.sum(y * y) / (T * D)


def main():
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    ins = inputs(np.random.default_rng(SEED))
    os.makedirs(OUT, exist_ok=True)
    for k, v in ins.items():
        np.save(os.path.join(OUT, k + ".npy"), v)
    p = {k: jnp.asarray(ins[k], dtype=jnp.float64) for k in PARAMS}
    x = jnp.asarray(ins["x"], dtype=jnp.float64)
    loss, g = jax.value_and_grad(lambda q: loss_fn(jnp, q, x))(p)
    np.save(os.path.join(OUT, "expected_loss.npy"), np.asarray(loss, np.float32))
    for k in PARAMS:
        np.save(os.path.join(OUT, "expected_d_" + k + ".npy"), np.asarray(g[k], np.float32))
    print(f"loss {float(loss):.6f}; wrote {len(ins)} inputs and {len(PARAMS) + 1} expected arrays to {OUT}")


if __name__ == "__main__":
    main()
