"""The Python call overhead of tapc for a tiny graph: a call of a 1-element graph from Python
(`f(x=array)`: binding, checks, the run, the output array) against the same program run from
Rust with no Python in between (`_time_runs`: the executor and the kernel, sinks copied out as
a call does). Medians over many calls; the load average is printed with them.

    python python/bench/call_overhead.py [--calls N] [--repeats R]

Run after `maturin develop` (or `pip install ./python`); prints a markdown row for
docs/benchmarks.md.
"""

import argparse
import os
import statistics
import time

import numpy as np

import tapc

TINY = """
op @inc(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] + 1.0
}
graph @tiny {
  %x = source @x : f32[1]
  %y = apply @inc(%x)
  sink @y %y
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000, help="calls per repeat")
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    f = tapc.compile(TINY, threads=1)
    x = np.zeros(1, np.float32)
    assert float(f(x=x)["y"][0]) == 1.0
    load0 = os.getloadavg()[0]
    py_named, py_pos, native = [], [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.calls):
            f(x=x)
        py_named.append((time.perf_counter() - t0) / a.calls)
        t0 = time.perf_counter()
        for _ in range(a.calls):
            f(x)
        py_pos.append((time.perf_counter() - t0) / a.calls)
        native.append(statistics.median(f._program._time_runs([x], a.calls)))
    load1 = os.getloadavg()[0]
    us = lambda v: statistics.median(v) * 1e6
    named, pos, prog = us(py_named), us(py_pos), us(native)
    print(f"program run from Rust (executor + kernel): median {prog:.2f} us")
    print(f"Python call f(x=a): median {named:.2f} us -> overhead {named - prog:.2f} us")
    print(f"Python call f(a):   median {pos:.2f} us -> overhead {pos - prog:.2f} us")
    print(f"load average {load0:.2f} -> {load1:.2f}; {a.repeats} repeats of {a.calls} calls")
    print(
        f"| Python call of a 1-element graph (`python/bench/call_overhead.py`, threads=1) | "
        f"f(x=a) {named:.2f} µs, f(a) {pos:.2f} µs; the program alone (from Rust) {prog:.2f} µs; "
        f"overhead {named - prog:.2f} / {pos - prog:.2f} µs (target ≤ 10 µs); "
        f"medians of {a.repeats}×{a.calls} calls, load average {load0:.1f}–{load1:.1f} |"
    )


if __name__ == "__main__":
    main()
