"""The NumPy reference as a backend: every op, always available, the final fallback.

Its kernel for a node is the node's :attr:`OpDef.reference` function. Device tensors are NumPy
arrays in host memory. In **arena mode** (the default) every planned activation is a view into
one ``uint8`` arena array at the offset the memory planner chose, and each kernel copies its
result into that view (an op with an ``out`` parameter computes it there), so a planning bug
(two live values sharing bytes) shows up as a wrong answer in the reference itself. Values
that cannot be planned (sequences, optionals, strings, data-dependent shapes) are held as plain
Python objects (see :class:`Slot`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from refmnn.backends.base import Backend, Kernel, KernelDef, NodeSpec, Probe
from refmnn.backends.host import HostMemory
from refmnn.errors import ShapeError, node_context
from refmnn.ops._schema import OpContext

class Slot:
    """Holder for a value that has no planned storage (a sequence, an optional, a string
    tensor, a tensor whose shape is only known after running)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    def __repr__(self) -> str:
        return f"Slot({type(self.value).__name__})"


class ReferenceKernel(Kernel):
    """Runs a node's reference function and stores its results into the planned outputs
    (an op with an ``out`` parameter, :attr:`OpDef.writes_out`, is handed its first output's
    planned view and may write there directly; any other result is checked against the plan
    and copied in)."""

    def __init__(self, spec: NodeSpec, context: OpContext) -> None:
        self.spec = spec
        self.context = context
        # Fixed per node, so worked out once here rather than on every run: the function, its
        # keyword arguments (attributes with defaults, the context when it takes one) and the
        # Nones that stand for trailing optional inputs the node omits.
        self._function = spec.opdef.reference
        self._keywords = dict(spec.attrs)
        if spec.opdef.takes_context:
            self._keywords["ctx"] = context
        given = len(spec.node.inputs)
        self._padding = spec.opdef.pad_inputs([None] * given)[given:]
        self._writes_out = spec.opdef.writes_out

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any], workspace: Any | None) -> None:
        args = (*inputs, *self._padding)
        self._store(self._function(*args, **self._call_keywords(outputs)), args, outputs)

    def bind(self, inputs: Sequence[Any], outputs: Sequence[Any],
             workspace: Any | None) -> Callable[[], None]:
        """What :meth:`run` does, its arguments assembled once (the executor binds steps whose
        tensors are the same objects every run): a node's run is then its function's call and
        the check of what it returned -- about 2.5 us less per node. Sessions with and without,
        alternating in one process, 2 threads, median ms (a loaded machine): BERT-6 33.06 ->
        32.58 and 39.25 -> 38.79, ResNet-18 53.89 -> 53.37, ViT-Tiny 50.40 -> 50.57 and 41.69
        -> 38.44, MobileNetV2 28.76 -> 28.65; outputs bit-equal."""
        args = (*inputs, *self._padding)
        keywords = self._call_keywords(outputs)
        function, store = self._function, self._store

        def call() -> None:
            store(function(*args, **keywords), args, outputs)
        return call

    def _call_keywords(self, outputs: Sequence[Any]) -> dict[str, Any]:
        """The function's keyword arguments: attributes, context and, for an op that writes
        into its planned output (:attr:`OpDef.writes_out`), ``out`` (into() checks that it
        fits)."""
        if self._writes_out and outputs and isinstance(outputs[0], np.ndarray):
            return {**self._keywords, "out": outputs[0]}
        return self._keywords

    def _store(self, result: Any, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Each result into its planned output: nothing for one computed in place, a Slot's
        value for a host object, else a copy after checking it against the plan."""
        results = result if isinstance(result, tuple) else (result,)
        for index, target in enumerate(outputs):
            if target is None or (index < len(results) and results[index] is target):
                continue  # absent, or already written in place
            if index >= len(results):
                raise ShapeError(f"{self._where(inputs)}: the reference returned {len(results)} "
                                 f"output(s), the node lists more")
            value = results[index]
            if isinstance(target, Slot):
                target.value = _detached(value)
                continue
            value = np.asarray(value)
            if value.shape != target.shape or value.dtype != target.dtype:
                raise ShapeError(f"{self._where(inputs)} produced output #{index} as "
                                 f"{value.dtype}{list(value.shape)}, but the plan (from shape "
                                 f"inference) expects {target.dtype}{list(target.shape)}")
            np.copyto(target, value)

    def _where(self, inputs: Sequence[Any]) -> str:
        node = self.spec.node
        return node_context(node, self.spec.opset, inputs)


def _detached(value: Any) -> Any:
    """A host object to keep in a :class:`Slot`: ``value`` with every array in it (a
    sequence's elements, an optional's content) owning its memory. A reference function may
    return an input as it is -- a Loop of no iterations its initial values, SequenceConstruct
    and Optional the tensors they hold -- and a planned input is a view of arena bytes that a
    later step may reuse, while the Slot's value lives on (found by tools/fuzz_graphs.py: a
    SequenceAt read after its element's bytes were reused returned the other value). A new
    array is kept as it is; a NumPy scalar becomes a 0-d array."""
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, np.ndarray):
        return value if value.base is None else value.copy()
    if isinstance(value, list | tuple):
        return type(value)(_detached(v) for v in value)
    return value


class ReferenceBackend(HostMemory, Backend):
    """The NumPy reference backend (arena mode is the Session's ``arena`` option)."""

    name = "reference"

    @classmethod
    def probe(cls) -> Probe:
        return Probe(True, "", np.__version__, ("cpu",))

    def kernels(self) -> Sequence[KernelDef]:
        """Empty: the reference supports every op through :meth:`kernel_for` (it is the fallback)."""
        return ()

    def kernel_for(self, spec: NodeSpec, context: OpContext) -> ReferenceKernel:
        return ReferenceKernel(spec, context)

    def describe(self) -> str:
        return f"reference (NumPy {np.__version__})"
