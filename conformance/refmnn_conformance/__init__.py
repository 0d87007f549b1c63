"""refmnn's conformance suite: checks a backend against the NumPy reference, op by op.

Run it on an installed backend::

    refmnn conformance --backend acme --report out/
    python -m refmnn_conformance --backend acme -n 2

or from pytest directly: ``pytest -p refmnn_conformance.plugin --pyargs refmnn_conformance
--backend acme``. See ``conformance/README.md``.
"""

from __future__ import annotations

from refmnn_conformance.case import (
    ANY,
    EXTREMAL,
    NONZERO,
    POSITIVE,
    SMALL_INT,
    UNIT,
    Domain,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
    Tol,
)
from refmnn_conformance.compare import ConformanceFailure, assert_conforms, ulp_distance
from refmnn_conformance.tolerances import DEFAULTS, default_tolerance, tolerance_for

__all__ = [
    "ANY", "DEFAULTS", "EXTREMAL", "NONZERO", "POSITIVE", "SMALL_INT", "UNIT", "ConformanceFailure",
    "Domain", "ErrorSample", "OpCase", "Sample", "SampleContext", "Tol", "assert_conforms",
    "default_tolerance", "tolerance_for", "ulp_distance",
]
