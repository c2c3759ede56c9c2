#!/usr/bin/env python3
"""Generates small numpy-written .npy files that the tapc-runtime reader tests
(runtime/tests/npy.rs) check against: supported layouts and unsupported dtypes.

Supported (read must succeed; every value is its C-order index, bool = index % 3 == 0):
    c_f32_2x3.npy        f32[2, 3]     C order
    fortran_f64_2x3x4.npy f64[2, 3, 4] Fortran order (np.asfortranarray)
    fortran_i32_3x2.npy  i32[3, 2]     Fortran order
    c_i64_5.npy          i64[5]
    c_bool_2x2.npy       bool[2, 2]
    scalar_f64.npy       f64[]         0-d, value 2.5
    empty_i32_0x3.npy    i32[0, 3]
    v2_f32_4.npy         f32[4]        format version 2.0 header
    f16.npy              f16[3]        <f2
    u8.npy               u8[3]         |u1
Unsupported (read must fail naming the dtype):
    be_f32.npy (>f4), c64.npy (<c8),
    object.npy (|O, pickled), structured.npy ([('a','<f4'),('b','<i4')])

Regenerate: pip install numpy && python3 tests/data/npy/gen.py
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name + ".npy")


def iota(shape, dtype):
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).astype(dtype)


def main():
    np.save(path("c_f32_2x3"), iota((2, 3), np.float32))
    np.save(path("fortran_f64_2x3x4"), np.asfortranarray(iota((2, 3, 4), np.float64)))
    np.save(path("fortran_i32_3x2"), np.asfortranarray(iota((3, 2), np.int32)))
    np.save(path("c_i64_5"), iota((5,), np.int64))
    np.save(path("c_bool_2x2"), iota((2, 2), np.int64) % 3 == 0)
    np.save(path("scalar_f64"), np.float64(2.5))
    np.save(path("empty_i32_0x3"), np.zeros((0, 3), np.int32))
    with open(path("v2_f32_4"), "wb") as f:
        np.lib.format.write_array(f, iota((4,), np.float32), version=(2, 0))

    np.save(path("be_f32"), iota((3,), np.dtype(">f4")))
    np.save(path("f16"), iota((3,), np.float16))
    np.save(path("u8"), iota((3,), np.uint8))
    np.save(path("c64"), iota((3,), np.complex64))
    np.save(path("object"), np.array([1, "a", None], dtype=object), allow_pickle=True)
    np.save(path("structured"), np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))

    for name in sorted(os.listdir(HERE)):
        if name.endswith(".npy"):
            with open(os.path.join(HERE, name), "rb") as f:
                magic = f.read(10)
            print(name, magic[6:8], os.path.getsize(os.path.join(HERE, name)))


if __name__ == "__main__":
    main()
