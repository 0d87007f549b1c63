"""The pytest plugin of the conformance suite. Load it explicitly (it is never auto-loaded)::

    pytest -p refmnn_conformance.plugin --pyargs refmnn_conformance --backend acme \\
        [--xfails FILE] [--report DIR] [--strict-xfails] [--precision low] [--source refmnn]

Test ids are ``Op@opset-dtype-sample[backend]``. Each test records its verdict in
``user_properties``; the process that owns the session (the pytest-xdist controller, or the
only process) gathers them from the test reports, so the report covers every worker, and
writes it at the end, sorted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from refmnn_conformance import xfails as xfail_manifest
from refmnn_conformance.suite import PROPERTY, ConformanceSuite, SuiteCollector, options

BUILTIN_DISTRIBUTION = "refmnn"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("refmnn-conformance", "refmnn conformance suite")
    group.addoption("--backend", dest="refmnn_backend", default="reference", metavar="NAME",
                    help="the backend to check against the reference (default: reference)")
    group.addoption("--xfails", dest="refmnn_xfails", default=None, metavar="FILE",
                    help="TOML manifest of expected failures ([[xfail]] case/dtype/sample/reason)")
    group.addoption("--report", dest="refmnn_report", default=None, metavar="DIR",
                    help="write report.json, report.md and report.html into DIR")
    group.addoption("--strict-xfails", dest="refmnn_strict_xfails", action="store_true",
                    help="an expected failure that passes fails the run (always on for built-in backends)")
    group.addoption("--precision", dest="refmnn_precision", default="normal",
                    choices=("high", "normal", "low"),
                    help="the backend's BackendConfig.precision; 'low' judges float32 as float16")
    group.addoption("--device", dest="refmnn_device", default=None, metavar="DEV",
                    help="the backend's BackendConfig.device (a name, or an index)")
    group.addoption("--option", dest="refmnn_options", action="append", default=[],
                    metavar="KEY=VALUE", help="a BackendConfig.options entry (repeatable)")
    group.addoption("--source", dest="refmnn_source", default="all", choices=("refmnn", "onnx", "all"),
                    help="which cases: refmnn's own (with the contract checks), the ONNX node tests, or all")
    group.addoption("--ops", dest="refmnn_ops", action="append", default=[], metavar="OP[,OP...]",
                    help="only the cases of these ops (exact op names, repeatable)")
    group.addoption("--checks", dest="refmnn_checks", default="", metavar="KIND[,KIND...]",
                    help=f"only these kinds of check: {', '.join(CHECKS)} (default: all)")


CHECKS = ("value", "error", "contract", "probe")
"""The kinds of check an item makes (its ``check``): a value against the reference, a clear
error for bad input, a contract rule (poison, inputs untouched, no allocation in run), the
backend's probe."""


def selection(config: pytest.Config) -> tuple[frozenset[str], frozenset[str]]:
    """The ``--ops`` and ``--checks`` given (empty: no filter); an unknown check kind is a usage
    error."""
    ops = frozenset(o.strip() for given in config.getoption("refmnn_ops") for o in given.split(",")
                    if o.strip())
    checks = frozenset(c.strip() for c in config.getoption("refmnn_checks").split(",") if c.strip())
    unknown = sorted(checks - set(CHECKS))
    if unknown:
        raise pytest.UsageError(f"--checks: unknown kind(s) {unknown} (known: {', '.join(CHECKS)})")
    return ops, checks


def backend_header(config: pytest.Config) -> dict[str, str]:
    """Backend name, version, distribution and device, from the backend registry."""
    opts = options(config)
    info = opts.registry.info(opts.backend)
    device = "unavailable"
    if info.available:
        try:
            backend = opts.registry.create(opts.backend, opts.config)
            device = backend.describe()
            backend.close()
        except Exception as exc:  # noqa: BLE001 - shown, not raised
            device = f"failed to start: {exc}"
    else:
        device = f"unavailable: {info.reason}"
    import numpy

    import refmnn

    return {"backend": opts.backend, "version": info.version or "?", "distribution": info.distribution or "?",
            "device": device, "precision": opts.precision, "source": opts.source,
            **({"options": ", ".join(f"{k}={v}" for k, v in sorted(opts.config.options.items()))}
               if opts.config.options else {}),
            "refmnn": getattr(refmnn, "__version__", "?"), "numpy": numpy.__version__}


def builtin_manifest(config: pytest.Config) -> str | None:
    """The manifest shipped for a built-in backend (``expectations/<name>.toml``), used when no
    ``--xfails`` is given; None for third-party backends, whose manifests live with them."""
    opts = options(config)
    info = opts.registry.info(opts.backend)
    if info.distribution != BUILTIN_DISTRIBUTION:
        return None
    path = Path(__file__).with_name("expectations") / f"{opts.backend}.toml"
    return str(path) if path.is_file() else None


class ConformancePlugin:
    """Per-session state: the xfail manifest and the verdicts gathered from test reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict[str, Any]] = {}
        path = config.getoption("refmnn_xfails") or builtin_manifest(config)
        try:
            self.xfails = xfail_manifest.load(path) if path else ()
        except xfail_manifest.ManifestError as exc:
            raise pytest.UsageError(str(exc)) from exc
        self.matched: set[int] = set()

    @property
    def strict(self) -> bool:
        if self.config.getoption("refmnn_strict_xfails"):
            return True
        info = options(self.config).registry.info(options(self.config).backend)
        return info.distribution == BUILTIN_DISTRIBUTION

    # -- collection ------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector, name: str, obj: object) -> Any:
        if isinstance(obj, ConformanceSuite):
            return SuiteCollector.from_parent(collector, name=name, suite=obj)
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self._select(items)
        if not self.xfails:
            return
        strict = self.strict
        for item in items:
            describe = getattr(item, "_describe", None)
            if describe is None:
                continue
            info = describe()
            for index, entry in enumerate(self.xfails):
                if entry.matches(info["case"], info["op"], info["dtype"], info["sample"],
                                 getattr(item, "source", ""), getattr(item, "check", "")):
                    item.user_properties.append(("refmnn_xfail", str(index)))
                    item.add_marker(pytest.mark.xfail(reason=entry.reason, raises=None,
                                                      strict=strict and not entry.flaky))
                    break

    def _select(self, items: list[pytest.Item]) -> None:
        """Deselect the items outside ``--ops`` / ``--checks`` (a vendor checking a few ops, or
        a short lease of a device checking only values)."""
        ops, checks = selection(self.config)
        if not ops and not checks:
            return
        op_of = {id(item): describe()["op"] for item in items
                 if (describe := getattr(item, "_describe", None)) is not None}
        if ops - set(op_of.values()):
            raise pytest.UsageError(f"--ops: no case of {sorted(ops - set(op_of.values()))} in "
                                    "the suite (op names are ONNX's, e.g. Conv, MatMul, Softmax)")
        keep, drop = [], []
        for item in items:
            ok = id(item) in op_of and (not ops or op_of[id(item)] in ops) and \
                (not checks or getattr(item, "check", "") in checks)
            (keep if ok else drop).append(item)
        if drop:
            self.config.hook.pytest_deselected(items=drop)
            items[:] = keep

    # -- reporting -------------------------------------------------------------------------

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        header = backend_header(config)
        lines = [f"refmnn conformance: backend {header['backend']} {header['version']} "
                 f"({header['distribution']}), device: {header['device']}, precision "
                 f"{header['precision']}, source {header['source']}"]
        if self.xfails:
            lines.append(f"xfail manifest: {len(self.xfails)} entries "
                         f"({'strict' if self.strict else 'not strict'})")
        return lines

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.matched.update(int(v) for k, v in report.user_properties if k == "refmnn_xfail")
        if report.when == "teardown" and not report.failed:
            return
        if report.when == "setup" and report.passed:
            return
        props = [json.loads(v) for k, v in report.user_properties if k == PROPERTY]
        record = props[-1] if props else None
        if record is None or report.when != "call":
            if report.nodeid in self.records and not report.failed:
                return
            record = dict(self.records.get(report.nodeid) or record or {
                "id": report.nodeid.rsplit("::", 1)[-1], "check": report.when, "source": "",
                "case": "?", "op": "?", "dtype": "?", "sample": "?",
                "backend": options(self.config).backend, "status": "skipped"})
        if hasattr(report, "wasxfail"):  # xfailed, or passed under a non-strict xfail
            record["xfail_reason"] = report.wasxfail
            record["status"] = "xfail" if report.skipped else record.get("status", "pass")
        elif report.failed:
            record["status"] = "fail"
            longrepr = str(report.longrepr or "")
            if longrepr.startswith("[XPASS(strict)]"):
                record["message"] = f"{longrepr} (stale expected failure: remove its entry)"
        record["nodeid"] = report.nodeid
        self.records[report.nodeid] = record

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput"):
            return
        from refmnn_conformance.report import closing_line, write

        records = [self.records[k] for k in sorted(self.records)]
        directory = self.config.getoption("refmnn_report")
        if directory:
            paths = write(directory, records, backend_header(self.config))
            terminalreporter.write_line(f"conformance report: {', '.join(str(p) for p in paths)}")
        unmatched = [e for i, e in enumerate(self.xfails) if i not in self.matched]
        for entry in unmatched:
            terminalreporter.write_line(f"xfail entry matched no test: {entry.describe()}")
        terminalreporter.write_line(closing_line(records))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ConformancePlugin(config), "refmnn-conformance-session")


