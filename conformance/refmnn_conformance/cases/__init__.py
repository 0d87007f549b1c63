"""refmnn's own conformance cases, one module per op family (mirroring ``refmnn/ops``).

Each module ends with ``CASES = (...)``; :data:`ALL_CASES` concatenates them in a fixed order.
"""

from __future__ import annotations

from refmnn_conformance.case import OpCase
from refmnn_conformance.cases import (
    activation,
    cast,
    conv,
    elementwise,
    indexing,
    linalg,
    norm,
    pool,
    reduction,
    shape,
)

ALL_CASES: tuple[OpCase, ...] = (
    *elementwise.CASES,
    *activation.CASES,
    *reduction.CASES,
    *linalg.CASES,
    *conv.CASES,
    *pool.CASES,
    *norm.CASES,
    *shape.CASES,
    *indexing.CASES,
    *cast.CASES,
)


def _check_unique() -> None:
    seen: set[str] = set()
    for case in ALL_CASES:
        if case.id in seen:
            raise ValueError(f"two conformance cases share the id {case.id}; give one a variant")
        seen.add(case.id)


_check_unique()
