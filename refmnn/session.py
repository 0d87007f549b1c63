"""Session: load a model once, plan it once per input shape, run it many times.

::

    sess = refmnn.Session("model.onnx", backends=("numba", "reference"))
    outputs = sess.run({"input": x})                 # dict in the graph's output order
    everything = sess.run({"input": x}, intermediates=True)
    sess.run({"input": x}, callback=lambda name, op, ins, outs: print(name, op))
    print(sess.explain())                            # the plan as a table

As in MNN, work is split into *resize* and *run*. :meth:`Session.resize` (called implicitly by
``run`` for a new input-shape signature) infers every value's shape, folds constants, lowers
what the chosen backends lack, places nodes, chooses kernel schemes, plans memory and prepares
kernels; the result is cached per signature, so repeated runs on the same shapes do no planning.
Feeds are checked against the declared inputs before anything runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from refmnn.backends.base import Backend, BackendConfig
from refmnn.backends.registry import BackendRegistry
from refmnn.converter import load
from refmnn.dtypes import DType
from refmnn.errors import InputError, UsageError
from refmnn.graph import Graph, OptionalType, SequenceType, TensorType, Value, ValueType
from refmnn.ops import default_registry
from refmnn.ops.registry import OpRegistry
from refmnn.runtime.executor import Prepared
from refmnn.runtime.interpreter import Callback, Runner
from refmnn.schedule.plan import REFERENCE, Plan, compile_plan
from refmnn.schedule.shapes import Inferred, infer_types

SIGNATURE_CACHE = 8
"""How many distinct input-shape signatures keep their prepared plans."""


class Session:
    """A loaded model ready to run.

    Args:
        model: a path, bytes, an ``onnx.ModelProto`` or a refmnn :class:`Graph`.
        backends: backend names in order of preference; ``"reference"`` is always the final
            fallback (appended when not listed).
        registry: the op definitions to use (default: every built-in op).
        backend_registry: where backends are found (default: the ``refmnn.backends`` entry
            points).
        configs: a :class:`BackendConfig` per backend name.
        arena: arena mode for the reference (default): every activation the reference
            computes is copied into its planned view of one reused arena, so a planning bug shows
            up as a wrong answer. With False the reference keeps each result as the array its
            function returned (no arena, no copies); accelerated backends always use arenas.
        check: validate an ONNX model with ``onnx.checker`` while loading.
        seed: seed of the generator used by random ops that have no ``seed`` attribute.
        optimize: apply the graph passes of :mod:`refmnn.schedule.optimize` (Dropout/Identity
            removal, BatchNormalization folding, Conv/MatMul/Gemm epilogue fusion) when
            planning. None (default): only when an accelerated backend is chosen, fusing only
            into ops it has kernels for; True: always, every fusion (the reference runs the
            fused ops); False: never.
    """

    def __init__(
        self,
        model: Any,
        backends: Sequence[str] = ("reference",),
        *,
        registry: OpRegistry | None = None,
        backend_registry: BackendRegistry | None = None,
        configs: Mapping[str, BackendConfig] | None = None,
        arena: bool = True,
        check: bool = True,
        seed: int = 0,
        optimize: bool | None = None,
    ) -> None:
        if isinstance(backends, str):
            backends = (backends,)
        names = list(dict.fromkeys(backends))
        if REFERENCE not in names:
            names.append(REFERENCE)
        self.registry = registry if registry is not None else default_registry()
        self.backend_registry = backend_registry if backend_registry is not None else BackendRegistry()
        configs = dict(configs or {})
        self._backends: dict[str, Backend] = {
            name: self.backend_registry.create(name, configs.get(name)) for name in names
        }
        self.backends = tuple(names)
        self.arena = arena
        self.optimize = optimize
        self.graph: Graph = load(model, self.registry, check=check)
        self._runner = Runner(self.registry, np.random.default_rng(seed))
        self._runner.compiled(self.graph)  # resolves every op now: one error lists all misses
        self._prepared: dict[tuple[Any, ...], Prepared] = {}
        self._last: Prepared | None = None
        self._variants: dict[frozenset[str], Graph] = {}  # see _with_fed_defaults
        self._lock = threading.Lock()  # see _exclusive
        self._holder: int | None = None
        declared = {v.name: v.type for v in self.graph.inputs}
        self.declared_types: Inferred = infer_types(self.graph, declared, self.registry)

    @property
    def inputs(self) -> tuple[Value, ...]:
        """The declared graph inputs (initializers excluded)."""
        return self.graph.inputs

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self.graph.outputs

    @property
    def plan(self) -> Plan | None:
        """The plan of the most recent resize or run (None before the first)."""
        return self._last.plan if self._last is not None else None

    def resize(self, shapes: Mapping[str, Sequence[int]] | None = None) -> Plan:
        """Plan and prepare for concrete input shapes (declared static shapes when omitted).

        Cached per input-shape signature: a second call with the same shapes does nothing.
        """
        types = self._types_for(shapes or {})
        with self._exclusive("resize"):
            return self._prepare(types).plan

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
                empty optional); an input the model also gives an initializer (a default,
                ``graph.defaults``) may be fed too, and the feed replaces the default.
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
        checked = check_feeds(self.graph.inputs, feeds, self.graph.defaults)
        types = {name: _runtime_type(value) for name, value in checked.items()}
        with self._exclusive("run"):
            prepared = self._prepare(types, self._with_fed_defaults(checked))
            return prepared.run(checked, intermediates=intermediates, callback=callback)

    def _with_fed_defaults(self, feeds: Mapping[str, Any]) -> Graph:
        """The graph to plan when some inputs with a default are fed: those become plain
        inputs, their initializers gone (the plan then reads them as it reads any input, never
        folding or packing the defaults). Made once per set of fed defaults."""
        fed = tuple(v for v in self.graph.defaults if v.name in feeds)
        if not fed:
            return self.graph
        names = frozenset(v.name for v in fed)
        graph = self._variants.get(names)
        if graph is None:
            initializers = {k: a for k, a in self.graph.initializers.items() if k not in names}
            graph = self.graph.replace(inputs=self.graph.inputs + fed, defaults=tuple(
                v for v in self.graph.defaults if v.name not in names), initializers=initializers)
            self._variants[names] = graph
        return graph

    def explain(self, shapes: Mapping[str, Sequence[int]] | None = None) -> str:
        """The plan for ``shapes`` (or the last plan) as a table with a memory summary."""
        types = self._types_for(shapes or {}) if shapes is not None or self._last is None \
            else None
        with self._exclusive("explain"):
            prepared = self._prepare(types) if types is not None else self._last
            assert prepared is not None
            return prepared.plan.table()

    @contextmanager
    def _exclusive(self, method: str) -> Iterator[None]:
        """Hold the Session for one call: planning, the prepared plans and their arenas
        belong to one call at a time.

        A run writes every activation into its plan's arena, so two runs of one Session at once
        (threads sharing it) would write into each other's values: before this lock, three
        threads running SqueezeNet 1.1 on one Session got 30 wrong results in 30 on the
        reference (29 on numba), silently. Runs from several threads now take turns (separate
        Sessions run side by side). A run started from inside the same thread's own run -- a
        callback or a subgraph's op calling ``run`` again -- would overwrite the arena under
        the outer run, and waiting for it would hang: it is refused.
        """
        me = threading.get_ident()
        if self._holder == me:  # only this thread can have set it to its own id
            raise UsageError(f"Session.{method}() was called during this Session's own run on "
                             f"the same thread (from a callback?): the run in progress owns the "
                             f"Session's buffers; use another Session for a nested run")
        with self._lock:
            self._holder = me
            try:
                yield
            finally:
                self._holder = None

    def _types_for(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, ValueType | None]:
        unknown = sorted(set(shapes) - {v.name for v in self.graph.inputs})
        if unknown:
            raise UsageError(f"unknown input name(s) {unknown}; inputs are {[v.name for v in self.inputs]}")
        types: dict[str, ValueType | None] = {}
        for value in self.graph.inputs:
            declared = value.type
            if value.name in shapes:
                dtype = declared.dtype if isinstance(declared, TensorType) else None
                types[value.name] = TensorType(dtype, tuple(int(d) for d in shapes[value.name]))
            elif isinstance(declared, TensorType) and declared.is_static:
                types[value.name] = declared
            elif isinstance(declared, TensorType):
                symbolic = [d for d in (declared.shape or ("?",)) if not isinstance(d, int)]
                raise UsageError(f"input {value.name!r} ({declared}) has symbolic or unknown dims "
                                 f"{symbolic}; give its shape")
            else:
                types[value.name] = declared
        return types

    def _prepare(self, types: Mapping[str, ValueType | None], graph: Graph | None = None
                 ) -> Prepared:
        """The prepared plan for these input types (``graph``: :meth:`_with_fed_defaults`'s,
        whose extra inputs are part of ``types`` and so of the signature)."""
        signature = tuple(sorted((name, str(t)) for name, t in types.items()))
        prepared = self._prepared.get(signature)
        if prepared is None:
            backends = [self._backends[name] for name in self.backends]
            plan = compile_plan(graph or self.graph, types, self.registry, backends,
                                reference_arena=self.arena, optimize=self.optimize)
            prepared = Prepared(plan, self._backends, self._runner)
            if len(self._prepared) >= SIGNATURE_CACHE:
                oldest = next(iter(self._prepared))
                self._prepared.pop(oldest).close()
            self._prepared[signature] = prepared
        self._last = prepared
        return prepared

    def close(self) -> None:
        """Release every prepared plan's buffers and the backends (after a run in progress on
        another thread ends)."""
        with self._exclusive("close"):
            for prepared in self._prepared.values():
                prepared.close()
            self._prepared.clear()
            for backend in self._backends.values():
                backend.close()


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


def check_feeds(declared: Sequence[Value], feeds: Mapping[str, Any],
                defaults: Sequence[Value] = ()) -> dict[str, Any]:
    """Check feeds against the declared inputs (and any of the inputs with a default that are
    fed); returns them as arrays (scalars made 0-d).

    Symbolic dims must be bound consistently: the same symbol has one size in one run.
    """
    names = [v.name for v in declared]
    if not isinstance(feeds, Mapping):
        raise InputError(f"feeds must map input names to values, got {type(feeds).__name__}; "
                         f"the model's inputs are {names}")
    declared = [*declared, *(v for v in defaults if v.name in feeds)]
    unknown = sorted(set(feeds) - {v.name for v in declared})
    missing = [n for n in names if n not in feeds]
    if unknown or missing:
        parts = []
        if missing:
            parts.append(f"missing feed(s) {missing}")
        if unknown:
            parts.append(f"unknown input name(s) {unknown}")
        also = [v.name for v in defaults]
        raise InputError("; ".join(parts) + f"; the model's inputs are {names}" +
                         (f" (and, with a default, {also})" if also else ""))
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
