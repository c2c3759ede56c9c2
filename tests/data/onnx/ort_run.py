"""Runs an ONNX model in onnxruntime (CPU) for the import tests: feeds random inputs (seeded;
static dims, dynamic ones as 1 unless NAME=d0,d1,... gives an input's shape, or NAME=FILE.npy
its values), writes them as in_NAME.npy and the outputs as ref_NAME.npy.

    python ort_run.py MODEL.onnx OUT_DIR [NAME=d0,d1,... | NAME=FILE.npy]...
"""
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort



def ident(name):
    """The TEG name `tapc import` gives an ONNX value (src/import/onnx/lower/emit.rs)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    s = s.strip("_") or s
    return "v" + s if not s or s[0].isdigit() else s


model, out = sys.argv[1], sys.argv[2]
given = dict(a.split("=", 1) for a in sys.argv[3:])
inits = {i.name for i in onnx.load(model, load_external_data=False).graph.initializer}
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(7)
feeds = {}
for i in sess.get_inputs():
    if i.name in inits:
        continue
    if given.get(i.name, "").endswith(".npy"):
        feeds[i.name] = np.load(given[i.name])
        continue
    shape = [int(d) for d in given[i.name].split(",")] if i.name in given else None
    shape = shape or [d if isinstance(d, int) else 1 for d in i.shape]
    if "int" in i.type:
        feeds[i.name] = rng.integers(0, 10, size=shape).astype(np.int64)
    else:
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
os.makedirs(out, exist_ok=True)
for k, v in feeds.items():
    np.save(os.path.join(out, f"in_{ident(k)}.npy"), v)
for o, r in zip(sess.get_outputs(), sess.run(None, feeds)):
    np.save(os.path.join(out, f"ref_{ident(o.name)}.npy"), r)
