"""tapc.import_onnx and tapc.compile_onnx on models built with the onnx helper, against
onnxruntime on the same inputs."""

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import tapc


def mlp_model(path, batch="N"):
    """y = relu(x @ w1 + b1) @ w2, with the weights as initializers and a dynamic batch."""
    rng = np.random.default_rng(7)
    w1 = rng.standard_normal((5, 7)).astype(np.float32)
    b1 = rng.standard_normal(7).astype(np.float32)
    w2 = rng.standard_normal((7, 3)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def onnxruntime_outputs(path, **inputs):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


def test_import_onnx_returns_teg_and_the_weights(tmp_path):
    path = mlp_model(tmp_path / "mlp.onnx")
    teg, weights = tapc.import_onnx(path, input_shapes={"x": [4, 5]})
    assert "graph" in teg and "@x" in teg
    shapes = sorted(a.shape for a in weights.values())
    assert shapes == [(5, 7), (7,), (7, 3)]
    # The text compiles on its own once the weights are passed as sources.
    f = tapc.compile(teg, threads=1)
    x = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    got = f(x=x, **weights)
    want = onnxruntime_outputs(path, x=x)["y"]
    np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
def test_compile_onnx_binds_the_weights_and_matches_onnxruntime(tmp_path, threads):
    path = mlp_model(tmp_path / "mlp.onnx")
    model = tapc.compile_onnx(path, input_shapes={"x": [6, 5]}, threads=threads)
    assert [p.name for p in model.inputs] == ["x"] and [p.name for p in model.outputs] == ["y"]
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    want = onnxruntime_outputs(path, x=x)["y"]
    for got in (model(x)["y"], model(x=x)["y"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="weight"):
        model(x=x, **{next(iter(model.weights)): np.zeros(1, np.float32)})
    with pytest.raises(ValueError, match="x"):
        model(x=np.zeros((7, 5), np.float32))


def test_an_unsupported_operator_is_a_compile_error_naming_it(tmp_path):
    node = helper.make_node("NonMaxSuppression", ["b", "s"], ["i"], name="nms")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4, 4]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 4]),
        ],
        [helper.make_tensor_value_info("i", TensorProto.INT64, [None, 3])],
    )
    path = tmp_path / "nms.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(tapc.CompileError) as e:
        tapc.compile_onnx(path)
    codes = [d["code"] for d in e.value.diagnostics]
    assert codes == ["E0122"], codes
    assert "NonMaxSuppression" in str(e.value) and "nms.onnx" in str(e.value)


def test_a_corrupt_file_and_bad_shapes_are_clean_errors(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f not a model")
    with pytest.raises(tapc.CompileError) as e:
        tapc.import_onnx(path)
    assert [d["code"] for d in e.value.diagnostics] == ["E0120"]
    with pytest.raises(TypeError, match="input_shapes"):
        tapc.import_onnx(path, input_shapes=[("x", [1])])


def test_compile_onnx_runs_a_real_model_with_trained_weights(tmp_path):
    """The PP-OCR text direction classifier that the rapidocr-onnxruntime wheel ships (pinned;
    fetched with pip, no dependencies), on a synthetic text line, against onnxruntime."""
    import subprocess
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
         "rapidocr-onnxruntime==1.4.4", "-d", str(tmp_path)],
        check=True,
    )
    (wheel,) = tmp_path.glob("*.whl")
    name = "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
    path = tmp_path / "cls.onnx"
    path.write_bytes(zipfile.ZipFile(wheel).read(name))
    line = np.ones((48, 192), np.float32)
    rng = np.random.default_rng(11)
    x0 = 6
    while x0 < 180:
        w = int(rng.integers(3, 8))
        line[12:36, x0:x0 + w] = 0.1
        x0 += w + int(rng.integers(2, 5))
    x = np.broadcast_to((line - 0.5) / 0.5, (1, 3, 48, 192)).astype(np.float32)
    model = tapc.compile_onnx(path, input_shapes={"x": [1, 3, 48, 192]}, threads=2)
    got = model(x=x)
    want = onnxruntime_outputs(path, x=x)
    # The sinks are the outputs' names made into identifiers (`save_infer_model/scale_0.tmp_1`).
    assert len(got) == len(want) == 1
    for (k, g), w in zip(got.items(), want.values()):
        assert g.shape == w.shape == (1, 2), k
        err = np.abs(g - w).max() / np.abs(w).max()
        assert err <= 1e-4, (k, err)
