#!/usr/bin/env python3
"""Writes the fixtures of tests/native/dtypes.rs: edge values of each new dtype and the results
numpy (with ml_dtypes for bf16) computes for them, one folder per dtype.

For every dtype D in f16 bf16 i8 u8 i16 u16 u32 u64, D/ holds the inputs
    x.npy, y.npy   D[16]     edge values: ±0, ±1, min/max, subnormals, ±inf, NaN, wrap-around
                             and division-by-zero pairs
    w.npy          f64[16]   values to cast to D: ties, overflow, NaN, a value just above a
                             16-bit tie that rounding through f32 first would get wrong
and the expected sinks of the graph the test writes (docs/teg.md §5.2, §12):
    add sub mul div rem neg max lt wide narrow   (expected_NAME.npy)
      x+y, x-y, x*y, x/y, x%y, -x, max(x, y), x<y, f64(x), D(w)

numpy computes + - * / - < f64(x) and, for floats, D(w) (numpy's float16 and ml_dtypes'
bfloat16 compute in float32 and round once to nearest even; integers wrap, floor division and
remainder with x // 0 == x % 0 == 0 and MIN // -1 == MIN). Four results are the documented
rules written out here, because numpy's own differ or are undefined:
  - float x % y is x - y*floor(x/y) in f64, then rounded (numpy uses fmod);
  - float max(x, y) is x if x is NaN or x > y, else y (numpy's float16 maximum may differ on ±0);
  - D(w) for an integer D truncates toward zero and saturates, NaN is 0 (numpy: undefined);
  - D(w) for bf16 rounds the f64 value once (ml_dtypes goes through float32, rounding twice):
    `round_exact` below, with exact fractions.
bf16 files are written as np.save writes an ml_dtypes array: descr '<V2' (the reader test of
that form); the program writes '<u2'.

Regenerate (deterministic): pip install numpy ml_dtypes && python3 tests/data/dtypes/gen.py
(made with numpy 2.4.6 and ml_dtypes 0.6.0).
"""

import math
import os
from fractions import Fraction

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
N = 16

FLOATS = {
    # dtype: (numpy type, fraction bits, least normal exponent, max finite)
    "f16": (np.float16, 10, -14, 65504.0),
    "bf16": (ml_dtypes.bfloat16, 7, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
}
INTS = {
    "i8": np.int8,
    "u8": np.uint8,
    "i16": np.int16,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}


def round_exact(v, frac_bits, emin, maxf):
    """v (a Python float) rounded to nearest, ties to even, to a float with frac_bits fraction
    bits, least normal exponent emin and greatest finite value maxf; exact arithmetic."""
    if math.isnan(v) or math.isinf(v) or v == 0:
        return v
    a = Fraction(abs(v))
    e = max(math.floor(math.log2(abs(v))), emin)
    # log2 of a float can be off by one near powers of two: fix e so 2^e <= a < 2^(e+1).
    while e > emin and a < Fraction(2) ** e:
        e -= 1
    while a >= Fraction(2) ** (e + 1):
        e += 1
    ulp = Fraction(2) ** (e - frac_bits)
    q = a / ulp
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = float(n * ulp)
    # Overflow: at or past max + half an ulp of max rounds to infinity.
    top_ulp = Fraction(2) ** (math.floor(math.log2(maxf)) - frac_bits)
    if a >= Fraction(maxf) + top_ulp / 2:
        r = math.inf
    return math.copysign(r, v)


def saturate(v, t):
    info = np.iinfo(t)
    if math.isnan(v):
        return 0
    if v >= info.max:
        return info.max
    if v <= info.min:
        return info.min
    return math.trunc(v)


def float_inputs(name):
    t, fb, emin, maxf = FLOATS[name]
    tiny = 2.0 ** (emin - fb)  # least subnormal
    x = [0.0, -0.0, 1.0, -1.0, maxf, -maxf, 2.0**emin, tiny, -tiny, math.inf, -math.inf,
         math.nan, 0.1, 3.140625, 1000.0, 2049.0]
    y = [-0.0, 0.0, 3.0, 0.0, maxf, -1.0, 0.5, 0.5, tiny, math.inf, 2.0, 1.0, 0.2, -2.5,
         0.001, 7.0]
    return np.array(x).astype(t), np.array(y).astype(t)


def int_inputs(name):
    t = INTS[name]
    info = np.iinfo(t)
    lo, hi = int(info.min), int(info.max)
    if lo < 0:
        x = [0, 1, -1, lo, hi, lo, 7, -7, 7, -7, 100, hi, lo + 1, 5, 3, hi - 1]
        y = [0, 0, 0, -1, -1, 1, 2, 2, -2, -2, 3, 2, -1, 7, -1, 3]
    else:
        half = 1 << (info.bits - 1)
        x = [0, 1, hi, hi, hi - 1, 7, 7, 200, 100, 3, 5, 0, 1, hi // 2, half, 9]
        y = [0, 0, 1, hi, 2, 2, 0, 3, 7, 5, 3, 1, hi, 2, half, 4]
    return np.array(x, dtype=object).astype(t), np.array(y, dtype=object).astype(t)


W = [0.5, -0.5, 2.5, -2.5, -0.0, 1e10, -1e10, math.nan, math.inf, -math.inf, 65520.0,
     1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40, 3.4e38, 1e-40, 300.7]


def expected_float(name, x, y, w):
    t, fb, emin, maxf = FLOATS[name]
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        rem64 = xd - yd * np.floor(xd / yd)
        out = {
            "add": x + y,
            "sub": x - y,
            "mul": x * y,
            "div": x / y,
            "rem": np.array([round_exact(v, fb, emin, maxf) for v in rem64]).astype(t),
            "neg": -x,
            "max": np.where(np.isnan(x) | (x > y), x, y).astype(t),
            "lt": x < y,
            "wide": xd,
            "narrow": np.array([round_exact(v, fb, emin, maxf) for v in W]).astype(t),
        }
    if name == "f16":
        # numpy's own double -> half conversion rounds once, as round_exact does.
        assert (np.array(W).astype(np.float16).view(np.uint16)
                == out["narrow"].view(np.uint16)).all()
    return out


def expected_int(name, x, y, w):
    t = INTS[name]
    with np.errstate(all="ignore"):
        return {
            "add": x + y,
            "sub": x - y,
            "mul": x * y,
            "div": np.floor_divide(x, y),
            "rem": np.remainder(x, y),
            "neg": np.negative(x),
            "max": np.maximum(x, y),
            "lt": x < y,
            "wide": x.astype(np.float64),
            "narrow": np.array([saturate(v, t) for v in W], dtype=object).astype(t),
        }


def main():
    w = np.array(W, dtype=np.float64)
    for name in list(FLOATS) + list(INTS):
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        if name in FLOATS:
            x, y = float_inputs(name)
            out = expected_float(name, x, y, w)
        else:
            x, y = int_inputs(name)
            out = expected_int(name, x, y, w)
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "y.npy"), y)
        np.save(os.path.join(d, "w.npy"), w)
        for k, v in out.items():
            assert v.shape == (N,), (name, k)
            np.save(os.path.join(d, f"expected_{k}.npy"), v)


if __name__ == "__main__":
    main()
