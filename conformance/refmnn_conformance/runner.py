"""How one sample runs on a backend and is judged against the reference.

A sample becomes a one-node refmnn :class:`~refmnn.graph.Graph`: the sample's arrays are graph
inputs (inputs whose *values* the op's shape rule reads, such as Reshape's shape, become
initializers, as they are in real models, and so do the inputs a case lists in ``constants``:
the weights of its ``constant_weights`` variants), an omitted optional input is ``""``. The
graph runs in ``refmnn.Session(graph, backends=(backend,))``; the plan's steps say where the
node was placed:

* on the tested backend (or, after lowering, some of its core ops are): the outputs are judged;
* on the reference while another backend is tested: "fell back" (the backend declares the op
  but not for this sample: dtype, opset or scheme, or the sample has an empty tensor, which the
  planner always gives the reference) or "unsupported" (it does not declare the op at all).
  Neither is a failure; the report shows them.

The expected value is the op's reference function called directly on the same inputs (the
reference backend runs exactly that function); for float16/bfloat16 the reference computes in
float32 and rounds once. A float64 *oracle* (the reference on inputs cast to float64) gives the
"exact" answer against which ULP distances are reported.

Before the run every planned output view is poison-filled (NaN for floats, a sentinel for
integers) through the backend's ``upload``, so elements a kernel forgets to write show up.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import refmnn
from refmnn.backends import BackendConfig, BackendRegistry
from refmnn.backends.base import Storage
from refmnn.dtypes import DType
from refmnn.graph import Graph, Node, TensorType, Value
from refmnn.ops import default_registry
from refmnn.ops._schema import OpContext, OpDef
from refmnn.ops.registry import OpRegistry
from refmnn.schedule.plan import REFERENCE, Plan, RunStep

from refmnn_conformance.case import ErrorSample, OpCase, Sample, _finfo, _is_float
from refmnn_conformance.compare import ConformanceFailure, assert_conforms, ulp_distance
from refmnn_conformance.tolerances import tolerance_for

PASS, FAIL, FELL_BACK, UNSUPPORTED = "pass", "fail", "fell back", "unsupported"
REFERENCE_ERROR = "reference error"

_REGISTRY: OpRegistry | None = None


def op_registry() -> OpRegistry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = default_registry()
    return _REGISTRY


@dataclass
class Result:
    """The verdict on one sample (value check, error check or contract check)."""

    status: str
    placed: tuple[str, ...] = ()
    reason: str = ""
    message: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    ulp_backend: float | None = None
    ulp_reference: float | None = None
    tolerance: tuple[float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        out = {"status": self.status, "placed": list(self.placed), "reason": self.reason}
        for key in ("max_abs", "max_rel", "ulp_backend", "ulp_reference"):
            value = getattr(self, key)
            out[key] = None if value is None else float(f"{value:.6g}")
        out["tolerance"] = list(self.tolerance) if self.tolerance else None
        return out


# ---------------------------------------------------------------------------------------------
# the one-node graph


def resolve(case_op: str, domain: str, opset: int) -> OpDef:
    return op_registry().resolve(domain, case_op, opset)


def sample_ports(op: str, domain: str, opset: int, sample: Sample,
                 constants: Collection[int] = ()
                 ) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The node's input names (``x<i>``, ``""`` for an omitted optional input), its feeds and
    its initializers: the inputs whose values the op's shape rule reads and those listed in
    ``constants`` are initializers, as they are in real models."""
    opdef = resolve(op, domain, opset)
    names, initializers, feeds = [], {}, {}
    for index, array in enumerate(sample.inputs):
        if array is None:
            names.append("")
            continue
        name = f"x{index}"
        names.append(name)
        if index in opdef.value_inputs or index in constants:
            initializers[name] = np.array(array, copy=True, order="C")
        else:
            feeds[name] = array
    while names and names[-1] == "":
        names.pop()
    return names, feeds, initializers


def build_graph(op: str, domain: str, opset: int, sample: Sample,
                constants: Collection[int] = ()) -> tuple[Graph, dict[str, np.ndarray]]:
    """The one-node graph of a sample and its feeds (:func:`sample_ports`)."""
    names, feeds, initializers = sample_ports(op, domain, opset, sample, constants)
    inputs = [Value(name, TensorType(DType.from_numpy(array.dtype), tuple(array.shape)))
              for name, array in feeds.items()]
    outputs = tuple(f"y{i}" for i in range(sample.outputs))
    node = Node(name=f"{op}_0", op=op, domain=domain, inputs=tuple(names), outputs=outputs,
                attrs=dict(sample.attrs))
    opsets = {"": opset} if not domain else {"": 21, domain: opset}
    graph = Graph(nodes=(node,), inputs=tuple(inputs), outputs=tuple(Value(n) for n in outputs),
                  initializers=initializers, opsets=opsets, name=f"{op}_{sample.name}")
    return graph, feeds


def reference_outputs(op: str, domain: str, opset: int, sample: Sample,
                      inputs: Sequence[np.ndarray | None] | None = None) -> tuple[Any, ...]:
    """The op's reference function called directly on the sample's inputs (or ``inputs``)."""
    opdef = resolve(op, domain, opset)
    graph, _ = build_graph(op, domain, opset, sample)
    node = graph.nodes[0]
    args = [None if a is None else np.array(a, copy=True, order="C")
            for a in (sample.inputs if inputs is None else inputs)]
    bound = opdef.bind_attrs(node.attrs)
    with np.errstate(all="ignore"):
        if opdef.takes_context:
            ctx = OpContext(node, opset, rng=np.random.default_rng(0), graph=graph)
            result = opdef.reference(*args, ctx=ctx, **bound)
        else:
            result = opdef.reference(*args, **bound)
    results = result if isinstance(result, tuple) else (result,)
    return tuple(np.asarray(r) if isinstance(r, np.generic | np.ndarray) else r
                 for r in results[:sample.outputs])


def float64_oracle(op: str, domain: str, opset: int, sample: Sample) -> tuple[Any, ...] | None:
    """The reference on float64-cast float inputs; None when the sample has no float input or
    the reference refuses float64 for this op."""
    cast, changed = [], False
    for array in sample.inputs:
        if array is not None and _is_float(array.dtype) and array.dtype != np.float64:
            cast.append(array.astype(np.float64))
            changed = True
        else:
            cast.append(array)
    if not changed:
        return None
    try:
        return reference_outputs(op, domain, opset, sample, cast)
    except Exception:
        return None


# ---------------------------------------------------------------------------------------------
# placement and poison


def placement(plan: Plan, backend: str) -> tuple[bool, tuple[str, ...], str]:
    """(judged, backends of the run steps, reason) for a plan tested on ``backend``."""
    steps = [s for s in plan.steps if isinstance(s, RunStep)]
    placed = tuple(sorted({s.backend for s in steps}))
    if backend == REFERENCE:
        return True, placed, ""
    if any(s.backend == backend for s in steps):
        return True, placed, ""
    reasons = "; ".join(dict.fromkeys(s.reason for s in steps)) or "folded at plan time"
    return False, placed, reasons


def declares(backend: Any, op: str, domain: str) -> bool:
    """True when a backend has any KernelDef for the op (else the op is 'unsupported')."""
    try:
        return any(k.op == op and k.domain == domain for k in backend.kernels())
    except Exception:
        return False


def poison_values(dtype: np.dtype) -> tuple[Any, Any]:
    """Two distinct fill values: NaN (or the largest finite value in formats without NaN) and
    the most negative finite value for floats; the extremes for integers; True/False."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True, False
    if _is_float(dtype):
        info = _finfo(dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            nan = np.array(np.nan, dtype=np.float32).astype(dtype)
        first = nan if np.isnan(nan.astype(np.float32)) else np.array(info.max).astype(dtype)
        second = np.array(-float(info.max)).astype(dtype) if float(info.min) < 0 else \
            np.array(float(info.tiny)).astype(dtype)
        if not np.isnan(first.astype(np.float32)) and first == second:
            second = np.array(float(info.tiny)).astype(dtype)
        return first, second
    if dtype == object:
        return "\x00poison", "\x00poison2"
    import ml_dtypes

    info = ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)
    return np.array(info.max).astype(dtype), np.array(info.min).astype(dtype)


def poison_outputs(session: refmnn.Session, which: int = 0, skip: Sequence[str] = ()) -> list[str]:
    """Fill every planned (arena) value except the graph inputs with a poison value, through
    the owning backend's ``upload``. Returns the keys filled."""
    prepared = session._last
    assert prepared is not None, "resize the session first"
    filled = []
    for key, slot in sorted(prepared.plan.slots.items()):
        if slot.storage is not Storage.ARENA or key in skip or not isinstance(slot.type, TensorType):
            continue
        dtype = slot.type.dtype.numpy  # type: ignore[union-attr]
        value = poison_values(dtype)[which]
        fill = np.full(tuple(slot.type.shape), value, dtype=dtype)  # type: ignore[arg-type]
        prepared.backends[slot.backend].upload(fill, prepared.tensors[key])
        filled.append(key)
    return filled


def make_session(graph: Any, backend: str, registry: BackendRegistry | None,
                 config: BackendConfig | None, **kwargs: Any) -> refmnn.Session:
    configs = {backend: config} if config is not None else None
    return refmnn.Session(graph, backends=(backend,), backend_registry=registry, configs=configs,
                          **kwargs)


# ---------------------------------------------------------------------------------------------
# the checks


def check_value(case: OpCase, dtype: DType, sample: Sample, backend: str, *,
                registry: BackendRegistry | None = None, config: BackendConfig | None = None,
                seed: int | None = None) -> Result:
    """Run one sample on ``backend`` and judge it; raises ConformanceFailure on a mismatch
    (the Result of a conforming or skipped sample is returned)."""
    opset = case.resolved_opset
    graph, feeds = build_graph(case.op, case.domain, opset, sample, case.constants)
    try:
        want = reference_outputs(case.op, case.domain, opset, sample)
    except Exception as exc:
        if backend == REFERENCE:
            raise
        # the reference itself cannot compute the sample: not the tested backend's failure
        text = str(exc).splitlines()[0] if str(exc) else ""
        return Result(REFERENCE_ERROR, reason=f"the reference raised {type(exc).__name__}: {text}")
    session = make_session(graph, backend, registry, config)
    plan = session.resize({k: v.shape for k, v in feeds.items()})
    judged, placed, reason = placement(plan, backend)
    if not judged:
        status = FELL_BACK if declares(session._backends[backend], case.op, case.domain) else UNSUPPORTED
        return Result(status, placed, reason)
    poison_outputs(session, 0, skip=tuple(feeds))
    with np.errstate(all="ignore"):
        got = session.run(feeds)
    precision = config.precision if config is not None else "normal"
    oracle = float64_oracle(case.op, case.domain, opset, sample)
    result = Result(PASS, placed)
    what = f"{case.id} {dtype.name} sample {sample.name!r} on backend {backend!r}"
    for index, name in enumerate(graph.nodes[0].outputs):
        g, w = got[name], want[index]
        if not isinstance(w, np.ndarray):
            continue
        out_dtype = DType.from_numpy(w.dtype) if w.dtype != object else DType.string
        tol = tolerance_for(case, out_dtype, sample, precision)
        result.tolerance = (tol.rtol, tol.atol)
        stats = assert_conforms(g, w, tol, what=f"{what}, output {index}",
                                inputs=sample.describe(), seed=seed)
        result.max_abs = max(result.max_abs or 0.0, stats.max_abs)
        result.max_rel = max(result.max_rel or 0.0, stats.max_rel)
        if oracle is not None and index < len(oracle) and isinstance(oracle[index], np.ndarray):
            ub, ur = ulp_distance(g, oracle[index]), ulp_distance(w, oracle[index])
            if ub is not None:
                result.ulp_backend = max(result.ulp_backend or 0.0, ub)
            if ur is not None:
                result.ulp_reference = max(result.ulp_reference or 0.0, ur)
    return result


def check_error(case: OpCase, dtype: DType, error: ErrorSample, backend: str, *,
                registry: BackendRegistry | None = None, config: BackendConfig | None = None) -> Result:
    """The sample must raise ``error.error`` (message matching ``error.match``)."""
    sample = error.sample
    opset = case.resolved_opset
    try:
        graph, feeds = build_graph(case.op, case.domain, opset, sample, case.constants)
        session = make_session(graph, backend, registry, config)
        with np.errstate(all="ignore"):
            session.run(feeds)
    except Exception as exc:  # noqa: BLE001 - judged below
        text = "\n".join([str(exc), *getattr(exc, "__notes__", [])])
        if isinstance(exc, error.error) and re.search(error.match, text):
            return Result(PASS, reason=f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}")
        raise ConformanceFailure(
            f"{case.id} {dtype.name} error sample {sample.name!r} on backend {backend!r}: expected "
            f"{error.error.__name__} matching {error.match!r}, got {type(exc).__name__}: {text}\n"
            f"inputs: {sample.describe()}") from exc
    raise ConformanceFailure(
        f"{case.id} {dtype.name} error sample {sample.name!r} on backend {backend!r}: expected "
        f"{error.error.__name__} matching {error.match!r}, but it ran without error\n"
        f"inputs: {sample.describe()}")


def compare_outputs(got: Mapping[str, Any], want: Mapping[str, Any], tol_for: Any, what: str,
                    inputs: str = "") -> Result:
    """Judge every output of a model run (arrays, sequences of arrays, None)."""
    result = Result(PASS)
    for name, w in want.items():
        g = got.get(name)
        pairs = list(zip(g, w, strict=False)) if isinstance(w, list) and isinstance(g, list) else [(g, w)]
        if isinstance(w, list) and (not isinstance(g, list) or len(g) != len(w)):
            raise ConformanceFailure(f"{what}, output {name!r}: a sequence of {len(w)} expected, "
                                     f"got {type(g).__name__}")
        for g_item, w_item in pairs:
            if w_item is None or g_item is None:
                if (w_item is None) != (g_item is None):
                    raise ConformanceFailure(f"{what}, output {name!r}: got {g_item!r}, "
                                             f"reference {w_item!r}")
                continue
            w_item, g_item = np.asarray(w_item), np.asarray(g_item)
            tol = tol_for(w_item.dtype)
            result.tolerance = (tol.rtol, tol.atol)
            stats = assert_conforms(g_item, w_item, tol, what=f"{what}, output {name!r}", inputs=inputs)
            result.max_abs = max(result.max_abs or 0.0, stats.max_abs)
            result.max_rel = max(result.max_rel or 0.0, stats.max_rel)
    return result
