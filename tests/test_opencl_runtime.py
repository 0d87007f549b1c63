"""The OpenCL backend as a process-wide runtime: what a session leaves behind when its plans
are dropped, and what a forked child may do with a runtime its parent started.

Skipped, with the probe's reason, when pyopencl or an OpenCL platform is missing.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from refmnn.backends.opencl import OpenCLBackend

PROBE = OpenCLBackend.probe()
if not PROBE.available:
    pytest.skip(f"opencl backend unavailable: {PROBE.reason}", allow_module_level=True)

import refmnn  # noqa: E402
from refmnn.backends.base import BackendConfig  # noqa: E402
from tests.helpers import make_model  # noqa: E402

F = TensorProto.FLOAT
NO_TUNE = {"opencl": BackendConfig(options={"tune": "off"})}
rng = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def opencl_session(model):  # type: ignore[no-untyped-def]
    return refmnn.Session(model, backends=("opencl",), configs=NO_TUNE, check=False)


def test_plans_dropped_from_the_cache_free_their_kernels():
    """A session re-planned for ever new shapes holds the kernels of the plans it keeps
    (SIGNATURE_CACHE of them), not of every plan it made: the context used to keep every
    kernel it had declared scalar types for (~1 MB a SqueezeNet plan, without end)."""
    import gc

    import pyopencl as cl

    from refmnn.session import SIGNATURE_CACHE

    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["y"])]
    w = numpy_helper.from_array(randn(8, 8), "w")
    model = make_model(nodes, [("x", F, ["n", 8])], [("y", F, ["n", 8])], initializers=[w])
    session = opencl_session(model)

    def kernels_alive() -> int:
        gc.collect()
        # type(), not isinstance(): a dead weak proxy among the objects raises on isinstance
        return sum(type(o) is cl.Kernel for o in gc.get_objects())

    counts = []
    for rows in range(1, 4 * SIGNATURE_CACHE + 1):
        x = randn(rows, 8)
        y = session.run({"x": x})["y"]
        np.testing.assert_allclose(y, np.maximum(x @ np.asarray(numpy_helper.to_array(w)), 0) + x,
                                   rtol=1e-5, atol=1e-5)
        if rows % SIGNATURE_CACHE == 0:
            counts.append(kernels_alive())
    assert counts[1] > 0 and counts[-1] <= counts[1], counts


def test_a_child_forked_after_the_runtime_started_is_refused_not_hung():
    """A child forked (a multiprocessing pool's "fork" start) after the parent used OpenCL: the
    runtime does not survive fork and the child's first upload used to wait for ever. A run of
    the parent's Session, and a new Session, there raise a BackendError saying what to do."""
    from tests.helpers import in_forked_child

    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(nodes, [("x", F, [4])], [("y", F, [4])])
    session = opencl_session(model)
    x = np.array([-1, 0, 1, 2], np.float32)
    np.testing.assert_array_equal(session.run({"x": x})["y"], np.maximum(x, 0))
    again = in_forked_child(lambda: session.run({"x": x}), timeout=60)
    new = in_forked_child(lambda: opencl_session(model).run({"x": x}), timeout=60)
    assert again.startswith("BackendError: opencl: this process was forked"), again
    assert new.startswith("BackendError: backend 'opencl' is not available here: opencl: this "
                          "process was forked"), new
