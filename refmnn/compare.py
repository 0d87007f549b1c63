"""Find the first layer where two backends diverge (``refmnn compare``).

The model runs on backend A and on backend B (each as ``Session(model, backends=(name,))``, so
the reference is the fallback of both) on the same feeds, with every intermediate value
collected. Every value is then compared in the node order of the model's graph::

    ok  <=>  |a - b| <= atol * max(1, max|b|) + rtol * |b|      elementwise

(floats; integers, booleans and strings must be equal; NaN positions must match, infinities
must be equal; shape and dtype must match). The absolute term scales with the value's largest
finite magnitude: a float32 sum's rounding error grows with the size of its terms, not of its
result, so an element that cancels to near zero inside a layer of magnitude 15 carries an error
of ~1e-5 that is noise, not divergence (ResNet-18 on two correct backends: 10 of 24 values
beyond a plain 1e-5 + 1e-4 |b| from such elements, none beyond the scaled term). ``--absolute``
takes ``atol`` as it is, as ``numpy.isclose`` does.

The **first divergent node** is the first node, in topological order, with an output beyond
tolerance: its inputs all agree (they were compared before it), its output does not. It is
reported with the inputs it received. A value one side's plan does not compute -- fused into
the node that consumes it (a Conv into its Relu, a Gelu chain into one node) or folded at plan
time -- is listed as ``not-in-a``/``not-in-b`` and not compared; the fused node's output is,
so a fused kernel's error still shows there.

A golden set (``--save-golden DIR``) stores backend A's inputs, outputs and intermediates::

    DIR/manifest.json   format, model sha256, backend, seed, shapes, inputs and values in order
    DIR/golden.npz      one array per value under a safe key (v00000, v00001, ...)
    DIR/inputs.npz      the feeds used (i00000, ...)

``--golden DIR`` reloads it in place of running A, so a backend is checked against a fixed
golden set (regression tests). Library use::

    report = compare_backends("model.onnx", "reference", "numba")
    print(report.table()); report.ok; report.first          # the first divergence, or None
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refmnn.errors import UsageError

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4
GOLDEN_FORMAT = "refmnn-golden"
GOLDEN_VERSION = 1
MANIFEST = "manifest.json"
VALUES_FILE = "golden.npz"
INPUTS_FILE = "inputs.npz"

# statuses of one compared value. Not divergences: OK; ONLY_A/ONLY_B, values that exist only
# on one side because one backend lowered a node the other ran whole; MISSING_A/MISSING_B,
# values of the model that one side's plan does not compute (fused into the node that consumes
# them, or folded at plan time): nothing to compare, and the fused node's own output still is.
OK = "ok"
MISMATCH = "MISMATCH"
NONFINITE = "NONFINITE"
SHAPE = "SHAPE"
DTYPE = "DTYPE"
MISSING_A = "not-in-a"
MISSING_B = "not-in-b"
ONLY_A = "only-a"
ONLY_B = "only-b"
BENIGN = (OK, ONLY_A, ONLY_B, MISSING_A, MISSING_B)
_FUSED = "fused or folded away by its plan"


# ---------------------------------------------------------------------------------------------
# comparing two values


@dataclass(frozen=True)
class Tolerance:
    """Elementwise tolerance ``|a - b| <= atol * scale + rtol * |b|`` for floating-point
    values; ``scale`` is ``max(1, max|b|)`` over b's finite elements when ``scaled`` (the
    default, see the module docstring), else 1."""

    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    scaled: bool = True

    def absolute(self, b: np.ndarray) -> float:
        """The absolute term for a value whose finite elements' magnitudes are ``b``."""
        if not self.scaled or b.size == 0:
            return self.atol
        return self.atol * max(1.0, float(b.max()))

    def describe(self) -> str:
        """The rule in words, for reports."""
        scale = "*max(1, max|b|)" if self.scaled else ""
        return f"|a-b| <= {self.atol:g}{scale} + {self.rtol:g}*|b|"


@dataclass(frozen=True)
class Diff:
    """How two values differ.

    Attributes:
        status: OK, MISMATCH (beyond tolerance or unequal), NONFINITE (NaN/inf positions
            differ), SHAPE, DTYPE, or one of the one-sided statuses.
        max_abs: largest ``|a - b|`` over elements finite on both sides (None if not computed).
        max_rel: largest ``|a - b| / |b|`` over those elements with ``b != 0``.
        rel_l2: ``||a - b||_2 / ||b||_2`` (0 when both are zero, inf when only b is).
        bad: number of elements out of tolerance (or unequal).
        detail: a few words when the status needs them.
    """

    status: str
    max_abs: float | None = None
    max_rel: float | None = None
    rel_l2: float | None = None
    bad: int = 0
    detail: str = ""


def _describe_type(value: Any) -> tuple[str, str]:
    """``(shape, dtype)`` of a value as short strings."""
    if value is None:
        return "-", "none"
    if isinstance(value, list):
        return f"seq[{len(value)}]", "sequence"
    array = np.asarray(value)
    return "x".join(str(d) for d in array.shape) or "scalar", str(array.dtype)


def _is_float(dtype: np.dtype) -> bool:
    """True for NumPy float/complex dtypes and the ml_dtypes narrow floats."""
    if dtype.kind in "fc":
        return True
    try:
        from refmnn.dtypes import DType

        return DType.from_numpy(dtype).is_float
    except (KeyError, TypeError, ValueError):
        return False


def compare_arrays(a: np.ndarray, b: np.ndarray, tol: Tolerance) -> Diff:
    """Compare two arrays: shape and dtype first, then exact or within ``tol``."""
    if a.shape != b.shape:
        return Diff(SHAPE, detail=f"shape {list(a.shape)} vs {list(b.shape)}")
    if a.dtype != b.dtype:
        return Diff(DTYPE, detail=f"dtype {a.dtype} vs {b.dtype}")
    if not _is_float(a.dtype):
        return _compare_exact(a, b)
    return _compare_float(a, b, tol)


def _compare_exact(a: np.ndarray, b: np.ndarray) -> Diff:
    """Integers, booleans, strings: every element equal; errors as numbers where they are."""
    unequal = int(np.count_nonzero(a != b))
    if a.dtype.kind in "iub":
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        diff = np.abs(wide_a - wide_b)
        max_abs, max_rel, rel_l2 = _error_measures(diff, np.abs(wide_b))
    else:
        max_abs = max_rel = rel_l2 = None
    return Diff(OK if unequal == 0 else MISMATCH, max_abs, max_rel, rel_l2, unequal,
                "" if unequal == 0 else f"{unequal} unequal element(s)")


def _compare_float(a: np.ndarray, b: np.ndarray, tol: Tolerance) -> Diff:
    """Floats (narrow ones in float64): non-finite positions first, then the tolerance."""
    dtype = np.complex128 if a.dtype.kind == "c" else np.float64
    wide_a, wide_b = a.astype(dtype), b.astype(dtype)
    finite = np.isfinite(wide_a) & np.isfinite(wide_b)
    nan_a, nan_b = np.isnan(wide_a), np.isnan(wide_b)
    other = ~finite & ~(nan_a & nan_b) & ~(wide_a == wide_b)
    nonfinite_bad = int(np.count_nonzero(other))
    diff = np.abs(wide_a[finite] - wide_b[finite])
    scale = np.abs(wide_b[finite])
    beyond = int(np.count_nonzero(diff > tol.absolute(scale) + tol.rtol * scale))
    max_abs, max_rel, rel_l2 = _error_measures(diff, scale)
    if nonfinite_bad:
        return Diff(NONFINITE, max_abs, max_rel, rel_l2, nonfinite_bad + beyond,
                    f"{nonfinite_bad} element(s) NaN/inf on one side only or with other signs")
    if beyond:
        return Diff(MISMATCH, max_abs, max_rel, rel_l2, beyond,
                    f"{beyond} of {a.size} element(s) beyond tolerance")
    return Diff(OK, max_abs, max_rel, rel_l2)


def _error_measures(diff: np.ndarray, scale: np.ndarray) -> tuple[float, float, float]:
    """Max absolute, max relative (where b != 0) and relative L2 errors of ``diff``."""
    if diff.size == 0:
        return 0.0, 0.0, 0.0
    max_abs = float(diff.max())
    nonzero = scale > 0
    max_rel = float((diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else 0.0
    num, den = float(np.linalg.norm(diff)), float(np.linalg.norm(scale))
    rel_l2 = num / den if den > 0 else (0.0 if num == 0 else float("inf"))
    return max_abs, max_rel, rel_l2


def compare_values(a: Any, b: Any, tol: Tolerance) -> Diff:
    """Compare two runtime values: arrays, sequences (lists of arrays) or empty optionals."""
    if a is None or b is None:
        both = a is None and b is None
        return Diff(OK) if both else Diff(DTYPE, detail="empty optional on one side")
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)):
            return Diff(DTYPE, detail="sequence on one side only")
        if len(a) != len(b):
            return Diff(SHAPE, detail=f"sequence of {len(a)} vs {len(b)}")
        parts = [compare_values(x, y, tol) for x, y in zip(a, b, strict=True)]
        worst = next((p for p in parts if p.status != OK), None)
        return worst if worst is not None else Diff(OK, *_merge(parts))
    return compare_arrays(np.asarray(a), np.asarray(b), tol)


def _merge(parts: Sequence[Diff]) -> tuple[float | None, float | None, float | None]:
    """The largest of each error measure over the elements of a sequence."""
    def top(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    return (top([p.max_abs for p in parts]), top([p.max_rel for p in parts]),
            top([p.rel_l2 for p in parts]))


def summary_stats(value: Any) -> dict[str, Any]:
    """Shape, dtype and min/max/mean/std (over finite elements) of a value."""
    shape, dtype = _describe_type(value)
    stats: dict[str, Any] = {"shape": shape, "dtype": dtype}
    if value is None or isinstance(value, list):
        return stats
    array = np.asarray(value)
    if array.size == 0 or array.dtype.kind in "OUSV":
        return stats
    numeric = np.abs(array) if array.dtype.kind == "c" else array
    numeric = numeric.astype(np.float64)
    finite = numeric[np.isfinite(numeric)]
    if finite.size:
        stats.update(min=float(finite.min()), max=float(finite.max()),
                     mean=float(finite.mean()), std=float(finite.std()))
    if finite.size != numeric.size:
        stats["nonfinite"] = int(numeric.size - finite.size)
    return stats


# ---------------------------------------------------------------------------------------------
# one side of a comparison


@dataclass
class Side:
    """The values of one side: a backend's run, or a golden set.

    Attributes:
        label: how reports name it ("reference", "golden:DIR (reference)").
        values: every value computed (outputs, intermediates, folded constants) by name.
        producers: value name -> (node name, op) for values the model's graph does not name.
    """

    label: str
    values: dict[str, Any]
    producers: dict[str, tuple[str, str]] = field(default_factory=dict)


def model_sha256(model: Any) -> str:
    """SHA-256 of a model: of the file's bytes, of bytes, of a ModelProto serialised
    deterministically, or of a refmnn Graph's nodes and initializers."""
    digest = hashlib.sha256()
    if isinstance(model, str | os.PathLike):
        try:
            digest.update(Path(model).read_bytes())
        except OSError as exc:
            raise UsageError(f"cannot read model {str(model)!r}: {exc}") from exc
    elif isinstance(model, bytes | bytearray):
        digest.update(bytes(model))
    elif hasattr(model, "SerializeToString"):
        digest.update(model.SerializeToString(deterministic=True))
    else:
        digest.update(repr(getattr(model, "nodes", model)).encode())
        for name in sorted(getattr(model, "initializers", {})):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(model.initializers[name]).tobytes())
    return digest.hexdigest()


def open_session(model: Any, backend: str, backend_registry: Any = None) -> Any:
    """A Session preferring ``backend`` (the reference is its fallback)."""
    from refmnn.session import Session

    return Session(model, backends=(backend,), backend_registry=backend_registry)


def run_side(session: Any, label: str, feeds: Mapping[str, Any]) -> Side:
    """Run ``session`` on ``feeds`` keeping every intermediate value."""
    values = session.run(dict(feeds), intermediates=True)
    producers = {}
    for node in session.plan.graph.nodes:
        for name in node.outputs:
            if name:
                producers[name] = (node.name, node.op)
    return Side(label, dict(values), producers)


def make_feeds(session: Any, shapes: Mapping[str, Sequence[int]],
               given: Mapping[str, Path], seed: int) -> dict[str, Any]:
    """Feeds from ``.npy`` files and seeded random arrays (``refmnn run``'s rule)."""
    from refmnn.cli import load_or_make_feeds

    names = {v.name for v in session.inputs}
    unknown = sorted((set(given) | set(shapes)) - names)
    if unknown:
        raise UsageError(f"unknown input name(s) {unknown}; the model's inputs are {sorted(names)}")
    shapes = {k: tuple(v) for k, v in shapes.items()}
    return load_or_make_feeds(session.inputs, shapes, dict(given), seed)


# ---------------------------------------------------------------------------------------------
# the report


@dataclass(frozen=True)
class Row:
    """One compared value, in order."""

    index: int
    node: str
    op: str
    value: str
    shape: str
    dtype: str
    diff: Diff


@dataclass(frozen=True)
class InputInfo:
    """One input of the first divergent node, as both sides saw it."""

    name: str
    source: str  # "graph input", "initializer", or "node NAME (OP)"
    stats_a: dict[str, Any]
    stats_b: dict[str, Any]
    diff: Diff


@dataclass(frozen=True)
class Divergence:
    """The first node whose output diverges, and the inputs it received."""

    node: str
    op: str
    outputs: tuple[Row, ...]
    inputs: tuple[InputInfo, ...]

    @property
    def inputs_agree(self) -> bool:
        return all(i.diff.status in BENIGN for i in self.inputs)


@dataclass(frozen=True)
class Report:
    """The result of comparing side A with side B over one model."""

    model: str
    model_sha256: str
    a: str
    b: str
    tol: Tolerance
    rows: tuple[Row, ...]
    first: Divergence | None

    @property
    def ok(self) -> bool:
        return all(r.diff.status in BENIGN for r in self.rows)

    @property
    def divergent(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.diff.status not in BENIGN)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, deterministic description."""
        first = None
        if self.first is not None:
            first = {"node": self.first.node, "op": self.first.op,
                     "inputs_agree": self.first.inputs_agree,
                     "outputs": [_row_dict(r) for r in self.first.outputs],
                     "inputs": [{"name": i.name, "source": i.source, "a": _clean(i.stats_a),
                                 "b": _clean(i.stats_b), "status": i.diff.status,
                                 "max_abs": _num(i.diff.max_abs)} for i in self.first.inputs]}
        return {"model": self.model, "model_sha256": self.model_sha256, "a": self.a, "b": self.b,
                "atol": self.tol.atol, "rtol": self.tol.rtol,
                "atol_scaled": self.tol.scaled, "ok": self.ok,
                "compared": len(self.rows), "divergent": len(self.divergent),
                "values": [_row_dict(r) for r in self.rows], "first_divergence": first}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    def table(self) -> str:
        """The per-value error table, then the first divergence with its inputs."""
        lines = [f"compare {self.model}: A = {self.a}, B = {self.b}; "
                 f"ok when {self.tol.describe()}", ""]
        lines += _format_rows(self.rows)
        lines.append("")
        lines += _format_verdict(self)
        return "\n".join(lines)


def _num(x: float | None) -> float | str | None:
    """A JSON-safe number: None, a float, or "inf"/"nan" as a string."""
    if x is None:
        return None
    return float(x) if np.isfinite(x) else str(float(x))


def _clean(stats: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _num(v) if isinstance(v, float) else v for k, v in stats.items()}


def _row_dict(row: Row) -> dict[str, Any]:
    d = row.diff
    return {"index": row.index, "node": row.node, "op": row.op, "value": row.value,
            "shape": row.shape, "dtype": row.dtype, "status": d.status, "max_abs": _num(d.max_abs),
            "max_rel": _num(d.max_rel), "rel_l2": _num(d.rel_l2), "bad": d.bad, "detail": d.detail}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _format_rows(rows: Sequence[Row]) -> list[str]:
    """The table as aligned text lines."""
    header = ("#", "node", "op", "output", "shape", "max abs err", "max rel err", "rel L2",
              "status")
    body = [(str(r.index), r.node, r.op, r.value, f"{r.dtype}[{r.shape}]", _fmt(r.diff.max_abs),
             _fmt(r.diff.max_rel), _fmt(r.diff.rel_l2),
             r.diff.status + (f" ({r.diff.detail})" if r.diff.status not in BENIGN else ""))
            for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
            for line in [header, *body]]


def _format_verdict(report: Report) -> list[str]:
    """The closing lines: agreement, or the first divergent node and its inputs."""
    bad = report.divergent
    absent = sum(r.diff.status in (MISSING_A, MISSING_B) for r in report.rows)
    lowered = sum(r.diff.status in (ONLY_A, ONLY_B) for r in report.rows)
    compared = len(report.rows) - absent - lowered
    notes = [f"{n} {why}" for n, why in ((absent, f"not computed by one side: {_FUSED}"),
                                         (lowered, "made by one side's lowering only")) if n]
    note = f" ({'; '.join(notes)})" if notes else ""
    if not bad:
        return [f"all {compared} compared value(s) agree{note}"]
    lines = [f"{len(bad)} of {compared} compared value(s) diverge{note}"]
    first = report.first
    if first is None:
        return lines
    lines.append(f"first divergent node: {first.node} ({first.op})")
    for row in first.outputs:
        lines.append(f"  output {row.value}: {row.diff.status} {row.diff.detail}; max abs err "
                     f"{_fmt(row.diff.max_abs)}, max rel err {_fmt(row.diff.max_rel)}")
    agreement = "all agree" if first.inputs_agree else "SOME DIFFER: the cause is upstream"
    lines.append(f"  inputs ({agreement}):")
    for info in first.inputs:
        verdict = ("agree" if info.diff.status in (OK, ONLY_A, ONLY_B)
                   else info.diff.detail if info.diff.status in BENIGN
                   else f"DIFFER ({info.diff.status} {info.diff.detail})")
        lines.append(f"    {info.name} [{info.source}] {_stats_text(info.stats_a)}: {verdict}")
    return lines


def _stats_text(stats: Mapping[str, Any]) -> str:
    text = f"{stats['dtype']}[{stats['shape']}]"
    if "min" in stats:
        text += (f" min {stats['min']:.4g} max {stats['max']:.4g} mean {stats['mean']:.4g} "
                 f"std {stats['std']:.4g}")
    return text


# ---------------------------------------------------------------------------------------------
# ordering and the first divergence


def value_order(graph: Any, a: Side, b: Side) -> list[tuple[str, str, str, bool]]:
    """``(value, node, op, in_model)`` for every value to compare: the outputs of the model's
    nodes in node order, then values only one side's plan made (lowering), in computed order."""
    order: list[tuple[str, str, str, bool]] = []
    seen: set[str] = set()
    for node in graph.nodes:
        for name in node.outputs:
            if name and name not in seen and (name in a.values or name in b.values):
                order.append((name, node.name, node.op, True))
                seen.add(name)
    inputs = {v.name for v in graph.inputs}
    for side in (a, b):
        for name in side.values:
            if name not in seen and name not in inputs:
                node, op = side.producers.get(name, ("?", "?"))
                order.append((name, node, op, False))
                seen.add(name)
    return order


def compare_sides(graph: Any, a: Side, b: Side, tol: Tolerance) -> list[Row]:
    """One Row per value of :func:`value_order`."""
    rows = []
    for index, (name, node, op, in_model) in enumerate(value_order(graph, a, b)):
        present = name in a.values, name in b.values
        if all(present):
            diff = compare_values(a.values[name], b.values[name], tol)
            shown = a.values[name]
        elif present[0]:
            diff = Diff(MISSING_B if in_model else ONLY_A, detail=f"not computed by B: {_FUSED}")
            shown = a.values[name]
        else:
            diff = Diff(MISSING_A if in_model else ONLY_B, detail=f"not computed by A: {_FUSED}")
            shown = b.values[name]
        shape, dtype = _describe_type(shown)
        rows.append(Row(index, node, op, name, shape, dtype, diff))
    return rows


_ABSENT = object()


def first_divergence(graph: Any, rows: Sequence[Row], a: Side, b: Side,
                     feeds: Mapping[str, Any], tol: Tolerance) -> Divergence | None:
    """The first node (in the model's node order) with a divergent output, with its inputs."""
    nodes = {node.name: node for node in graph.nodes}
    bad = next((r for r in rows if r.diff.status not in BENIGN and r.node in nodes), None)
    if bad is None:
        return None
    node = nodes[bad.node]
    outputs = tuple(r for r in rows if r.node == node.name and r.value in node.outputs)
    producers = {out: n for n in graph.nodes for out in n.outputs if out}
    inputs = []
    for name in dict.fromkeys(n for n in node.inputs if n):
        value_a, value_b, source = _input_values(graph, name, a, b, feeds, producers)
        if value_a is _ABSENT or value_b is _ABSENT:
            side = "A" if value_a is _ABSENT else "B"
            diff = Diff(MISSING_A if value_a is _ABSENT else MISSING_B,
                        detail=f"not computed by {side}: {_FUSED}")
        else:
            diff = compare_values(value_a, value_b, tol)
        stats_a = summary_stats(None if value_a is _ABSENT else value_a)
        stats_b = summary_stats(None if value_b is _ABSENT else value_b)
        inputs.append(InputInfo(name, source, stats_a, stats_b, diff))
    return Divergence(node.name, node.op, outputs, tuple(inputs))


def _input_values(graph: Any, name: str, a: Side, b: Side, feeds: Mapping[str, Any],
                  producers: Mapping[str, Any]) -> tuple[Any, Any, str]:
    """Both sides' value of a node input, and where it came from."""
    if name in feeds:
        return feeds[name], feeds[name], "graph input"
    if name in graph.initializers and name not in producers:
        return graph.initializers[name], graph.initializers[name], "initializer"
    producer = producers.get(name)
    source = f"node {producer.name} ({producer.op})" if producer is not None else "outer scope"
    return a.values.get(name, _ABSENT), b.values.get(name, _ABSENT), source


def build_report(model: Any, digest: str, graph: Any, a: Side, b: Side,
                 feeds: Mapping[str, Any], tol: Tolerance) -> Report:
    """Compare two sides over ``graph`` and find the first divergence."""
    rows = compare_sides(graph, a, b, tol)
    first = first_divergence(graph, rows, a, b, feeds, tol)
    name = str(model) if isinstance(model, str | os.PathLike) else type(model).__name__
    return Report(name, digest, a.label, b.label, tol, tuple(rows), first)


def compare_backends(model: Any, backend_a: str, backend_b: str, *,
                     feeds: Mapping[str, Any] | None = None, seed: int = 0,
                     shapes: Mapping[str, Sequence[int]] | None = None,
                     tol: Tolerance = Tolerance(), backend_registry: Any = None) -> Report:
    """Run ``model`` on two backends on the same feeds (seeded random ones unless given) and
    compare every value; both sessions are opened before anything runs."""
    session_a = open_session(model, backend_a, backend_registry)
    session_b = open_session(model, backend_b, backend_registry)
    if feeds is None:
        feeds = make_feeds(session_a, shapes or {}, {}, seed)
    a = run_side(session_a, backend_a, feeds)
    b = run_side(session_b, backend_b, feeds)
    return build_report(model, model_sha256(model), session_a.graph, a, b, feeds, tol)


# ---------------------------------------------------------------------------------------------
# golden sets


@dataclass
class Golden:
    """A golden set read back: its manifest, its values (as side A) and its inputs."""

    directory: Path
    manifest: dict[str, Any]
    side: Side
    feeds: dict[str, Any]


def _encode(array: np.ndarray) -> tuple[np.ndarray, str]:
    """An array ``np.savez`` stores without pickling, and the dtype name to restore."""
    dtype = str(array.dtype)
    if array.dtype.kind == "O":
        return np.asarray(array, dtype=str), dtype
    if array.dtype.kind not in "biufcUS":  # ml_dtypes narrow types: store the raw bits
        return array.view(f"u{array.dtype.itemsize}"), dtype
    return array, dtype


def _decode(array: np.ndarray, dtype: str) -> np.ndarray:
    """Undo :func:`_encode`."""
    if dtype == "object":
        return array.astype(object)
    if dtype == str(array.dtype):
        return array
    import ml_dtypes

    return array.view(np.dtype(getattr(ml_dtypes, dtype)))


def _pack(values: Mapping[str, Any],
          prefix: str) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """Arrays for an ``.npz`` under safe keys, and one manifest entry per value in order."""
    arrays: dict[str, np.ndarray] = {}
    entries = []
    for name, value in values.items():
        entry: dict[str, Any] = {"name": name}
        if value is None:
            entry["kind"] = "none"
        elif isinstance(value, list):
            entry.update(kind="sequence", items=[])
            for item in value:
                key = f"{prefix}{len(arrays):05d}"
                arrays[key], dtype = _encode(np.asarray(item))
                entry["items"].append({"key": key, "dtype": dtype})
        else:
            key = f"{prefix}{len(arrays):05d}"
            arrays[key], dtype = _encode(np.asarray(value))
            entry.update(kind="tensor", key=key, dtype=dtype, shape=list(np.shape(value)))
        entries.append(entry)
    return arrays, entries


def save_golden(directory: str | os.PathLike[str], side: Side, feeds: Mapping[str, Any], *,
                digest: str, backend: str, seed: int, from_files: Sequence[str] = ()) -> Path:
    """Write a golden set: ``manifest.json``, ``golden.npz`` and ``inputs.npz``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    values, value_entries = _pack(side.values, "v")
    inputs, input_entries = _pack(feeds, "i")
    for entry in value_entries:
        if entry["name"] in side.producers:
            entry["node"], entry["op"] = side.producers[entry["name"]]
    np.savez(out / VALUES_FILE, **values)
    np.savez(out / INPUTS_FILE, **inputs)
    manifest = {"format": GOLDEN_FORMAT, "version": GOLDEN_VERSION, "model_sha256": digest,
                "backend": backend, "seed": seed, "inputs_from_files": sorted(from_files),
                "shapes": {k: list(np.shape(v)) for k, v in sorted(feeds.items())},
                "inputs": input_entries, "values": value_entries}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return out


def _unpack(npz: Any, entries: Sequence[Mapping[str, Any]], where: Path) -> dict[str, Any]:
    """Values from an opened ``.npz`` by manifest entries; a missing array is a UsageError."""
    missing = [e["name"] for e in entries
               if (e.get("kind") == "tensor" and e.get("key") not in npz.files)
               or any(i["key"] not in npz.files for i in e.get("items", ()))]
    if missing:
        raise UsageError(f"golden set {where} is incomplete: {len(missing)} value(s) listed in "
                         f"{MANIFEST} are missing from {where.name}: {missing[:5]}")
    values: dict[str, Any] = {}
    for entry in entries:
        kind = entry.get("kind")
        if kind == "none":
            values[entry["name"]] = None
        elif kind == "sequence":
            values[entry["name"]] = [_decode(npz[i["key"]], i["dtype"]) for i in entry["items"]]
        else:
            values[entry["name"]] = _decode(npz[entry["key"]], entry["dtype"])
    return values


def load_golden(directory: str | os.PathLike[str], digest: str) -> Golden:
    """Read a golden set saved for the model whose SHA-256 is ``digest``.

    Raises:
        UsageError: no golden set there, another model's set, or values missing.
    """
    where = Path(directory)
    try:
        manifest = json.loads((where / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--golden {where}: cannot read {MANIFEST}: {exc}") from exc
    if manifest.get("format") != GOLDEN_FORMAT:
        raise UsageError(f"--golden {where}: {MANIFEST} is not a refmnn golden set")
    if manifest.get("model_sha256") != digest:
        saved = str(manifest.get("model_sha256"))[:12]
        raise UsageError(f"--golden {where} was saved for another model (sha256 {saved}..., "
                         f"this model is {digest[:12]}...)")
    try:
        with np.load(where / VALUES_FILE, allow_pickle=False) as npz:
            values = _unpack(npz, manifest.get("values", []), where / VALUES_FILE)
        with np.load(where / INPUTS_FILE, allow_pickle=False) as npz:
            feeds = _unpack(npz, manifest.get("inputs", []), where / INPUTS_FILE)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--golden {where}: cannot read the arrays: {exc}") from exc
    producers = {e["name"]: (e["node"], e["op"]) for e in manifest["values"] if "node" in e}
    label = f"golden:{where} ({manifest.get('backend', '?')})"
    return Golden(where, manifest, Side(label, values, producers), feeds)


def check_golden_covers(graph: Any, golden: Golden, b: Side) -> None:
    """Every value of the model's graph that B computed must be in the golden set."""
    model_values = {name for node in graph.nodes for name in node.outputs if name}
    missing = sorted(name for name in b.values
                     if name in model_values and name not in golden.side.values)
    if missing:
        raise UsageError(f"golden set {golden.directory} lacks {len(missing)} value(s) of this "
                         f"model: {missing[:5]}")


# ---------------------------------------------------------------------------------------------
# command line


def _backend_names(args: argparse.Namespace) -> list[str]:
    """The backend names, checked against the mode."""
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    if args.golden and args.save_golden:
        raise UsageError("give --golden or --save-golden, not both")
    if args.golden:
        if len(names) not in (1, 2):
            raise UsageError(f"--golden compares one backend; got --backends {args.backends!r}")
        if args.input or args.shape or args.seed is not None:
            raise UsageError("--golden runs on the golden set's saved inputs; "
                             "drop --input/--shape/--seed")
    elif args.save_golden:
        if len(names) not in (1, 2):
            raise UsageError("--save-golden takes one or two backends; "
                             f"got --backends {args.backends!r}")
    elif len(names) != 2:
        raise UsageError(f"--backends needs two names, A,B; got {args.backends!r}")
    return names


def run_command(args: argparse.Namespace, backend_registry: Any = None) -> int:
    """``refmnn compare``: 0 when everything agrees, 1 on a divergence (2 for errors, raised)."""
    from refmnn.cli import _parse_input, _parse_shape

    names = _backend_names(args)
    tol = Tolerance(args.atol, args.rtol, scaled=not args.absolute)
    digest = model_sha256(args.model)
    if args.golden:
        golden = load_golden(args.golden, digest)
        session = open_session(args.model, names[-1], backend_registry)
        b = run_side(session, names[-1], golden.feeds)
        check_golden_covers(session.graph, golden, b)
        report = build_report(args.model, digest, session.graph, golden.side, b, golden.feeds,
                              tol)
        return _emit(report, args.json)
    sessions = [open_session(args.model, name, backend_registry) for name in names]
    shapes = dict(_parse_shape(s) for s in args.shape)
    given = dict(_parse_input(s) for s in args.input)
    seed = 0 if args.seed is None else args.seed
    feeds = make_feeds(sessions[0], shapes, given, seed)
    a = run_side(sessions[0], names[0], feeds)
    if args.save_golden:
        where = save_golden(args.save_golden, a, feeds, digest=digest, backend=names[0],
                            seed=seed, from_files=list(given))
        print(f"saved golden set of {len(a.values)} value(s) from {names[0]} to {where}",
              file=sys.stderr)
        if len(names) == 1:
            return 0
    b = run_side(sessions[1], names[1], feeds)
    report = build_report(args.model, digest, sessions[0].graph, a, b, feeds, tol)
    return _emit(report, args.json)


def _emit(report: Report, as_json: bool) -> int:
    print(report.to_json() if as_json else report.table())
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m refmnn.compare ...`` = ``refmnn compare ...`` (same errors and exit codes)."""
    from refmnn.cli import main as cli_main

    return cli_main(["compare", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
