"""Numba kernels, one module per op family (named after ``refmnn/ops/<family>.py``).

Importing this package imports Numba. :func:`all_kernel_defs` gathers every module's
``KERNELS`` tuple into the backend's declarative support table.
"""

from __future__ import annotations

from refmnn.backends.base import KernelDef


def all_kernel_defs() -> tuple[KernelDef, ...]:
    from refmnn.backends.numba.kernels import (
        activation,
        attention,
        blocked,
        cast,
        conv,
        conv_few_pool,
        elementwise,
        indexing,
        linalg,
        norm,
        pool,
        quant,
        raster,
        reduction,
        shape,
    )

    modules = (conv, conv_few_pool, blocked, linalg, attention, pool, elementwise, activation,
               reduction, norm, raster, shape, indexing, cast, quant)
    return tuple(k for m in modules for k in m.KERNELS)
