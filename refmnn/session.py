"""Session: load a model once, run it many times.

::

    sess = refmnn.Session("model.onnx")
    outputs = sess.run({"input": x})                 # dict in the graph's output order
    everything = sess.run({"input": x}, intermediates=True)
    sess.run({"input": x}, callback=lambda name, op, ins, outs: print(name, op))

Feeds are checked against the declared inputs before anything runs. Shapes and dtypes of every
value are inferred once per distinct input-shape signature and each node's outputs are checked
against them while it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refmnn.converter import load
from refmnn.dtypes import DType
from refmnn.errors import InputError, UsageError
from refmnn.graph import Graph, OptionalType, SequenceType, TensorType, Value, ValueType
from refmnn.ops import default_registry
from refmnn.ops.registry import OpRegistry
from refmnn.runtime.interpreter import Callback, Runner
from refmnn.schedule.shapes import Inferred, infer_types

SIGNATURE_CACHE = 16
"""How many distinct input-shape signatures keep their inferred types."""


class Session:
    """A loaded model ready to run on the reference.

    Args:
        model: a path, bytes, an ``onnx.ModelProto`` or a refmnn :class:`Graph`.
        backends: backend names in order of preference; ``"reference"`` is always the fallback.
        registry: the op definitions to use (default: every built-in op).
        check: validate an ONNX model with ``onnx.checker`` while loading.
        seed: seed of the generator used by random ops that have no ``seed`` attribute.
    """

    def __init__(
        self,
        model: Any,
        backends: Sequence[str] = ("reference",),
        *,
        registry: OpRegistry | None = None,
        check: bool = True,
        seed: int = 0,
    ) -> None:
        unknown = [b for b in backends if b != "reference"]
        if unknown:
            raise UsageError(f"unknown backend(s) {unknown}; available: ['reference']")
        self.backends = tuple(backends)
        self.registry = registry if registry is not None else default_registry()
        self.graph: Graph = load(model, self.registry, check=check)
        self._runner = Runner(self.registry, np.random.default_rng(seed))
        self._compiled = self._runner.compiled(self.graph)
        self._types: dict[tuple[Any, ...], Inferred] = {}
        declared = {v.name: v.type for v in self.graph.inputs}
        self.declared_types: Inferred = infer_types(self.graph, declared, self.registry)

    @property
    def inputs(self) -> tuple[Value, ...]:
        """The declared graph inputs (initializers excluded)."""
        return self.graph.inputs

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self.graph.outputs

    def run(
        self,
        feeds: Mapping[str, Any],
        *,
        intermediates: bool = False,
        callback: Callback | None = None,
    ) -> dict[str, Any]:
        """Run the model.

        Args:
            feeds: one value per declared input (arrays; lists for sequence inputs; None for an
                empty optional).
            intermediates: also return every intermediate value, in the order computed.
            callback: called after each node as ``callback(node_name, op, inputs, outputs)``.

        Returns:
            The graph outputs by name, in the graph's output order (followed by every other
            value when ``intermediates`` is set).

        Raises:
            InputError: a missing or unknown feed, a wrong dtype, or a shape that contradicts
                the declaration.
            OpError / ShapeError: a node failed; the message names node, op, opset and inputs.
        """
        checked = check_feeds(self.graph.inputs, feeds)
        types = self._infer(checked)
        env = self._runner.execute(self._compiled, checked, keep=intermediates,
                                   callback=callback, types=types.types)
        result = {v.name: env[v.name] for v in self.graph.outputs}
        if intermediates:
            for name, value in env.items():
                if name not in result and name not in self.graph.initializers:
                    result[name] = value
        return result

    def _infer(self, feeds: Mapping[str, Any]) -> Inferred:
        signature = tuple((name, _signature(value)) for name, value in sorted(feeds.items()))
        cached = self._types.get(signature)
        if cached is None:
            given = {name: _runtime_type(value) for name, value in feeds.items()}
            cached = infer_types(self.graph, given, self.registry)
            if len(self._types) >= SIGNATURE_CACHE:
                self._types.pop(next(iter(self._types)))
            self._types[signature] = cached
        return cached


def _signature(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape)
    if isinstance(value, list):
        return ("seq", tuple(_signature(v) for v in value))
    return (type(value).__name__,)


def _runtime_type(value: Any) -> ValueType | None:
    if isinstance(value, np.ndarray):
        try:
            return TensorType(DType.from_numpy(value.dtype), tuple(value.shape))
        except KeyError:
            return None
    return None


def _as_array(name: str, value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    raise InputError(f"input {name!r}: expected a numpy array, got {type(value).__name__}")


def check_feeds(declared: Sequence[Value], feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Check feeds against the declared inputs; returns them as arrays (scalars made 0-d).

    Symbolic dims must be bound consistently: the same symbol has one size in one run.
    """
    names = [v.name for v in declared]
    unknown = sorted(set(feeds) - set(names))
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        parts = []
        if missing:
            parts.append(f"missing feed(s) {missing}")
        if unknown:
            parts.append(f"unknown input name(s) {unknown}")
        raise InputError("; ".join(parts) + f"; the model's inputs are {names}")
    bound: dict[str, int] = {}
    checked: dict[str, Any] = {}
    for value in declared:
        feed = feeds[value.name]
        kind = value.type
        if isinstance(kind, OptionalType):
            if feed is None:
                checked[value.name] = None
                continue
            kind = kind.elem
        if isinstance(kind, SequenceType):
            if not isinstance(feed, list | tuple):
                raise InputError(f"input {value.name!r} is a sequence; feed a list of arrays")
            checked[value.name] = [_as_array(value.name, v) for v in feed]
            continue
        array = _as_array(value.name, feed)
        if isinstance(kind, TensorType):
            _check_tensor(value.name, kind, array, bound)
        checked[value.name] = array
    return checked


def _check_tensor(name: str, declared: TensorType, array: np.ndarray, bound: dict[str, int]) -> None:
    if declared.dtype is not None and array.dtype != declared.dtype.numpy:
        if not (declared.dtype is DType.string and array.dtype.kind in "OUS"):
            raise InputError(f"input {name!r}: dtype {array.dtype} given, the model declares "
                             f"{declared.dtype.name}")
    if declared.shape is None:
        return
    if array.ndim != len(declared.shape):
        raise InputError(f"input {name!r}: shape {list(array.shape)} has rank {array.ndim}, the "
                         f"model declares {declared} (rank {len(declared.shape)})")
    for axis, (want, got) in enumerate(zip(declared.shape, array.shape, strict=True)):
        if isinstance(want, int) and want != got:
            raise InputError(f"input {name!r}: shape {list(array.shape)} contradicts the "
                             f"declared {declared} at axis {axis}")
        if isinstance(want, str):
            if bound.setdefault(want, got) != got:
                raise InputError(f"input {name!r}: dim {want!r} is {got} here but "
                                 f"{bound[want]} in another input")
