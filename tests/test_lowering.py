"""Every lowering rule equals the op's reference.

A test backend that implements exactly the core op set (each core op computed by its own
reference function) is put first; the planner must then lower every other op into core ops,
and the result must match the reference run of the original op.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.backends import Backend, BackendRegistry, Buffer, Kernel, KernelDef, Probe, Scheme
from refmnn.dtypes import FLOATS, INTEGERS, DType
from refmnn.schedule.lower import CORE_OPS, RULES
from tests.helpers import make_model

ALL_TYPES = frozenset(FLOATS | INTEGERS | {DType.bool})


class CoreKernel(Kernel):
    def __init__(self, spec):
        self.spec = spec

    def run(self, inputs, outputs, workspace):
        result = self.spec.opdef(*inputs, **self.spec.attrs)
        for out, value in zip(outputs, result if isinstance(result, tuple) else (result,), strict=False):
            np.copyto(out, value)


class CoreBackend(Backend):
    """Supports the core op set and nothing else."""

    name = "core"
    host_memory = True

    @classmethod
    def probe(cls):
        return Probe(True)

    def kernels(self):
        return tuple(KernelDef(op, (Scheme("ref", lambda b, s: CoreKernel(s)),), domain=domain,
                               dtypes=ALL_TYPES) for domain, op in sorted(CORE_OPS))

    def allocate(self, nbytes, storage):
        return Buffer(nbytes, storage, np.zeros(max(nbytes, 1), np.uint8))

    def view(self, buffer, offset, type):
        n = int(np.prod(type.shape, dtype=np.int64)) * type.dtype.itemsize
        return buffer.handle[offset:offset + n].view(type.dtype.numpy).reshape(type.shape)

    def upload(self, src, dst):
        np.copyto(dst, src)

    def download(self, src):
        return np.array(src)


F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


# (case id, node, inputs {name: array}, initializers, opset)
CASES = [
    ("Transpose", helper.make_node("Transpose", ["X"], ["Y"], perm=[2, 0, 1]), {"X": _x(2, 3, 4)}, [], 17),
    ("Slice", helper.make_node("Slice", ["X", "s", "e", "a", "t"], ["Y"]), {"X": _x(5, 6)},
     [_const("s", [4, 1]), _const("e", [0, 6]), _const("a", [0, 1]), _const("t", [-2, 2])], 17),
    ("Reshape", helper.make_node("Reshape", ["X", "shape"], ["Y"]), {"X": _x(2, 3, 4)}, [_const("shape", [4, -1])], 17),
    ("Flatten", helper.make_node("Flatten", ["X"], ["Y"], axis=2), {"X": _x(2, 3, 4, 5)}, [], 17),
    ("Squeeze", helper.make_node("Squeeze", ["X", "axes"], ["Y"]), {"X": _x(2, 1, 4)}, [_const("axes", [1])], 17),
    ("Unsqueeze", helper.make_node("Unsqueeze", ["X", "axes"], ["Y"]), {"X": _x(2, 4)}, [_const("axes", [0, 3])], 17),
    ("Identity", helper.make_node("Identity", ["X"], ["Y"]), {"X": _x(3, 2)}, [], 17),
    ("Expand", helper.make_node("Expand", ["X", "shape"], ["Y"]), {"X": _x(3, 1)}, [_const("shape", [2, 3, 4])], 17),
    ("Dropout", helper.make_node("Dropout", ["X"], ["Y"]), {"X": _x(3, 4)}, [], 17),
    ("Concat", helper.make_node("Concat", ["X", "Z", "W"], ["Y"], axis=1),
     {"X": _x(2, 1, 3), "Z": _x(2, 4, 3), "W": _x(2, 2, 3)}, [], 17),
    ("Gemm", helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transA=1, transB=1, alpha=0.5, beta=2.0),
     {"A": _x(6, 4), "B": _x(5, 6), "C": _x(5)}, [], 17),
    ("Gemm_noC", helper.make_node("Gemm", ["A", "B"], ["Y"]), {"A": _x(4, 6), "B": _x(6, 5)}, [], 17),
    ("GlobalAveragePool", helper.make_node("GlobalAveragePool", ["X"], ["Y"]), {"X": _x(2, 3, 5, 4)}, [], 17),
    ("GlobalMaxPool", helper.make_node("GlobalMaxPool", ["X"], ["Y"]), {"X": _x(2, 3, 5)}, [], 17),
    ("BatchNormalization", helper.make_node("BatchNormalization", ["X", "s", "b", "m", "v"], ["Y"], epsilon=1e-3),
     {"X": _x(2, 3, 4, 4)},
     [_const("s", _x(3)), _const("b", _x(3)), _const("m", _x(3)), _const("v", np.abs(_x(3)) + 0.5)], 15),
    ("Sum", helper.make_node("Sum", ["X", "Z", "W"], ["Y"]), {"X": _x(3, 4), "Z": _x(4), "W": _x(1, 4)}, [], 17),
    ("Mean", helper.make_node("Mean", ["X", "Z"], ["Y"]), {"X": _x(3, 4), "Z": _x(3, 4)}, [], 17),
    ("Gelu", helper.make_node("Gelu", ["X"], ["Y"]), {"X": _x(4, 5) * 3}, [], 20),
    ("LogSoftmax", helper.make_node("LogSoftmax", ["X"], ["Y"], axis=1), {"X": _x(3, 7, 2) * 10}, [], 17),
    ("HardSigmoid", helper.make_node("HardSigmoid", ["X"], ["Y"], alpha=0.3, beta=0.4), {"X": _x(20) * 4}, [], 17),
    ("HardSwish", helper.make_node("HardSwish", ["X"], ["Y"]), {"X": _x(20) * 4}, [], 17),
    ("ReduceL1", helper.make_node("ReduceL1", ["X"], ["Y"], axes=[1], keepdims=0), {"X": _x(3, 4, 5)}, [], 17),
    ("ReduceL2", helper.make_node("ReduceL2", ["X"], ["Y"], axes=[0, 2]), {"X": _x(3, 4, 5)}, [], 17),
    ("ReduceSumSquare", helper.make_node("ReduceSumSquare", ["X"], ["Y"]), {"X": _x(3, 4)}, [], 17),
    ("ReduceLogSum", helper.make_node("ReduceLogSum", ["X"], ["Y"], axes=[1]), {"X": np.abs(_x(3, 4)) + 0.1}, [], 17),
]


def _build(node, feeds, initializers, opset):
    node.name = "n"
    inputs = [(name, F, list(value.shape)) for name, value in feeds.items()]
    return make_model([node], inputs, [("Y", F, None)], initializers=initializers, opset=opset)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_lowering_equals_reference(case):
    _, node, feeds, initializers, opset = case
    model = _build(node, feeds, initializers, opset)
    want = refmnn.Session(model, check=False).run(feeds)["Y"]
    session = refmnn.Session(model, backends=("core",), check=False,
                             backend_registry=BackendRegistry(extra=[CoreBackend]))
    got = session.run(feeds)["Y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    backends = {step.backend for step in session.plan.steps if hasattr(step, "node")}
    assert backends == {"core"}, session.explain()
    assert node.op_type not in {step.node.op for step in session.plan.steps if hasattr(step, "node")}


def test_a_gemm_weight_is_transposed_once_when_planning():
    """Gemm(transB=1) with a weight (larger than the constants shape inference propagates):
    lowered to a MatMul on the transposed weight, made when planning; no step transposes it
    on every run (it did: a 5 MB Raster a run for MobileNetV2's classifier)."""
    weight = _x(90, 64)  # 5760 elements > FOLD_LIMIT
    node = helper.make_node("Gemm", ["A", "W", "C"], ["Y"], transB=1)
    feeds = {"A": _x(3, 64)}
    model = _build(node, feeds, [_const("W", weight), _const("C", _x(90))], 17)
    session = refmnn.Session(model, backends=("core",), check=False,
                             backend_registry=BackendRegistry(extra=[CoreBackend]))
    np.testing.assert_allclose(session.run(feeds)["Y"],
                               refmnn.Session(model, check=False).run(feeds)["Y"],
                               rtol=2e-6, atol=2e-6)
    ops = [step.node.op for step in session.plan.steps if hasattr(step, "node")]
    assert ops == ["MatMul", "Add"], session.explain()


def test_every_rule_has_a_case():
    covered = {case[1].op_type for case in CASES}
    assert {op for _, op in RULES} <= covered


def test_raster_reference_copies_regions_and_zero_fills():
    from refmnn.ops.raster import raster

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # transpose x into the top-left of a 3x3 output; the rest stays zero
    out = raster(x, shape=(3, 3), rank=2, regions=(0, 0, 0, 3, 2, 1, 3, 3, 1))
    np.testing.assert_array_equal(out, [[0, 3, 0], [1, 4, 0], [2, 5, 0]])
    with pytest.raises(ValueError, match="outside"):
        raster(x, shape=(2,), rank=1, regions=(0, 0, 0, 3, 1, 1))


NARROW_CASES = [
    ("Mean", helper.make_node("Mean", ["X", "Z"], ["Y"]), {"X": _x(64, 64), "Z": _x(64, 64)}),
    ("HardSigmoid", helper.make_node("HardSigmoid", ["X"], ["Y"], alpha=0.3, beta=0.4), {"X": _x(64, 64) * 4}),
    ("HardSwish", helper.make_node("HardSwish", ["X"], ["Y"]), {"X": _x(64, 64) * 4}),
]


@pytest.mark.parametrize("case", NARROW_CASES, ids=[c[0] for c in NARROW_CASES])
def test_lowering_rounds_narrow_floats_once(case):
    """float16 Mean / HardSigmoid / HardSwish: the references compute in float32 and round
    once; the lowered chain runs on float32 Casts (lower.WIDENED), so it equals the reference
    bit for bit (rounding to float16 after every step of the chain would not)."""
    _, node, feeds = case
    node.name = "n"
    feeds = {k: v.astype(np.float16) for k, v in feeds.items()}
    model = make_model([node], [(k, TensorProto.FLOAT16, list(v.shape)) for k, v in feeds.items()],
                       [("Y", TensorProto.FLOAT16, None)], opset=17)
    want = refmnn.Session(model, check=False).run(feeds)["Y"]
    session = refmnn.Session(model, backends=("core",), check=False,
                             backend_registry=BackendRegistry(extra=[CoreBackend]))
    got = session.run(feeds)["Y"]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)
    ops = [step.node.op for step in session.plan.steps if hasattr(step, "node")]
    assert ops[0] == "Cast" and ops[-1] == "Cast", ops
