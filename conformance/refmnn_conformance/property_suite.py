"""The pytest items of the property-based cases (``test_properties.py``).

``test_properties.py`` names this module in ``pytest_plugins``, so its collection hook turns the
module's :class:`PropertySuite` into one item per property and dtype, named
``Op-dtype[backend]`` under the suite ``property`` (``test_properties.py::property::Add-float32[acme]``;
select them with ``-k property``). They run only under the conformance plugin
(``-p refmnn_conformance.plugin``), for the ``--backend`` it tests, with ``--source refmnn`` or
``all``.

An item runs hypothesis over the property's examples; each example is one sample run and judged
by :func:`refmnn_conformance.runner.check_value`, exactly as a fixed sample is (tolerances, NaN
positions, exact integers, poison-filled outputs). An example the backend does not take (the
session placed it on the reference) counts as fell back or unsupported, not as a failure; an item
none of whose examples ran on the backend is skipped with that status. The first failing example
is shrunk by hypothesis and reported with the conformance message and the falsifying
:class:`~refmnn_conformance.properties.Example`. Verdicts are recorded like the fixed samples'
(check ``property``, sample ``property``), so reports and xfail manifests cover them.

PYTEST_DONT_REWRITE: ``test_properties.py`` imports this module before naming it a plugin.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from refmnn_conformance.compare import ConformanceFailure
from refmnn_conformance.suite import SKIPPED_STATUSES, _Item, options

PLUGIN_NAME = "refmnn-conformance-session"  # registered by refmnn_conformance.plugin


@dataclass(frozen=True)
class PropertySuite:
    """Marker object of a test module: collect the property-based cases here."""


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Any:
    if isinstance(obj, PropertySuite):
        return PropertyCollector.from_parent(collector, name=name)
    return None


class PropertyCollector(pytest.Collector):
    def collect(self) -> Iterator[pytest.Item]:
        if self.config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
            return  # not under the conformance plugin: nothing to check against
        opts = options(self.config)
        if opts.source not in ("refmnn", "all"):
            return
        from refmnn_conformance.properties import PROPERTIES

        for prop in PROPERTIES.values():
            for dtype in prop.dtypes:
                yield PropertyItem.from_parent(self, name=f"{prop.name}-{dtype.name}[{opts.backend}]",
                                               prop=prop, dtype=dtype)


class PropertyItem(_Item):
    source = "refmnn"
    check = "property"

    def __init__(self, *, prop: Any, dtype: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop, self.dtype = prop, dtype
        self.keywords["property"] = True
        for tag in prop.case.tags:
            self.keywords[tag] = True

    def _describe(self) -> dict[str, Any]:
        case = self.prop.case
        return {"case": case.id, "op": case.op, "opset": case.resolved_opset,
                "dtype": self.dtype.name, "sample": self.prop.sample_name}

    def runtest(self) -> None:
        self._judge(self._run)

    def _run(self) -> Any:
        from hypothesis import given

        from refmnn_conformance.runner import PASS, Result, check_value

        opts = options(self.config)
        prop, dtype, case = self.prop, self.dtype, self.prop.case
        statuses: Counter[str] = Counter()
        overall = Result(PASS)

        @prop.settings
        @given(example=prop.examples(dtype))
        def conforms(example: Any) -> None:
            sample = prop.sample(dtype, example)
            result = check_value(case, dtype, sample, opts.backend, registry=opts.registry,
                                 config=opts.config, seed=example.seed)
            statuses[result.status] += 1
            _merge(overall, result)

        conforms()
        counts = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
        overall.reason = f"{sum(statuses.values())} examples: {counts}"
        if not statuses[PASS]:
            skipped = [s for s in SKIPPED_STATUSES if statuses[s]]
            overall.status = max(skipped, key=lambda s: statuses[s]) if skipped else PASS
        return overall

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        exc = excinfo.value
        if isinstance(exc, ConformanceFailure):  # the message, then hypothesis's falsifying example
            return "\n".join([str(exc), *getattr(exc, "__notes__", ())])
        return super().repr_failure(excinfo, style)


def _merge(overall: Any, result: Any) -> None:
    """Fold one example's verdict into the item's: placements, largest errors, tolerance."""
    overall.placed = tuple(sorted({*overall.placed, *result.placed}))
    for key in ("max_abs", "max_rel", "ulp_backend", "ulp_reference"):
        value = getattr(result, key)
        if value is not None:
            setattr(overall, key, max(getattr(overall, key) or 0.0, value))
    if result.tolerance is not None:
        overall.tolerance = result.tolerance
