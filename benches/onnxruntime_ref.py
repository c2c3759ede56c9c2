"""The onnxruntime side of `cargo bench --bench import`: times a model on the bench's inputs.

    python onnxruntime_ref.py MODEL.onnx INPUT_DIR THREADS RUNS

Reads INPUT_DIR/input{k}.npy for the model's k-th input (ONNX names need not be file names), runs the CPU execution provider with
`intra_op_num_threads = THREADS` (one inter-op thread, sequential execution) once to warm up
and RUNS times timed, and prints the median seconds of `session.run` as its last line.
"""
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

model, data, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
feeds = {i.name: np.load(os.path.join(data, f"input{k}.npy")) for k, i in enumerate(sess.get_inputs())}
sess.run(None, feeds)
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    sess.run(None, feeds)
    times.append(time.perf_counter() - t0)
print(statistics.median(times))
