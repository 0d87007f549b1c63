"""refmnn's own conformance cases, one module per op family (mirroring ``refmnn/ops``).

Each module ends with ``CASES = (...)``; :data:`ALL_CASES` concatenates them in a fixed order.
"""

from __future__ import annotations

from refmnn_conformance.case import OpCase
from refmnn_conformance.cases import (
    activation,
    attention,
    blocked,
    cast,
    constant,
    conv,
    detection,
    elementwise,
    fused,
    image,
    indexing,
    layout,
    linalg,
    loss,
    norm,
    pad,
    pool,
    quant,
    reduction,
    resize,
    rnn,
    shape,
    signal,
    split,
)

ALL_CASES: tuple[OpCase, ...] = (
    *elementwise.CASES,
    *activation.CASES,
    *reduction.CASES,
    *linalg.CASES,
    *conv.CASES,
    *fused.CASES,
    *blocked.CASES,
    *pool.CASES,
    *norm.CASES,
    *shape.CASES,
    *indexing.CASES,
    *cast.CASES,
    *constant.CASES,
    *layout.CASES,
    *split.CASES,
    *pad.CASES,
    *resize.CASES,
    *image.CASES,
    *detection.CASES,
    *quant.CASES,
    *rnn.CASES,
    *attention.CASES,
    *signal.CASES,
    *loss.CASES,
)


def _check_unique() -> None:
    seen: set[str] = set()
    for case in ALL_CASES:
        if case.id in seen:
            raise ValueError(f"two conformance cases share the id {case.id}; give one a variant")
        seen.add(case.id)


_check_unique()
