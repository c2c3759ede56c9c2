#!/usr/bin/env python3
"""Generates the numpy fixtures for examples/mlp.teg (a 784-512-10 MLP, batch 64).

Inputs (float32, fixed seed 20261122, numpy.random.default_rng):
    x  f32[64, 784]   ~ normal
    w1 f32[784, 512]  ~ normal * 0.1
    b1 f32[512]       ~ normal * 0.1
    w2 f32[512, 10]   ~ normal * 0.1
    b2 f32[10]        ~ normal * 0.1
Expected outputs, computed in float64 from the float32 inputs, then cast to float32:
    h = x @ w1 + b1;  a = max(h, 0);  y = a @ w2 + b2
    expected_logits.npy   = y                    f32[64, 10]
    expected_sampled.npy  = y.T[0:10, 0:64:2]    f32[10, 32]
All files are standard C-order .npy, written next to this script.

Regenerate (numpy is not needed in CI; the .npy files are committed):
    pip install numpy && python3 tests/data/mlp/gen.py
"""

import os

import numpy as np

SEED = 20261122
HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, array, dtype=np.float32):
    array = np.ascontiguousarray(array, dtype=dtype)
    np.save(os.path.join(HERE, name + ".npy"), array)
    print(f"{name}.npy: {array.dtype}{list(array.shape)}")


def main():
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    w1 = (rng.standard_normal((784, 512)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(512) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((512, 10)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    for name, array in [("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)]:
        save(name, array)

    f64 = np.float64
    h = x.astype(f64) @ w1.astype(f64) + b1.astype(f64)
    a = np.maximum(h, 0.0)
    y = a @ w2.astype(f64) + b2.astype(f64)
    save("expected_logits", y)
    save("expected_sampled", y.T[0:10, 0:64:2])


if __name__ == "__main__":
    main()
