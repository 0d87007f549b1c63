"""The OpenCL backend against the NumPy reference.

Skipped, with the probe's reason, when pyopencl or an OpenCL platform is missing. Otherwise:
every scheme of every kernel on small shapes (broadcasting, odd sizes, empty tensors, float16
storage), the zoo models end to end with every node on opencl, and the synchronisation rule (a
run waits on the host only in downloads and in ``end_run``'s single ``finish``).
Tuning is off except in the tuning test, so the file runs in bounded time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from refmnn.backends.opencl import OpenCLBackend

PROBE = OpenCLBackend.probe()
if not PROBE.available:
    pytest.skip(f"opencl backend unavailable: {PROBE.reason}", allow_module_level=True)

import refmnn  # noqa: E402
from refmnn.backends.base import BackendConfig  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import assert_bit_equal, make_model, quantization_values  # noqa: E402

F, H, I64, B = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL
NO_TUNE = {"opencl": BackendConfig(options={"tune": "off"})}


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    keep = ~(np.isnan(a) & np.isnan(b))   # NaN positions are compared separately
    a, b = a[keep], b[keep]
    if a.size == 0:
        return 0.0
    denom = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (denom if denom else 1.0))


def opencl_session(model, configs=NO_TUNE):  # type: ignore[no-untyped-def]
    return refmnn.Session(model, backends=("opencl",), configs=configs, check=False)


def every_scheme(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tol: float = 1e-6,
                 fallback: bool = False, compare=None) -> list[str]:  # type: ignore[no-untyped-def]
    """Run each node of ``model`` with every applicable opencl scheme (not just the chosen one)
    on device tensors and compare with the reference's output; return the schemes checked.
    ``compare(what, got, want)``, given, replaces the comparison of float outputs (relative L2
    within ``tol``, NaN where the reference has NaN)."""
    ref = refmnn.Session(model, check=False).run(feeds, intermediates=True)
    session = opencl_session(model)
    session.run(feeds)
    prepared = session._last
    backend = prepared.backends["opencl"]
    plan = session.plan
    checked = []
    values = {**feeds, **{k: np.asarray(v) for k, v in plan.graph.initializers.items()}, **ref}
    for step in plan.steps:
        if not isinstance(step, RunStep):
            continue
        spec = plan.specs[step.node.name]
        # a case the backend declares unsupported, or one with an empty tensor (a node that
        # has one is always the reference's): the reference ran it
        if fallback or any(t is not None and t.numel() == 0 for t in (*spec.inputs, *spec.outputs)):
            assert step.backend == "reference", step.reason
            continue
        assert step.backend == "opencl", f"{step.node.op} ran on {step.backend}: {step.reason}"
        kdef = next(k for k in backend.kernels() if k.op == step.node.op and k.domain == step.node.domain)
        for scheme in kdef.schemes:
            if not scheme.applies(spec):
                continue
            kernel = scheme.build(backend, spec)
            kernel.prepare(spec)
            from refmnn.backends.base import Storage

            def device(value, t):  # type: ignore[no-untyped-def]
                buf = backend.allocate(max(int(np.asarray(value).nbytes), 1), Storage.ARENA)
                tensor = backend.view(buf, 0, t)
                backend.upload(np.asarray(value, dtype=t.dtype.numpy), tensor)
                return tensor

            ins = [None if not name else device(values[name], spec.inputs[i])
                   for i, name in enumerate(step.node.inputs)]
            outs = [None if not name else device(np.zeros(spec.outputs[i].shape, spec.outputs[i].dtype.numpy),
                                                 spec.outputs[i])
                    for i, name in enumerate(step.node.outputs)]
            ws = backend.allocate(kernel.workspace_bytes, Storage.WORKSPACE) if kernel.workspace_bytes else None
            kernel.run(ins, outs, ws)
            backend.end_run()
            for name, out in zip(step.node.outputs, outs, strict=True):
                if out is None:
                    continue
                got, want = backend.download(out), np.asarray(ref[name])
                assert got.shape == want.shape and got.dtype == want.dtype
                if compare is not None and want.dtype.kind in "fc":
                    compare(f"{step.node.op}/{scheme.name}", got, want)
                elif want.dtype.kind in "fc":
                    assert rel_l2(got, want) <= tol, f"{step.node.op}/{scheme.name}: {rel_l2(got, want)}"
                    assert np.array_equal(np.isnan(got), np.isnan(want))
                else:
                    np.testing.assert_array_equal(got, want, err_msg=f"{step.node.op}/{scheme.name}")
            checked.append(f"{step.node.op}/{scheme.name}")
    return checked


rng = np.random.default_rng(7)


def randn(*shape: int, dtype=np.float32) -> np.ndarray:  # type: ignore[no-untyped-def]
    return rng.standard_normal(shape).astype(dtype)


def node_model(op: str, in_shapes, attrs=None, inits=(), elem=F, out_count=1, opset=17):  # type: ignore[no-untyped-def]
    names = [f"x{i}" for i in range(len(in_shapes))]
    init_names = [n for n, _ in inits]
    outs = [f"y{i}" for i in range(out_count)]
    node = helper.make_node(op, names + init_names, outs, name="n0", **(attrs or {}))
    return make_model([node], [(n, elem, s) for n, s in zip(names, in_shapes, strict=True)],
                      [(o, elem if op != "Cast" else 0, None) for o in outs],
                      initializers=[numpy_helper.from_array(v, n) for n, v in inits], opset=opset)


# -- elementwise -------------------------------------------------------------------------------

BROADCASTS = [((2, 3, 4), (4,)), ((2, 1, 5), (1, 3, 1)), ((3,), (2, 3)), ((0, 3), (3,)),
              ((7, 9), (7, 9)), ((2, 3, 4, 5, 6), (3, 1, 5, 1))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary(op, shapes):  # type: ignore[no-untyped-def]
    a, b = randn(*shapes[0]), randn(*shapes[1])
    if op == "Pow":
        a = np.abs(a) + 0.5
    if op == "Max" and a.size:
        a.flat[0] = np.nan
    # more than 4 axes left after collapsing the broadcast: declared unsupported (falls back)
    fallback = shapes == ((2, 3, 4, 5, 6), (3, 1, 5, 1))
    every_scheme(node_model(op, shapes), {"x0": a, "x1": b}, fallback=fallback)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Neg", "Abs",
                                "Reciprocal", "LeakyRelu", "Elu"])
@pytest.mark.parametrize("shape", [(3, 7), (0, 5), (1000,)], ids=str)
def test_unary(op, shape):  # type: ignore[no-untyped-def]
    x = randn(*shape) * 3
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + 0.1
    attrs = {"alpha": 0.3} if op in ("LeakyRelu", "Elu") else None
    every_scheme(node_model(op, [shape], attrs), {"x0": x})


def test_clip_constant_bounds_and_default():  # type: ignore[no-untyped-def]
    lo, hi = np.array(-0.5, np.float32), np.array(0.7, np.float32)
    every_scheme(node_model("Clip", [(4, 33)], inits=[("lo", lo), ("hi", hi)]), {"x0": randn(4, 33)})
    every_scheme(node_model("Clip", [(5,)]), {"x0": randn(5)})


def test_where_broadcast():  # type: ignore[no-untyped-def]
    model = make_model([helper.make_node("Where", ["c", "a", "b"], ["y"], name="w")],
                       [("c", B, (3, 1)), ("a", F, (1, 4)), ("b", F, (3, 4))], [("y", F, None)])
    every_scheme(model, {"c": np.array([[True], [False], [True]]), "a": randn(1, 4), "b": randn(3, 4)})


@pytest.mark.parametrize("to", [TensorProto.INT64, TensorProto.INT32, TensorProto.FLOAT16, TensorProto.BOOL])
def test_cast_from_float(to):  # type: ignore[no-untyped-def]
    x = randn(3, 17) * 10
    x[0, :3] = 0
    every_scheme(node_model("Cast", [(3, 17)], {"to": to}), {"x0": x})


def test_cast_int64_to_float():  # type: ignore[no-untyped-def]
    model = node_model("Cast", [(9,)], {"to": F}, elem=I64)
    every_scheme(model, {"x0": np.arange(-4, 5, dtype=np.int64) * 12345})


QUANT_CODES = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}


def _bit_equal_outputs(what, got, want):  # type: ignore[no-untyped-def]
    assert_bit_equal(got, want, what)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23])
@pytest.mark.parametrize("code", [TensorProto.INT8, TensorProto.UINT8, None])
def test_quantize_linear_is_the_reference_bit_for_bit(code, opset):  # type: ignore
    """Per tensor, the scale and zero point constants: ordinary values, values at or next to
    rounding ties, far past the code range, NaN, +-inf, +-0 and subnormals."""
    scale = np.float32(0.0371)
    x = quantization_values(6000, scale, opset)
    inits = [("s", np.array(scale))]
    if code is not None:
        inits.append(("z", np.array(-7 if code == TensorProto.INT8 else 131, QUANT_CODES[code])))
    model = node_model("QuantizeLinear", [(6000,)], inits=inits, opset=opset)
    model.graph.output[0].type.tensor_type.elem_type = code or TensorProto.UINT8
    checked = every_scheme(model, {"x0": x}, compare=_bit_equal_outputs)
    assert checked == ["QuantizeLinear/per_tensor"], checked


@pytest.mark.parametrize("code", [TensorProto.INT8, TensorProto.UINT8])
def test_dequantize_linear_is_the_reference_bit_for_bit(code):  # type: ignore[no-untyped-def]
    dtype = QUANT_CODES[code]
    info = np.iinfo(dtype)
    x = np.arange(int(info.min), int(info.max) + 1).astype(dtype)
    inits = [("s", np.array(0.0371, np.float32)), ("z", np.array(3, dtype))]
    model = node_model("DequantizeLinear", [(x.size,)], inits=inits, elem=code, opset=13)
    model.graph.output[0].type.tensor_type.elem_type = F
    checked = every_scheme(model, {"x0": x}, compare=_bit_equal_outputs)
    assert checked == ["DequantizeLinear/per_tensor"], checked


def test_quantization_with_a_scale_given_at_run_time_runs_on_the_reference():  # type: ignore
    model = node_model("QuantizeLinear", [(8,), ()], opset=13)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.UINT8
    every_scheme(model, {"x0": randn(8), "x1": np.array(0.5, np.float32)}, fallback=True)


# -- reductions, softmax, layer norm ---------------------------------------------------------

@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes,keepdims", [((1,), 1), ((0, 1), 0), ((2,), 1), ((1, 2), 1)], ids=str)
def test_reduce(op, axes, keepdims):  # type: ignore[no-untyped-def]
    shape = (2, 37, 3)
    if op == "ReduceSum":   # axes is an input from opset 13
        model = node_model(op, [shape], {"keepdims": keepdims},
                           inits=[("axes", np.array(axes, np.int64))])
    else:
        model = node_model(op, [shape], {"axes": list(axes), "keepdims": keepdims})
    # tol: the work-group tree adds up to 111 float32 terms in another order than NumPy's
    # pairwise sum, and standard-normal data cancel (a mean near 0.1 from terms near 1), so the
    # relative error of the result reaches ~1e-6 on some draws (1.007e-6 seen); a wrong or
    # missing term costs ~1e-2.
    every_scheme(model, {"x0": randn(*shape)}, tol=1e-5)


def test_reduce_sum_empty_axis():  # type: ignore[no-untyped-def]
    model = node_model("ReduceSum", [(2, 0, 3)], {"keepdims": 0}, inits=[("axes", np.array([1], np.int64))])
    every_scheme(model, {"x0": np.zeros((2, 0, 3), np.float32)})


@pytest.mark.parametrize("shape,axis", [((2, 5, 3), 1), ((4, 333), -1), ((3, 1), 0)], ids=str)
def test_softmax(shape, axis):  # type: ignore[no-untyped-def]
    every_scheme(node_model("Softmax", [shape], {"axis": axis}), {"x0": randn(*shape) * 4})


def test_softmax_11_coerces_to_2d():  # type: ignore[no-untyped-def]
    every_scheme(node_model("Softmax", [(2, 3, 5)], {"axis": 1}, opset=11), {"x0": randn(2, 3, 5)})


@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(with_bias):  # type: ignore[no-untyped-def]
    inits = [("scale", randn(2, 37))] + ([("bias", randn(2, 37))] if with_bias else [])
    every_scheme(node_model("LayerNormalization", [(3, 2, 37)], {"axis": -2, "epsilon": 1e-5}, inits=inits),
                 {"x0": randn(3, 2, 37)}, tol=2e-6)


# -- MatMul ------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [((5, 7), (7, 9)), ((2, 1, 3, 4), (3, 4, 5)), ((7,), (7, 3)),
                                 ((4, 7), (7,)), ((33, 65), (65, 17)), ((3, 0), (0, 4)), ((0, 4), (4, 2))],
                         ids=str)
def test_matmul(a, b):  # type: ignore[no-untyped-def]
    every_scheme(node_model("MatMul", [a, b]), {"x0": randn(*a), "x1": randn(*b)}, tol=2e-6)


# -- the GEMM kernels, each configuration forced ------------------------------------------------

def gemm_configs():  # type: ignore[no-untyped-def]
    from refmnn.backends.opencl.kernels import matmul

    extra = [("reg", 16, 1, 3, 2, 2), ("reg", 4, 1, 8, 16, 4), ("reg", 4, 2, 4, 16, 4)]
    return list(dict.fromkeys([*matmul.REG, *matmul.TILED, *extra]))


# (M, N, K): not multiples of any block (rows 4/6/8, columns 8..24, tiles 16/32), and exact ones
GEMM_SHAPES = [(1, 1, 1), (7, 13, 5), (13, 37, 19), (6, 16, 8), (33, 50, 3), (8, 24, 40)]


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")   # PoCL's ABI notes on float16
@pytest.mark.parametrize("half", [False, True], ids=["f32", "f16"])
@pytest.mark.parametrize("config", gemm_configs(), ids=str)
def test_gemm_config_edges(config, half):  # type: ignore[no-untyped-def]
    """Every GEMM configuration on edge shapes against NumPy: batches through the offset table
    (A broadcast over batches, distinct B and bias offsets), nonzero tensor offsets, a C batch
    stride with a gap that must stay untouched, bias, and float16 storage."""
    import pyopencl as cl

    from refmnn.backends.opencl.backend import CLTensor
    from refmnn.backends.opencl.kernels._common import CLKernel
    from refmnn.backends.opencl.kernels.matmul import Gemm

    backend = OpenCLBackend(BackendConfig(options={"tune": "off"}))
    ctx = backend.context
    dtype = np.float16 if half else np.float32
    batch, pad = 3, 5

    def device(host, offset):  # type: ignore[no-untyped-def]
        flat = np.concatenate([np.full(offset, 7, dtype), host.reshape(-1).astype(dtype)])
        buf = cl.Buffer(ctx.cl, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=flat)
        return CLTensor(buf, offset * flat.itemsize, host.shape, dtype), buf, flat

    for M, N, K in GEMM_SHAPES:
        a = randn(2, M, K).astype(dtype)            # batch b uses A[b % 2]
        b = randn(batch, K, N).astype(dtype)
        bias = randn(batch, M).astype(dtype)
        offsets = np.array([((i % 2) * M * K, i * K * N, i * M) for i in range(batch)])
        c_stride = M * N + 2                         # 2 untouched elements after each batch
        c_host = np.full((batch, c_stride), 9, dtype)
        (ta, _, _), (tb, _, _), (tbias, _, _) = device(a, 1), device(b, pad), device(bias, 3)
        tc, c_buf, c_flat = device(c_host, pad)

        class Probe(CLKernel):
            def launches(self, local):  # type: ignore[no-untyped-def]
                return [self.gemm.launch(local)]

        kernel = Probe(backend, None)
        kernel.gemm = Gemm(kernel, M, N, K, offsets, c_stride, ("in", 0), ("in", 1), ("out", 0),
                           ("in?", 2), half=half)
        kernel.plan = kernel.launches(config)
        kernel.run([ta, tb, tbias], [tc], None)
        cl.enqueue_copy(ctx.queue, c_flat, c_buf)
        got = c_flat[pad:].reshape(batch, c_stride)
        for i in range(batch):
            want = a[i % 2].astype(np.float64) @ b[i].astype(np.float64) + bias[i][:, None]
            np.testing.assert_allclose(got[i, :M * N].reshape(M, N), want, rtol=2e-3 if half else 1e-5,
                                       atol=(4e-3 if half else 1e-5) * np.sqrt(K),
                                       err_msg=f"{config} M,N,K={M, N, K} batch {i}")
            assert (got[i, M * N:] == 9).all(), f"{config}: wrote past C[{i}]"


@pytest.mark.parametrize("preset", [None, "0"])
def test_pocl_affinity_default(preset):  # type: ignore[no-untyped-def]
    """The backend pins PoCL's worker threads (POCL_AFFINITY=1) before PoCL loads, unless the
    environment already says otherwise (backend.pocl_defaults says why)."""
    env = {k: v for k, v in os.environ.items() if k != "POCL_AFFINITY"}
    if preset is not None:
        env["POCL_AFFINITY"] = preset
    code = ("import os; from refmnn.backends.opencl import OpenCLBackend; OpenCLBackend.probe(); "
            "print(os.environ.get('POCL_AFFINITY'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == (preset or "1")


# -- Conv and pooling --------------------------------------------------------------------------

CONVS = [
    # (x shape, w shape, attrs, bias)
    ((1, 8, 7, 9), (6, 8, 3, 3), {"pads": [1, 1, 1, 1]}, True),                 # winograd, odd sizes
    ((2, 4, 19, 37), (5, 4, 3, 3), {"pads": [1, 1, 1, 1]}, True),               # winograd: full and tail tile strips
    ((2, 4, 6, 6), (5, 4, 1, 1), {}, True),                                       # 1x1, batch 2
    ((1, 4, 9, 8), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [2, 1],
                                  "pads": [1, 0, 2, 1]}, False),                  # grouped, asym
    ((1, 6, 8, 8), (12, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}, True),  # depthwise x2
    ((1, 3, 10, 10), (4, 3, 5, 5), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, True),
]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{c[0]}x{c[1]}")
def test_conv_every_scheme(case):  # type: ignore[no-untyped-def]
    x_shape, w_shape, attrs, bias = case
    inits = [("w", randn(*w_shape))] + ([("b", randn(w_shape[0]))] if bias else [])
    checked = every_scheme(node_model("Conv", [x_shape], attrs, inits=inits), {"x0": randn(*x_shape)}, tol=2e-6)
    assert "Conv/direct" in checked and len(checked) >= 2, checked


def test_conv_schemes_all_covered():  # type: ignore[no-untyped-def]
    seen = set()
    for x_shape, w_shape, attrs, bias in CONVS:
        inits = [("w", randn(*w_shape))] + ([("b", randn(w_shape[0]))] if bias else [])
        seen |= set(every_scheme(node_model("Conv", [x_shape], attrs, inits=inits), {"x0": randn(*x_shape)}, 2e-6))
    assert {f"Conv/{s}" for s in ("direct", "depthwise", "gemm_1x1", "im2col_gemm", "winograd_f23")} <= seen


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [0, 1, 1, 0], "ceil_mode": 1,
                     "count_include_pad": 1}),
], ids=str)
def test_pool(op, attrs):  # type: ignore[no-untyped-def]
    every_scheme(node_model(op, [(2, 3, 9, 8)], attrs), {"x0": randn(2, 3, 9, 8)})


# The strip kernels (conv_depthwise, pool2d: 8 outputs of a row per work-item, vector loads for
# strips inside the input; border strips: depthwise gathers the row window into registers, pool
# clips each tap) on rows wide enough for both paths: odd sizes, pads, stride 1, 2 and 3 (no
# vector-load path: every strip gathers), dilation, channel multiplier, N > 1, float16, fused
# activations, MobileNet's 14x14 (two strips, both at a border).
DEPTHWISE = [
    ((2, 5, 13, 37), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}, True),
    ((1, 4, 21, 41), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]}, True),
    ((2, 3, 11, 30), (6, 1, 3, 3), {"group": 3, "pads": [0, 2, 1, 0]}, False),        # multiplier 2
    ((1, 4, 12, 25), (4, 1, 3, 3), {"group": 4, "pads": [2, 2, 2, 2], "dilations": [2, 2]}, True),
    ((1, 4, 9, 43), (4, 1, 5, 5), {"group": 4, "pads": [2, 2, 2, 2], "strides": [2, 2]}, False),
    ((3, 2, 7, 7), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True),            # 7x7: border only
    ((1, 6, 14, 14), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, True),
    ((1, 3, 17, 40), (3, 1, 3, 3), {"group": 3, "pads": [1, 2, 1, 0], "strides": [3, 3]}, True),
]


@pytest.mark.parametrize("case", DEPTHWISE, ids=lambda c: f"{c[0]}x{c[1]}")
def test_depthwise_strips(case):  # type: ignore[no-untyped-def]
    x_shape, w_shape, attrs, bias = case
    inits = [("w", randn(*w_shape))] + ([("b", randn(w_shape[0]))] if bias else [])
    checked = every_scheme(node_model("Conv", [x_shape], attrs, inits=inits), {"x0": randn(*x_shape)}, tol=2e-6)
    assert "Conv/depthwise" in checked, checked


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")
@pytest.mark.parametrize("case", DEPTHWISE[:2], ids=lambda c: f"{c[0]}x{c[1]}")
def test_depthwise_float16(case):  # type: ignore[no-untyped-def]
    x_shape, w_shape, attrs, _ = case
    inits = [("w", randn(*w_shape, dtype=np.float16)), ("b", randn(w_shape[0], dtype=np.float16))]
    model = node_model("Conv", [x_shape], attrs, inits=inits, elem=H)
    checked = every_scheme(model, {"x0": randn(*x_shape, dtype=np.float16)}, tol=2e-3)
    assert "Conv/depthwise" in checked, checked


POOLS = [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}),                         # SqueezeNet's
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 2, 1, 0], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
]


@pytest.mark.parametrize("op,attrs", POOLS, ids=str)
def test_pool_strips(op, attrs):  # type: ignore[no-untyped-def]
    x = randn(2, 3, 13, 45)
    x[0, 0, 4, 10] = np.nan     # inside a vector strip: NaN propagates (MaxPool and AveragePool)
    x[1, 1, 7, 16] = np.nan     # the 17th column of a stride-2 strip (MaxPool 3x3's row maximum)
    if op == "MaxPool":
        x[1, 2, 5, 20] = -np.inf
    every_scheme(node_model(op, [x.shape], attrs), {"x0": x})


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")
@pytest.mark.parametrize("op,attrs", POOLS[:1] + POOLS[4:5], ids=str)
def test_pool_float16(op, attrs):  # type: ignore[no-untyped-def]
    every_scheme(node_model(op, [(1, 4, 17, 37)], attrs, elem=H), {"x0": randn(1, 4, 17, 37, dtype=np.float16)},
                 tol=2e-3)


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")
@pytest.mark.parametrize("shape", [(3, 197), (2, 3, 21), (5, 8), (4, 3), (2, 0, 5)], ids=str)
@pytest.mark.parametrize("half", [False, True], ids=["f32", "f16"])
def test_softmax_last_axis(shape, half):  # type: ignore[no-untyped-def]
    """Softmax along the last axis (on PoCL: a row per work-item, float8 and the vector exp)."""
    dtype = np.float16 if half else np.float32
    x = (randn(*shape) * 6).astype(dtype)
    if x.size:
        x.reshape(-1)[0] = 80.0 if not half else 11.0
    every_scheme(node_model("Softmax", [shape], {"axis": -1}, elem=H if half else F), {"x0": x},
                 tol=2e-3 if half else 1e-6)


# -- movement ----------------------------------------------------------------------------------

def test_movement_lowered_to_raster():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Transpose", ["a"], ["t"], perm=[2, 0, 1], name="tr"),
             helper.make_node("Slice", ["t", "st", "en", "ax"], ["s"], name="sl"),
             helper.make_node("Concat", ["s", "b"], ["c"], axis=1, name="cat"),
             helper.make_node("Reshape", ["c", "shape"], ["y"], name="reshape")]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("st", [1]), ("en", [4]), ("ax", [2]), ("shape", [5, -1]))]
    model = make_model(nodes, [("a", F, (3, 4, 5)), ("b", F, (5, 2, 3))], [("y", F, None)], initializers=inits)
    checked = every_scheme(model, {"a": randn(3, 4, 5), "b": randn(5, 2, 3)})
    assert checked and all(c == "Raster/regions" for c in checked), checked


def test_split_and_gather():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=1, name="split"),
             helper.make_node("Gather", ["a", "idx"], ["g"], axis=2, name="gather")]
    inits = [numpy_helper.from_array(np.array([1, 3, 2], np.int64), "sizes"),
             numpy_helper.from_array(np.array([[0, -1], [2, 1]], np.int64), "idx")]
    model = make_model(nodes, [("x", F, (2, 6, 5))], [("g", F, None), ("b", F, None), ("c", F, None)],
                       initializers=inits)
    assert set(every_scheme(model, {"x": randn(2, 6, 5)})) == {"Split/regions", "Gather/rows"}


# -- float16 storage ---------------------------------------------------------------------------

def test_float16_storage():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["s"], name="add"),
             helper.make_node("Softmax", ["s"], ["y"], axis=-1, name="sm")]
    inits = [numpy_helper.from_array(randn(8, 19, dtype=np.float16), "w"),
             numpy_helper.from_array(randn(19, dtype=np.float16), "b")]
    model = make_model(nodes, [("a", H, (5, 8))], [("y", H, None)], initializers=inits)
    every_scheme(model, {"a": randn(5, 8, dtype=np.float16)}, tol=2e-3)


def test_erf_rational_fit_within_an_ulp():  # type: ignore[no-untyped-def]
    """Erf by the reference's own rational fit, evaluated in double: within 1 ulp everywhere
    (tails, zero, NaN and the clip at |x| = 4 included)."""
    x = np.concatenate([np.linspace(-6, 6, 4001, dtype=np.float32), randn(5000) * 2,
                        np.array([0.0, -0.0, 1e-30, -1e-8, 3.999, 4.0, 4.5, np.inf, -np.inf, np.nan],
                                 np.float32)])
    model = node_model("Erf", [x.shape])
    got = opencl_session(model).run({"x0": x})["y0"]
    want = refmnn.Session(model, check=False).run({"x0": x})["y0"]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    ulps = np.abs(got[ok].view(np.int32).astype(np.int64) - want[ok].view(np.int32).astype(np.int64))
    assert ulps.max() <= 1


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")   # PoCL's ABI notes on float16
@pytest.mark.parametrize("shapes", BROADCASTS[:-1], ids=str)   # (the last one has > 4 axes)
def test_binary_broadcast_float16(shapes):  # type: ignore[no-untyped-def]
    """The 3-D NDRange broadcast kernel (inner strides 0 / 1 compiled in) with float16 storage."""
    a, b = shapes
    model = node_model("Mul", [a, b], elem=H)
    every_scheme(model, {"x0": randn(*a, dtype=np.float16), "x1": randn(*b, dtype=np.float16)}, tol=1e-3)


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (2, 0, 3, 1), (0, 1, 3, 2)], ids=str)
def test_transpose_raster_odd_shapes(perm):  # type: ignore[no-untyped-def]
    """Raster's 3-D NDRange copy with unit and non-unit inner strides, float16 and int64."""
    for elem, dtype in ((H, np.float16), (I64, np.int64)):
        x = (randn(3, 5, 7, 2) * 100).astype(dtype)
        model = node_model("Transpose", [x.shape], {"perm": list(perm)}, elem=elem)
        got = opencl_session(model).run({"x0": x})["y0"]
        np.testing.assert_array_equal(got, np.transpose(x, perm))


# -- zoo models --------------------------------------------------------------------------------

ZOO = ["resnet18", "mobilenet_v2", "squeezenet1_1", "vit_tiny", "bert6"]


def zoo_feeds(path: str) -> dict[str, np.ndarray]:
    model = onnx.load(path, load_external_data=False)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == TensorProto.INT64:
            feeds[value.name] = np.random.default_rng(0).integers(0, 1000, size=shape).astype(np.int64)
        else:
            feeds[value.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return feeds


@pytest.fixture(scope="module")
def zoo_paths():  # type: ignore[no-untyped-def]
    zoo = pytest.importorskip("refmnn.zoo")
    try:
        return {name: zoo.export_onnx(name) for name in ZOO}
    except Exception as exc:  # noqa: BLE001 - torch missing etc.
        pytest.skip(f"zoo models unavailable: {exc}")


@pytest.mark.parametrize("exporter", ("torchscript", "dynamo"))
@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_matches_reference(name, exporter, zoo_paths):  # type: ignore[no-untyped-def]
    if exporter == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
        from refmnn import zoo

        path = zoo.export_onnx(name, exporter="dynamo")  # torch's default exporter
    else:
        path = zoo_paths[name]
    feeds = zoo_feeds(path)
    session = opencl_session(path)
    out = session.run(feeds)
    steps = [s for s in session.plan.steps if isinstance(s, RunStep)]
    off = [(s.node.op, s.reason) for s in steps if s.backend != "opencl"]
    assert not off, off
    ref = refmnn.Session(path).run(feeds)
    for key, want in ref.items():
        assert rel_l2(out[key], want) <= 1e-5, (key, rel_l2(out[key], want))


# -- synchronisation, tuning, probe, import ------------------------------------------------------

def test_run_syncs_only_in_downloads(monkeypatch, zoo_paths):  # type: ignore[no-untyped-def]
    import pyopencl as cl

    path = zoo_paths["squeezenet1_1"]
    feeds = zoo_feeds(path)
    session = opencl_session(path)
    session.run(feeds)   # prepare + first run
    backend = session._last.backends["opencl"]
    blocking = []
    real_copy = cl.enqueue_copy

    def copy(*args, **kwargs):  # type: ignore[no-untyped-def]
        blocking.append(kwargs.get("is_blocking", True))
        return real_copy(*args, **kwargs)

    def wait(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("wait_for_events during a run")

    monkeypatch.setattr(cl, "enqueue_copy", copy)
    monkeypatch.setattr(cl, "wait_for_events", wait)
    before = dict(backend.stats)
    session.run(feeds)
    after = backend.stats
    assert after["finish"] - before["finish"] == 1          # end_run only
    assert after["tune_sync"] == before["tune_sync"]
    n_outputs = len(session.plan.outputs)
    assert after["downloads"] - before["downloads"] == n_outputs
    assert sum(blocking) == n_outputs                        # the downloads; uploads don't block
    assert after["launches"] - before["launches"] >= len(session.plan.steps) - 1


def test_tuning_cache(tmp_path):  # type: ignore[no-untyped-def]
    cache = tmp_path / "tune.json"
    configs = {"opencl": BackendConfig(options={"tune": "on", "tune_cache": str(cache)})}
    x_shape, w_shape, attrs, _ = CONVS[0]
    model = node_model("Conv", [x_shape], attrs, inits=[("w", randn(*w_shape))])
    feeds = {"x0": randn(*x_shape)}
    out = refmnn.Session(model, backends=("opencl",), configs=configs, check=False).run(feeds)
    ref = refmnn.Session(model, check=False).run(feeds)
    assert rel_l2(out["y0"], ref["y0"]) <= 1e-6
    table = json.loads(cache.read_text())
    assert any("Conv" in key for key in table), table
    session = refmnn.Session(model, backends=("opencl",), configs=configs, check=False)
    session.run(feeds)
    assert session._last.backends["opencl"].stats["tune_sync"] == 0   # answered from the file


def test_probe_reports_devices():  # type: ignore[no-untyped-def]
    assert PROBE.available and PROBE.devices and PROBE.version


def test_import_refmnn_does_not_import_pyopencl():  # type: ignore[no-untyped-def]
    code = ("import sys, refmnn, refmnn.backends.opencl; "
            "from refmnn.backends.registry import BackendRegistry; "
            "assert 'pyopencl' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_gather_index_out_of_range_is_an_error_naming_the_node():
    """A kernel cannot raise: Gather sets the device error flag, and the run's one sync raises
    an OpError naming the node, op, opset and shapes; the next valid run is unaffected."""
    from refmnn.errors import OpError

    node = helper.make_node("Gather", ["X", "I"], ["Y"], name="lookup", axis=1)
    model = make_model([node], [("X", TensorProto.FLOAT, (3, 4)), ("I", TensorProto.INT64, (2,))],
                       [("Y", TensorProto.FLOAT, (3, 2))])
    session = opencl_session(model)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    steps = [s for s in session.resize({"X": (3, 4), "I": (2,)}).steps if isinstance(s, RunStep)]
    assert [s.backend for s in steps] == ["opencl"]
    for bad in ([0, 4], [-5, 1]):
        with pytest.raises(OpError, match=r"node 'lookup' \(Gather, opset 17\).*float32\[3, 4\]"
                                          r".*out of range \[-4, 3\] for axis 1"):
            session.run({"X": x, "I": np.array(bad, np.int64)})
    got = session.run({"X": x, "I": np.array([-1, 2], np.int64)})["Y"]
    np.testing.assert_array_equal(got, x[:, [3, 2]])
    assert session._last.backends["opencl"].stats["finish"] == 3  # one sync per run, errors too
