"""What the numba backend's tests share: forcing every scheme of a node's kernel and comparing it
with the reference (:func:`check_node`), seeded inputs and small model builders."""

from __future__ import annotations

import tracemalloc

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.backends import Storage
from refmnn.backends.numba import NumbaBackend
from refmnn.schedule.plan import RunStep
from tests.helpers import make_model

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _native() -> bool:
    from refmnn.backends.numba.kernels.simd import native

    return native()


SIMD_1X1 = ("gemm_1x1_simd",) if _native() else ()
"""gemm_1x1_simd, where it applies: on CPUs with AVX2 and FMA (``kernels/simd.py``, native)."""
SIMD_MATMUL = ("packed_simd",) if _native() else ()
"""MatMul's and FusedMatMul's packed_simd, where it applies: AVX2 and FMA, B a constant matrix."""
SIMD_FEW = ("direct3x3_few_simd", "direct7x7_few_simd") if _native() else ()
"""direct3x3_few's and direct7x7_few's register-tile variants, where they apply (AVX2 and FMA;
output channels a multiple of 4, constant weights)."""
SIMD_DW_S2 = ("depthwise3x3_s2_simd",) if _native() else ()
"""depthwise3x3_s2_simd, where it applies (AVX2 and FMA; a row wide enough for one vector)."""
SIMD_DW_C8 = ("depthwise3x3_c8",) if _native() else ()
"""depthwise3x3_c8, where it applies (AVX2 and FMA; channels a multiple of 8, planes of at least
eight pixels)."""
SIMD_POOL = ("max3x3s2_simd",) if _native() else ()
"""max3x3s2_simd, where it applies (AVX2 and FMA; rows of at least 16 input and 8 output
columns)."""
SIMD_WINOGRAD = ("winograd_f23_simd", "winograd_f43_simd") if _native() else ()
"""The Winograd schemes' register-tile variants, where they apply (AVX2 and FMA)."""
WINOGRAD = ("direct", "im2col_gemm", "winograd_f23", "winograd_f43", *SIMD_WINOGRAD)
"""The conv schemes that apply to a 3x3 stride-1 single-group convolution."""


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    denom = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / denom) if denom else float(np.linalg.norm(a - b))


# Schemes whose float32 rounding is known to be larger than the rest: their forced runs are held to
# ``tol`` times this factor. Winograd F(4x4, 3x3)'s transforms (entries up to 8 and 1/24) give
# about 4x F(2,3)'s error (kernels/conv_winograd.py's docstring); relative to the conv output it
# stays near 1e-6, but after an activation that clips most outputs (FusedConv clip [0, 0.5] +
# residual) the relative L2 of what is left reached 1.2e-5.
SCHEME_TOL = {"winograd_f43": 5.0, "winograd_f43_simd": 5.0}


def check_node(model, feeds, *, node="n0", min_schemes=1, tol=1e-5, must_run=(), inspect=None):
    """Run ``node`` of ``model`` with every applicable scheme of the numba backend and compare with
    the reference; the session as a whole must also place the node on numba and agree.
    ``inspect(scheme name, outputs)`` may check each scheme's outputs further; with ``tol=None``
    it is the only check of the outputs (for inputs with inf or NaN, where rel_l2 is NaN)."""
    everything = refmnn.Session(model, check=False).run(feeds, intermediates=True)
    expected = {v.name: everything[v.name] for v in model.graph.output}
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run(feeds)
    assert tol is not None or inspect is not None
    for key, value in expected.items():
        assert tol is None or rel_l2(got[key], value) <= tol, (key, rel_l2(got[key], value))
    plan = session.plan
    steps = {s.node.name: s for s in plan.steps if isinstance(s, RunStep)}
    assert steps[node].backend == "numba", steps[node].reason
    spec = plan.specs[node]
    values = dict(everything)
    values.update(feeds)
    values.update({i.name: numpy_helper.to_array(i) for i in model.graph.initializer})
    inputs = [np.ascontiguousarray(values[n]) if n else None for n in spec.node.inputs]
    before = [None if a is None else a.copy() for a in inputs]
    want = [everything.get(n) for n in spec.node.outputs]
    backend = NumbaBackend()
    kdef = next(k for k in backend.kernels() if k.op == spec.node.op and k.domain == spec.node.domain)
    ran = []
    for scheme in kdef.schemes:
        if not scheme.applies(spec):
            continue
        kernel = scheme.build(backend, spec)
        kernel.prepare(spec)
        workspace = backend.allocate(kernel.workspace_bytes, Storage.WORKSPACE) if kernel.workspace_bytes else None
        outputs = [None if t is None else np.full(t.shape, np.nan if t.dtype.numpy.kind == "f" else 7,
                                                  dtype=t.dtype.numpy) for t in spec.outputs]
        backend.begin_run()
        kernel.run(inputs, outputs, workspace)  # compile outside the allocation check
        tracemalloc.start()
        kernel.run(inputs, outputs, workspace)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        backend.end_run()
        nbytes = sum(o.nbytes for o in outputs if o is not None)
        assert peak < max(16384, nbytes // 4), f"{scheme.name}: run allocated {peak} bytes"
        for a, b in zip(inputs, before, strict=True):
            assert a is None or np.array_equal(a, b, equal_nan=True), f"{scheme.name} wrote an input"
        for out, ref in zip(outputs, want, strict=True):
            if out is None or ref is None:
                continue
            assert out.dtype == ref.dtype and out.shape == ref.shape
            if tol is not None:
                limit = tol * SCHEME_TOL.get(scheme.name, 1.0)
                assert rel_l2(out, ref) <= limit, (scheme.name, rel_l2(out, ref))
        if inspect is not None:
            inspect(scheme.name, outputs)
        ran.append(scheme.name)
    assert len(ran) >= min_schemes, ran
    for name in must_run:
        assert name in ran, (name, ran)
    backend.close()
    return ran


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def conv_model(x_shape, w_shape, bias=True, **attrs):
    w = numpy_helper.from_array(rand(*w_shape), "W")
    inits = [w]
    inputs = ["X", "W"]
    if bias:
        inits.append(numpy_helper.from_array(rand(w_shape[0]), "B"))
        inputs.append("B")
    node = helper.make_node("Conv", inputs, ["Y"], name="n0", **attrs)
    return make_model([node], [("X", F, x_shape)], [("Y", F, None)], initializers=inits)
