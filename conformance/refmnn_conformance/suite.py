"""The pytest items of the suite: one per (case, dtype, sample) and kind of check.

A test module of this package holds one :class:`ConformanceSuite` object; the plugin
(:mod:`refmnn_conformance.plugin`) turns it into a collector whose items are named
``Op@opset-dtype-sample[backend]``. Each item records its verdict (status, placement, errors,
ULPs) in ``user_properties``, which pytest-xdist carries back to the controller for the report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from refmnn_conformance.compare import ConformanceFailure

PROPERTY = "refmnn_conformance"
SKIPPED_STATUSES = ("fell back", "unsupported", "reference error")


@dataclass(frozen=True)
class ConformanceSuite:
    """Marker object: a test module's suite of one kind ("values", "errors" are both in
    "refmnn"; "contract"; "onnx")."""

    kind: str


class Options:
    """What the plugin's command-line options say (set on the config by the plugin)."""

    def __init__(self, config: pytest.Config) -> None:
        from refmnn.backends import BackendConfig, BackendRegistry

        self.backend: str = config.getoption("refmnn_backend")
        self.source: str = config.getoption("refmnn_source")
        self.precision: str = config.getoption("refmnn_precision")
        self.registry = BackendRegistry()
        device = config.getoption("refmnn_device")
        self.config = BackendConfig(precision=self.precision,
                                    device=int(device) if device and device.isdigit() else device,
                                    options=_key_values(config.getoption("refmnn_options")))


def _key_values(items: list[str]) -> dict[str, str]:
    """``["tune=off", ...]`` (``--option``) as BackendConfig.options; a malformed one is a usage
    error pytest reports before anything runs."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"--option {item!r}: expected KEY=VALUE")
        found[key.strip()] = value.strip()
    return found


def options(config: pytest.Config) -> Options:
    found = getattr(config, "_refmnn_conformance_options", None)
    if found is None:
        found = Options(config)
        config._refmnn_conformance_options = found  # type: ignore[attr-defined]
    return found


class SuiteCollector(pytest.Collector):
    def __init__(self, *, suite: ConformanceSuite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite

    def collect(self) -> Iterator[pytest.Item]:
        opts = options(self.config)
        kind = self.suite.kind
        wanted = {"refmnn": ("refmnn", "contract"), "onnx": ("onnx",),
                  "all": ("refmnn", "contract", "onnx")}[opts.source]
        if kind not in wanted:
            return
        backend = opts.backend
        if kind == "contract":
            yield ProbeItem.from_parent(self, name=f"probe[{backend}]")
        if kind in ("refmnn", "contract"):
            from refmnn_conformance.cases import ALL_CASES

            for case in ALL_CASES:
                for dtype in case.dtypes:
                    ctx_seed = case.context(dtype).seed
                    names = set()
                    for sample in case.make_samples(dtype):
                        names.add(sample.name)
                        yield CaseItem.from_parent(
                            self, name=f"{case.id}-{dtype.name}-{sample.name}[{backend}]",
                            case=case, dtype=dtype, sample=sample, seed=ctx_seed,
                            check="value" if kind == "refmnn" else kind)
                    if kind == "refmnn":
                        for error in case.make_errors(dtype):
                            name = error.sample.name
                            if name in names:
                                name = f"raises_{name}"
                            yield CaseItem.from_parent(
                                self, name=f"{case.id}-{dtype.name}-{name}[{backend}]", case=case,
                                dtype=dtype, sample=error, check="error", seed=ctx_seed)
        if kind == "onnx":
            from refmnn_conformance.onnx_cases import onnx_node_cases

            for case in onnx_node_cases():
                yield OnnxItem.from_parent(
                    self, name=f"{case.case_id}-{case.dtype}-{case.sample}[{backend}]", case=case)


class _Item(pytest.Item):
    """Shared behaviour: record the verdict, skip what was not judged, readable failures."""

    source = "refmnn"
    check = "value"

    def _describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def _record(self, status: str, result: Any = None, message: str = "") -> None:
        record = {"id": self.name, "nodeid": self.nodeid, "source": self.source, "check": self.check,
                  "backend": options(self.config).backend, **self._describe()}
        if result is not None:
            record.update(result.record())
        record["status"] = status
        if message:
            record["message"] = message
        self.user_properties.append((PROPERTY, json.dumps(record, sort_keys=True)))

    def _judge(self, run: Any) -> None:
        try:
            result = run()
        except ConformanceFailure as exc:
            self._record("fail", message=str(exc).splitlines()[0])
            raise
        except Exception as exc:
            self._record("fail", message=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            raise
        self._record(result.status, result)
        if result.status in SKIPPED_STATUSES:
            pytest.skip(f"{result.status}: {result.reason}")

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name


class CaseItem(_Item):
    def __init__(self, *, case: Any, dtype: Any, sample: Any, check: str, seed: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.dtype, self.sample, self.check, self.seed = case, dtype, sample, check, seed
        self.source = "refmnn"
        for tag in case.tags:
            self.keywords[tag] = True

    @property
    def sample_name(self) -> str:
        return self.name.rsplit("[", 1)[0].split("-", 2)[2]

    def _describe(self) -> dict[str, Any]:
        return {"case": self.case.id, "op": self.case.op, "opset": self.case.resolved_opset,
                "dtype": self.dtype.name, "sample": self.sample_name, "seed": self.seed}

    def runtest(self) -> None:
        from refmnn_conformance.contract import check_contract
        from refmnn_conformance.runner import check_error, check_value

        opts = options(self.config)
        kwargs = {"registry": opts.registry, "config": opts.config}
        if self.check == "error":
            self._judge(lambda: check_error(self.case, self.dtype, self.sample, opts.backend, **kwargs))
        elif self.check == "contract":
            self._judge(lambda: check_contract(self.case, self.dtype, self.sample, opts.backend, **kwargs))
        else:
            self._judge(lambda: check_value(self.case, self.dtype, self.sample, opts.backend,
                                            seed=self.seed, **kwargs))


class ProbeItem(_Item):
    check = "probe"

    def _describe(self) -> dict[str, Any]:
        return {"case": "probe", "op": "probe", "opset": 0, "dtype": "-", "sample": "probe"}

    def runtest(self) -> None:
        from refmnn_conformance.contract import check_probe

        opts = options(self.config)
        self._judge(lambda: check_probe(opts.backend, opts.registry))


class OnnxItem(_Item):
    source = "onnx"

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def _describe(self) -> dict[str, Any]:
        return {"case": self.case.case_id, "op": self.case.op, "opset": self.case.opset,
                "dtype": self.case.dtype, "sample": self.case.sample}

    def runtest(self) -> None:
        self._judge(self._run)

    def _run(self) -> Any:
        import refmnn
        from refmnn.dtypes import DType
        from refmnn_conformance.onnx_cases import feeds
        from refmnn_conformance.runner import FELL_BACK, Result, compare_outputs, placement
        from refmnn_conformance.tolerances import tolerance_for

        opts = options(self.config)
        model = self.case.test.model
        try:
            reference = refmnn.Session(model, arena=False)
            inputs = feeds(self.case, [v.name for v in reference.inputs])
            with np.errstate(all="ignore"):
                want = reference.run(inputs)
        except Exception as exc:  # the reference cannot run it: not the backend's business
            return Result("reference error", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        configs = {opts.backend: opts.config}
        session = refmnn.Session(model, backends=(opts.backend,), backend_registry=opts.registry,
                                 configs=configs)
        with np.errstate(all="ignore"):
            got = session.run(inputs)
        judged, placed, reason = placement(session.plan, opts.backend)
        if not judged:
            return Result(FELL_BACK, placed, reason)

        def tol_for(dtype: np.dtype) -> Any:
            try:
                kind = DType.from_numpy(dtype)
            except KeyError:
                kind = DType.bool
            if kind is DType.string:
                kind = DType.bool
            return tolerance_for(None, kind, precision=opts.precision)

        shapes = ", ".join(f"{k}: {getattr(v, 'dtype', type(v).__name__)}{list(getattr(v, 'shape', ()))}"
                           for k, v in inputs.items())
        result = compare_outputs(got, want, tol_for,
                                 f"ONNX node test {self.case.test.name} (data set {self.case.dataset}) "
                                 f"on backend {opts.backend!r}", shapes)
        result.placed = placed
        return result
