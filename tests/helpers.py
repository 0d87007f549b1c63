"""Small model builders shared by the machinery tests, and the special-value checks of the
backends' tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from refmnn.compare import NONFINITE, OK, Tolerance, compare_arrays


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]],
    outputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]],
    *,
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    ir_version: int | None = None,
    extra_opsets: Sequence[tuple[str, int]] = (),
    functions: Sequence[onnx.FunctionProto] = (),
) -> onnx.ModelProto:
    """A model from nodes and (name, elem_type, shape) input/output declarations."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers),
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def add_relu_model(shape: Sequence[int | str | None] = (2, 3)) -> onnx.ModelProto:
    """Y = Relu(A + B): two nodes, named, with float32 inputs of the given shape."""
    nodes = [
        helper.make_node("Add", ["A", "B"], ["S"], name="add0"),
        helper.make_node("Relu", ["S"], ["Y"], name="relu0"),
    ]
    f = TensorProto.FLOAT
    return make_model(nodes, [("A", f, shape), ("B", f, shape)], [("Y", f, shape)])


def gelu_chain_model() -> onnx.ModelProto:
    """x [2, 8] -> y = x * (erf(x / sqrt(2)) + 1) * 0.5 as exporters write it: Div, Erf, Add,
    Mul, Mul, the constants from Constant nodes and sqrt(2) from a Sqrt of one (folded at plan
    time); the fusion pass makes the chain one Gelu."""
    f = TensorProto.FLOAT

    def const(name: str, value: float) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name],
                                value=helper.make_tensor(f"{name}_t", f, [], [value]))

    nodes = [const("two", 2.0), helper.make_node("Sqrt", ["two"], ["s"]),
             helper.make_node("Div", ["x", "s"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             const("one", 1.0), helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["x", "a"], ["m"]), const("half", 0.5),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    return make_model(nodes, [("x", f, [2, 8])], [("y", f, [2, 8])], opset=17)


def install_distribution(site: Path, dist: str, version: str, entry_points: str,
                         modules: dict[str, str]) -> None:
    """Leave ``site`` as ``pip install <dist>`` would: a dist-info folder with METADATA, an
    ``entry_points.txt`` and RECORD, plus the given modules (name -> source)."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)
    (info / "RECORD").write_text("")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)


def in_forked_child(work: Callable[[], object], timeout: int = 120) -> str:
    """Run ``work()`` in a child made by ``os.fork`` (as a multiprocessing pool with the "fork"
    start method does): "ran", or the exception it raised as "Type: message", or how the child
    ended when it sent nothing (killed by a signal, the alarm after ``timeout`` seconds among
    them)."""
    import os
    import signal

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's stack
        os.close(read)
        signal.alarm(timeout)
        try:
            work()
            message = "ran"
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            message = f"{type(exc).__name__}: {exc}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return message or f"child ended without a word (wait status {status})"


def special_input(shape: Sequence[int], seed: int = 0) -> np.ndarray:
    """Standard normal float32 with a tenth of the elements NaN, +inf, -inf, +-0 or subnormal,
    as tools/fuzz_graphs.py --special draws them for a backend (no huge values, where the order
    of a float32 sum decides whether it overflows)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    where = rng.random(shape) < 0.1
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45], np.float32)
    x[where] = rng.choice(specials, int(where.sum()))
    return x


def quantization_values(size: int, scale: float, seed: int = 0) -> np.ndarray:
    """``size`` float32 of every kind QuantizeLinear meets, shuffled: ordinary values, values at
    or next to rounding ties (``(k + 1/2) * scale``, rounded to float32; an eighth of them),
    100 far past the code range, NaN, +-inf, +-0 and a subnormal."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    ties = size // 8
    x[:ties] = (rng.integers(-200, 200, ties) + 0.5) * np.float32(scale)
    x[ties:ties + 100] = rng.standard_normal(100).astype(np.float32) * 1e6
    x[ties + 100:ties + 106] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45]
    return rng.permutation(x)


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: object) -> None:
    """The same dtype, shape and bytes (NaN payloads and the signs of zeros included)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=str(what))


def assert_same_specials(got: np.ndarray, want: np.ndarray, what: object, *,
                         rtol: float | None = None, atol: float = 0.0,
                         rel_l2: float | None = None) -> None:
    """NaN and infinities (with their signs) exactly where ``want`` has them -- the check of
    :func:`refmnn.compare.compare_arrays` --, then the finite values within ``|got - want| <=
    atol + rtol * |want|`` or, given ``rel_l2``, within that relative L2 error. ``got`` is
    widened to ``want``'s dtype (a float64 oracle stays float64)."""
    elementwise = Tolerance(atol=atol, rtol=rtol, scaled=False) if rtol is not None else \
        Tolerance(atol=np.inf, rtol=0.0, scaled=False)
    diff = compare_arrays(np.asarray(got).astype(want.dtype), want, elementwise)
    assert diff.status != NONFINITE, (what, diff.detail)
    assert diff.status == OK, (what, diff.detail)
    assert rel_l2 is None or diff.rel_l2 <= rel_l2, (what, diff.rel_l2)


def require_backend(name: str) -> None:
    """Skip the calling test, with the backend's own reason, where ``name`` cannot run here."""
    from refmnn.backends.registry import BackendRegistry

    info = BackendRegistry().info(name)
    if not info.available:
        pytest.skip(f"backend {name} not available here: {info.reason}")
