"""Numba backend placeholder: reports itself unavailable until its kernels land."""

from __future__ import annotations

from refmnn.backends.base import Backend, Probe


class NumbaBackend(Backend):
    name = "numba"

    @classmethod
    def probe(cls) -> Probe:
        return Probe(False, "the numba backend is not built yet")

    def kernels(self):  # type: ignore[no-untyped-def]
        return ()

    def allocate(self, nbytes, storage):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def view(self, buffer, offset, type):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def upload(self, src, dst):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def download(self, src):  # type: ignore[no-untyped-def]
        raise NotImplementedError
