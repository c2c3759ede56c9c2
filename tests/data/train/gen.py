#!/usr/bin/env python3
"""Generates the fixtures of examples/sgd_momentum.teg and examples/adamw.teg: a linear
regression (batch 64, 8 features) trained for STEPS steps, its loss at every step computed with
numpy in float64, in the order the graphs compute it.

Inputs (float64, fixed seed 20261127, numpy.random.default_rng):
    x  f64[64, 8]  ~ normal
    y  f64[64]     = x @ w_true + 0.3 + 0.1 * normal,  w_true ~ normal
Initial state (zeros): w f64[8], b f64[], vw f64[8], vb f64[] (SGD with momentum) and
mw f64[8], mb f64[], t f64[] (AdamW; it also reads vw and vb, as its second moments).
Expected:
    expected_sgd_loss.npy    f64[STEPS]  the loss of each step of sgd_momentum.teg
    expected_sgd_w.npy       f64[8]      w after the last step
    expected_adamw_loss.npy  f64[STEPS]  the loss of each step of adamw.teg
    expected_adamw_w.npy     f64[8]      w after the last step
The loss of step s is the mean squared residual of the weights step s starts from.

Regenerate (numpy is not needed in CI; the .npy files are committed):
    pip install numpy && python3 tests/data/train/gen.py
"""

import os

import numpy as np

SEED = 20261127
STEPS = 50
HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, array):
    # asarray, not ascontiguousarray, which turns a 0-d array into a 1-d one.
    np.save(os.path.join(HERE, name + ".npy"), np.asarray(array, dtype=np.float64, order="C"))


def grads(x, y, w, b):
    r = x @ w + b - y
    n = x.shape[0]
    return np.mean(r * r), 2.0 * (x.T @ r) / n, 2.0 * np.sum(r) / n


def sgd(x, y, steps, lr=0.05, mu=0.9):
    w, b = np.zeros(x.shape[1]), 0.0
    vw, vb = np.zeros_like(w), 0.0
    losses = []
    for _ in range(steps):
        loss, gw, gb = grads(x, y, w, b)
        losses.append(loss)
        vw, vb = mu * vw + gw, mu * vb + gb
        w, b = w - lr * vw, b - lr * vb
    return np.array(losses), w


def adamw_step(w, m, v, g, t, lr=0.1, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    m = b1 * m + (1.0 - b1) * g
    v = b2 * v + (1.0 - b2) * g * g
    mhat = m / (1.0 - b1**t)
    vhat = v / (1.0 - b2**t)
    return w - lr * (mhat / (np.sqrt(vhat) + eps) + wd * w), m, v


def adamw(x, y, steps):
    w, b = np.zeros(x.shape[1]), 0.0
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), 0.0, 0.0
    losses = []
    for t in range(1, steps + 1):
        loss, gw, gb = grads(x, y, w, b)
        losses.append(loss)
        w, mw, vw = adamw_step(w, mw, vw, gw, float(t))
        b, mb, vb = adamw_step(b, mb, vb, gb, float(t))
    return np.array(losses), w


def main():
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((64, 8))
    w_true = rng.standard_normal(8)
    y = x @ w_true + 0.3 + 0.1 * rng.standard_normal(64)
    save("x", x)
    save("y", y)
    for name in ["w", "vw", "mw"]:
        save(name, np.zeros(8))
    for name in ["b", "vb", "mb", "t"]:
        save(name, np.zeros(()))
    losses, w = sgd(x, y, STEPS)
    save("expected_sgd_loss", losses)
    save("expected_sgd_w", w)
    losses, w = adamw(x, y, STEPS)
    save("expected_adamw_loss", losses)
    save("expected_adamw_w", w)


if __name__ == "__main__":
    main()
