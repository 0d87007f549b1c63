"""pytest plugin (-p gpu_filter): keep only the value checks (test_ops.py, test_onnx_nodes.py)
of the ops in GPU_OPS (comma-separated env var), exact op names; deselect everything else.

For a conformance run that must fit a short lease of a GPU machine (bench/results/
2026-11-26-h200b/gpu.txt): with this folder on PYTHONPATH,

    GPU_OPS=Conv,MatMul refmnn conformance --backend opencl --option tune=off -n 15 \
        --report DIR -- -p gpu_filter
"""
import os

DEFAULT = ("Conv,FusedConv,MatMul,FusedMatMul,Gemm,FusedGemm,Softmax,LayerNormalization,Add,Mul,"
           "Relu,MaxPool,GlobalAveragePool,Erf,FusedAttention")
OPS = {o.strip() for o in os.environ.get("GPU_OPS", DEFAULT).split(",") if o.strip()}
MODULES = ("test_ops.py", "test_onnx_nodes.py")


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        describe = getattr(item, "_describe", None)
        ok = (item.nodeid.split("::", 1)[0].endswith(MODULES) and describe is not None
              and describe()["op"] in OPS)
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
