"""A minimal refmnn backend, as a vendor would write it (it is installed and run by the tests).

It supports three ops in float32 — Relu, Add and MatMul — and keeps its tensors in its own
"device" memory (NumPy arrays standing in for device buffers, so ``host_memory`` is False and
refmnn inserts copies where values cross to and from other backends). Everything else falls
back to the reference. Package it with an entry point::

    [project.entry-points."refmnn.backends"]
    acme = "acme_backend:AcmeBackend"
"""

from __future__ import annotations

import numpy as np

from refmnn.backends import Backend, Buffer, Kernel, KernelDef, NodeSpec, Probe, Scheme, Storage
from refmnn.dtypes import DType


class DeviceTensor:
    """A typed window into one of the backend's buffers."""

    def __init__(self, buffer: Buffer, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        count = int(np.prod(shape, dtype=np.int64))
        self.array = buffer.handle[offset:offset + count * dtype.itemsize].view(dtype).reshape(shape)


class Elementwise(Kernel):
    """Relu and Add: one NumPy ufunc call writing straight into the output tensor."""

    def __init__(self, op: str) -> None:
        self.op = op

    def run(self, inputs, outputs, workspace):
        out = outputs[0].array
        if self.op == "Relu":
            np.maximum(inputs[0].array, np.float32(0), out=out)
        else:
            np.add(inputs[0].array, inputs[1].array, out=out)


class MatMulBlocked(Kernel):
    """MatMul for 2-D operands, computed in row blocks of the output."""

    BLOCK = 64

    def run(self, inputs, outputs, workspace):
        a, b, out = inputs[0].array, inputs[1].array, outputs[0].array
        for row in range(0, a.shape[0], self.BLOCK):
            np.matmul(a[row:row + self.BLOCK], b, out=out[row:row + self.BLOCK])


def _is_2d(spec: NodeSpec) -> bool:
    return all(t is not None and t.rank == 2 for t in spec.inputs)


class AcmeBackend(Backend):
    name = "acme"
    host_memory = False

    @classmethod
    def probe(cls) -> Probe:
        return Probe(True, "", "1.0", ("acme-sim",))

    def kernels(self):
        f32 = frozenset({DType.float32})
        return (
            KernelDef("Relu", (Scheme("ufunc", lambda b, s: Elementwise("Relu")),), since=6, dtypes=f32),
            KernelDef("Add", (Scheme("ufunc", lambda b, s: Elementwise("Add")),), since=7, dtypes=f32),
            KernelDef("MatMul", (Scheme("blocked", lambda b, s: MatMulBlocked(), applies=_is_2d,
                                        doc="2-D only, row blocks of 64"),), since=1, dtypes=f32),
        )

    def allocate(self, nbytes: int, storage: Storage) -> Buffer:
        return Buffer(nbytes, storage, np.zeros(max(nbytes, 1), dtype=np.uint8))

    def view(self, buffer, offset, type):
        return DeviceTensor(buffer, offset, tuple(type.shape), type.dtype.numpy)

    def upload(self, src, dst):
        np.copyto(dst.array, src)

    def download(self, src):
        return src.array.copy()
