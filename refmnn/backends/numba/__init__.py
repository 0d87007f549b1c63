"""The Numba CPU backend (being written)."""

from refmnn.backends.numba.backend import NumbaBackend

__all__ = ["NumbaBackend"]
