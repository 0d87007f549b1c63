"""Scheme microbenchmarks: every kernel scheme of a backend at zoo (and larger) shapes.

A backend offers several schemes per op (direct / im2col / Winograd F(2,3) / F(4,3) convolution,
BLAS / blocked / Strassen matrix products...) and its cost model picks one per node. This file
times **each applicable scheme** of each case, side by side (one benchmark group per case), and
records the one the planner picks (``extra_info``: ``chosen``, ``is_chosen``, the scheme's
modelled ``cost``, ``rel_l2``, ``gflops``; see them with ``--benchmark-json=FILE``), so a kernel
researcher can see what each scheme costs and whether the cost model agrees with the clock.
Schemes the cost model prices above 20x the chosen one are skipped, saying so. Every scheme's output is checked against the
reference op first (relative L2 <= 5e-5: Winograd F(4,3) and Strassen round a little more than
a plain GEMM; their module docstrings give the figures).

Run::

    .venv/bin/python -m pytest bench/test_schemes.py --benchmark-columns=min,median,max,rounds

``REFMNN_BENCH_BACKEND`` (default ``numba``) names the backend, ``REFMNN_BENCH_THREADS``
(default 1) its thread count; ``-k`` picks cases (``-k winograd``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

THREADS = int(os.environ.get("REFMNN_BENCH_THREADS", "1"))  # bench/conftest.py applies it
BACKEND = os.environ.get("REFMNN_BENCH_BACKEND", "numba")

pytest.importorskip("pytest_benchmark")

REL_L2_TOLERANCE = 5e-5

# (id, op, input shapes (the first is fed, the rest are initializers), attributes, MACs)
CASES = (
    ("conv3x3_64c_56", "Conv", ((1, 64, 56, 56), (64, 64, 3, 3), (64,)),
     {"pads": [1, 1, 1, 1]}, 64 * 56 * 56 * 64 * 9),
    ("conv3x3_128c_28", "Conv", ((1, 128, 28, 28), (128, 128, 3, 3), (128,)),
     {"pads": [1, 1, 1, 1]}, 128 * 28 * 28 * 128 * 9),
    ("conv3x3_256c_14", "Conv", ((1, 256, 14, 14), (256, 256, 3, 3), (256,)),
     {"pads": [1, 1, 1, 1]}, 256 * 14 * 14 * 256 * 9),
    ("conv3x3_512c_7", "Conv", ((1, 512, 7, 7), (512, 512, 3, 3), (512,)),
     {"pads": [1, 1, 1, 1]}, 512 * 7 * 7 * 512 * 9),
    ("conv3x3_16to64_55", "Conv", ((1, 16, 55, 55), (64, 16, 3, 3), (64,)),
     {"pads": [1, 1, 1, 1]}, 16 * 55 * 55 * 64 * 9),
    ("conv3x3s2_3to32_224", "Conv", ((1, 3, 224, 224), (32, 3, 3, 3), (32,)),
     {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 3 * 112 * 112 * 32 * 9),
    ("conv7x7s2_3to64_224", "Conv", ((1, 3, 224, 224), (64, 3, 7, 7), (64,)),
     {"pads": [3, 3, 3, 3], "strides": [2, 2]}, 3 * 112 * 112 * 64 * 49),
    ("conv3x3s2_64to128_56", "Conv", ((1, 64, 56, 56), (128, 64, 3, 3), (128,)),
     {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 64 * 28 * 28 * 128 * 9),
    ("conv1x1_96to24_56", "Conv", ((1, 96, 56, 56), (24, 96, 1, 1), (24,)), {},
     96 * 56 * 56 * 24),
    ("conv1x1_512to1000_13", "Conv", ((1, 512, 13, 13), (1000, 512, 1, 1), (1000,)), {},
     512 * 13 * 13 * 1000),  # SqueezeNet 1.1's classifier
    ("conv_depthwise3x3_144c_56", "Conv", ((1, 144, 56, 56), (144, 1, 3, 3), (144,)),
     {"pads": [1, 1, 1, 1], "group": 144}, 144 * 56 * 56 * 9),
    ("conv_depthwise3x3s2_96c_112", "Conv", ((1, 96, 112, 112), (96, 1, 3, 3), (96,)),
     {"pads": [1, 1, 1, 1], "group": 96, "strides": [2, 2]}, 96 * 56 * 56 * 9),
    ("maxpool3x3s2_64c_111", "MaxPool", ((1, 64, 111, 111),),
     {"kernel_shape": [3, 3], "strides": [2, 2]}, 64 * 55 * 55 * 9),
    ("matmul_128x384_384x1536", "MatMul", ((1, 128, 384), (384, 1536)), {}, 128 * 384 * 1536),
    ("matmul_2048", "MatMul", ((2048, 2048), (2048, 2048)), {}, 2048 ** 3),
    ("matmul_4096", "MatMul", ((4096, 4096), (4096, 4096)), {}, 4096 ** 3),
)


def _model(op: str, shapes: tuple[tuple[int, ...], ...], attrs: dict[str, Any]) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    names = [f"in{i}" for i in range(len(shapes))]
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in zip(names[1:], shapes[1:], strict=True)]
    node = helper.make_node(op, names, ["Y"], name="n0", **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(
        names[0], TensorProto.FLOAT, shapes[0])], [helper.make_tensor_value_info(
            "Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _backend() -> Any:
    """The backend under test, or the reason it is missing."""
    from refmnn.backends import BackendConfig, BackendRegistry

    registry = BackendRegistry()
    info = registry.info(BACKEND)
    if not info.available:
        return f"backend {BACKEND} is not available here: {info.reason}"
    return registry.create(BACKEND, BackendConfig(threads=THREADS))


BACKEND_OR_REASON = _backend()


def _params() -> list[Any]:
    """(case, scheme name) for every scheme the backend declares for the case's op."""
    if isinstance(BACKEND_OR_REASON, str):
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=BACKEND_OR_REASON))]
    out = []
    for case in CASES:
        kdef = next((k for k in BACKEND_OR_REASON.kernels() if k.op == case[1] and k.domain == ""),
                    None)
        for scheme in (kdef.schemes if kdef else ()):
            out.append(pytest.param(case, scheme.name, id=f"{case[0]}-{scheme.name}"))
    return out


def _prepared(case: tuple[Any, ...]) -> tuple[Any, Any, np.ndarray, list[np.ndarray]]:
    """(plan step, node spec, reference output, inputs) of the case's one-node model."""
    import refmnn
    from refmnn.schedule.plan import RunStep

    _, op, shapes, attrs, _ = case
    model = _model(op, shapes, attrs)
    feed = np.random.default_rng(1).standard_normal(shapes[0]).astype(np.float32)
    session = refmnn.Session(model, backends=(BACKEND,), check=False)
    session.run({"in0": feed})  # plans
    step = next(s for s in session.plan.steps if isinstance(s, RunStep))
    spec = session.plan.specs["n0"]
    expected = refmnn.Session(model, check=False).run({"in0": feed})["Y"]
    return step, spec, expected, [feed] + [np.asarray(spec.constants[i])
                                           for i in range(1, len(shapes))]


@pytest.mark.parametrize(("case", "scheme_name"), _params())
def test_scheme(benchmark: Any, case: tuple[Any, ...], scheme_name: str) -> None:
    from refmnn.backends import Storage

    backend = BACKEND_OR_REASON
    name, _, _, _, macs = case
    step, spec, expected, inputs = _prepared(case)
    kdef = next(k for k in backend.kernels()
                if k.op == spec.node.op and k.domain == spec.node.domain)
    assert step.backend == BACKEND, f"{name} fell back: {step.reason}"
    scheme = next(s for s in kdef.schemes if s.name == scheme_name)
    if not scheme.applies(spec):
        pytest.skip(f"{scheme_name} does not apply to {name}")
    chosen = next(s for s in kdef.schemes if s.name == step.scheme)
    if scheme.cost(spec) > 20 * chosen.cost(spec):
        pytest.skip(f"{scheme_name} costs {scheme.cost(spec) / chosen.cost(spec):.0f}x the "
                    f"chosen {step.scheme} by the cost model: not worth timing")
    kernel = scheme.build(backend, spec)
    kernel.prepare(spec)
    workspace = backend.allocate(kernel.workspace_bytes, Storage.WORKSPACE) \
        if kernel.workspace_bytes else None
    out = [np.empty(tuple(int(d) for d in t.shape), np.float32) for t in spec.outputs]

    def run() -> None:
        backend.begin_run()
        try:
            kernel.run(inputs, out, workspace)
        finally:
            backend.end_run()

    run()  # compile (numba caches on disk), then check before timing
    rel = float(np.linalg.norm(out[0].astype(np.float64) - expected) / np.linalg.norm(expected))
    assert rel <= REL_L2_TOLERANCE, f"{scheme_name}: rel L2 {rel:.2e} vs the reference"
    benchmark.group = name
    benchmark.extra_info.update(backend=BACKEND, threads=THREADS, chosen=step.scheme,
                                is_chosen=scheme_name == step.scheme, cost=scheme.cost(spec),
                                rel_l2=rel, macs=macs)
    rounds = 5 if macs > 1e9 else 20
    benchmark.pedantic(run, rounds=rounds, warmup_rounds=1)
    if benchmark.stats is not None and macs:
        benchmark.extra_info["gflops"] = 2 * macs / (benchmark.stats.stats.median * 1e9)
