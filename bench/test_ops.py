"""Op microbenchmarks: refmnn's reference ops next to onnxruntime, at zoo shapes.

Run (single-threaded, the default)::

    .venv/bin/python -m pytest bench/test_ops.py --benchmark-columns=min,median,max,rounds

Two threads: ``REFMNN_BENCH_THREADS=2 .venv/bin/python -m pytest bench/test_ops.py``.
Save for comparison: add ``--benchmark-save=<name>`` (stored under ``.benchmarks/``) or
``--benchmark-json=bench/results/<date>/ops.json``.

Each case runs the refmnn reference op directly (an ``OpDef`` is callable: defaults applied,
``registry.resolve("", "Conv", 17)(X, W, B, pads=...)``) and onnxruntime on a one-node model
whose weights are initializers (so onnxruntime may pre-pack them, as it does in real models).
Before anything is timed, the result is checked against the reference op's (relative L2
<= 1e-5, the llm.c rule: a fast wrong kernel is not a result). A case whose op refmnn does
not define yet is skipped, saying so: without the reference there is nothing to check against.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

THREADS = int(os.environ.get("REFMNN_BENCH_THREADS", "1"))  # bench/conftest.py applies it

pytest.importorskip("pytest_benchmark")

REL_L2_TOLERANCE = 1e-5


@dataclass(frozen=True)
class Case:
    """One op at one shape.

    Attributes:
        id: test id and benchmark group.
        op: ONNX op type; opset: the version used for both engines.
        inputs: ``(name, shape, is_weight)``; weights become initializers for onnxruntime.
        attrs: node attributes (also the reference op's keyword arguments).
        macs: multiply-accumulates, for GFLOP/s in ``extra_info`` (0 when not meaningful).
        where: the zoo layer this shape comes from.
    """

    id: str
    op: str
    opset: int
    inputs: tuple[tuple[str, tuple[int, ...], bool], ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    macs: int = 0
    where: str = ""


CASES = (
    Case("conv3x3_64c_56", "Conv", 17,
         (("X", (1, 64, 56, 56), False), ("W", (64, 64, 3, 3), True), ("B", (64,), True)),
         {"pads": (1, 1, 1, 1), "kernel_shape": (3, 3)}, 64 * 56 * 56 * 64 * 9,
         "resnet18 layer1 conv"),
    Case("conv_depthwise3x3_144c_56", "Conv", 17,
         (("X", (1, 144, 56, 56), False), ("W", (144, 1, 3, 3), True), ("B", (144,), True)),
         {"pads": (1, 1, 1, 1), "kernel_shape": (3, 3), "group": 144}, 144 * 56 * 56 * 9,
         "mobilenet_v2 block 3 depthwise conv"),
    Case("matmul_197x192_192x768", "MatMul", 13,
         (("A", (1, 197, 192), False), ("B", (192, 768), True)), {}, 197 * 192 * 768,
         "vit_tiny MLP fc1"),
    Case("maxpool3x3s2_64c_112", "MaxPool", 12, (("X", (1, 64, 112, 112), False),),
         {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, 0,
         "resnet18 stem pool"),
    Case("softmax_1x3x197x197", "Softmax", 13, (("X", (1, 3, 197, 197), False),),
         {"axis": -1}, 0, "vit_tiny attention probabilities"),
    Case("erf_12x197x768", "Erf", 13, (("X", (12, 197, 768), False),), {}, 0,
         "vit_tiny exact GELU, all 12 layers (1.8M floats)"),
    Case("layernorm_1x197x192", "LayerNormalization", 17,
         (("X", (1, 197, 192), False), ("Scale", (192,), True), ("B", (192,), True)),
         {"axis": -1, "epsilon": 1e-6}, 0, "vit_tiny pre-norm"),
    Case("add_1x64x56x56", "Add", 14,
         (("A", (1, 64, 56, 56), False), ("B", (1, 64, 56, 56), False)), {}, 0,
         "resnet18 residual add"),
)


def _inputs(case: Case) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(np.float32) for _, shape, _ in case.inputs]


def _reference(case: Case) -> Callable[..., Any]:
    from refmnn.errors import UnsupportedOpError
    from refmnn.ops import default_registry

    try:
        return default_registry().resolve("", case.op, case.opset)
    except UnsupportedOpError:
        pytest.skip(f"refmnn defines no {case.op}-{case.opset} yet (nothing to check against)")


def _ort_runner(case: Case, arrays: list[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    graph_inputs, initializers, feeds = [], [], {}
    for (name, shape, weight), value in zip(case.inputs, arrays, strict=True):
        if weight:
            initializers.append(numpy_helper.from_array(value, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
            feeds[name] = value
    node = helper.make_node(case.op, [n for n, _, _ in case.inputs], ["Y"], **case.attrs)
    graph = helper.make_graph([node], case.id, graph_inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def _check(got: Any, want: Any) -> dict[str, float]:
    got = np.asarray(got[0] if isinstance(got, (list, tuple)) else got, dtype=np.float64)
    want = np.asarray(want[0] if isinstance(want, (list, tuple)) else want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != reference {want.shape}"
    rel = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    max_abs = float(np.max(np.abs(got - want))) if got.size else 0.0
    assert rel <= REL_L2_TOLERANCE, f"rel L2 {rel:.2e} (max abs {max_abs:.2e}) vs the reference"
    return {"rel_l2": rel, "max_abs": max_abs}


@pytest.mark.parametrize("engine", ["refmnn-reference", "onnxruntime"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op(benchmark: Any, case: Case, engine: str) -> None:
    arrays = _inputs(case)
    reference = _reference(case)
    expected = reference(*arrays, **case.attrs)
    if engine == "refmnn-reference":
        def fn() -> Any:
            return reference(*arrays, **case.attrs)
    else:
        fn = _ort_runner(case, arrays)
    accuracy = _check(fn(), expected)  # checked before it is timed
    benchmark.group = case.id
    benchmark.extra_info.update(op=f"{case.op}-{case.opset}", where=case.where, threads=THREADS,
                                shapes=[list(s) for _, s, _ in case.inputs], **accuracy)
    benchmark(fn)
    if case.macs and benchmark.stats is not None:
        median = benchmark.stats.stats.median
        benchmark.extra_info["gflops_per_s"] = 2 * case.macs / median / 1e9
