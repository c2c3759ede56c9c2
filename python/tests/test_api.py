"""The tapc Python API: results against numpy, binding, errors, dtypes, caching, options."""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tapc

MLP = """
op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}
graph @mlp {
  %x = source @x : f32[8, 16]
  %w = source @w : f32[16, 4]
  %b = source @b : f32[4]
  %h = apply @linear(%x, %w, %b)
  %y = apply @relu(%h)
  %t = transpose %y [1, 0]
  sink @y %y
  sink @t %t
}
"""

TWO_GRAPHS = """
op @scale(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] * 2.0
}
op @shift(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] + 1.0
}
graph @double {
  %x = source @x : f32[3]
  %y = apply @scale(%x)
  sink @y %y
}
graph @inc {
  %x = source @x : f32[3]
  %y = apply @shift(%x)
  sink @y %y
}
"""

SUM = """
op @total(x: f32[N]) -> (y: f32[]) {
  y[] = sum[i](x[i])
}
graph @g {
  %x = source @x : f32[5]
  %y = apply @total(%x)
  sink @s %y
}
"""

ALL_DTYPES = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"]
NUMPY_OF = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
}


def rng_inputs(seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal((8, 16), dtype=np.float32),
            r.standard_normal((16, 4), dtype=np.float32),
            r.standard_normal(4, dtype=np.float32))


def mlp_numpy(x, w, b):
    return np.maximum(x.astype(np.float64) @ w + b, 0)


@pytest.fixture(scope="module")
def mlp():
    return tapc.compile(MLP, threads=2)


def test_named_call_matches_numpy(mlp):
    x, w, b = rng_inputs()
    out = mlp(x=x, w=w, b=b)
    assert set(out) == {"y", "t"}
    assert out["y"].dtype == np.float32 and out["y"].shape == (8, 4)
    np.testing.assert_allclose(out["y"], mlp_numpy(x, w, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out["t"], out["y"].T)


def test_positional_and_mixed_calls_agree(mlp):
    x, w, b = rng_inputs(1)
    named = mlp(x=x, w=w, b=b)["y"]
    np.testing.assert_array_equal(mlp(x, w, b)["y"], named)
    np.testing.assert_array_equal(mlp(x, b=b, w=w)["y"], named)
    np.testing.assert_array_equal(mlp(b=b, x=x, w=w)["y"], named)


def test_ports_describe_sources_and_sinks(mlp):
    assert [(p.name, p.dtype, p.shape, p.teg_dtype) for p in mlp.inputs] == [
        ("x", np.dtype(np.float32), (8, 16), "f32"),
        ("w", np.dtype(np.float32), (16, 4), "f32"),
        ("b", np.dtype(np.float32), (4,), "f32"),
    ]
    assert [(p.name, p.shape) for p in mlp.outputs] == [("y", (8, 4)), ("t", (4, 8))]
    name, dtype, shape = mlp.inputs[0]  # a port is the tuple (name, dtype, shape)
    assert (name, dtype, shape) == ("x", np.dtype(np.float32), (8, 16))
    assert mlp.graph == "mlp" and mlp.threads == 2


def test_teg_is_the_text_after_passes_and_recompiles_to_the_same_results(mlp):
    assert "graph @mlp" in mlp.teg and "apply @linear" in mlp.teg
    again = tapc.compile(mlp.teg)
    x, w, b = rng_inputs(2)
    np.testing.assert_array_equal(again(x, w, b)["y"], mlp(x, w, b)["y"])


def test_signature_and_cost_name_the_applies(mlp):
    sig = mlp.signature()
    assert "apply @linear" in sig and "index [" in sig
    cost = mlp.cost()
    assert "apply @linear" in cost and "totals:" in cost


def test_passes_option_runs_that_pipeline():
    f = tapc.compile(MLP, passes="canonicalize,fuse")
    x, w, b = rng_inputs(3)
    np.testing.assert_allclose(f(x, w, b)["y"], mlp_numpy(x, w, b), rtol=1e-5, atol=1e-5)


def test_graph_option_picks_the_graph():
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(tapc.compile(TWO_GRAPHS, graph="double")(x)["y"], 2 * x)
    np.testing.assert_array_equal(tapc.compile(TWO_GRAPHS, graph="@inc")(x)["y"], x + 1)


def test_several_graphs_without_a_choice_is_a_compile_error():
    with pytest.raises(tapc.CompileError) as e:
        tapc.compile(TWO_GRAPHS)
    assert [d["code"] for d in e.value.diagnostics] == ["E0104"]


def test_a_zero_dimensional_sink():
    x = np.arange(5, dtype=np.float32)
    s = tapc.compile(SUM)(x)["s"]
    assert s.shape == () and s.dtype == np.float32 and float(s) == 10.0


def test_compile_from_a_path_and_a_pathlike(tmp_path):
    p = tmp_path / "mlp.teg"
    p.write_text(MLP)
    x, w, b = rng_inputs(4)
    want = mlp_numpy(x, w, b)
    for arg in (str(p), p):
        np.testing.assert_allclose(tapc.compile(arg)(x, w, b)["y"], want, rtol=1e-5, atol=1e-5)


def test_compile_errors_name_the_file_of_a_path(tmp_path):
    p = tmp_path / "bad.teg"
    p.write_text("graph @g {\n  %x = source @x : f32[2]\n  sink @y %nope\n}\n")
    with pytest.raises(tapc.CompileError) as e:
        tapc.compile(p)
    (d,) = e.value.diagnostics
    assert d["file"] == str(p)
    assert str(p) in str(e.value)


def test_programs_are_cached_by_text_and_options():
    a = tapc.compile(TWO_GRAPHS, graph="double")
    assert tapc.compile(TWO_GRAPHS, graph="double") is a
    assert tapc.compile(TWO_GRAPHS, graph="double", threads=1) is not a
    assert tapc.compile(TWO_GRAPHS, graph="inc") is not a


def identity(dtype):
    return f"""
op @id(x: {dtype}[2, 3]) -> (y: {dtype}[2, 3]) {{
  y[i, j] = x[i, j]
}}
graph @g {{
  %x = source @x : {dtype}[2, 3]
  %y = apply @id(%x)
  %z = apply @id(%y)
  %t = transpose %y [1, 0]
  sink @y %t
  sink @z %z
}}
"""


def bf16_numpy_dtype():
    try:
        import ml_dtypes
    except ImportError:
        return np.dtype(np.uint16)
    return np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_round_trips(dtype):
    f = tapc.compile(identity(dtype))
    np_dtype = bf16_numpy_dtype() if dtype == "bf16" else np.dtype(NUMPY_OF[dtype])
    if dtype == "bool":
        x = np.array([[True, False, True], [False, False, True]])
    elif dtype == "bf16":
        x = BF16_BITS.view(np_dtype)
    else:
        x = np.arange(6).reshape(2, 3).astype(np_dtype)
    assert f.inputs[0].dtype == np_dtype
    assert f.inputs[0].teg_dtype == dtype
    out = f(x)
    y, z = out["y"], out["z"]
    assert y.dtype == np_dtype and z.dtype == np_dtype
    # @y (a transposed view) is copied; @z comes back in the program's own buffer.
    np.testing.assert_array_equal(y.view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))
    np.testing.assert_array_equal(z.view(np.uint8), x.view(np.uint8))
    assert type(z.base).__name__ == "SinkBuffer"


# bf16 bit patterns of 1.0, -2.0, 0.5, 3.0, 0.0, -0.25
BF16_BITS = np.array([[0x3F80, 0xC000, 0x3F00], [0x4040, 0x0000, 0xBE80]], np.uint16)

BF16_WITHOUT_ML_DTYPES = """
import sys
sys.modules["ml_dtypes"] = None  # as if it were not installed
import numpy as np, tapc
f = tapc.compile(sys.argv[1])
assert f.inputs[0].dtype == np.uint16, f.inputs[0]
bits = np.array([[0x3F80, 0xC000, 0x3F00], [0x4040, 0x0000, 0xBE80]], np.uint16)
out = f(bits)
y, z = out["y"], out["z"]
assert y.dtype == np.uint16 and (y == bits.T).all(), y
assert z.dtype == np.uint16 and (z == bits).all(), z
print("ok")
"""


def test_bf16_is_uint16_bits_without_ml_dtypes():
    run = subprocess.run(
        [sys.executable, "-c", BF16_WITHOUT_ML_DTYPES, identity("bf16")], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout == "ok\n", run.stderr


def test_threads_must_be_positive():
    with pytest.raises(ValueError, match="threads"):
        tapc.compile(SUM, threads=0)


def test_compile_takes_text_or_paths_only():
    with pytest.raises(TypeError, match="TEG text or a path"):
        tapc.compile(42)


def test_out_arrays_receive_the_sinks(mlp):
    x, w, b = rng_inputs(5)
    y = np.empty((8, 4), np.float32)
    out = mlp(x, w, b, out={"y": y})
    assert out["y"] is y
    np.testing.assert_allclose(y, mlp_numpy(x, w, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out["t"], y.T)


def test_out_arrays_are_checked(mlp):
    x, w, b = rng_inputs(6)
    with pytest.raises(TypeError, match=r"output `y`: expected f32\[8, 4\].*found float64 \(8, 4\)"):
        mlp(x, w, b, out={"y": np.empty((8, 4), np.float64)})
    with pytest.raises(ValueError, match="output `t`: the array must be C-contiguous"):
        mlp(x, w, b, out={"t": np.empty((8, 4), np.float32).T})
    with pytest.raises(TypeError, match="no output `z`"):
        mlp(x, w, b, out={"z": np.empty(3)})



def test_the_readme_example_matches_the_committed_mlp_fixtures():
    root = pathlib.Path(__file__).resolve().parents[2]
    data = root / "tests" / "data" / "mlp"
    f = tapc.compile(root / "examples" / "mlp.teg")
    ins = {p.name: np.load(data / f"{p.name}.npy") for p in f.inputs}
    out = f(**ins)
    for sink in ("logits", "sampled"):
        want = np.load(data / f"expected_{sink}.npy")
        assert out[sink].shape == want.shape
        np.testing.assert_allclose(out[sink], want, rtol=1e-4, atol=1e-4)
