"""Host memory for backends whose tensors are NumPy arrays (the reference, numba).

Buffers are 64-byte aligned ``uint8`` arrays; a tensor is a typed, reshaped view of a buffer's
bytes at an offset. Two host-memory backends share tensors without copies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refmnn.backends.base import Buffer, Storage
from refmnn.graph import TensorType
from refmnn.schedule.memory import ALIGNMENT


class HostMemory:
    """The memory half of the backend contract, for host NumPy arrays (a mixin)."""

    host_memory = True
    linear_memory = True

    def allocate(self, nbytes: int, storage: Storage) -> Buffer:
        raw = np.empty(max(nbytes, 1) + ALIGNMENT, dtype=np.uint8)
        start = (-raw.ctypes.data) % ALIGNMENT
        return Buffer(nbytes, storage, raw[start:start + max(nbytes, 1)])

    def view(self, buffer: Buffer, offset: int, type: TensorType) -> np.ndarray:
        assert type.dtype is not None and type.shape is not None
        dtype = type.dtype.numpy
        count = math.prod(type.shape)
        raw = buffer.handle[offset:offset + count * dtype.itemsize]
        return raw.view(dtype).reshape(type.shape)

    def upload(self, src: np.ndarray, dst: np.ndarray) -> None:
        np.copyto(dst, src)

    def download(self, src: Any) -> np.ndarray:
        return np.array(src, copy=True)
