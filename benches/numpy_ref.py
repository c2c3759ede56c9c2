#!/usr/bin/env python3
"""Side-by-side benchmark: tapc's native backend vs numpy on the same inputs.

Usage: python3 benches/numpy_ref.py [--runs N] [--only NAME]

Runs `cargo bench --bench native -- --data DIR --json` (which compiles every workload with the
JIT, times it with 1 and 2 worker threads and writes its inputs as .npy files into DIR), then
times numpy on exactly those inputs and prints medians and ratios. A ratio above 1 means
tapc is faster than numpy. numpy is installed with pip if missing (it is needed only here,
never by the tests). numpy uses its default BLAS threads (all cores); the conv2d reference is
the usual im2col + matmul formulation.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "numpy"])
    import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def softmax(x):
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=1, keepdims=True)


def conv2d(x, f):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp[0], (3, 3), axis=(1, 2))  # C, H, W, 3, 3
    cols = win.transpose(1, 2, 0, 3, 4).reshape(56 * 56, 64 * 9)
    return (f.reshape(64, 64 * 9) @ cols.T).reshape(1, 64, 56, 56)


WORKLOADS = {
    "matmul": lambda d: d["a"] @ d["b"],
    "mlp": lambda d: np.maximum(d["x"] @ d["w1"] + d["b1"], 0) @ d["w2"] + d["b2"],
    "elementwise": lambda d: np.maximum(d["x"] * np.float32(1.5) + np.float32(0.25), 0) * np.float32(2),
    "softmax": lambda d: softmax(d["x"]),
    "conv2d": lambda d: conv2d(d["x"], d["f"]),
}


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tapc-bench-") as data:
        cmd = ["cargo", "bench", "--bench", "native", "--", "--data", data, "--json", "--runs", str(args.runs)]
        if args.only:
            cmd += ["--only", args.only]
        print("$", " ".join(cmd), flush=True)
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        print("\n".join(lines[:-1]))
        native = json.loads(lines[-1])
        print()
        print(f"{'workload':<12} {'numpy ms':>10} {'tapc 1T ms':>11} {'tapc 2T ms':>11} {'ratio 1T':>9} {'ratio 2T':>9}")
        for name, t in native.items():
            d = {f[:-4]: np.load(os.path.join(data, name, f)) for f in os.listdir(os.path.join(data, name))}
            fn = WORKLOADS[name]
            fn(d)  # warm-up
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                fn(d)
                times.append(time.perf_counter() - t0)
            ref = median(times)
            print(
                f"{name:<12} {ref * 1e3:>10.2f} {t['t1'] * 1e3:>11.2f} {t['t2'] * 1e3:>11.2f}"
                f" {ref / t['t1']:>8.2f}x {ref / t['t2']:>8.2f}x"
            )


if __name__ == "__main__":
    main()
