"""Fixtures for examples/transformer.teg (deterministic; run from the repository root).

`x.npy` (the 8 x 768 f32 tokens) is written without numpy, from a fixed xorshift stream.
`expected_y.npy` is the block computed by numpy in float64 from the same f32 inputs and the
same weights: TEG's `rand` (splitmix64 of the seed folded over the coordinates, top 24 bits
as a float in [0, 1)) is reproduced here exactly, then mapped like `@uniform` (in f32, as the
graph does). numpy is needed only for `expected_y.npy`: `pip install numpy`.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
T, D, H, E, F = 8, 768, 12, 64, 3072
MASK = (1 << 64) - 1


def write_npy_f32(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join(f"{s}, " for s in shape) if len(shape) != 1 else f"{shape[0]},"
    )
    header = header.replace(", )", ")")
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))


def tokens():
    """T x D floats in [-2, 2) (xorshift64, seed 0x2545f4914f6cdd1d)."""
    s, out = 0x2545F4914F6CDD1D, []
    for _ in range(T * D):
        s ^= (s << 13) & MASK
        s ^= s >> 7
        s ^= (s << 17) & MASK
        out.append((s >> 40) / float(1 << 24) * 4.0 - 2.0)
    return out


def main():
    x = tokens()
    write_npy_f32(os.path.join(HERE, "x.npy"), (T, D), x)
    try:
        import numpy as np
    except ImportError:
        sys.exit("x.npy written; expected_y.npy needs numpy (pip install numpy)")

    def splitmix(z):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))

    def rand(seed, shape):
        with np.errstate(over="ignore"):
            h = splitmix(np.array(seed, dtype=np.uint64))
            for axis, n in enumerate(shape):
                c = np.arange(n, dtype=np.uint64).reshape(
                    [n if a == axis else 1 for a in range(len(shape))]
                )
                h = splitmix(h ^ c)
        return (h >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)

    def uniform(seed, shape, m, one):
        r = rand(seed, shape)
        # @uniform in f32, rounded after every operation as TEG does.
        w = (r * np.float32(2.0) - np.float32(1.0)) * (np.float32(m) / np.float32(1000.0))
        return (w + np.float32(one)).astype(np.float64)

    w_qkv = uniform(1, (D, 3 * D), 50, 0)
    b_qkv = uniform(2, (3 * D,), 20, 0)
    w_o = uniform(3, (D, D), 50, 0)
    b_o = uniform(4, (D,), 20, 0)
    w_fc = uniform(5, (D, F), 50, 0)
    b_fc = uniform(6, (F,), 20, 0)
    w_proj = uniform(7, (F, D), 25, 0)
    b_proj = uniform(8, (D,), 20, 0)
    g1, b1 = uniform(9, (D,), 100, 1), uniform(10, (D,), 100, 0)
    g2, b2 = uniform(11, (D,), 100, 1), uniform(12, (D,), 100, 0)

    def layernorm(v, g, b):
        mu = v.mean(axis=-1, keepdims=True)
        var = ((v - mu) ** 2).mean(axis=-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * g + b

    xs = np.array(x, dtype=np.float32).astype(np.float64).reshape(T, D)
    h = layernorm(xs, g1, b1)
    qkv = h @ w_qkv + b_qkv
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, E).transpose(1, 0, 2) for i in range(3))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(E)
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -1e30)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    o = (p @ v).transpose(1, 0, 2).reshape(T, D)
    x1 = xs + o @ w_o + b_o
    f = layernorm(x1, g2, b2) @ w_fc + b_fc
    gelu = 0.5 * f * (1.0 + np.tanh(0.7978845608 * (f + 0.044715 * f**3)))
    y = x1 + gelu @ w_proj + b_proj
    np.save(os.path.join(HERE, "expected_y.npy"), y)


if __name__ == "__main__":
    main()
