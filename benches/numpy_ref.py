#!/usr/bin/env python3
"""The numpy side of `cargo bench --bench native`: times numpy on the bench's own inputs.

Usage:
  python3 benches/numpy_ref.py --data DIR [--runs N] [--only NAME[,NAME...]]
      times every workload whose inputs are in DIR/NAME/*.npy (written by the bench) and
      prints one JSON object {NAME: median seconds} as its last line. The bench runs this
      twice, with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS set to 1 and to 2.
  python3 benches/numpy_ref.py [BENCH ARGS...]
      convenience: runs `cargo bench --bench native -- BENCH ARGS...`, which prints tapc and
      numpy side by side.

numpy is needed only here, never by the tests, and is not installed automatically: without
it this script exits with status 3 and a message (the bench then reports tapc alone). The
conv2d reference is the usual im2col + matmul formulation.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def softmax(np, x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def conv2d(np, x, f):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp[0], (3, 3), axis=(1, 2))  # C, H, W, 3, 3
    cols = win.transpose(1, 2, 0, 3, 4).reshape(56 * 56, 64 * 9)
    return (f.reshape(64, 64 * 9) @ cols.T).reshape(1, 64, 56, 56)


def layernorm(np, x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=-1, keepdims=True)
    return c / np.sqrt(var + np.float32(1e-5)) * g + b


def gelu(np, x):
    f32 = np.float32
    return f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608) * (x + f32(0.044715) * x * x * x)))


def transformer(np, x, w={}):
    """examples/transformer.teg's block; weights are made on the first (warm-up) call."""
    f32 = np.float32
    T, D, H, E, F = x.shape[0], 768, 12, 64, 3072
    if not w:
        rng = np.random.default_rng(0)

        def u(*shape, m=0.05, one=0.0):
            return (rng.random(shape, dtype=f32) * f32(2) - f32(1)) * f32(m) + f32(one)

        w.update(qkv=u(D, 3 * D), bqkv=u(3 * D, m=0.02), o=u(D, D), bo=u(D, m=0.02),
                 fc=u(D, F), bfc=u(F, m=0.02), proj=u(F, D, m=0.025), bproj=u(D, m=0.02),
                 g1=u(D, m=0.1, one=1.0), b1=u(D, m=0.1), g2=u(D, m=0.1, one=1.0), b2=u(D, m=0.1))
    qkv = layernorm(np, x, w["g1"], w["b1"]) @ w["qkv"] + w["bqkv"]
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, E).transpose(1, 0, 2) for i in range(3))
    s = np.where(np.tri(T, dtype=bool), q @ k.transpose(0, 2, 1) / f32(np.sqrt(E)), f32(-1e30))
    p = softmax(np, s)
    x1 = x + (p @ v).transpose(1, 0, 2).reshape(T, D) @ w["o"] + w["bo"]
    f = gelu(np, layernorm(np, x1, w["g2"], w["b2"]) @ w["fc"] + w["bfc"])
    return x1 + f @ w["proj"] + w["bproj"]


def workloads(np):
    f32 = np.float32
    return {
        "matmul": lambda d: d["a"] @ d["b"],
        "mlp": lambda d: np.maximum(d["x"] @ d["w1"] + d["b1"], 0) @ d["w2"] + d["b2"],
        "elementwise": lambda d: np.maximum(d["x"] * f32(1.5) + f32(0.25), 0) * f32(2),
        "softmax": lambda d: softmax(np, d["x"]),
        "conv2d": lambda d: conv2d(np, d["x"], d["f"]),
        "gelu": lambda d: gelu(np, d["x"]),
        "layernorm": lambda d: layernorm(np, d["x"], d["g"], d["b"]),
        "transformer": lambda d: transformer(np, d["x"]),
    }


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    if "--data" not in sys.argv[1:]:
        cmd = ["cargo", "bench", "--bench", "native", "--"] + sys.argv[1:]
        print("$", " ".join(cmd), flush=True)
        sys.exit(subprocess.run(cmd, cwd=ROOT).returncode)
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only")
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        print(f"numpy is not installed for {sys.executable} ({e}); `pip install numpy` to compare", file=sys.stderr)
        sys.exit(3)
    fns = workloads(np)
    names = args.only.split(",") if args.only else sorted(os.listdir(args.data))
    out = {}
    for name in names:
        d = os.path.join(args.data, name)
        if name not in fns or not os.path.isdir(d):
            print(f"no inputs for workload {name!r} in {args.data}", file=sys.stderr)
            sys.exit(1)
        inputs = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}
        fn = fns[name]
        fn(inputs)  # warm-up
        times = []
        for _ in range(max(args.runs, 1)):
            t0 = time.perf_counter()
            fn(inputs)
            times.append(time.perf_counter() - t0)
        out[name] = median(times)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
