"""How calls take their inputs: errors, copies and zero-copy reads, the GIL, memory, spans."""

import threading
import time

import numpy as np
import pytest

import tapc

ADD = """
op @add(a: f32[R, C], b: f32[R, C]) -> (c: f32[R, C]) {
  c[i, j] = a[i, j] + b[i, j]
}
graph @g {
  %x = source @x : f32[4, 6]
  %y = source @y : f32[4, 6]
  %z = apply @add(%x, %y)
  sink @z %z
}
"""


@pytest.fixture(scope="module")
def add():
    return tapc.compile(ADD, threads=1)


def inputs(seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((4, 6), dtype=np.float32), r.standard_normal((4, 6), dtype=np.float32)


def test_a_wrong_dtype_is_a_type_error_naming_input_expected_and_found(add):
    x, y = inputs()
    with pytest.raises(TypeError) as e:
        add(x=x.astype(np.float64), y=y)
    msg = str(e.value)
    assert "input `x`" in msg and "f32[4, 6]" in msg and "float32" in msg and "found float64 (4, 6)" in msg


def test_a_wrong_shape_is_a_value_error_naming_input_expected_and_found(add):
    x, y = inputs()
    with pytest.raises(ValueError) as e:
        add(x, y[:, :5].copy())
    msg = str(e.value)
    assert "input `y`" in msg and "f32[4, 6]" in msg and "(4, 5)" in msg


def test_a_non_array_is_a_type_error(add):
    x, _ = inputs()
    with pytest.raises(TypeError, match=r"input `y`: expected a numpy array of f32\[4, 6\].*found list"):
        add(x, [[0.0] * 6] * 4)


def test_binding_errors_name_the_input(add):
    x, y = inputs()
    with pytest.raises(TypeError, match="no input `q`"):
        add(x=x, q=y)
    with pytest.raises(TypeError, match="missing input"):
        add(x=x)
    with pytest.raises(TypeError, match="input `x` is given twice"):
        add(x, x=x)
    with pytest.raises(TypeError, match="takes 2 input"):
        add(x, y, y)


def test_a_non_native_byte_order_is_a_type_error(add):
    x, y = inputs()
    with pytest.raises(TypeError, match="input `x`"):
        add(x.astype(">f4"), y)


@pytest.mark.parametrize("layout", ["transposed", "strided", "fortran", "negative"])
def test_non_contiguous_inputs_are_copied_and_give_the_same_results(add, layout):
    x, y = inputs(1)
    if layout == "transposed":
        xv = np.ascontiguousarray(x.T).T
    elif layout == "strided":
        big = np.zeros((8, 12), np.float32)
        big[::2, ::2] = x
        xv = big[::2, ::2]
    elif layout == "fortran":
        xv = np.asfortranarray(x)
    else:
        xv = np.ascontiguousarray(x[::-1])[::-1]
    assert not xv.flags.c_contiguous
    np.testing.assert_array_equal(xv, x)
    np.testing.assert_array_equal(add(xv, y)["z"], x + y)
    # The copy, not the view, was read: the view's memory is not where the source was.
    assert add._program._last_source_addresses()[0] != xv.ctypes.data


def test_an_unaligned_input_is_copied(add):
    x, y = inputs(2)
    raw = np.zeros(x.nbytes + 1, np.uint8)
    xu = raw[1:].view(np.float32).reshape(4, 6)
    xu[...] = x
    assert not xu.flags.aligned
    np.testing.assert_array_equal(add(xu, y)["z"], x + y)


def test_contiguous_inputs_are_read_in_place(add):
    x, y = inputs(3)
    z = add(x, y)["z"]
    np.testing.assert_array_equal(z, x + y)
    assert add._program._last_source_addresses() == [x.ctypes.data, y.ctypes.data]
    # A C-contiguous slice of a bigger array is read in place too.
    big = np.concatenate([x, y])
    add(big[:4], big[4:])
    assert add._program._last_source_addresses() == [big[:4].ctypes.data, big[4:].ctypes.data]


def test_inputs_are_not_written(add):
    x, y = inputs(4)
    x0, y0 = x.copy(), y.copy()
    add(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def test_outputs_are_fresh_arrays_each_call(add):
    x, y = inputs(5)
    a = add(x, y)["z"]
    b = add(x, y)["z"]
    assert a.ctypes.data != b.ctypes.data
    a[...] = 0
    np.testing.assert_array_equal(b, x + y)


def test_a_compile_error_carries_code_message_and_span():
    text = "graph @g {\n  %x = source @x : f32[2]\n  sink @y %nope\n}\n"
    with pytest.raises(tapc.CompileError) as e:
        tapc.compile(text)
    (d,) = e.value.diagnostics
    assert d["code"] == "E0011" and d["severity"] == "error"
    assert "%nope" in d["message"]
    (label,) = d["labels"]
    assert (label["line_start"], label["col_start"], label["line_end"], label["col_end"]) == (3, 11, 3, 16)
    assert text[label["byte_start"]:label["byte_end"]] == "%nope"
    assert "E0011" in str(e.value) and "3:11" in str(e.value)


def test_a_bad_pipeline_is_a_compile_error():
    with pytest.raises(tapc.CompileError) as e:
        tapc.compile(ADD, passes="no_such_pass")
    (d,) = e.value.diagnostics
    assert d["code"] == "E0103" and "no_such_pass" in d["message"]


LONG = """
op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
graph @g {
  %a = source @a : f32[1024, 1024]
  %b = source @b : f32[1024, 1024]
  %c = apply @mm(%a, %b)
  %d = apply @mm(%c, %b)
  sink @d %d
}
"""


def test_the_gil_is_released_while_a_program_runs():
    f = tapc.compile(LONG, threads=1)
    a = np.full((1024, 1024), 1.0 / 1024, np.float32)
    f(a, a)  # warm: page in the code and buffers
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    t = threading.Thread(target=tick)
    t.start()
    calls = []
    try:
        # Calls until 0.3 s were spent inside them, however fast this machine is.
        while sum(end - start for start, end in calls) < 0.3:
            time.sleep(0.005)
            start = time.perf_counter()
            out = f(a, a)["d"]
            calls.append((start, time.perf_counter()))
    finally:
        stop.set()
        t.join()
    np.testing.assert_allclose(out, a, rtol=1e-4)
    # While the caller holds the GIL the ticker cannot run a line, so a tick stamped strictly
    # inside a call (clear of its first and last millisecond) proves the GIL was released.
    inside = [s for s in ticks if any(b + 0.001 < s < e - 0.001 for b, e in calls)]
    assert len(inside) >= 5, f"{len(inside)} ticks inside {len(calls)} calls"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


BIG = """
op @scale(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] * 3.0
}
graph @g {
  %x = source @x : f32[1048576]
  %y = apply @scale(%x)
  sink @y %y
}
"""


def test_a_hundred_calls_do_not_grow_memory():
    f = tapc.compile(BIG, threads=1)
    x = np.ones(1 << 20, np.float32)
    for _ in range(10):
        f(x)
    before = rss_bytes()
    for _ in range(100):
        y = f(x)["y"]
    grown = rss_bytes() - before
    assert float(y[0]) == 3.0
    # Keeping each call's 4 MiB result (or its input copy) would grow 400 MiB; allow a tenth.
    leaked_if_kept = 100 * x.nbytes
    assert grown < leaked_if_kept / 10, f"resident set grew {grown} bytes over 100 calls"


def test_an_output_is_the_buffer_the_program_wrote(add):
    x, y = inputs(6)
    z = add(x, y)["z"]
    # The array's memory is the runtime's buffer, owned through its base object: no copy.
    assert type(z.base).__name__ == "SinkBuffer"
    assert z.flags.c_contiguous and z.flags.writeable and z.flags.aligned
    assert z.ctypes.data % 64 == 0, "the executor's buffers are 64-byte aligned"
    z += 1  # the caller's to change
    np.testing.assert_array_equal(z, x + y + 1)


def test_a_strided_or_shared_sink_is_copied_once(add):
    f = tapc.compile(ADD.replace("sink @z %z", "%t = transpose %z [1, 0]\n  sink @z %z\n  sink @t %t"))
    x, y = inputs(7)
    out = f(x, y)
    np.testing.assert_array_equal(out["t"], (x + y).T)
    np.testing.assert_array_equal(out["z"], x + y)
    # Two sinks in one buffer: neither takes it; each is a C-order copy of its own.
    for a in out.values():
        assert type(a.base).__name__ != "SinkBuffer" and a.flags.c_contiguous


def test_one_function_called_from_several_threads_at_once():
    f = tapc.compile(ADD, threads=2)
    results = {}

    def call(k):
        x, y = inputs(100 + k)
        for _ in range(50):
            z = f(x, y)["z"]
        results[k] = (z, x + y)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1, 2, 3]
    for got, want in results.values():
        np.testing.assert_array_equal(got, want)
