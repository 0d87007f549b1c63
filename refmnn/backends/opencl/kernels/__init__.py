"""OpenCL kernel classes, one module per op family; the OpenCL C sources are in ``../cl``.

Importing this package imports pyopencl. :func:`all_kernel_defs` gathers every module's
``KERNELS`` into the backend's declarative support table.
"""

from __future__ import annotations

from refmnn.backends.base import KernelDef


def all_kernel_defs() -> tuple[KernelDef, ...]:
    from refmnn.backends.opencl.kernels import conv, elementwise, matmul, pool, raster, reduction

    modules = (conv, matmul, pool, elementwise, reduction, raster)
    return tuple(k for m in modules for k in m.KERNELS)
