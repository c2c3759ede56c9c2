"""Writes the ONNX backend node tests (the `onnx` wheel's own generator,
`onnx.backend.test.case.node.collect_testcases`) as case directories for tests/import/node.rs:
model.onnx, in_NAME.npy, ref_NAME.npy (the first data set) and tol.txt ("rtol atol").

A case whose inputs or outputs are not plain tensors (sequences, maps, optionals, strings) gets
a file `not_tensor` naming why instead of the .npy files, so the harness counts it.

    python node_cases.py OUT_DIR
"""
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.backend.test.case.node as node
from onnx import numpy_helper


def as_array(a):
    """A numpy array for a data-set value: scalars as 0-d arrays, TensorProtos converted, bf16
    as the 2-byte void form tapc reads (`ml_dtypes.bfloat16` arrays save as that too)."""
    if isinstance(a, onnx.TensorProto):
        a = numpy_helper.to_array(a)
    if isinstance(a, np.generic):
        a = np.asarray(a)
    if isinstance(a, np.ndarray) and a.dtype.name == "bfloat16":
        a = a.view("V2")
    return a


# numpy's names of the dtypes TEG has (bf16 as its 2-byte void form, see `as_array`).
TEG_DTYPES = {
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "void16",
}


def not_tensor(model, inputs, outputs):
    """Why a case cannot be written as .npy files, or None."""
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            return f"{vi.name} is a {vi.type.WhichOneof('value')}"
    for a in list(inputs) + list(outputs):
        if not isinstance(a, np.ndarray):
            return f"a value of type {type(a).__name__}"
        if a.dtype.name not in TEG_DTYPES:
            return f"a value of dtype {a.dtype}"
    return None


def write(case, out):
    d = os.path.join(out, case.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    with open(os.path.join(d, "tol.txt"), "w") as f:
        f.write(f"{case.rtol} {case.atol}\n")
    inputs, outputs = case.data_sets[0]
    inputs = [as_array(a) for a in inputs]
    outputs = [as_array(a) for a in outputs]
    why = not_tensor(case.model, inputs, outputs)
    if why:
        with open(os.path.join(d, "not_tensor"), "w") as f:
            f.write(why + "\n")
        return
    for vi, a in zip(case.model.graph.input, inputs):
        np.save(os.path.join(d, f"in_{vi.name}.npy"), a)
    for vi, a in zip(case.model.graph.output, outputs):
        np.save(os.path.join(d, f"ref_{vi.name}.npy"), a)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    for c in cases:
        write(c, out)
    print(len(cases))


if __name__ == "__main__":
    main()
