#!/usr/bin/env python3
"""Generates the fixtures of examples/train_mlp.teg: a two-layer MLP regression (1,024 samples,
16 -> 64 -> 1, ReLU, mean squared error) trained STEPS steps with AdamW, its gradients from
`jax.grad`, its loss at every step computed by JAX in float64 and in float32 from the same
initial weights and data, in the order the graph computes it.

Inputs (numpy.random.default_rng(SEED), made in float64; the f32 directory holds them rounded):
    x  [1024, 16] ~ normal;  y [1024, 1] = sin(x @ a) + 0.1 * normal,  a [16, 1] ~ normal / 2
    w1 [16, 64] ~ normal * sqrt(2 / 16);  b1 [64] = 0
    w2 [64, 1]  ~ normal * sqrt(1 / 64);  b2 [1]  = 0
    every AdamW moment (mw1 vw1 mb1 vb1 mw2 vw2 mb2 vb2) = 0, the step count t [] = 0
Written to mlp/f64/ (float64) and mlp/f32/ (float32), each with
    expected_loss.npy  [STEPS]  the loss of each step (that of the weights the step starts from)
    expected_w2.npy    [64, 1]  w2 after the last step
The f64 run is examples/train_mlp.teg with every `f32` read as `f64`. The data has more samples
than the model has weights (1,153), so the loss falls towards the noise (0.01) rather than to 0,
where an f32 loss would have no correct digits left. The learning rate (0.005) keeps the f32 run
within 1e-6 of the f64 one; at 0.01 AdamW's division by the root mean square of near-zero
gradients made the two drift apart by 4.5e-4 after step 150.

Regenerate (JAX is not needed by the tests; the .npy files are committed):
    pip install jax numpy && python3 tests/data/train/gen_mlp.py
"""

import os

import numpy as np

SEED = 20261128
STEPS = 200
LR, B1, B2, EPS, WD = 0.005, 0.9, 0.999, 1e-8, 1e-4
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp")


def inputs():
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((1024, 16))
    a = rng.standard_normal((16, 1)) / 2.0
    y = np.sin(x @ a) + 0.1 * rng.standard_normal((1024, 1))
    state = {
        "w1": rng.standard_normal((16, 64)) * np.sqrt(2.0 / 16),
        "b1": np.zeros(64),
        "w2": rng.standard_normal((64, 1)) * np.sqrt(1.0 / 64),
        "b2": np.zeros(1),
    }
    for k in ["w1", "b1", "w2", "b2"]:
        state["m" + k] = np.zeros_like(state[k])
        state["v" + k] = np.zeros_like(state[k])
    state["t"] = np.zeros(())
    return x, y, state


def loss_fn(jnp, params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.maximum(x @ w1 + b1, 0.0)
    d = h @ w2 + b2 - y
    return jnp.sum(d * d) / d.size


def adamw(jnp, w, m, v, g, t, dt):
    c = lambda v_: jnp.asarray(v_, dtype=dt)  # noqa: E731 (a hyperparameter in the run's dtype)
    mt = c(B1) * m + (c(1.0) - c(B1)) * g
    vt = c(B2) * v + (c(1.0) - c(B2)) * g * g
    mhat = mt / (c(1.0) - jnp.power(c(B1), t))
    step = mhat / (jnp.sqrt(vt / (c(1.0) - jnp.power(c(B2), t))) + c(EPS))
    return w - c(LR) * (step + c(WD) * w), mt, vt


def train(dt, x, y, state):
    import jax
    import jax.numpy as jnp

    x, y = jnp.asarray(x, dt), jnp.asarray(y, dt)
    s = {k: jnp.asarray(v, dt) for k, v in state.items()}
    names = ["w1", "b1", "w2", "b2"]
    value_and_grad = jax.jit(jax.value_and_grad(lambda p: loss_fn(jnp, p, x, y)))
    losses = []
    for _ in range(STEPS):
        loss, grads = value_and_grad(tuple(s[k] for k in names))
        losses.append(np.asarray(loss))
        s["t"] = s["t"] + jnp.asarray(1.0, dt)
        for k, g in zip(names, grads):
            s[k], s["m" + k], s["v" + k] = adamw(jnp, s[k], s["m" + k], s["v" + k], g, s["t"], dt)
    return np.array(losses, dtype=dt), np.asarray(s["w2"])


def main():
    import jax

    jax.config.update("jax_enable_x64", True)
    x, y, state = inputs()
    for name, dt in [("f64", np.float64), ("f32", np.float32)]:
        out = os.path.join(HERE, name)
        os.makedirs(out, exist_ok=True)
        save = lambda n, a: np.save(os.path.join(out, n + ".npy"), np.asarray(a, dtype=dt))  # noqa: E731
        save("x", x)
        save("y", y)
        for k, v in state.items():
            save(k, v)
        losses, w2 = train(dt, x, y, state)
        save("expected_loss", losses)
        save("expected_w2", w2)
        print(name, "loss", losses[0], "->", losses[-1])


if __name__ == "__main__":
    main()
