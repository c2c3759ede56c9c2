#!/usr/bin/env python3
"""The numpy side of `cargo bench --bench native`: times numpy on the bench's own inputs.

Usage:
  python3 benches/numpy_ref.py --data DIR [--lib numpy|jax] [--runs N] [--only NAME[,NAME...]]
      times every workload whose inputs are in DIR/NAME/*.npy (written by the bench) with
      numpy or with JAX (jit, CPU) and prints one JSON object {NAME: median seconds} as its
      last line. The bench runs this with OMP/OPENBLAS/MKL/BLIS_NUM_THREADS set to 1 and to 2,
      under `taskset` pinning it to that many cores (JAX sizes its pool to the machine).
  python3 benches/numpy_ref.py [BENCH ARGS...]
      convenience: runs `cargo bench --bench native -- BENCH ARGS...`, which prints tapc and
      numpy side by side.

numpy (and JAX) are needed only here, never by the tests, and are not installed
automatically: without them this script exits with status 3 and a message (the bench then
reports tapc alone). The numpy conv reference is the usual im2col + matmul formulation; JAX
uses XLA's convolution. Workload names encode shapes (`mm_M_K_N`, `conv_K_S_H_C_O`, ...).
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


def conv(np, x, f, stride, pad):
    """NCHW conv as im2col + matmul (numpy has no conv); works for jax.numpy too."""
    o, c, kh, kw = f.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    hp, wp = xp.shape[2], xp.shape[3]
    ho, wo = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    cols = [xp[0, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            for i in range(kh) for j in range(kw)]  # each C, Ho, Wo
    cols = np.stack(cols, axis=1).reshape(c * kh * kw, ho * wo)
    return (f.reshape(o, c * kh * kw) @ cols).reshape(1, o, ho, wo)


def layernorm(np, x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    c = x - mu
    var = (c * c).mean(axis=-1, keepdims=True)
    return c / np.sqrt(var + np.float32(1e-5)) * g + b


def gelu(np, x):
    f32 = np.float32
    return f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608) * (x + f32(0.044715) * x * x * x)))


def block(np, x, w):
    """examples/transformer.teg's block (width 768, heads of 64) with the weights `w` (named as
    tests/common/train_block.rs names them)."""
    f32 = np.float32
    T, D = x.shape
    H, E = D // 64, 64
    qkv = layernorm(np, x, w["g1"], w["b1"]) @ w["w_qkv"] + w["b_qkv"]
    q, k, v = (qkv[:, i * D:(i + 1) * D].reshape(T, H, E).transpose(1, 0, 2) for i in range(3))
    s = np.where(np.tri(T, dtype=bool), q @ k.transpose(0, 2, 1) / f32(np.sqrt(E)), f32(-1e30))
    p = softmax(np, s)
    x1 = x + (p @ v).transpose(1, 0, 2).reshape(T, D) @ w["w_o"] + w["b_o"]
    f = gelu(np, layernorm(np, x1, w["g2"], w["b2"]) @ w["w_fc"] + w["b_fc"])
    return x1 + f @ w["w_proj"] + w["b_proj"]


def transformer(np, x, w={}):
    """examples/transformer.teg's block; weights are made on the first (warm-up) call."""
    f32 = np.float32
    D, F = 768, 3072
    if not w:
        import numpy  # the weights come from numpy's generator also when `np` is jax.numpy
        rng = numpy.random.default_rng(0)

        def u(*shape, m=0.05, one=0.0):
            return (rng.random(shape, dtype=f32) * f32(2) - f32(1)) * f32(m) + f32(one)

        w.update(w_qkv=u(D, 3 * D), b_qkv=u(3 * D, m=0.02), w_o=u(D, D), b_o=u(D, m=0.02),
                 w_fc=u(D, F), b_fc=u(F, m=0.02), w_proj=u(F, D, m=0.025), b_proj=u(D, m=0.02),
                 g1=u(D, m=0.1, one=1.0), b1=u(D, m=0.1), g2=u(D, m=0.1, one=1.0), b2=u(D, m=0.1))
    return block(np, x, w)


ADAMW = dict(lr=0.005, b1=0.9, b2=0.999, eps=1e-8, wd=1e-4)  # examples/train_mlp.teg's


def adamw(np, w, m, v, g, t):
    """One AdamW step, as examples/train_mlp.teg's @adamw writes it."""
    f32, h = np.float32, ADAMW
    mt = f32(h["b1"]) * m + (f32(1) - f32(h["b1"])) * g
    vt = f32(h["b2"]) * v + (f32(1) - f32(h["b2"])) * g * g
    step = mt / (f32(1) - f32(h["b1"]) ** t) / (np.sqrt(vt / (f32(1) - f32(h["b2"]) ** t)) + f32(h["eps"]))
    return w - f32(h["lr"]) * (step + f32(h["wd"]) * w), mt, vt


def mlp_loss(np, p, x, y):
    d = np.maximum(x @ p[0] + p[1], 0) @ p[2] + p[3] - y
    return np.sum(d * d) / np.float32(d.size)


def mlp_grads(np, p, x, y):
    """The loss and gradients of `mlp_loss`, derived by hand (numpy has no autodiff)."""
    w1, b1, w2, b2 = p
    z = x @ w1 + b1
    h = np.maximum(z, 0)
    d = h @ w2 + b2 - y
    dp = d * np.float32(2 / d.size)
    dz = (dp @ w2.T) * (z > 0)
    return np.sum(d * d) / np.float32(d.size), (x.T @ dz, dz.sum(0), h.T @ dp, dp.sum(0))


def train_step(np, d):
    """One step of examples/train_mlp.teg: the loss, its gradients (jax.value_and_grad under
    JAX, `mlp_grads` under numpy) and AdamW on each parameter; returns the loss and new state."""
    names = ["w1", "b1", "w2", "b2"]
    p = tuple(d[k] for k in names)
    if np.__name__ == "jax.numpy":
        import jax
        loss, g = jax.value_and_grad(lambda q: mlp_loss(np, q, d["x"], d["y"]))(p)
    else:
        loss, g = mlp_grads(np, p, d["x"], d["y"])
    t = d["t"] + np.float32(1)
    out = [loss, t]
    for k, gk in zip(names, g):
        out.extend(adamw(np, d[k], d["m" + k], d["v" + k], gk, t))
    return out


def block_loss(np, w, x):
    """The loss of the `train_block` workload: mean(y²) of the block with weights `w`."""
    y = block(np, x, w)
    return np.sum(y * y) / np.float32(y.size)


BLOCK_PARAMS = ["g1", "b1", "w_qkv", "b_qkv", "w_o", "b_o", "g2", "b2", "w_fc", "b_fc", "w_proj", "b_proj"]
BLOCK_ADAMW = dict(lr=0.0001, b1=0.9, b2=0.999, eps=1e-8, wd=0.01)  # tests/common/train_block.rs's


def jax_train_block(jax):
    """One training step of the GPT-2-small block: `jax.value_and_grad` of `block_loss` and
    optax's AdamW, under one `jit`, the parameters and optimizer state donated (updated in
    place, as a training loop runs it). Each call is one step from the previous call's state;
    the first starts from the inputs (the moments and step count zero, as optax's `init`)."""
    import jax.numpy as jnp
    import optax
    h = BLOCK_ADAMW
    opt = optax.adamw(h["lr"], b1=h["b1"], b2=h["b2"], eps=h["eps"], weight_decay=h["wd"])

    def step(params, state, x):
        loss, g = jax.value_and_grad(lambda p: block_loss(jnp, p, x))(params)
        updates, state = opt.update(g, state, params)
        return optax.apply_updates(params, updates), state, loss

    jstep = jax.jit(step, donate_argnums=(0, 1))
    carry = {}

    def run(d):
        if not carry:
            params = {k: jnp.array(d[k]) for k in BLOCK_PARAMS}
            carry.update(params=params, state=opt.init(params))
        carry["params"], carry["state"], loss = jstep(carry["params"], carry["state"], d["x"])
        return loss

    def live(d):
        params = {k: jnp.array(d[k]) for k in BLOCK_PARAMS}
        m = jstep.lower(params, opt.init(params), d["x"]).compile().memory_analysis()
        return (m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
                - m.alias_size_in_bytes)

    run.live = live
    return run


def workload(np, name):
    """The reference computation of workload `name` (the bench's names encode the shapes)."""
    f32 = np.float32
    fixed = {
        "matmul": lambda d: d["a"] @ d["b"],
        "mlp": lambda d: np.maximum(d["x"] @ d["w1"] + d["b1"], 0) @ d["w2"] + d["b2"],
        "elementwise": lambda d: np.maximum(d["x"] * f32(1.5) + f32(0.25), 0) * f32(2),
        "softmax": lambda d: softmax(np, d["x"]),
        "softmax_768": lambda d: softmax(np, d["x"]),
        "softmax_long": lambda d: softmax(np, d["x"]),
        "conv2d": lambda d: conv(np, d["x"], d["f"], 1, 1),
        "gelu": lambda d: gelu(np, d["x"]),
        "layernorm": lambda d: layernorm(np, d["x"], d["g"], d["b"]),
        "transformer": lambda d: transformer(np, d["x"]),
        "train_step": lambda d: train_step(np, d),
        # numpy's `E[ids]`, JAX's `jnp.take` (the same row gather).
        "embedding": (lambda d: np.take(d["E"], d["ids"], axis=0)) if np.__name__ == "jax.numpy"
        else (lambda d: d["E"][d["ids"]]),
    }
    if name in fixed:
        return fixed[name]
    base = name.split("+")[0]
    kind = base.split("_")[0]
    if kind in ("mm", "bmm", "odd"):
        return lambda d: d["a"] @ d["b"]
    if kind == "bf16mm":
        # numpy has no bf16 matmul: widen to f32 and use its f32 matmul; JAX multiplies bf16
        # with f32 accumulation (inputs arrive as ml_dtypes.bfloat16, see `load_inputs`).
        if np.__name__ == "jax.numpy":
            return lambda d: np.matmul(d["a"], d["b"], preferred_element_type=np.float32)
        return lambda d: d["a"].astype(f32) @ d["b"].astype(f32)
    if kind == "u8mm":
        if np.__name__ == "jax.numpy":
            return lambda d: np.matmul(d["a"], d["b"], preferred_element_type=np.int32)
        # numpy's integer matmul has no BLAS (83 s a call at 2048³): timed up to 512³ only.
        m, k, n = (int(v) for v in base.split("_")[1:4])
        if m * k * n > 512 ** 3:
            return None
        return lambda d: d["a"].astype(np.int32) @ d["b"].astype(np.int32)
    if kind == "argmax":
        return lambda d: np.argmax(d["x"], axis=1)
    if kind == "abt":
        return lambda d: d["a"] @ d["w"].T
    if kind == "linres":
        return lambda d: d["x"] @ d["w"] + d["b"] + d["r"]
    if kind == "mlplayer":
        return lambda d: np.maximum(d["x"] @ d["w"] + d["b"], 0)
    if kind == "conv":
        k, s = (int(v) for v in base.split("_")[1:3])
        return lambda d: conv(np, d["x"], d["f"], s, (k - 1) // 2)
    return None


def jax_conv(jax, x, f, stride, pad):
    return jax.lax.conv_general_dilated(x, f, (stride, stride), [(pad, pad), (pad, pad)],
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def jax_workload(jax, name):
    """The JAX version of `name`: jitted, with convs as XLA convolutions."""
    import jax.numpy as jnp
    base = name.split("+")[0]
    if base == "train_block":
        return jax_train_block(jax)
    if base.startswith("conv"):
        if base == "conv2d":
            k, s = 3, 1
        else:
            k, s = (int(v) for v in base.split("_")[1:3])
        f = jax.jit(lambda x, w: jax_conv(jax, x, w, s, (k - 1) // 2))
        return lambda d: f(d["x"], d["f"])
    fn = workload(jnp, name)
    if fn is None:
        return None
    jf = jax.jit(fn)
    run = lambda d: jf(d)  # noqa: E731
    run.jitted = jf
    return run


def live_bytes(jitted, inputs, name):
    """XLA's buffer assignment for one call: arguments + temporaries + outputs (aliased
    bytes once), plus the weights the transformer closes over (embedded constants)."""
    m = jitted.lower(inputs).compile().memory_analysis()
    total = (m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes
             - m.alias_size_in_bytes)
    if name == "transformer":
        total += sum(v.nbytes for v in transformer.__defaults__[0].values())
    return total


def load_inputs(np, d, name):
    """The workload's `.npy` inputs; a bf16 workload's (written as `<u2` bits) viewed as
    `ml_dtypes.bfloat16`, the type JAX uses."""
    inputs = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}
    if name.startswith("bf16"):
        import ml_dtypes
        inputs = {k: v.view(ml_dtypes.bfloat16) for k, v in inputs.items()}
    return inputs


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
    ap.add_argument("--lib", default="numpy", choices=["numpy", "jax"])
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        print(f"numpy is not installed for {sys.executable} ({e}); `pip install numpy` to compare", file=sys.stderr)
        sys.exit(3)
    if args.lib == "jax":
        try:
            import jax
        except ImportError as e:
            print(f"jax is not importable ({e}); `pip install jax[cpu]` to compare", file=sys.stderr)
            sys.exit(3)
    names = args.only.split(",") if args.only else sorted(os.listdir(args.data))
    out = {}
    for name in names:
        d = os.path.join(args.data, name)
        fn = jax_workload(jax, name) if args.lib == "jax" else workload(np, name)
        if fn is None and name.split("+")[0] == "train_block":
            print("no numpy reference for train_block (numpy has no autodiff)", file=sys.stderr)
            continue
        if fn is None and name.startswith("u8mm_") and args.lib == "numpy":
            print(f"{name}: not timed with numpy (its integer matmul has no BLAS)", file=sys.stderr)
            continue
        if fn is None or not os.path.isdir(d):
            print(f"no {args.lib} reference or no inputs for workload {name!r} in {args.data}", file=sys.stderr)
            sys.exit(1)
        inputs = load_inputs(np, d, name)
        if args.lib == "jax":
            inputs = {k: jax.device_put(v) for k, v in inputs.items()}
            run = lambda: jax.block_until_ready(fn(inputs))  # noqa: E731
        else:
            np.seterr(invalid="ignore")  # the random second moments are negative in places
            run = lambda: fn(inputs)  # noqa: E731
        run()  # warm-up (and jit compile)
        times, cpu = [], []
        for _ in range(max(args.runs, 1)):
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out[name] = median(times)
        out[name + "@cpu"] = median(cpu)  # the process's CPU time (all its threads)
        if args.lib == "jax" and name == "transformer":
            out[name + "@live_bytes"] = live_bytes(fn.jitted, inputs, name)
        if args.lib == "jax" and name.split("+")[0] == "train_block":
            out[name + "@live_bytes"] = fn.live(inputs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
