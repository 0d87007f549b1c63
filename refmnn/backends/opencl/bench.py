"""Latency of the OpenCL backend on the zoo models next to onnxruntime (2 threads).

    python -m refmnn.backends.opencl.bench [model ...] [--runs 10] [--tune off]

Per model: first-run time (Session creation + resize/prepare: program builds, tuning, + the first
run) reported separately, then the median of ``--runs`` runs after one warm-up; onnxruntime with
intra_op_num_threads=2 on the same feeds, and the relative L2 error of opencl vs onnxruntime.
Prints the load average (``os.getloadavg``) before and after, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

MODELS = ("resnet18", "mobilenet_v2", "squeezenet1_1", "vit_tiny", "bert6")


def feeds_for(path: str) -> dict[str, np.ndarray]:
    import onnx

    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[value.name] = rng.integers(0, 1000, size=shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def median_ms(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tune", default="on")
    args = parser.parse_args()
    import onnxruntime as ort

    import refmnn
    from refmnn import zoo
    from refmnn.backends.base import BackendConfig

    print(f"load average before: {os.getloadavg()}")
    configs = {"opencl": BackendConfig(options={"tune": args.tune})}
    print(f"{'model':14} {'first run s':>11} {'builds':>6} {'opencl ms':>10} {'ort(2t) ms':>10} {'ratio':>6} {'rel L2':>9}")
    for name in args.models:
        path = zoo.export_onnx(name)
        feeds = feeds_for(path)
        start = time.perf_counter()
        session = refmnn.Session(path, backends=("opencl",), configs=configs)
        out = session.run(feeds)
        first = time.perf_counter() - start
        builds = session._last.backends["opencl"].context.builds
        cl_ms = median_ms(lambda: session.run(feeds), args.runs)  # noqa: B023
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.inter_op_num_threads = 1
        ort_session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        ort_out = ort_session.run(None, feeds)
        ort_ms = median_ms(lambda: ort_session.run(None, feeds), args.runs)  # noqa: B023
        a = np.asarray(next(iter(out.values())), np.float64)
        b = np.asarray(ort_out[0], np.float64)
        err = np.linalg.norm(a - b) / np.linalg.norm(b)
        print(f"{name:14} {first:11.2f} {builds:6d} {cl_ms:10.1f} {ort_ms:10.1f} {cl_ms / ort_ms:6.1f} {err:9.2e}",
              flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
