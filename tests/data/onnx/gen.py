"""Generates the ONNX import test data (tests/import): per-operator cases, a BERT block and a
GPT-2 block (opset 17), and the bad models. Each case is a directory with model.onnx, its inputs
(in_NAME.npy) and onnxruntime's outputs (ref_NAME.npy). Deterministic (seeded); run with the
test environment's python (tests/common/pyenv.rs):

    target/pyenv/bin/python tests/data/onnx/gen.py [GROUP...]

With GROUP names (functions below, e.g. `p7_cases`) only those are regenerated.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

ROOT = os.path.dirname(os.path.abspath(__file__))
RNG = np.random.default_rng(20261127)
F = TP.FLOAT
I64 = TP.INT64


def vi(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return nh.from_array(np.asarray(array), name)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def save_case(dirname, nodes, inputs, outputs, feeds, inits=(), opset=17, shapes=None):
    """Builds, checks and runs one model; writes model.onnx, in_*.npy and ref_*.npy."""
    graph = oh.make_graph(nodes, os.path.basename(dirname), inputs, outputs, list(inits))
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    if os.path.isdir(dirname):
        shutil.rmtree(dirname)
    os.makedirs(dirname)
    path = os.path.join(dirname, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    res = sess.run(None, feeds)
    for k, v in feeds.items():
        np.save(os.path.join(dirname, f"in_{k}.npy"), v)
    for o, r in zip(sess.get_outputs(), res):
        np.save(os.path.join(dirname, f"ref_{o.name}.npy"), r)
    if shapes:
        with open(os.path.join(dirname, "input_shapes.txt"), "w") as f:
            f.write("\n".join(shapes) + "\n")


def op_case(name, op, in_shapes, out_shape, attrs=None, opset=17, inits=(), feeds=None,
            n_out=1, out_elem=F, in_elems=None, extra_inputs=()):
    """A single-node model: data inputs x0, x1, ... (float unless in_elems says), then
    `extra_inputs` (initializer names), outputs y0, y1, ..."""
    in_elems = in_elems or [F] * len(in_shapes)
    names = [f"x{i}" for i in range(len(in_shapes))]
    outs = [f"y{i}" for i in range(n_out)]
    node = oh.make_node(op, names + list(extra_inputs), outs, name=f"{op}_node", **(attrs or {}))
    inputs = [vi(n, e, s) for n, e, s in zip(names, in_elems, in_shapes)]
    elems = out_elem if isinstance(out_elem, list) else [out_elem] * n_out
    outputs = [vi(o, e, None) for o, e in zip(outs, elems)]
    if feeds is None:
        feeds = {n: rand(*s) for n, s in zip(names, in_shapes)}
    save_case(os.path.join(ROOT, "ops", name), [node], inputs, outputs, feeds, inits, opset)


def elementwise_cases():
    for op in ["Add", "Sub", "Mul", "Div"]:
        op_case(op.lower() + "_bcast", op, [[2, 3, 4], [4]], None)
    op_case("pow_const2", "Pow", [[2, 5]], None, inits=[init("e", np.float32(2.0))], extra_inputs=["e"])
    op_case("pow_int_exp", "Pow", [[2, 5]], None, inits=[init("e", np.int64(3))], extra_inputs=["e"])
    pos = {"x0": rand(3, 4, lo=0.1, hi=3.0)}
    for op in ["Sqrt", "Log", "Reciprocal"]:
        op_case(op.lower(), op, [[3, 4]], None, feeds=dict(pos))
    for op in ["Exp", "Tanh", "Erf", "Relu", "Sigmoid", "Neg", "Abs", "Floor", "Ceil", "Softplus", "Sin", "Cos"]:
        op_case(op.lower(), op, [[3, 4]], None)
    op_case("leakyrelu", "LeakyRelu", [[3, 4]], None, {"alpha": 0.2})
    op_case("elu", "Elu", [[3, 4]], None, {"alpha": 0.7})
    op_case("hardsigmoid", "HardSigmoid", [[3, 4]], None, {"alpha": 0.3, "beta": 0.4},
            feeds={"x0": rand(3, 4, lo=-4, hi=4)})
    op_case("hardswish", "HardSwish", [[3, 4]], None, feeds={"x0": rand(3, 4, lo=-5, hi=5)})
    op_case("clip", "Clip", [[3, 4]], None,
            inits=[init("lo", np.float32(-0.5)), init("hi", np.float32(0.25))], extra_inputs=["lo", "hi"])
    op_case("clip_opset6", "Clip", [[3, 4]], None, {"min": -0.3, "max": 0.6}, opset=6)
    op_case("clip_relu6", "Clip", [[3, 4]], None, inits=[init("lo", np.float32(0)), init("hi", np.float32(6))],
            extra_inputs=["lo", "hi"], feeds={"x0": rand(3, 4, lo=-8, hi=8)})
    for op in ["Equal", "Less", "Greater"]:
        a = RNG.integers(0, 3, size=(3, 4)).astype(np.float32)
        b = RNG.integers(0, 3, size=(4,)).astype(np.float32)
        op_case(op.lower(), op, [[3, 4], [4]], None, out_elem=TP.BOOL, feeds={"x0": a, "x1": b})
    op_case("equal_i64", "Equal", [[3, 4], [3, 4]], None, out_elem=TP.BOOL, in_elems=[I64, I64],
            feeds={"x0": RNG.integers(0, 3, (3, 4)), "x1": RNG.integers(0, 3, (3, 4))})
    op_case("cast_f2i", "Cast", [[3, 4]], None, {"to": I64}, out_elem=I64,
            feeds={"x0": rand(3, 4, lo=-20, hi=20)})
    op_case("cast_i2f", "Cast", [[3, 4]], None, {"to": F}, in_elems=[I64],
            feeds={"x0": RNG.integers(-100, 100, (3, 4))})
    op_case("max3", "Max", [[3, 4], [4], [3, 1]], None)
    op_case("sum3", "Sum", [[3, 4], [4], [3, 4]], None)
    # Where with a condition computed in the graph.
    nodes = [oh.make_node("Greater", ["x0", "x1"], ["c"]), oh.make_node("Where", ["c", "x0", "x2"], ["y0"])]
    save_case(os.path.join(ROOT, "ops", "where"), nodes,
              [vi("x0", F, [2, 3]), vi("x1", F, [3]), vi("x2", F, [2, 1])], [vi("y0", F, None)],
              {"x0": rand(2, 3), "x1": rand(3), "x2": rand(2, 1)})


def reduce_cases():
    op_case("softmax_last", "Softmax", [[2, 3, 5]], None, {"axis": -1}, opset=13)
    op_case("softmax_axis1", "Softmax", [[2, 3, 5]], None, {"axis": 1}, opset=13)
    op_case("softmax_opset11", "Softmax", [[2, 3, 5]], None, {"axis": 1}, opset=11)
    op_case("logsoftmax", "LogSoftmax", [[2, 5]], None, {"axis": -1}, opset=13)
    op_case("layernorm", "LayerNormalization", [[2, 3, 8]], None, {"epsilon": 1e-5},
            inits=[init("g", rand(8)), init("b", rand(8))], extra_inputs=["g", "b"])
    op_case("layernorm_axis1_nobias", "LayerNormalization", [[2, 3, 4]], None, {"axis": 1},
            inits=[init("g", rand(3, 4))], extra_inputs=["g"])
    op_case("reducemean_keep", "ReduceMean", [[2, 3, 4]], None, {"axes": [-1]}, opset=13)
    op_case("reducemean_opset18", "ReduceMean", [[2, 3, 4]], None, {"keepdims": 0}, opset=18,
            inits=[init("axes", np.array([0, 2], np.int64))], extra_inputs=["axes"])
    op_case("reducesum_opset13", "ReduceSum", [[2, 3, 4]], None, {"keepdims": 0}, opset=13,
            inits=[init("axes", np.array([1], np.int64))], extra_inputs=["axes"])
    op_case("reducemax_all", "ReduceMax", [[2, 3, 4]], None, {"keepdims": 0}, opset=13)
    op_case("argmax", "ArgMax", [[3, 5]], None, {"axis": 1, "keepdims": 0}, out_elem=I64)
    op_case("matmul_2d", "MatMul", [[3, 4]], None, inits=[init("w", rand(4, 5))], extra_inputs=["w"])
    op_case("matmul_3d_2d", "MatMul", [[2, 3, 4], [4, 5]], None)
    op_case("matmul_batched", "MatMul", [[2, 2, 3, 4], [2, 1, 4, 5]], None)
    op_case("matmul_vec", "MatMul", [[4], [4, 5]], None)
    op_case("gemm", "Gemm", [[3, 4], [5, 4]], None, {"transB": 1, "alpha": 0.5, "beta": 2.0},
            inits=[init("c", rand(5))], extra_inputs=["c"])
    op_case("gemm_plain", "Gemm", [[3, 4], [4, 5]], None)


def view_cases():
    op_case("reshape", "Reshape", [[2, 3, 4]], None, inits=[init("s", np.array([0, -1], np.int64))],
            extra_inputs=["s"])
    op_case("transpose", "Transpose", [[2, 3, 4]], None, {"perm": [2, 0, 1]})
    op_case("flatten", "Flatten", [[2, 3, 4]], None, {"axis": 2})
    op_case("squeeze", "Squeeze", [[2, 1, 4]], None, inits=[init("a", np.array([1], np.int64))],
            extra_inputs=["a"], opset=13)
    op_case("unsqueeze", "Unsqueeze", [[2, 4]], None, inits=[init("a", np.array([0, -1], np.int64))],
            extra_inputs=["a"], opset=13)
    op_case("unsqueeze_opset11", "Unsqueeze", [[2, 4]], None, {"axes": [1]}, opset=11)
    op_case("concat", "Concat", [[2, 3], [2, 2]], None, {"axis": 1})
    op_case("split_opset13", "Split", [[2, 6]], None, {"axis": 1}, n_out=2, out_elem=[F, I64],
            inits=[init("s", np.array([2, 4], np.int64))], extra_inputs=["s"], opset=13)
    op_case("split_opset18", "Split", [[6, 2]], None, {"axis": 0, "num_outputs": 3}, n_out=3, opset=18)
    op_case("slice_steps", "Slice", [[6, 8]], None,
            inits=[init("st", np.array([1, -1], np.int64)), init("en", np.array([100, -9], np.int64)),
                   init("ax", np.array([0, 1], np.int64)), init("sp", np.array([2, -3], np.int64))],
            extra_inputs=["st", "en", "ax", "sp"])
    op_case("gather_scalar_axis1", "Gather", [[3, 5]], None, {"axis": 1},
            inits=[init("i", np.int64(2))], extra_inputs=["i"])
    op_case("gather_dyn_axis1", "Gather", [[3, 5], [2, 2]], None, {"axis": 1}, in_elems=[F, I64],
            feeds={"x0": rand(3, 5), "x1": RNG.integers(0, 5, (2, 2))})
    op_case("expand", "Expand", [[3, 1]], None, inits=[init("s", np.array([2, 3, 4], np.int64))],
            extra_inputs=["s"])
    op_case("pad_constant", "Pad", [[2, 3]], None, {"mode": "constant"},
            inits=[init("p", np.array([0, 1, 1, 2], np.int64)), init("v", np.float32(0.5))],
            extra_inputs=["p", "v"])
    op_case("pad_reflect", "Pad", [[3, 4]], None, {"mode": "reflect"},
            inits=[init("p", np.array([1, 2, 1, 1], np.int64))], extra_inputs=["p"])


def gather_embedding_fix():
    # Gather(table, ids): the table is an initializer, the ids the input.
    node = oh.make_node("Gather", ["table", "ids"], ["y0"], name="embed")
    save_case(os.path.join(ROOT, "ops", "gather_embedding"), [node], [vi("ids", I64, [2, 3])],
              [vi("y0", F, None)], {"ids": RNG.integers(-10, 10, (2, 3))}, [init("table", rand(10, 4))])


def shape_glue_case():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape, Range, Cast, as exporters write.
    n = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        oh.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        oh.make_node("Concat", ["b1", "minus1"], ["target"], axis=0),
        oh.make_node("Reshape", ["x", "target"], ["flat"]),
        oh.make_node("Gather", ["s", "two"], ["w"], axis=0),
        oh.make_node("Range", ["zero", "w", "one"], ["r"]),
        oh.make_node("Cast", ["r"], ["rf"], to=F),
        oh.make_node("ConstantOfShape", ["s"], ["ones"], value=nh.from_array(np.array([1.5], np.float32))),
        oh.make_node("Mul", ["x", "ones"], ["xo"]),
        oh.make_node("Add", ["xo", "rf"], ["y0"]),
    ]
    inits = [init("zero", np.int64(0)), init("one", np.int64(1)), init("two", np.int64(2)),
             init("ax0", np.array([0], np.int64)), init("minus1", np.array([-1], np.int64))]
    save_case(os.path.join(ROOT, "ops", "shape_glue"), n, [vi("x", F, ["batch", 3, 4])],
              [vi("y0", F, None), vi("flat", F, None)], {"x": rand(2, 3, 4)}, inits,
              shapes=["x=2,3,4"])


def nn_cases():
    x = [1, 4, 7, 7]
    op_case("conv3x3_pad1", "Conv", [x], None, {"pads": [1, 1, 1, 1]},
            inits=[init("w", rand(6, 4, 3, 3)), init("b", rand(6))], extra_inputs=["w", "b"])
    op_case("conv_stride2_dil2", "Conv", [x], None, {"strides": [2, 2], "dilations": [2, 2]},
            inits=[init("w", rand(3, 4, 2, 2))], extra_inputs=["w"])
    op_case("conv_group2", "Conv", [x], None, {"group": 2, "pads": [0, 1, 0, 1]},
            inits=[init("w", rand(6, 2, 3, 3)), init("b", rand(6))], extra_inputs=["w", "b"])
    op_case("conv_depthwise", "Conv", [x], None, {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]},
            inits=[init("w", rand(4, 1, 3, 3)), init("b", rand(4))], extra_inputs=["w", "b"])
    op_case("conv_same_upper", "Conv", [[1, 2, 6, 6]], None, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
            inits=[init("w", rand(3, 2, 3, 3))], extra_inputs=["w"])
    op_case("conv1d", "Conv", [[2, 3, 9]], None, {"pads": [2, 0]},
            inits=[init("w", rand(4, 3, 3))], extra_inputs=["w"])
    op_case("maxpool", "MaxPool", [x], None, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    op_case("maxpool_ceil", "MaxPool", [[1, 2, 6, 6]], None, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
    op_case("avgpool_pad_exclude", "AveragePool", [x], None,
            {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    op_case("avgpool_pad_include", "AveragePool", [x], None,
            {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})
    op_case("globalavgpool", "GlobalAveragePool", [x], None)
    op_case("batchnorm", "BatchNormalization", [x], None, {"epsilon": 1e-3},
            inits=[init("g", rand(4)), init("b", rand(4)), init("m", rand(4)), init("v", rand(4, lo=0.5, hi=2))],
            extra_inputs=["g", "b", "m", "v"])
    op_case("lrn", "LRN", [x], None, {"size": 3, "alpha": 1e-3, "beta": 0.75, "bias": 1.0})


def late_cases():
    """Cases added after the first set (generated last, so the earlier data stay the same)."""
    op_case("convtranspose_s2", "ConvTranspose", [[1, 3, 4, 5]], None,
            {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]},
            inits=[init("w", rand(3, 2, 3, 3)), init("b", rand(2))], extra_inputs=["w", "b"])
    op_case("convtranspose_dil", "ConvTranspose", [[1, 2, 5]], None, {"dilations": [2]},
            inits=[init("w", rand(2, 3, 2))], extra_inputs=["w"])
    op_case("resize_nearest_x2", "Resize", [[1, 2, 3, 4]], None, {"mode": "nearest"},
            inits=[init("roi", np.array([], np.float32)), init("sc", np.array([1, 1, 2, 3], np.float32))],
            extra_inputs=["roi", "sc"], opset=13)
    op_case("resize_sizes_asym", "Resize", [[1, 2, 3, 4]], None,
            {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
            inits=[init("sz", np.array([1, 2, 9, 8], np.int64))], extra_inputs=["", "", "sz"], opset=13)


def resize_case(name, x, attrs, scales=None, sizes=None, opset=13):
    inits = [init("roi", np.array([], np.float32))]
    extra = ["roi"]
    if scales is not None:
        inits.append(init("sc", np.array(scales, np.float32)))
        extra.append("sc")
    else:
        inits.append(init("sz", np.array(sizes, np.int64)))
        extra += ["", "sz"]
    op_case(name, "Resize", [x], None, attrs, inits=inits, extra_inputs=extra, opset=opset)


def p9_cases():
    """1×1 convolutions, lowered as a matmul over the flattened positions when stride 1 and
    unpadded (their own seed): with bias at batch 2, 1-D and 3-D, no bias, and the forms that
    keep the generic lowering (stride 2, padding, groups)."""
    global RNG
    RNG = np.random.default_rng(2026112809)
    op_case("conv1x1_bias", "Conv", [[2, 8, 5, 7]], None, {},
            inits=[init("w", rand(6, 8, 1, 1)), init("b", rand(6))], extra_inputs=["w", "b"])
    op_case("conv1x1_nobias_1d", "Conv", [[1, 3, 17]], None, {},
            inits=[init("w", rand(5, 3, 1))], extra_inputs=["w"])
    op_case("conv1x1_3d", "Conv", [[1, 4, 3, 2, 5]], None, {"dilations": [2, 2, 2]},
            inits=[init("w", rand(2, 4, 1, 1, 1)), init("b", rand(2))], extra_inputs=["w", "b"])
    op_case("conv1x1_stride2", "Conv", [[1, 4, 7, 7]], None, {"strides": [2, 2]},
            inits=[init("w", rand(3, 4, 1, 1))], extra_inputs=["w"])
    op_case("conv1x1_pad1", "Conv", [[1, 4, 3, 3]], None, {"pads": [1, 0, 0, 1]},
            inits=[init("w", rand(3, 4, 1, 1)), init("b", rand(3))], extra_inputs=["w", "b"])
    op_case("conv1x1_group2", "Conv", [[1, 4, 5, 5]], None, {"group": 2},
            inits=[init("w", rand(6, 2, 1, 1))], extra_inputs=["w"])


def p7_cases():
    """Resize linear and cubic, grouped ConvTranspose, Tile and CumSum (their own seed, so
    `gen.py p7_cases` alone regenerates exactly these)."""
    global RNG
    RNG = np.random.default_rng(2026112707)
    x = [1, 2, 3, 4]
    resize_case("resize_linear_half_pixel", x, {"mode": "linear"}, scales=[1, 1, 2, 1.5])
    resize_case("resize_linear_align_corners", x,
                {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, sizes=[1, 2, 5, 7])
    resize_case("resize_linear_asymmetric_down", [1, 2, 6, 8],
                {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, scales=[1, 1, 0.5, 0.75])
    resize_case("resize_linear_pytorch", x,
                {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, sizes=[1, 2, 1, 6])
    resize_case("resize_cubic_half_pixel", x, {"mode": "cubic"}, scales=[1, 1, 2, 2])
    resize_case("resize_cubic_exclude", x,
                {"mode": "cubic", "coordinate_transformation_mode": "asymmetric",
                 "cubic_coeff_a": -0.5, "exclude_outside": 1}, sizes=[1, 2, 5, 3])
    resize_case("resize_nearest_down", [1, 2, 5, 6],
                {"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, scales=[1, 1, 0.6, 0.5])
    resize_case("resize_linear_opset18", [2, 3, 4],
                {"mode": "linear", "antialias": 0}, sizes=[2, 5, 9], opset=18)
    op_case("convtranspose_group", "ConvTranspose", [[1, 4, 3, 3]], None,
            {"group": 2, "strides": [2, 2], "pads": [1, 1, 0, 1]},
            inits=[init("w", rand(4, 3, 3, 3)), init("b", rand(6))], extra_inputs=["w", "b"])
    op_case("convtranspose_depthwise", "ConvTranspose", [[1, 3, 4, 4]], None,
            {"group": 3, "strides": [2, 2]}, inits=[init("w", rand(3, 1, 2, 2))], extra_inputs=["w"])
    op_case("convtranspose_output_shape", "ConvTranspose", [[1, 2, 3, 4]], None,
            {"strides": [2, 2], "output_shape": [6, 8]}, inits=[init("w", rand(2, 2, 3, 3))],
            extra_inputs=["w"])
    op_case("convtranspose_same_upper", "ConvTranspose", [[1, 2, 3, 4]], None,
            {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, inits=[init("w", rand(2, 3, 3, 3))],
            extra_inputs=["w"])
    op_case("tile_2d", "Tile", [[2, 3]], None, inits=[init("r", np.array([2, 3], np.int64))],
            extra_inputs=["r"])
    op_case("tile_int_3d", "Tile", [[2, 1, 3]], None, inits=[init("r", np.array([1, 4, 2], np.int64))],
            extra_inputs=["r"], in_elems=[I64], out_elem=I64,
            feeds={"x0": RNG.integers(-9, 9, size=(2, 1, 3)).astype(np.int64)})
    op_case("cumsum", "CumSum", [[3, 5]], None, inits=[init("a", np.array(1, np.int64))],
            extra_inputs=["a"])
    op_case("cumsum_exclusive_reverse", "CumSum", [[4, 3, 2]], None, {"exclusive": 1, "reverse": 1},
            inits=[init("a", np.array(-3, np.int64))], extra_inputs=["a"])
    op_case("cumsum_int", "CumSum", [[6]], None, inits=[init("a", np.array(0, np.int32))],
            extra_inputs=["a"], in_elems=[I64], out_elem=I64,
            feeds={"x0": RNG.integers(-50, 50, size=(6,)).astype(np.int64)})
    op_case("topk", "TopK", [[3, 7]], None, {"axis": 1}, n_out=2, out_elem=[F, I64],
            inits=[init("k", np.array([3], np.int64))], extra_inputs=["k"])
    op_case("topk_smallest_axis0", "TopK", [[6, 2, 3]], None, {"axis": 0, "largest": 0}, n_out=2,
            out_elem=[F, I64],
            inits=[init("k", np.array([2], np.int64))], extra_inputs=["k"])
    op_case("topk_int_ties", "TopK", [[2, 9]], None, n_out=2, in_elems=[I64], out_elem=[I64, I64],
            inits=[init("k", np.array([5], np.int64))], extra_inputs=["k"],
            feeds={"x0": RNG.integers(0, 4, size=(2, 9)).astype(np.int64)})
    op_case("upsample_linear_opset9", "Upsample", [[1, 2, 3, 4]], None, {"mode": "linear"},
            inits=[init("sc", np.array([1, 1, 2, 1.5], np.float32))], extra_inputs=["sc"], opset=9)
    op_case("resize_nearest_opset10_down", "Resize", [[1, 2, 6, 5]], None, {"mode": "nearest"},
            inits=[init("sc", np.array([1, 1, 0.5, 0.6], np.float32))], extra_inputs=["sc"], opset=10)
    # A Resize coordinate transformation the importer does not lower (E0123).
    g = oh.make_graph([oh.make_node("Resize", ["x", "roi", "sc"], ["y"], name="crop_node", mode="linear",
                                    coordinate_transformation_mode="tf_crop_and_resize")],
                      "crop", [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)],
                      [init("roi", np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)),
                       init("sc", np.array([1, 1, 2, 2], np.float32))])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(ROOT, "bad", "resize_crop.onnx"))
    # Import-time tables too large to build (E0123, not an allocation of terabytes).
    g = oh.make_graph([oh.make_node("CumSum", ["x", "a"], ["y"], name="long_cumsum")], "long",
                      [vi("x", F, [1, 100000])], [vi("y", F, None)], [init("a", np.array(1, np.int64))])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(ROOT, "bad", "cumsum_long_axis.onnx"))
    g = oh.make_graph([oh.make_node("Resize", ["x", "", "", "sz"], ["y"], name="huge_resize", mode="linear")],
                      "huge", [vi("x", F, [1, 1, 4, 4])], [vi("y", F, None)],
                      [init("sz", np.array([1, 1, 1 << 40, 3], np.int64))])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(ROOT, "bad", "resize_huge.onnx"))


def linear(prefix, x, w, b, nodes, inits):
    inits += [init(prefix + "_w", w), init(prefix + "_b", b)]
    nodes += [oh.make_node("MatMul", [x, prefix + "_w"], [prefix + "_mm"]),
              oh.make_node("Add", [prefix + "_mm", prefix + "_b"], [prefix])]
    return prefix


def heads(name, x, nh_, dh, nodes, inits, perm):
    """[B, S, H] -> [B, nh, S, dh] (perm [0, 2, 1, 3]) or [B, nh, dh, S] (perm [0, 2, 3, 1]),
    with the reshape target built from Shape like exporters do."""
    nodes += [
        oh.make_node("Shape", [x], [name + "_shape"]),
        oh.make_node("Slice", [name + "_shape", "c_0", "c_2"], [name + "_bs"]),
        oh.make_node("Concat", [name + "_bs", "c_heads"], [name + "_target"], axis=0),
        oh.make_node("Reshape", [x, name + "_target"], [name + "_r"]),
        oh.make_node("Transpose", [name + "_r"], [name], perm=perm),
    ]
    return name


def block_consts(nh_, dh):
    return [init("c_0", np.array([0], np.int64)), init("c_2", np.array([2], np.int64)),
            init("c_heads", np.array([nh_, dh], np.int64)), init("c_merge", np.array([0, 0, -1], np.int64)),
            init("c_sqrt_dh", np.float32(np.sqrt(dh))), init("c_half", np.float32(0.5)),
            init("c_one", np.float32(1.0))]


def attention(x, nh_, dh, nodes, inits, qkv, mask_add=None, causal=None):
    q = heads("q", qkv[0], nh_, dh, nodes, inits, [0, 2, 1, 3])
    k = heads("k", qkv[1], nh_, dh, nodes, inits, [0, 2, 3, 1])
    v = heads("v", qkv[2], nh_, dh, nodes, inits, [0, 2, 1, 3])
    nodes += [oh.make_node("MatMul", [q, k], ["qk"]), oh.make_node("Div", ["qk", "c_sqrt_dh"], ["scores"])]
    s = "scores"
    if mask_add:
        nodes.append(oh.make_node("Add", [s, mask_add], ["scores_m"]))
        s = "scores_m"
    if causal:
        nodes.append(oh.make_node("Where", [causal, s, "c_neg"], ["scores_c"]))
        s = "scores_c"
    nodes += [oh.make_node("Softmax", [s], ["probs"], axis=-1),
              oh.make_node("MatMul", ["probs", v], ["ctx"]),
              oh.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              oh.make_node("Reshape", ["ctx_t", "c_merge"], ["ctx_m"])]
    return "ctx_m"


def bert_block():
    """Embeddings (Gather), one encoder layer (post-LN, Erf GELU, additive mask), opset 17."""
    V, S, H, nh_, F_ = 50, 8, 32, 4, 64
    dh = H // nh_
    nodes, inits = [], block_consts(nh_, dh)
    inits += [init("word_emb", rand(V, H)), init("pos_emb", rand(S, H)), init("ln0_g", rand(H)), init("ln0_b", rand(H))]
    nodes += [oh.make_node("Gather", ["word_emb", "input_ids"], ["we"]),
              oh.make_node("Add", ["we", "pos_emb"], ["emb"]),
              oh.make_node("LayerNormalization", ["emb", "ln0_g", "ln0_b"], ["h0"], axis=-1, epsilon=1e-12)]
    # The additive mask: (1 - mask) * -10000, mask [B, S] -> [B, 1, 1, S].
    nodes += [oh.make_node("Unsqueeze", ["attention_mask", "c_mask_axes"], ["m4"]),
              oh.make_node("Cast", ["m4"], ["m4f"], to=F),
              oh.make_node("Sub", ["c_one", "m4f"], ["m_inv"]),
              oh.make_node("Mul", ["m_inv", "c_neg"], ["mask_add"])]
    inits += [init("c_mask_axes", np.array([1, 2], np.int64)), init("c_neg", np.float32(-10000.0))]
    qkv = [linear(p, "h0", rand(H, H), rand(H), nodes, inits) for p in ["q_lin", "k_lin", "v_lin"]]
    ctx = attention("h0", nh_, dh, nodes, inits, qkv, mask_add="mask_add")
    o = linear("o_lin", ctx, rand(H, H), rand(H), nodes, inits)
    inits += [init("ln1_g", rand(H)), init("ln1_b", rand(H)), init("ln2_g", rand(H)), init("ln2_b", rand(H)),
              init("c_sqrt2", np.float32(np.sqrt(2.0)))]
    nodes += [oh.make_node("Add", [o, "h0"], ["res1"]),
              oh.make_node("LayerNormalization", ["res1", "ln1_g", "ln1_b"], ["h1"], epsilon=1e-12)]
    f = linear("fc1", "h1", rand(H, F_), rand(F_), nodes, inits)
    nodes += [oh.make_node("Div", [f, "c_sqrt2"], ["g_d"]), oh.make_node("Erf", ["g_d"], ["g_e"]),
              oh.make_node("Add", ["g_e", "c_one"], ["g_a"]), oh.make_node("Mul", [f, "g_a"], ["g_m"]),
              oh.make_node("Mul", ["g_m", "c_half"], ["gelu"])]
    f2 = linear("fc2", "gelu", rand(F_, H), rand(H), nodes, inits)
    nodes += [oh.make_node("Add", [f2, "h1"], ["res2"]),
              oh.make_node("LayerNormalization", ["res2", "ln2_g", "ln2_b"], ["hidden"], epsilon=1e-12)]
    ids = RNG.integers(0, V, (1, S)).astype(np.int64)
    mask = np.ones((1, S), np.int64)
    mask[0, -2:] = 0
    save_case(os.path.join(ROOT, "models", "bert_block"), nodes,
              [vi("input_ids", I64, ["batch", "seq"]), vi("attention_mask", I64, ["batch", "seq"])],
              [vi("hidden", F, None)], {"input_ids": ids, "attention_mask": mask}, inits,
              shapes=["input_ids=1,8", "attention_mask=1,8"])


def gpt2_block():
    """One GPT-2 layer: pre-LN, fused QKV + Split, causal Where mask, tanh GELU, opset 17."""
    S, H, nh_ = 8, 32, 4
    dh = H // nh_
    nodes, inits = [], block_consts(nh_, dh)
    causal = np.tril(np.ones((S, S), bool)).reshape(1, 1, S, S)
    inits += [init("ln1_g", rand(H)), init("ln1_b", rand(H)), init("ln2_g", rand(H)), init("ln2_b", rand(H)),
              init("causal", causal), init("c_neg", np.float32(-1e4)), init("c_split", np.array([H, H, H], np.int64)),
              init("c_three", np.float32(3.0)), init("c_k", np.float32(0.044715)),
              init("c_s2p", np.float32(np.sqrt(2 / np.pi)))]
    nodes.append(oh.make_node("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["a_in"], epsilon=1e-5))
    qkv = linear("c_attn", "a_in", rand(H, 3 * H), rand(3 * H), nodes, inits)
    nodes.append(oh.make_node("Split", [qkv, "c_split"], ["q_in", "k_in", "v_in"], axis=2))
    ctx = attention("a_in", nh_, dh, nodes, inits, ["q_in", "k_in", "v_in"], causal="causal")
    o = linear("c_proj", ctx, rand(H, H), rand(H), nodes, inits)
    nodes += [oh.make_node("Add", ["x", o], ["res1"]),
              oh.make_node("LayerNormalization", ["res1", "ln2_g", "ln2_b"], ["m_in"], epsilon=1e-5)]
    f = linear("c_fc", "m_in", rand(H, 4 * H), rand(4 * H), nodes, inits)
    nodes += [oh.make_node("Pow", [f, "c_three"], ["g_p"]), oh.make_node("Mul", ["g_p", "c_k"], ["g_k"]),
              oh.make_node("Add", [f, "g_k"], ["g_s"]), oh.make_node("Mul", ["g_s", "c_s2p"], ["g_t"]),
              oh.make_node("Tanh", ["g_t"], ["g_h"]), oh.make_node("Add", ["g_h", "c_one"], ["g_1"]),
              oh.make_node("Mul", [f, "g_1"], ["g_m"]), oh.make_node("Mul", ["g_m", "c_half"], ["gelu"])]
    f2 = linear("c_proj2", "gelu", rand(4 * H, H), rand(H), nodes, inits)
    nodes.append(oh.make_node("Add", ["res1", f2], ["y"]))
    save_case(os.path.join(ROOT, "models", "gpt2_block"), nodes, [vi("x", F, [1, S, H])],
              [vi("y", F, None)], {"x": rand(1, S, H)}, inits)


def bad_models():
    bad = os.path.join(ROOT, "bad")
    if os.path.isdir(bad):
        shutil.rmtree(bad)
    os.makedirs(bad)
    good = open(os.path.join(ROOT, "ops", "matmul_2d", "model.onnx"), "rb").read()
    open(os.path.join(bad, "truncated.onnx"), "wb").write(good[: len(good) // 2])
    open(os.path.join(bad, "garbage.onnx"), "wb").write(b"\xff\xfe not a protobuf \x00\x01")
    # A weight whose external data file is missing.
    w = nh.from_array(rand(4, 5), "w")
    w.data_location = TP.EXTERNAL
    w.ClearField("raw_data")
    for k, v in [("location", "missing_weights.bin"), ("offset", "0"), ("length", "80")]:
        e = w.external_data.add()
        e.key, e.value = k, v
    g = oh.make_graph([oh.make_node("MatMul", ["x", "w"], ["y"])], "ext", [vi("x", F, [3, 4])],
                      [vi("y", F, None)], [w])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "missing_external.onnx"))
    # The same model with its external data present (read relative to the model file).
    m2 = onnx.load(os.path.join(bad, "missing_external.onnx"), load_external_data=False)
    m2.graph.initializer[0].external_data[0].value = "weights.bin"
    onnx.save(m2, os.path.join(bad, "external_ok.onnx"))
    open(os.path.join(bad, "weights.bin"), "wb").write(rand(4, 5).tobytes())
    # An operator the importer does not lower.
    g = oh.make_graph([oh.make_node("Relu", ["x"], ["r"], name="first"),
                       oh.make_node("NonZero", ["r"], ["y"], name="nz_node")], "unsup",
                      [vi("x", F, [3, 4])], [vi("y", I64, None)])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "unsupported_op.onnx"))
    # A dynamic input dimension (needs --input-shape).
    g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "dyn", [vi("x", F, ["n", 4])], [vi("y", F, None)])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "dynamic.onnx"))
    # A node reading a value nothing defines.
    g = oh.make_graph([oh.make_node("Relu", ["nope"], ["y"], name="dangling")], "inv",
                      [vi("x", F, [2])], [vi("y", F, None)])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "undefined_value.onnx"))
    # A supported operator in a form that is not: a ScatterElements that multiplies.
    g = oh.make_graph([oh.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="smul",
                                    reduction="mul")], "form",
                      [vi("x", F, [3]), vi("i", I64, [2]), vi("u", F, [2])], [vi("y", F, None)])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "unsupported_form.onnx"))
    # An output declared with a shape the node cannot give it.
    g = oh.make_graph([oh.make_node("Relu", ["x"], ["y"], name="relu")], "decl",
                      [vi("x", F, [3, 4])], [vi("y", F, [4, 3])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(bad, "wrong_declared_shape.onnx"))


def fold_cases():
    """The import's simplification (src/import/onnx/simplify.rs): convolutions followed by
    BatchNormalization and constant per-channel Mul/Add/Sub/Div (folded into the weights), and
    elementwise chains (one apply), at edge shapes; and the forms that must not be folded.
    Writes tests/data/onnx/fold/CASE; its own seed, so it does not shift the other groups."""
    rng = np.random.default_rng(20261128)

    def r(*shape, lo=-1.0, hi=1.0):
        return rng.uniform(lo, hi, size=shape).astype(np.float32)

    def const(nodes, name, array):
        nodes.append(oh.make_node("Constant", [], [name], value=nh.from_array(np.asarray(array), name)))
        return name

    def conv(nodes, p, x, c, o, k, stride, pad, group, bias, rank=2):
        w = const(nodes, f"{p}_w", r(o, c // group, *([k] * rank)))
        ins = [x, w] + ([const(nodes, f"{p}_b", r(o))] if bias else [])
        nodes.append(oh.make_node("Conv", ins, [f"{p}_conv"], strides=[stride] * rank,
                                  pads=[pad] * (2 * rank), group=group))
        return f"{p}_conv"

    def bn(nodes, p, y, o):
        ps = [const(nodes, f"{p}_bn{i}", a) for i, a in
              enumerate([r(o), r(o), r(o), r(o, lo=0.3, hi=2.0)])]
        nodes.append(oh.make_node("BatchNormalization", [y] + ps, [f"{p}_bn"], epsilon=1e-3))
        return f"{p}_bn"

    def binop(nodes, p, op, y, array, first=True):
        p = f"{p}_{op}{len(nodes)}"
        c = const(nodes, f"{p}_c", array)
        nodes.append(oh.make_node(op, [y, c] if first else [c, y], [p]))
        return p

    def hardswish(nodes, p, y):
        three, zero, six = (const(nodes, f"{p}_hs{i}", np.array(v, np.float32)) for i, v in
                            enumerate([3.0, 0.0, 6.0]))
        nodes.append(oh.make_node("Add", [y, three], [f"{p}_hs_add"]))
        nodes.append(oh.make_node("Clip", [f"{p}_hs_add", zero, six], [f"{p}_hs_clip"]))
        nodes.append(oh.make_node("Mul", [y, f"{p}_hs_clip"], [f"{p}_hs_mul"]))
        nodes.append(oh.make_node("Div", [f"{p}_hs_mul", six], [f"{p}_hs"]))
        return f"{p}_hs"

    def model(name, branches):
        """branches: (input shape, build(nodes, p, x) -> output names)."""
        nodes, inputs, outputs, feeds = [], [], [], {}
        for i, (shape, build) in enumerate(branches):
            x = f"x{i}"
            inputs.append(vi(x, F, shape))
            feeds[x] = r(*shape, lo=-4.0, hi=4.0)
            for o in build(nodes, f"b{i}", x):
                outputs.append(vi(o, F, None))
        save_case(os.path.join(ROOT, "fold", name), nodes, inputs, outputs, feeds)

    # (N, C, H, W), O, k, stride, pad, group, bias
    model("conv_bn_shapes", [
        ([1, 1, 1, 1], lambda n, p, x: [bn(n, p, conv(n, p, x, 1, 3, 1, 1, 0, 1, False), 3)]),
        ([2, 3, 5, 7], lambda n, p, x: [binop(n, p, "Add", binop(n, p, "Mul",
            bn(n, p, conv(n, p, x, 3, 17, 3, 2, 1, 1, True), 17), np.float32(0.7)),
            r(1, 17, 1, 1))]),
        ([1, 17, 9, 4], lambda n, p, x: [hardswish(n, p, bn(n, p, conv(n, p, x, 17, 17, 3, 1, 1, 17, False), 17))]),
        ([1, 33, 15, 17], lambda n, p, x: [binop(n, p, "Add", binop(n, p, "Mul", hardswish(n, p,
            binop(n, p, "Add", binop(n, p, "Mul", conv(n, p, x, 33, 33, 5, 2, 2, 33, True),
                                      np.float32(0.94), first=False), np.float32(0.5))),
            np.float32(0.48), first=False), np.float32(-0.01))]),
        ([1, 4, 3, 2], lambda n, p, x: [binop(n, p, "Div", binop(n, p, "Sub",
            conv(n, p, x, 4, 6, 3, 1, 1, 2, False), r(6, 1, 1)), np.float32(1.5))]),
        ([2, 3, 17], lambda n, p, x: [binop(n, p, "Sub", binop(n, p, "Mul",
            conv(n, p, x, 3, 5, 3, 2, 1, 1, True, rank=1), r(5, 1)), r(5, 1), first=False)]),
        ([1, 3, 17, 17], lambda n, p, x: [bn(n, p, conv(n, p, x, 3, 8, 2, 2, 0, 1, True), 8)]),
        ([1, 2, 2, 3], lambda n, p, x: [binop(n, p, "Add", bn(n, p, conv(n, p, x, 2, 33, 1, 1, 0, 1, True), 33),
                                              r(1, 33, 1, 1))]),
    ])

    def shared_conv(n, p, x):  # the conv's output is also a graph output: nothing folds
        y = conv(n, p, x, 3, 4, 3, 1, 1, 1, True)
        return [y, bn(n, p, y, 4)]

    def rowwise(n, p, x):  # [O, 1] against [N, O, H, W] scales rows (H == O), not channels
        return [binop(n, p, "Mul", conv(n, p, x, 2, 4, 1, 1, 0, 1, False), r(4, 1))]

    def runtime_add(n, p, x):  # an Add of a run-time value
        y = conv(n, p, x, 2, 2, 1, 1, 0, 1, False)
        n.append(oh.make_node("Add", [y, x], [f"{p}_radd"]))
        return [f"{p}_radd"]

    def leaky_chain(n, p, x):  # an intermediate of the chain is also an output
        h = hardswish(n, p, x)
        return [h, f"{p}_hs_clip"]

    def scalar_root(n, p, x):  # a rank-0 root and a [1] constant: the chain result is [1]
        y = binop(n, p, "Add", x, np.array([2.0], np.float32))
        n.append(oh.make_node("Relu", [y], [f"{p}_relu"]))
        n.append(oh.make_node("Neg", [f"{p}_relu"], [f"{p}_neg"]))
        return [f"{p}_neg"]

    model("no_fold", [
        ([1, 3, 5, 5], shared_conv),
        ([1, 2, 4, 3], rowwise),
        ([1, 2, 3, 3], runtime_add),
        ([2, 3, 4], leaky_chain),
        ([], scalar_root),
    ])
    # A chain over an integer root is lowered node by node.
    nodes = [oh.make_node("Relu", ["x0"], ["r"]), oh.make_node("Neg", ["r"], ["n"]),
             oh.make_node("Abs", ["n"], ["y0"])]
    save_case(os.path.join(ROOT, "fold", "int_chain"), nodes, [vi("x0", TP.INT32, [3, 5])],
              [vi("y0", TP.INT32, None)], {"x0": rng.integers(-9, 9, size=(3, 5)).astype(np.int32)})

    def pw(c, o, bias, stride=1, pad=0):
        return lambda n, p, x: [conv(n, p, x, c, o, 1, stride, pad, 1, bias)]

    # 1x1 convolutions: unit stride and no padding become one contraction over H·W positions
    # (ConvPointwise); strided or padded ones stay windowed convolutions.
    model("pointwise_shapes", [
        ([2, 1, 1, 1], pw(1, 3, True)),
        ([1, 3, 2, 5], pw(3, 17, False)),
        ([2, 17, 7, 3], pw(17, 33, True)),
        ([1, 33, 9, 4], pw(33, 1, True)),
        ([1, 8, 15, 17], pw(8, 16, False)),
        ([2, 16, 4, 2], pw(16, 3, True)),
        ([1, 5, 17, 9], pw(5, 7, True, stride=2)),
        ([1, 3, 3, 4], pw(3, 4, False, pad=1)),
    ])

    def ct(c, o, k, s, bias, pads=(0, 0, 0, 0)):
        def build(n, p, x):
            w = const(n, f"{p}_w", r(c, o, *k))
            ins = [x, w] + ([const(n, f"{p}_b", r(o))] if bias else [])
            n.append(oh.make_node("ConvTranspose", ins, [f"{p}_ct"], kernel_shape=list(k),
                                  strides=list(s), pads=list(pads)))
            return [f"{p}_ct"]
        return build

    # ConvTranspose with kernel = strides (no padding) is one contraction per output pixel
    # (ConvTransposeTiles); the others stay a convolution over the zero-upsampled input.
    model("convtranspose_tiles", [
        ([1, 24, 4, 8], ct(24, 24, (2, 2), (2, 2), False)),
        ([2, 1, 1, 1], ct(1, 3, (2, 2), (2, 2), True)),
        ([1, 3, 5, 7], ct(3, 17, (3, 3), (3, 3), True)),
        ([2, 17, 2, 3], ct(17, 1, (2, 3), (2, 3), False)),
        ([1, 4, 3, 3], ct(4, 5, (3, 3), (2, 2), True)),
        ([1, 4, 3, 3], ct(4, 5, (2, 2), (2, 2), True, pads=(1, 0, 0, 1))),
    ])

    def fill(n, name, shape, value):
        s = const(n, f"{name}_shape", np.array(shape, np.int64))
        n.append(oh.make_node("ConstantOfShape", [s], [name],
                              value=nh.from_array(np.array([value], np.float32))))
        return name

    def filled(c, o, k, group, params):
        """A conv whose weights, bias and BatchNormalization parameters are ConstantOfShape
        fills, as in the `onnx` wheel's ImageNet nets (light_resnet50.onnx ...)."""
        def build(n, p, x):
            w = fill(n, f"{p}_w", [o, c // group, k, k], params[0])
            b = fill(n, f"{p}_b", [o], params[1])
            n.append(oh.make_node("Conv", [x, w, b], [f"{p}_conv"], pads=[k // 2] * 4, group=group))
            ps = [fill(n, f"{p}_bn{i}", [o], v) for i, v in enumerate(params[2:])]
            n.append(oh.make_node("BatchNormalization", [f"{p}_conv"] + ps, [f"{p}_bn"],
                                  epsilon=1e-5))
            return [f"{p}_bn"]
        return build

    # Both BatchNormalizations fold into their convs (a dense 3x3 and a grouped 1x1).
    model("filled_weights", [
        ([1, 3, 6, 5], filled(3, 4, 3, 1, [0.05, 0.1, 1.5, 0.2, 0.3, 2.0])),
        ([2, 6, 3, 4], filled(6, 9, 1, 3, [-0.2, 0.4, 0.7, -0.1, 0.05, 0.5])),
    ])


if __name__ == "__main__" and len(sys.argv) > 1:
    for group in sys.argv[1:]:
        globals()[group]()
elif __name__ == "__main__":
    elementwise_cases()
    reduce_cases()
    view_cases()
    gather_embedding_fix()
    shape_glue_case()
    nn_cases()
    bert_block()
    gpt2_block()
    bad_models()
    late_cases()
    p7_cases()
    p9_cases()
    fold_cases()
    print("generated", len(os.listdir(os.path.join(ROOT, "ops"))), "op cases, 2 models, bad models")
