#!/usr/bin/env python3
"""Generates the fixtures of examples/train_transformer.teg: a decoder-only transformer (2
layers, width 128, 4 heads of 32, FFN 512, sequence 64, vocabulary 16) trained STEPS steps with
plain SGD on a reverse task, its gradients from `jax.grad`, in float32, computed as the graph
computes it (pre-LayerNorm, tanh GELU, causal mask by -1e30, the embedding a gather of rows,
whose gradient is a scatter-add).

Data (numpy.random.default_rng(SEED)): 32 tokens uniform below 16, then the same 32 reversed;
    ids     [64]      the sequence (int64)
    targets [64, 16]  one-hot of the next token (row 63 is zero: no prediction there)
Initial state: every matrix and the embeddings ~ normal * 0.02 (the embedding * 0.1), LayerNorm
gains 1, every bias 0. Written to transformer/ (float32) with
    expected_loss.npy  [STEPS]  the loss of each step (that of the weights it starts from)

Regenerate (JAX is not needed by the tests; the .npy files are committed):
    pip install jax numpy && python3 tests/data/train/gen_transformer.py
"""

import os

import numpy as np

SEED = 20261129
STEPS = 20
LR = 0.05
T, D, H, E, F, V = 64, 128, 4, 32, 512, 16
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer")


def params(rng):
    p = {"emb": rng.standard_normal((V, D)) * 0.1, "pos": rng.standard_normal((T, D)) * 0.02}
    for layer in (1, 2):
        q = f"l{layer}_"
        p[q + "g1"], p[q + "b1"] = np.ones(D), np.zeros(D)
        p[q + "wqkv"], p[q + "bqkv"] = rng.standard_normal((D, 3 * D)) * 0.02, np.zeros(3 * D)
        p[q + "wo"], p[q + "bo"] = rng.standard_normal((D, D)) * 0.02, np.zeros(D)
        p[q + "g2"], p[q + "b2"] = np.ones(D), np.zeros(D)
        p[q + "wfc"], p[q + "bfc"] = rng.standard_normal((D, F)) * 0.02, np.zeros(F)
        p[q + "wproj"], p[q + "bproj"] = rng.standard_normal((F, D)) * 0.02, np.zeros(D)
    p["gf"], p["bf"], p["wu"] = np.ones(D), np.zeros(D), rng.standard_normal((D, V)) * 0.02
    return p


def loss_fn(jnp, p, ids, targets):
    f32 = jnp.float32

    def layernorm(x, g, b):
        mu = jnp.sum(x, axis=-1, keepdims=True) / f32(D)
        c = x - mu
        var = jnp.sum(c * c, axis=-1, keepdims=True) / f32(D)
        return c / jnp.sqrt(var + f32(1e-5)) * g + b

    def gelu(x):
        return f32(0.5) * x * (f32(1) + jnp.tanh(f32(0.7978845608) * (x + f32(0.044715) * x * x * x)))

    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    x = p["emb"][ids] + p["pos"]
    for layer in (1, 2):
        q_ = f"l{layer}_"
        qkv = layernorm(x, p[q_ + "g1"], p[q_ + "b1"]) @ p[q_ + "wqkv"] + p[q_ + "bqkv"]
        q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, E).transpose(1, 0, 2) for i in range(3))
        s = jnp.where(causal, (q @ k.transpose(0, 2, 1)) / jnp.sqrt(f32(E)), f32(-1e30))
        m = jnp.max(s, axis=-1, keepdims=True)
        e = jnp.exp(s - m)
        a = (e / jnp.sum(e, axis=-1, keepdims=True)) @ v
        x = x + a.transpose(1, 0, 2).reshape(T, D) @ p[q_ + "wo"] + p[q_ + "bo"]
        f = gelu(layernorm(x, p[q_ + "g2"], p[q_ + "b2"]) @ p[q_ + "wfc"] + p[q_ + "bfc"])
        x = x + f @ p[q_ + "wproj"] + p[q_ + "bproj"]
    z = layernorm(x, p["gf"], p["bf"]) @ p["wu"]
    m = jnp.max(z, axis=-1, keepdims=True)
    lse = m + jnp.log(jnp.sum(jnp.exp(z - m), axis=-1, keepdims=True))
    return jnp.sum(targets * (lse - z)) / jnp.sum(targets)


def main():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(SEED)
    first = rng.integers(0, V, 32)
    seq = np.concatenate([first, first[::-1]])
    targets = np.zeros((T, V))
    targets[np.arange(T - 1), seq[1:]] = 1.0
    p = params(rng)
    os.makedirs(OUT, exist_ok=True)
    save = lambda n, a: np.save(os.path.join(OUT, n + ".npy"), np.asarray(a, dtype=np.float32))  # noqa: E731
    np.save(os.path.join(OUT, "ids.npy"), seq.astype(np.int64))
    save("targets", targets)
    for k, v in p.items():
        save(k, v)
    p = {k: jnp.asarray(v, jnp.float32) for k, v in p.items()}
    tk, tg = jnp.asarray(seq), jnp.asarray(targets, jnp.float32)
    step = jax.jit(jax.value_and_grad(lambda q: loss_fn(jnp, q, tk, tg)))
    losses = []
    for _ in range(STEPS):
        loss, g = step(p)
        losses.append(np.asarray(loss))
        p = {k: p[k] - jnp.float32(LR) * g[k] for k in p}
    save("expected_loss", losses)
    print("loss", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main()
