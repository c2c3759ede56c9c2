#!/usr/bin/env python3
"""Writes the fixtures of tests/native/gather.rs: gathers in kernels against numpy, one folder
per case, at edge shapes (sizes 1 to 5 and primes) with negative indices (which wrap once, as
numpy's do).

Each folder CASE/ holds the inputs and `expected_y.npy`. The kind is the name's first word:
    embed_*   E: f32[V, H], ids: INT[B, S]   y[b, s, h] = E[ids[b, s], h]         numpy E[ids]
    elems_*   x: f32[N, M], idx: INT[N, K]   y[i, j] = x[i, idx[i, j]]            take_along_axis
    shift_*   x: f32[N, M], idx: INT[N, K]   y[i, j] = x[i, idx[i, j] - 1]        the same, idx - 1
    bag_*     E: f32[V, H], ids: INT[B, S]   y[b, h] = sum[s](E[ids[b, s], h])   E[ids].sum(1)
The index dtype INT is the last word (i32, i64, u8, i16). Table values are small integers, so
every sum is exact in any order.

Regenerate (deterministic): pip install numpy && python3 tests/data/gather/gen.py
(made with numpy 2.4.6).
"""

import os
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(18)


def table(rows, cols):
    return rng.integers(-8, 9, size=(rows, cols)).astype(np.float32)


def indices(size, shape, dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -size
    return rng.integers(lo, size, size=shape).astype(dtype)


def save(name, **arrays):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    for k, v in arrays.items():
        np.save(os.path.join(d, k + ".npy"), v)


def embed(name, v, h, b, s, dt):
    E, ids = table(v, h), indices(v, (b, s), dt)
    save(name, E=E, ids=ids, expected_y=E[ids.astype(np.int64)])


def bag(name, v, h, b, s, dt):
    E, ids = table(v, h), indices(v, (b, s), dt)
    save(name, E=E, ids=ids, expected_y=E[ids.astype(np.int64)].sum(axis=1, dtype=np.float32))


def elems(name, n, m, k, dt, shift=0):
    x, idx = table(n, m), indices(m, (n, k), dt)
    if shift:
        idx = (idx.astype(np.int64) + shift).astype(dt)
    y = np.take_along_axis(x, idx.astype(np.int64) - shift, axis=1)
    save(name, x=x, idx=idx, expected_y=y)


embed("embed_1_i32", 1, 1, 1, 1, np.int32)
embed("embed_5x3_i64", 5, 3, 2, 3, np.int64)
embed("embed_7x13_i32", 7, 13, 3, 2, np.int32)
embed("embed_11x37_u8", 11, 37, 1, 5, np.uint8)
embed("embed_2x64_i16", 2, 64, 4, 3, np.int16)
elems("elems_1_i64", 1, 1, 1, np.int64)
elems("elems_3x5_i32", 3, 5, 2, np.int32)
elems("elems_5x2_i64", 5, 2, 7, np.int64)
elems("elems_2x17_i16", 2, 17, 19, np.int16)
elems("shift_4x3_i32", 4, 3, 3, np.int32, shift=1)
elems("shift_3x23_i64", 3, 23, 29, np.int64, shift=1)
bag("bag_5x3_i32", 5, 3, 2, 4, np.int32)
bag("bag_13x31_i64", 13, 31, 3, 7, np.int64)


# Scatters (tests/native/scatter.rs): `scatter %base, %idx, %upd axis A reduce R`, ONNX
# ScatterElements, written to tests/data/scatter/, one folder per case named
# REDUCE_SHAPE_aAXIS_INT with base.npy, idx.npy, upd.npy and expected_y.npy. numpy's
# definitions: `add` is np.add.at, `max`/`min` np.maximum.at/np.minimum.at, `none` an
# advanced-index assignment (duplicates: the last in C order wins, as numpy assigns in order).
# Updates outnumber the dimension in most cases, so duplicates occur; indices are negative as
# often as not. Values are small integers, so every sum is exact in any order.

SCATTER = os.path.join(os.path.dirname(HERE), "scatter")
NP_AT = {"add": np.add.at, "max": np.maximum.at, "min": np.minimum.at}


def scatter(reduce, base_shape, axis, count, dt, base_dtype=np.float32):
    base = rng.integers(-8, 9, size=base_shape).astype(base_dtype)
    shape = list(base_shape)
    shape[axis] = count
    size = base_shape[axis]
    idx = indices(size, tuple(shape), dt)
    upd = rng.integers(-8, 9, size=shape).astype(base_dtype)
    where = list(np.indices(shape))
    where[axis] = idx.astype(np.int64)
    y = base.copy()
    if reduce == "none":
        y[tuple(where)] = upd
    else:
        NP_AT[reduce](y, tuple(where), upd)
    dims = "x".join(str(n) for n in base_shape)
    name = f"{reduce}_{dims}_a{axis}_{np.dtype(dt).name.replace('int', 'i').replace('ui', 'u')}"
    d = os.path.join(SCATTER, name)
    os.makedirs(d, exist_ok=True)
    for k, v in dict(base=base, idx=idx, upd=upd, expected_y=y).items():
        np.save(os.path.join(d, k + ".npy"), v)


scatter("add", (1,), 0, 1, np.int64)
scatter("add", (5,), 0, 13, np.int32)
scatter("add", (11, 5), 0, 17, np.int64)  # the adjoint of an embedding lookup
scatter("add", (3, 7), 1, 4, np.int16)
scatter("add", (2, 3, 5), 2, 7, np.int64)
scatter("add", (4, 3), 0, 2, np.int32, base_dtype=np.int32)
scatter("max", (5, 2), 0, 3, np.int64)
scatter("max", (2, 13), 1, 13, np.uint8)
scatter("min", (3, 1, 4), 2, 5, np.int32)
scatter("min", (7,), 0, 2, np.int64, base_dtype=np.int64)
scatter("none", (1, 1), 1, 1, np.int64)
scatter("none", (4, 5), 1, 5, np.int64)
scatter("none", (3, 2), 0, 11, np.int32)
scatter("none", (5, 3, 2), 1, 4, np.int16)
