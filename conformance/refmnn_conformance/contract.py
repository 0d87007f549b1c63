"""Checks of the backend contract (``refmnn/backends/base.py``) beyond the values.

* **every output element is written**: each planned value is poison-filled (through the
  backend's ``upload``) before the run, twice with two different poisons; an element that holds
  the poison after both runs was never written (a kernel that happens to compute the poison
  value cannot match both).
* **inputs are never written**: after the run every input the backend read (its device copies
  included) still holds the fed bytes. The session plans without arena reuse so no later step
  may legitimately reuse an input's bytes.
* **run allocates nothing**: the backend's ``allocate`` is wrapped during ``Session.run`` and
  every call counted.
* **probe never raises** and returns a ``Probe``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.backends import BackendConfig, BackendRegistry, Probe
from refmnn.backends.base import Storage
from refmnn.dtypes import DType
from refmnn.schedule.plan import RunStep

from refmnn_conformance.case import OpCase, Sample, _is_float
from refmnn_conformance.compare import ConformanceFailure
from refmnn_conformance.runner import (
    FELL_BACK,
    PASS,
    UNSUPPORTED,
    Result,
    build_graph,
    declares,
    make_session,
    placement,
    poison_outputs,
    poison_values,
)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.array(a, order="C"), np.array(b, order="C")
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == object:
        return bool(np.all(a == b))
    return a.tobytes() == b.tobytes()


def _holds(array: np.ndarray, value: Any) -> np.ndarray:
    """Elementwise: does ``array`` hold exactly ``value`` (NaN matches NaN)?"""
    value = np.asarray(value, dtype=array.dtype)
    if array.dtype == object:
        return array == value
    if _is_float(array.dtype):
        a, v = array.astype(np.float64), value.astype(np.float64)
        return np.isnan(a) if np.isnan(v) else a == v
    if array.dtype.kind == "V":  # int4/uint4/int2/uint2
        return array.astype(np.int16) == value.astype(np.int16)
    return array == value


def check_contract(case: OpCase, dtype: DType, sample: Sample, backend: str, *,
                   registry: BackendRegistry | None = None,
                   config: BackendConfig | None = None) -> Result:
    """Poison, input-immutability and no-allocation checks for one sample on ``backend``."""
    opset = case.resolved_opset
    graph, feeds = build_graph(case.op, case.domain, opset, sample, case.constants)
    session = make_session(graph, backend, registry, config, arena=False)
    plan = session.resize({k: v.shape for k, v in feeds.items()})
    judged, placed, reason = placement(plan, backend)
    if not judged:
        status = FELL_BACK if declares(session._backends[backend], case.op, case.domain) else UNSUPPORTED
        return Result(status, placed, reason)
    prepared = session._last
    assert prepared is not None
    tested = session._backends[backend]
    what = f"{case.id} {dtype.name} sample {sample.name!r} on backend {backend!r}"
    problems: list[str] = []

    calls: list[tuple[int, Storage]] = []
    original = tested.allocate

    def counting(nbytes: int, storage: Storage) -> Any:
        calls.append((nbytes, storage))
        return original(nbytes, storage)

    # outputs written by the backend's steps, and inputs it reads (device copies included)
    written = sorted({key for s in plan.steps if isinstance(s, RunStep) and s.backend == backend
                      for key in s.outputs if key})
    read = sorted({key for s in plan.steps if isinstance(s, RunStep) and s.backend == backend
                   for key in s.inputs if key and key.split("@")[0] in feeds
                   and not _reused_later(plan, key)})
    snapshots = []
    for which in (0, 1):
        poison_outputs(session, which, skip=tuple(feeds))
        tested.allocate = counting  # type: ignore[method-assign]
        try:
            with np.errstate(all="ignore"):
                session.run(feeds)
        finally:
            del tested.allocate
        snapshots.append({key: prepared._download(key) for key in written + read})
    if calls:
        problems.append(f"run called allocate {len(calls)} time(s) ({calls[:3]}); kernels must "
                        "allocate in prepare, never in run")
    for key in written:
        first, second = snapshots[0][key], snapshots[1][key]
        if not isinstance(first, np.ndarray) or first.size == 0:
            continue
        a, b = poison_values(first.dtype)
        unwritten = _holds(first, a) & _holds(second, b)
        if unwritten.any():
            where = [list(map(int, i)) for i in np.argwhere(unwritten)[:5]]
            problems.append(f"output {key!r}: {int(unwritten.sum())} of {first.size} element(s) "
                            f"never written (they kept the poison in both runs), e.g. at {where}")
    for key in read:
        fed = np.asarray(feeds[key.split("@")[0]])
        for which, snap in enumerate(snapshots):
            if not _same_bits(snap[key], fed):
                problems.append(f"input {key!r} changed during run {which + 1}: kernels must "
                                "never write their inputs")
                break
    if problems:
        raise ConformanceFailure("\n".join([f"{what} breaks the backend contract:", *problems,
                                            f"inputs: {sample.describe()}"]))
    return Result(PASS, placed)


def check_probe(backend: str, registry: BackendRegistry | None = None) -> Result:
    """``probe()`` must return a Probe and never raise (called twice: it may cache)."""
    registry = registry or BackendRegistry()
    info = registry.info(backend)
    if info.cls is None:
        raise ConformanceFailure(f"backend {backend!r} cannot be loaded: {info.reason}")
    for attempt in (1, 2):
        try:
            probe = info.cls.probe()
        except Exception as exc:  # noqa: BLE001 - the contract says it never raises
            raise ConformanceFailure(f"{backend}.probe() raised {type(exc).__name__}: {exc} "
                                     f"(call {attempt}); probe must return Probe(False, why)") from exc
        if not isinstance(probe, Probe):
            raise ConformanceFailure(f"{backend}.probe() returned {type(probe).__name__}, not a Probe")
    return Result(PASS, (backend,), probe.reason)


def _reused_later(plan: Any, key: str) -> bool:
    """True when the arena bytes of ``key`` go to another value after its last use: what they
    hold after the run is then that value, so it says nothing about the kernel."""
    slot = plan.slots.get(key)
    if slot is None or slot.storage is None:
        return False
    end = slot.offset + slot.nbytes
    return any(other.key != key and other.backend == slot.backend and other.storage is slot.storage
               and other.first > slot.last and other.offset < end
               and slot.offset < other.offset + max(other.nbytes, 1)
               for other in plan.slots.values())
